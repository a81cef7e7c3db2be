//! kernelgen: ahead-of-time generated MLX Metal kernels with typed launchers,
//! and an emulator that runs Metal Shading Language on a Linux CPU.

// Generated code names this crate `::kernelgen`, inside and outside it alike,
// so the proc-macro's expansion and `generated/` are the same text.
extern crate self as kernelgen;

pub mod backend;
pub mod contract;
pub mod emu;
pub mod host;
/// Every generated kernel, one module per spec (`generated/rust/`).
#[cfg(feature = "kernels")]
#[path = "../generated/rust/mod.rs"]
pub mod kernels;
pub mod launch;
#[cfg(feature = "mlx")]
pub mod mlx_backend;
pub mod reference;

pub use contract::{BufferDef, Dim, Dtype, KernelDef, Region, Source};
/// Specs at compile time (feature `macros`, off by default so the runtime crate
/// does not depend on syn, tera or toml): `kernels! { ... }` for a spec in Rust
/// syntax, `include_specs!("specs/file.toml")` for a TOML spec; both expand to
/// the typed launchers `generated/` would hold for the spec.
#[cfg(feature = "macros")]
pub use kernelgen_macros::{include_specs, kernels};
