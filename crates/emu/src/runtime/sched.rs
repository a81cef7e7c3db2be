//! The scheduler of one threadgroup's fibers: run order, collectives (a SIMD-group is
//! released when its last live lane arrives), barriers, and the checks that a collective
//! or barrier is reached by the lanes that must reach it. Reached from the kernel through
//! `Rt::collective` and `Rt::barrier`.

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null_mut;

use crate::sanitize::AsanFns;

use super::faults::SanReport;
use super::object::{CollFn, ThreadFn, ThreadInfo};
use super::racecheck::{self, Found, Shadow};
use super::signals::RawFault;
use super::switch::{STACK_COLORS, Stack, kgemu_rt_switch, kgemu_rt_trampoline};
use super::tg_memory::{self, TgSite};
use super::warp;

/// Lanes per SIMD-group.
pub(super) const SIMD: usize = 32;
/// Threads per threadgroup, at most (Apple's limit).
pub(super) const MAX_THREADS: usize = kernelgen::contract::limits::MAX_THREADS_PER_THREADGROUP as usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Runnable: not started yet, or released from a collective or barrier.
    Ready,
    /// The fiber on the CPU.
    Running,
    Coll,
    /// At a CUDA warp operation with a mask (`__shfl_sync`...: see `warp`).
    Warp,
    /// 1: threadgroup_barrier, 2: simdgroup_barrier
    Barrier(u8),
    Exited,
}

/// What the scheduler reads and writes at every collective, barrier and switch, and no
/// more (40 bytes): a threadgroup's fibers are what must stay in cache between two
/// switches. The stack's bounds follow from `stack`; ASan's fake stacks are in `Sched`.
pub(super) struct Fiber {
    /// Saved stack pointer; null until the fiber first runs.
    pub(super) sp: *mut u8,
    pub(super) lane: *mut c_void,
    pub(super) coll: Option<CollFn>,
    pub(super) op: u32,
    pub(super) line: u32,
    /// The stack the fiber runs on (assigned when it first runs; `NO_STACK` before).
    pub(super) stack: u32,
    pub(super) state: State,
}

const _: () = assert!(std::mem::size_of::<Fiber>() == 40);

pub(super) const NO_STACK: u32 = u32::MAX;

/// Per SIMD-group counts: lanes that have not returned, and of those the ones waiting
/// (at a collective, a simdgroup barrier or a threadgroup barrier).
#[derive(Clone, Copy, Default)]
pub(super) struct SgCount {
    pub(super) live: u32,
    pub(super) blocked: u32,
    /// The memory flags of the simdgroup barrier its lanes wait at.
    pub(super) barrier_flags: u32,
}

/// A scheduling error found by a fiber, turned into an [`EmuError`] by the scheduler.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pending {
    Divergence { sg: u32, first: usize, second: usize },
    Barrier { first: usize, second: usize },
    /// The canaries of threadgroup array `array` were overwritten (`offset` from its start),
    /// found when its threads passed the threadgroup barrier at `line`.
    Overrun { array: usize, offset: isize, line: u32 },
}

