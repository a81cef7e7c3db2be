//! The fiber runtime: every GPU thread of a threadgroup is a fiber on the calling OS
//! thread, switched by a hand-written x86-64 context switch (callee-saved registers and
//! the stack pointer; no system call). Collectives, barriers and threadgroup allocations
//! reach it through the `Rt` table handed to each kernel object at load.
//!
//! One job per file: `args` (what a dispatch is given), `object` (a loaded kernel object and the ABI with the shim),
//! `dispatch` (a dispatch's threadgroups on the workers, each threadgroup's set-up),
//! `pool` (the helper threads), `sched` (the fibers of one threadgroup: run order,
//! collectives, barriers), `switch` (the context switch and fiber stacks), `tg_memory` (threadgroup
//! arrays between guards), `racecheck` (the threadgroup-memory check: races, bounds),
//! `warp` (CUDA's warp operations and what else a CUDA kernel asks), `watchdog` (the time limit), `signals` (faults in a GPU thread), `insn` (the access of an instruction that faulted
//! without an address) and `faults` (every error recorded, in words).
//!
//! The scheduler state is reached through a raw pointer (from the signal handler and from
//! the fibers' callbacks alike); short-lived references through it are intended.
#![allow(dangerous_implicit_autorefs)]

mod args;
mod dispatch;
mod faults;
mod insn;
mod object;
mod pool;
mod sched;
mod signals;
mod racecheck;
mod switch;
mod tg_memory;
mod warp;
mod watchdog;

pub(crate) use args::{Buf, DispatchArgs};
pub(crate) use dispatch::{default_workers, dispatch, set_default_workers};
pub(crate) use object::Object;
