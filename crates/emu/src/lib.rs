//! The MSL CPU emulator: runs Metal Shading Language compute kernels on Linux x86-64.
//!
//! A `.metal` source is checked as Metal, rewritten into C++17, compiled by g++ against the
//! emulator's own stand-in for `<metal_stdlib>` and run by a fiber scheduler: every GPU
//! thread of a threadgroup is a fiber, and the threadgroups of a dispatch run on a pool of
//! worker threads. What it models (dispatch, attributes, SIMD-group collectives in one
//! documented order, scheduling and barriers, half and bfloat arithmetic, math, threadgroup
//! memory, guard regions and faults, preprocessing, function constants, the time limit) and
//! its limits are in `docs/emulator.md` in kernelgen's repository.
//!
//! ```no_run
//! use kernelgen_emu::{DeviceBuffer, EmuOptions, Emulator};
//! let emu = Emulator::new(EmuOptions::default())?;
//! let prog = emu.load(
//!     "[[kernel]] void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] *= 2.0f; }",
//!     "twice.metal",
//! )?;
//! let mut x = DeviceBuffer::from_bytes(&[0u8; 64]);
//! prog.dispatch("twice", &mut [&mut x], [16, 1, 1], [16, 1, 1])?;
//! # Ok::<(), kernelgen_emu::EmuError>(())
//! ```
//!
//! [`Program::run`] takes a [`Dispatch`], which may set one dispatch's run order, workers,
//! placement, time limit or threadgroup poison. Every load is first checked as Metal by
//! kernelgen-msl (clang 14 or newer: without it [`Emulator::new`] fails with
//! [`EmuError::MetalCheck`], saying what to install); a source Metal would reject fails with
//! [`EmuError::InvalidMetal`].
//!
//! # kernelgen's launchers through the emulator
//!
//! [`EmuBackend`] is a `kernelgen` [`Backend`](kernelgen::backend::Backend)
//! over [`HostArray`]s, so the typed launchers a spec generates run here as
//! they do through MLX: the same launch checks, then the kernel's `.metal`
//! compiled once (and cached on disk) and dispatched. It needs x86-64 Linux
//! and g++; elsewhere [`EmuBackend::with_defaults`] returns
//! [`EmuError::Unsupported`].
//!
//! ```
//! use kernelgen::half::bf16;
//! use kernelgen::kernels::experts::TinyExpertQ4Bf16R4 as Tiny;
//! use kernelgen_emu::{EmuBackend, HostArray};
//! # if !cfg!(all(target_arch = "x86_64", target_os = "linux")) { return Ok(()); }
//!
//! // One expert (H = 256, I = 128) packed from its unpacked Q4 weights and row scales.
//! let (h, i) = (256, 128);
//! let q4 = |n: usize| (0..n).map(|k| (k % 16) as i8 - 8).collect::<Vec<i8>>();
//! let slot = Tiny::pack_slot(&q4(i * h), &q4(i * h), &q4(h * i), &vec![0.01; i], &vec![0.01; i], &vec![0.02; h])?;
//! let slot = HostArray::from_u8(vec![slot.len() as u64], slot.to_vec());
//!
//! let emu = EmuBackend::with_defaults()?;
//! let x = HostArray::from_bf16(vec![2, h as u64], &vec![bf16::from_f32(0.5); 2 * h]);
//! let mid = Tiny::gate_up(&emu, &x, &slot)?; // bf16 [2, 128]
//! let out = Tiny::down(&emu, &mid, &slot)?; // bf16 [2, 256]
//! assert_eq!(out.shape, [2, 256]);
//! assert!(out.to_f32().unwrap().iter().all(|v| v.is_finite()));
//!
//! // A wrong argument is refused before anything runs.
//! let e = Tiny::down(&emu, &x, &slot).unwrap_err();
//! assert!(e.to_string().contains("argument `mid`"), "{e}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
// Off x86-64 Linux the runtime is a stand-in that answers every load with
// `Unsupported`: the guard pages and sanitizer hooks it would drive still compile
// there (so the crate type-checks for a Mac, where the CLI builds), unused.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code, unused_variables, unreachable_code)
)]

pub mod backend;
mod buffer;
mod compile;
mod elf;
mod error;
pub mod host;
mod options;
mod program;
// The fiber scheduler's context switch and fault handling are written for x86-64
// Linux; elsewhere a stand-in answers every load with `EmuError::Unsupported`.
#[cfg_attr(not(all(target_arch = "x86_64", target_os = "linux")), path = "runtime_unsupported.rs")]
mod runtime;
mod sanitize;
mod signature;
mod translate;

pub use backend::{EmuBackend, RunConfig};
pub use buffer::{DeviceBuffer, POISON};
pub use error::{EmuError, Waiter};
pub use host::{GUARDED_MIN_BYTES, HostArray, HostData};
pub(crate) use options::workers_or_default;
pub use options::{
    EmuOptions, FunctionConstant, LoadOptions, Placement, RunOrder, default_timeout, default_workers, parse_timeout, set_default_timeout,
    set_default_workers,
};
pub use program::{Dispatch, DispatchStats, Emulator, Program};
pub use sanitize::{SANITIZED_MARKER, reexec_with_sanitizer_if_needed, sanitizer_active, sanitizer_env};
pub use signature::{AddressSpace, Attribute, Binding, FunctionConstantDecl, KernelSignature, Param};
/// One problem the Metal check found: `file:line:col: message`.
pub use kernelgen_msl::Problem as MetalProblem;