pub(super) struct Sched {
    pub(super) sched_sp: *mut u8,
    pub(super) fibers: Vec<Fiber>,
    pub(super) infos: Vec<ThreadInfo>,
    pub(super) cur: usize,
    pub(super) in_fiber: bool,
    /// The run order of this threadgroup and the position in the current round.
    pub(super) order: *const u32,
    pub(super) order_len: usize,
    pub(super) round_pos: usize,
    /// Fibers in state `Ready`.
    pub(super) ready: usize,
    /// Fibers that have not returned, and of those the ones at a threadgroup barrier.
    pub(super) live: usize,
    pub(super) tg_blocked: usize,
    pub(super) sgs: Vec<SgCount>,
    pub(super) pending: Option<Pending>,
    /// `report`, `abort` or `pending` is set.
    pub(super) stop: bool,
    /// The worker's fiber stacks, and the indices of those no fiber holds.
    pub(super) stacks: *const Stack,
    pub(super) free_stacks: Vec<u32>,
    pub(super) thread_fn: ThreadFn,
    pub(super) bufs: *const *mut u8,
    pub(super) fault: Option<RawFault>,
    pub(super) report: Option<SanReport>,
    pub(super) asan_headline: [u8; 200],
    pub(super) abort: Option<(String, u32, usize)>, // (message, line, fiber)
    pub(super) asan: Option<&'static AsanFns>,
    pub(super) os_stack_bottom: *const c_void,
    pub(super) os_stack_size: usize,
    pub(super) sched_fake: *mut c_void,
    /// Each fiber's fake stack, for ASan's fiber-switch annotations.
    pub(super) fakes: Vec<*mut c_void>,
    pub(super) switches: u64,
    pub(super) arena: *mut u8,
    /// Threadgroup arrays lie flush with the guard before them (a start-placed run), else after.
    pub(super) tg_at_start: bool,
    pub(super) tg_data: usize,
    pub(super) sites: Vec<Option<usize>>, // site id -> index into site_list
    pub(super) site_list: Vec<TgSite>,
    /// This worker's fiber stacks (low end, size), for fault reports.
    pub(super) stack_ranges: Vec<(usize, usize)>,
    /// The byte threadgroup memory starts as.
    pub(super) tg_poison: u8,
    /// Set by the watchdog when the dispatch is past its time limit (read by the signal
    /// handler; null between dispatches).
    pub(super) expired: *const std::sync::atomic::AtomicBool,
    /// The kernel object's code: where a GPU thread may be stopped at the time limit.
    pub(super) code: std::ops::Range<usize>,
    /// The GPU thread on the CPU was stopped at the time limit.
    pub(super) timed_out: bool,
    /// The threadgroup-memory check of this dispatch (its object is built for it), if any.
    pub(super) check: Option<crate::MemoryCheck>,
    pub(super) shadow: Shadow,
    /// What the check found (it stops the threadgroup).
    pub(super) found: Option<Found>,
    /// The memory flags of the threadgroup barrier the threads wait at.
    pub(super) tg_barrier_flags: u32,
    /// Fibers waiting at a CUDA warp operation (`State::Warp`).
    pub(super) warp_waits: usize,
    /// The threadgroup memory a threadgroup may declare, in bytes, and whose limit it is
    /// (`Apple's 32 KiB`).
    pub(super) tg_limit: (usize, &'static str),
    /// The bytes of a CUDA launch's dynamic shared memory (`extern __shared__`).
    pub(super) dynamic_shared: usize,
    /// The bytes of each `[[threadgroup(i)]]` parameter, by index.
    pub(super) tg_params: Vec<usize>,
}

#[inline(always)]
pub(super) fn cur_sched() -> *mut Sched {
    CURRENT.with(|c| c.get())
}

#[inline(always)]
pub(super) unsafe fn fiber(s: *mut Sched, i: usize) -> *mut Fiber {
    unsafe { (*s).fibers.as_mut_ptr().add(i) }
}

/// Whether the threadgroup must stop (a sanitizer report, a scheduling error, a refused
/// allocation): set with them, so the scheduler's hot path tests one flag.
#[inline(always)]
unsafe fn stopping(s: *mut Sched) -> bool {
    unsafe { (*s).stop }
}

/// The next ready fiber in run order, from the current position in the round; at the end
/// of a round the next one starts. `None` when no fiber is ready or the threadgroup stops.
#[inline(always)]
unsafe fn next_ready(s: *mut Sched) -> Option<usize> {
    unsafe {
        if (*s).ready == 0 || stopping(s) {
            return None;
        }
        loop {
            if (*s).round_pos == (*s).order_len {
                (*s).round_pos = 0;
            }
            let i = *(*s).order.add((*s).round_pos) as usize;
            (*s).round_pos += 1;
            let f = fiber(s, i);
            if (*f).state == State::Ready {
                (*f).state = State::Running;
                (*s).ready -= 1;
                // The fiber after this one in run order will most likely run next: fetch
                // the top of its stack (the registers it saved and the frames above them)
                // while this one runs. A switch is otherwise a cache miss on a cold stack.
                let k = *(*s).order.add(if (*s).round_pos == (*s).order_len { 0 } else { (*s).round_pos }) as usize;
                let sp = (*fiber(s, k)).sp;
                if !sp.is_null() {
                    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                    for line in 0..4 {
                        _mm_prefetch::<_MM_HINT_T0>(sp.wrapping_add(64 * line) as *const i8);
                    }
                }
                return Some(i);
            }
        }
    }
}

/// Give a fiber that has not run yet a stack and the initial frame `kgemu_rt_switch`
/// returns into: `fiber_entry(f)` through the trampoline.
#[inline(always)]
pub(super) unsafe fn prepare(s: *mut Sched, i: usize) {
    unsafe {
        let f = fiber(s, i);
        if !(*f).sp.is_null() {
            return;
        }
        let k = (*s).free_stacks.pop().expect("a free fiber stack");
        let st = &*(*s).stacks.add(k as usize);
        (*f).stack = k;
        // Stagger the stack tops over 64 KiB (1024 distinct cache-line offsets) so that the
        // frames of a threadgroup's fibers spread over every set of the L1 and L2 caches
        // (the stacks are equally spaced, so their tops would otherwise share a few sets).
        let color = (k as usize * 1088) % STACK_COLORS;
        let top = st.top().sub(color);
        let sp = top.sub(56) as *mut usize;
        // r15 r14 r13 r12 rbx rbp ret
        *sp.add(0) = 0;
        *sp.add(1) = 0;
        *sp.add(2) = 0;
        *sp.add(3) = f as usize; // r12: argument
        *sp.add(4) = fiber_entry as *const () as usize; // rbx: entry
        *sp.add(5) = 0;
        *sp.add(6) = kgemu_rt_trampoline as *const () as usize;
        (*f).sp = sp as *mut u8;
    }
}

/// Where a switch goes: a fiber's saved stack pointer and stack, or the scheduler's.
#[inline(always)]
unsafe fn target(s: *mut Sched, next: Option<usize>) -> (*mut u8, *const c_void, usize) {
    unsafe {
        match next {
            Some(j) => {
                prepare(s, j);
                (*s).cur = j;
                let t = fiber(s, j);
                (*s).switches += 1;
                // the bounds only ASan's switch annotations need
                let (lo, size) = match (*s).asan {
                    Some(_) => {
                        let st = &*(*s).stacks.add((*t).stack as usize);
                        (st.lo() as *const c_void, st.size())
                    }
                    None => (std::ptr::null(), 0),
                };
                ((*t).sp, lo, size)
            }
            None => ((*s).sched_sp, (*s).os_stack_bottom, (*s).os_stack_size),
        }
    }
}

/// From the scheduler: run the threadgroup's fibers until none is ready.
pub(super) unsafe fn run_fibers(s: *mut Sched) {
    unsafe {
        let Some(i) = next_ready(s) else { return };
        let (to, lo, size) = target(s, Some(i));
        (*s).in_fiber = true;
        if let Some(a) = (*s).asan {
            (a.start_switch)(&mut (*s).sched_fake, lo, size);
        }
        kgemu_rt_switch(&mut (*s).sched_sp, to);
        if let Some(a) = (*s).asan {
            (a.finish_switch)((*s).sched_fake, null_mut(), null_mut());
        }
        (*s).in_fiber = false;
    }
}

/// From a fiber that has blocked: run the next ready fiber (or return to the scheduler);
/// returns when this fiber is resumed.
#[inline(always)]
pub(super) unsafe fn yield_fiber(s: *mut Sched) {
    unsafe {
        let i = (*s).cur;
        let f = fiber(s, i);
        let next = next_ready(s);
        let (to, lo, size) = target(s, next);
        match (*s).asan {
            Some(a) => {
                let fake = (*s).fakes.as_mut_ptr().add(i);
                (a.start_switch)(fake, lo, size);
                kgemu_rt_switch(&mut (*f).sp, to);
                (a.finish_switch)(*fake, null_mut(), null_mut());
            }
            // the switch in tail position: the resumed fiber returns straight to its kernel
            None => kgemu_rt_switch(&mut (*f).sp, to),
        }
    }
}

/// A lane of `sg` has blocked or returned: if every live lane of the SIMD-group now waits,
/// release it (evaluate its collective, or pass its simdgroup barrier) or record why not.
#[inline(always)]
pub(super) unsafe fn sg_settled(s: *mut Sched, sg: usize) {
    unsafe {
        let c = *(*s).sgs.as_ptr().add(sg);
        if c.blocked >= c.live && c.live > 0 {
            sg_release(s, sg, c);
        }
    }
}

/// [`sg_settled`] once every live lane waits: out of line, so that the path every lane takes
/// into a collective keeps a small stack frame (the frames of all the fibers of a
/// threadgroup between two switches are what must stay in cache).
#[inline(never)]
unsafe fn sg_release(s: *mut Sched, sg: usize, c: SgCount) {
    unsafe {
        // a lane still at a CUDA warp operation waits for a lane of its mask that never comes
        if let Some(pair) = warp::stuck(s, sg) {
            (*s).pending = Some(warp::divergence(sg, pair));
            (*s).stop = true;
            return;
        }
        let n = (*s).fibers.len();
        let lo = sg * SIMD;
        let hi = (lo + SIMD).min(n);
        let mut first_coll: Option<usize> = None;
        let mut first_other: Option<usize> = None;
        let mut first_sgb: Option<usize> = None;
        let mut n_coll = 0u32;
        for i in lo..hi {
            let f = &*fiber(s, i);
            match f.state {
                State::Coll => {
                    n_coll += 1;
                    match first_coll {
                        None => first_coll = Some(i),
                        Some(j) => {
                            let g = &*fiber(s, j);
                            if (g.op, g.line) != (f.op, f.line) {
                                (*s).pending = Some(Pending::Divergence { sg: sg as u32, first: j, second: i }); (*s).stop = true;
                                return;
                            }
                        }
                    }
                }
                State::Barrier(k) => {
                    if k == 2 {
                        first_sgb.get_or_insert(i);
                    }
                    first_other.get_or_insert(i);
                }
                _ => {}
            }
        }
        if let Some(c0) = first_coll {
            if n_coll != c.live {
                (*s).pending = Some(Pending::Divergence { sg: sg as u32, first: c0, second: first_other.unwrap_or(c0) }); (*s).stop = true;
                return;
            }
            let mut lanes = [null_mut::<c_void>(); SIMD];
            let mut active = 0u32;
            for i in lo..hi {
                let f = fiber(s, i);
                if (*f).state == State::Coll {
                    lanes[i - lo] = (*f).lane;
                    active |= 1 << (i - lo);
                    (*f).state = State::Ready;
                }
            }
            let op = (*fiber(s, c0)).coll.expect("collective function");
            op(lanes.as_ptr(), active);
            (*s).ready += c.live as usize;
            (*(*s).sgs.as_mut_ptr().add(sg)).blocked = 0;
        } else if let Some(b0) = first_sgb {
            let line = (*fiber(s, b0)).line;
            for i in lo..hi {
                let f = &*fiber(s, i);
                if f.state != State::Exited && (f.state != State::Barrier(2) || f.line != line) {
                    (*s).pending = Some(Pending::Barrier { first: b0, second: i }); (*s).stop = true;
                    return;
                }
            }
            for i in lo..hi {
                let f = fiber(s, i);
                if (*f).state == State::Barrier(2) {
                    (*f).state = State::Ready;
                }
            }
            (*s).ready += c.live as usize;
            (*(*s).sgs.as_mut_ptr().add(sg)).blocked = 0;
            racecheck::simdgroup_barrier(s, sg, c.barrier_flags);
        }
        // else: every live lane waits at a threadgroup barrier
    }
}

/// A fiber has reached a threadgroup barrier or returned: if every live thread now waits at
/// a threadgroup barrier, release them all (or record the mismatch).
#[inline(always)]
unsafe fn tg_settled(s: *mut Sched) {
    unsafe {
        if (*s).tg_blocked >= (*s).live && (*s).live > 0 && (*s).pending.is_none() {
            tg_release(s);
        }
    }
}

#[inline(never)]
unsafe fn tg_release(s: *mut Sched) {
    unsafe {
        let n = (*s).fibers.len();
        let mut first: Option<usize> = None;
        for i in 0..n {
            let f = &*fiber(s, i);
            if f.state == State::Exited {
                continue;
            }
            match first {
                None => first = Some(i),
                Some(j) => {
                    if f.line != (*fiber(s, j)).line {
                        (*s).pending = Some(Pending::Barrier { first: j, second: i }); (*s).stop = true;
                        return;
                    }
                }
            }
        }
        // threadgroup arrays written past, found at the barrier (its line, not the writer's)
        if let Some((array, offset)) = tg_memory::overwritten(s) {
            let line = (*fiber(s, first.unwrap_or(0))).line;
            (*s).pending = Some(Pending::Overrun { array, offset, line });
            (*s).stop = true;
            return;
        }
        racecheck::threadgroup_barrier(s, (*s).tg_barrier_flags);
        for i in 0..n {
            let f = fiber(s, i);
            if (*f).state == State::Barrier(1) {
                (*f).state = State::Ready;
            }
        }
        for c in (*s).sgs.iter_mut() {
            c.blocked = 0;
        }
        (*s).ready += (*s).tg_blocked;
        (*s).tg_blocked = 0;
    }
}

/// From a fiber that returned: account for it; returns the next fiber to run.
#[inline(always)]
unsafe fn retire(s: *mut Sched) -> Option<usize> {
    unsafe {
        let i = (*s).cur;
        let f = fiber(s, i);
        (*f).state = State::Exited;
        (*s).live -= 1;
        let sg = i / SIMD;
        (*(*s).sgs.as_mut_ptr().add(sg)).live -= 1;
        // a CUDA warp operation's mask may name this lane, which no longer counts
        warp::release_complete(s, sg);
        sg_settled(s, sg);
        tg_settled(s);
        next_ready(s)
    }
}

extern "C" fn fiber_entry(f: *mut Fiber) -> ! {
    unsafe {
        let s = cur_sched();
        if let Some(a) = (*s).asan {
            (a.finish_switch)(null_mut(), null_mut(), null_mut());
        }
        let mut idx = f.offset_from((*s).fibers.as_ptr()) as usize;
        loop {
            ((*s).thread_fn)((*s).bufs, (*s).infos.as_ptr().add(idx));
            let next = retire(s);
            match next {
                // a fiber that has not run yet takes over this stack: no switch
                Some(j) if (*fiber(s, j)).sp.is_null() => {
                    let (me, it) = (fiber(s, idx), fiber(s, j));
                    (*it).stack = (*me).stack;
                    (*it).sp = 1 as *mut u8; // started
                    (*me).stack = NO_STACK;
                    (*s).cur = j;
                    idx = j;
                }
                _ => {
                    // this stack is free again; nothing runs on it past the switch
                    let me = fiber(s, idx);
                    (*s).free_stacks.push((*me).stack);
                    (*me).stack = NO_STACK;
                    let (to, lo, size) = target(s, next);
                    if let Some(a) = (*s).asan {
                        (a.start_switch)(null_mut(), lo, size);
                    }
                    let mut dead: *mut u8 = null_mut();
                    kgemu_rt_switch(&mut dead, to);
                    std::process::abort();
                }
            }
        }
    }
}

/// Parks the running fiber at a collective call (`state`, with what its release reads: the
/// lane's data, the function, the operation and the line) and counts it blocked in its
/// SIMD-group; returns the fiber and its SIMD-group.
#[inline(always)]
pub(super) unsafe fn park(s: *mut Sched, state: State, lane: *mut c_void, f: CollFn, op: u32, line: u32) -> (usize, usize) {
    unsafe {
        let i = (*s).cur;
        let fib = fiber(s, i);
        (*fib).state = state;
        (*fib).lane = lane;
        (*fib).coll = Some(f);
        (*fib).op = op;
        (*fib).line = line;
        let sg = i / SIMD;
        (*(*s).sgs.as_mut_ptr().add(sg)).blocked += 1;
        (i, sg)
    }
}

pub(super) unsafe extern "C" fn rt_collective(lane: *mut c_void, f: CollFn, op: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let (_, sg) = park(s, State::Coll, lane, f, op, line);
        sg_settled(s, sg);
        yield_fiber(s);
    }
}

