//! kernelgen: typed launchers for ahead-of-time generated MLX Metal kernels.
//!
//! This is the crate users import. It builds on every target and holds only
//! what a launch needs: the kernel contracts ([`contract`]), the checks every
//! launch passes ([`launch`]), the [`Backend`](backend::Backend) trait with the
//! MLX backend behind the `mlx` feature, and the generated catalog
//! ([`kernels`], feature `kernels`). The MSL CPU emulator and its backend are
//! the `kernelgen-emu` crate; the reference models are `kernelgen-reference`.

// Generated code names this crate `::kernelgen`, inside and outside it alike,
// so the proc-macro's expansion and `generated/` are the same text.
extern crate self as kernelgen;

pub mod backend;
/// The kernel contract types, shared with the generator (`kernelgen-contract`).
pub use kernelgen_contract as contract;
/// Every generated kernel, one module per spec (`generated/rust/`).
#[cfg(feature = "kernels")]
#[path = "../generated/rust/mod.rs"]
pub mod kernels;
pub mod launch;
pub mod pack;
pub mod quant;

pub use contract::{BufferDef, Dim, Dtype, KernelDef, Region, Source};
/// The launchers' bf16 and f16 element types (`half`), so callers build host
/// data with the same crate version.
pub use half;
/// Specs at compile time (feature `macros`, off by default so the runtime crate
/// does not depend on syn, tera or toml): `kernels! { ... }` for a spec in Rust
/// syntax, `include_specs!("specs/file.toml")` for a TOML spec; both expand to
/// the typed launchers `generated/` would hold for the spec.
#[cfg(feature = "macros")]
pub use kernelgen_macros::{include_specs, kernels};
