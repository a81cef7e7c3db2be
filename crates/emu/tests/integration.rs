//! The emulator's tests: every file in this folder is a module of one test binary (`--test
//! integration`), so that they link once and their tests run side by side on every core; a new
//! file is declared here (a test of the CLI's checks that none is missing).

#[path = "emu/common.rs"]
mod common;
mod backend_memory;
mod catalog_parallel;
mod emu_bounds;
mod emu_bugs;
mod emu_conversions;
mod emu_cuda;
mod emu_msl_extras;
mod emu_parallel;
mod emu_safety;
mod emu_sanitize;
mod emu_semantics;
mod emu_threadgroup;
mod emu_timeout;
mod launch_emu;
mod mlx_kernels;
mod real_world_kernels;