/// `kind`: 1 for a threadgroup barrier, 2 for a simdgroup barrier, its memory flags from bit 8.
pub(super) unsafe extern "C" fn rt_barrier(kind: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let i = (*s).cur;
        let fib = fiber(s, i);
        let (flags, kind) = (kind >> 8, kind & 0xff);
        (*fib).state = State::Barrier(kind as u8);
        (*fib).line = line;
        let sg = i / SIMD;
        let count = (*s).sgs.as_mut_ptr().add(sg);
        (*count).blocked += 1;
        if kind == 1 {
            (*s).tg_blocked += 1;
            (*s).tg_barrier_flags = flags;
        } else {
            (*count).barrier_flags = flags;
        }
        sg_settled(s, sg);
        if kind == 1 {
            tg_settled(s);
        }
        yield_fiber(s);
    }
}

/// From a fiber: end the threadgroup's run for an error found in it (the scheduler reports
/// it); never returns.
pub(super) unsafe fn abandon_fiber(s: *mut Sched) -> ! {
    unsafe {
        let f = fiber(s, (*s).cur);
        (*f).state = State::Exited;
        if let Some(a) = (*s).asan {
            (a.start_switch)(null_mut(), (*s).os_stack_bottom, (*s).os_stack_size);
        }
        let mut dead: *mut u8 = null_mut();
        kgemu_rt_switch(&mut dead, (*s).sched_sp);
        std::process::abort();
    }
}

thread_local! {
    /// The scheduler of the threadgroup running on this thread (null between dispatches).
    pub(super) static CURRENT: Cell<*mut Sched> = const { Cell::new(null_mut()) };
}
