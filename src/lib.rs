//! kernelgen: typed launchers for ahead-of-time generated MLX Metal kernels.
//!
//! kernelgen turns kernel specs (a family, the values of its axes, named model
//! geometries) into fully specialized Metal Shading Language and, for every
//! kernel, a [`KernelDef`] (the launch contract: every buffer's dtype, shape,
//! alignment and packed regions, the run-time sizes, the grid) and a typed
//! launcher. This is the crate users import. It builds on every target and
//! holds only what a launch needs:
//!
//! - [`kernels`](mod@kernels): the generated catalog, one module per bundled spec (feature
//!   `kernels`, on by default), e.g.
//!   [`kernels::experts::Glm52ExpertQ4Bf16R4`] with `gate_up`, `down`, the
//!   slot layout `SLOT` and the packer `pack_slot`;
//! - [`launch`]: the checks every launch passes before anything runs, the same
//!   for every backend, and the [`LaunchError`](launch::LaunchError) that
//!   reports every violation of a launch at once;
//! - [`backend`]: the [`Backend`](backend::Backend) trait, and the MLX backend
//!   (`backend::mlx`, feature `mlx`);
//! - [`pack`] and [`quant`]: building packed buffers (an expert's residency
//!   slot) and MLX's affine quantization from your own tensors;
//! - [`contract`]: the contract types; [`half`], the element types of the
//!   launcher API, re-exported so your crate uses the same version.
//!
//! The MSL CPU emulator and its backend, which run the same launchers on
//! x86-64 Linux without a GPU, are the crate
//! [`kernelgen-emu`](https://docs.rs/kernelgen-emu); the generator behind
//! the `kernelgen` command and the `macros` feature is `kernelgen-codegen`.
//!
//! # Using it
//!
//! ```toml
//! [dependencies]
//! kernelgen = "0.1"                       # once published
//! # kernelgen = { path = "../kernelgen" } # from a checkout, today
//!
//! [dev-dependencies]
//! kernelgen-emu = "0.1"                   # tests through the emulator (x86-64 Linux)
//! ```
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `kernels` | yes | [`kernels`](mod@kernels): the generated catalog of the bundled specs (`generated/rust/`). The generator builds kernelgen without it, so a stale `generated/` can always be regenerated. |
//! | `mlx` | no | `backend::mlx`: the MLX backend over `mlx-rs` (lazy launches through `mlx_rs::fast::MetalKernel`; on Apple silicon they run on the GPU), `array_from_bytes` (a packed slot as an MLX array without a copy) and `pack_arrays`. Builds `mlx-sys` (cmake, clang). |
//! | `macros` | no | `kernels!` and `include_specs!`: specs in Rust syntax or TOML expanded to typed launchers at compile time. Pulls in the generator (syn, tera, toml_edit). |
//!
//! # Checking a launch (any backend)
//!
//! Every launcher runs [`launch::check`] on what its backend says about the
//! arrays ([`ArgInfo`](launch::ArgInfo): dtype, shape, bytes, layout,
//! address) and only then hands the resulting plan to the backend. The checks
//! read no device memory, so they can be called on their own:
//!
//! ```
//! use kernelgen::Dtype;
//! use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as GATE_UP;
//! use kernelgen::launch::{self, ArgInfo, ErrorKind};
//!
//! // A dense, row-major array of this dtype and shape.
//! fn array(dtype: Dtype, shape: &[u64]) -> ArgInfo {
//!     let bytes = shape.iter().product::<u64>() * dtype.size() as u64;
//!     ArgInfo { dtype: Ok(dtype), shape: shape.to_vec(), bytes, row_contiguous: true, address: None }
//! }
//!
//! // gate_up takes `x: bf16 [M, 256]` and the packed `slot: u8 [73728]`.
//! let plan = launch::check(&GATE_UP, &[array(Dtype::Bf16, &[3, 256]), array(Dtype::U8, &[73728])], &[], &[])?;
//! assert_eq!(plan.sizes(), [3]); // M, read off the shape of `x`
//! assert_eq!(plan.outputs()[0].shape, [3, 128]); // `mid: bf16 [M, 128]`
//!
//! // Every problem of a launch is reported at once, and nothing would launch:
//! // here `x` has the wrong dtype and width, and the slot is too short.
//! let err = launch::check(&GATE_UP, &[array(Dtype::F32, &[3, 255]), array(Dtype::U8, &[1000])], &[], &[]).unwrap_err();
//! assert_eq!(err.violations().len(), 3, "{err}");
//! assert!(err.has(ErrorKind::Dtype) && err.has(ErrorKind::Dim));
//! assert!(err.to_string().contains("argument `slot`: expected shape [73728], given shape [1000]"), "{err}");
//!
//! // A backend that cannot make a strided array contiguous says so, and it is refused.
//! let mut strided = array(Dtype::Bf16, &[3, 256]);
//! strided.row_contiguous = false;
//! let err = launch::check(&GATE_UP, &[strided, array(Dtype::U8, &[73728])], &[], &[]).unwrap_err();
//! assert!(err.has(ErrorKind::Layout));
//! # Ok::<(), kernelgen::launch::LaunchError>(())
//! ```
//!
//! # Packing an expert slot
//!
//! The expert kernels read all their weights from one packed buffer. Its
//! layout is generated for every geometry (`SLOT`: every region's offset,
//! length, alignment, format and shape) and so is its packer, which takes
//! each region's values in the documented orientation (gate and up `[I, H]`,
//! down `[H, I]`, row-major; Q4 values in -8..=7; f32 row scales):
//!
//! ```
//! use kernelgen::kernels::experts::TinyExpertQ4Bf16R4 as Tiny;
//!
//! let (h, i) = (256, 128);
//! let gate = vec![1i8; i * h];
//! let up = vec![-2i8; i * h];
//! let down = vec![3i8; h * i];
//! let (gs, us, ds) = (vec![0.01f32; i], vec![0.02f32; i], vec![0.03f32; h]);
//! let slot = Tiny::pack_slot(&gate, &up, &down, &gs, &us, &ds)?;
//! assert_eq!(slot.len() as u64, Tiny::SLOT.bytes);
//! let up_at = Tiny::SLOT.regions.iter().find(|r| r.name == "up_weights").unwrap().offset as usize;
//! assert_eq!(slot[up_at], 0x66); // two Q4 values -2, stored as -2 + 8 = 6
//!
//! // A region of the wrong length is refused, naming it.
//! assert!(Tiny::pack_slot(&gate[1..], &up, &down, &gs, &us, &ds).is_err());
//! # Ok::<(), kernelgen::pack::PackError>(())
//! ```
//!
//! The slot's bytes are page-aligned ([`pack::AlignedBytes`]): the emulator
//! takes them as a `u8` array, and `backend::mlx::array_from_bytes` wraps
//! them as an MLX array without a copy.
//!
//! The grouped parts (`gate_up_grouped`, `down_grouped`: every routed expert
//! of each token in one launch) read the resident experts' slots as one
//! array, `u8 [S, slot_bytes]`; [`pack::stack`] builds it from packed slots
//! (`backend::mlx::array_from_slots` as an MLX array), and the launch reads
//! `S` off its shape:
//!
//! ```
//! use kernelgen::kernels::experts::{TinyExpertQ4Bf16R4 as Tiny, TINY_EXPERT_Q4_BF16_R4_GATE_UP_GROUPED as GROUPED};
//! use kernelgen::launch::{self, ArgInfo};
//! use kernelgen::{pack, Dtype};
//!
//! let (h, i) = (256, 128);
//! let slot = |w: i8| Tiny::pack_slot(&vec![w; i * h], &vec![w; i * h], &vec![w; h * i], &vec![0.01; i], &vec![0.01; i], &vec![0.01; h]);
//! let (a, b) = (slot(1)?, slot(-1)?);
//! let slots = pack::stack(Tiny::SLOT, &[&a, &b, &a])?;
//! assert_eq!(slots.len() as u64, 3 * Tiny::SLOT.bytes);
//! assert_eq!(&slots[Tiny::SLOT.bytes as usize..][..a.len()], &b[..]); // slot 1
//!
//! // x: bf16 [M, 256], slots: u8 [S, 73728], experts: u32 [M, K] -> mid: bf16 [M, K, 128]
//! let array = |dtype: Dtype, shape: &[u64]| ArgInfo { dtype: Ok(dtype), shape: shape.to_vec(), bytes: shape.iter().product::<u64>() * dtype.size() as u64, row_contiguous: true, address: None };
//! let args = [array(Dtype::Bf16, &[2, h as u64]), array(Dtype::U8, &[3, Tiny::SLOT.bytes]), array(Dtype::U32, &[2, 8])];
//! let plan = launch::check(&GROUPED, &args, &[], &[]).unwrap();
//! assert_eq!(plan.sizes(), [2, 8, 3]); // M, K, S
//! assert_eq!(plan.outputs()[0].shape, [2, 8, i as u64]);
//! # Ok::<(), kernelgen::pack::PackError>(())
//! ```
//!
//! # Launching through the emulator
//!
//! `kernelgen_emu::EmuBackend` implements [`Backend`](backend::Backend) over
//! host arrays, so the launchers run unchanged on x86-64 Linux (g++ is the
//! only requirement); the runnable example is in `kernelgen-emu`'s crate
//! documentation. Code generic over the backend runs on both:
//!
//! ```
//! use kernelgen::backend::Backend;
//! use kernelgen::kernels::experts::TinyExpertQ4Bf16R4 as Tiny;
//! use kernelgen::launch::LaunchError;
//!
//! /// `down(silu(gate(x)) * up(x))` for one expert whose weights are in `slot`.
//! pub fn expert<B: Backend>(backend: &B, x: &B::Array, slot: &B::Array) -> Result<B::Array, LaunchError> {
//!     let mid = Tiny::gate_up(backend, x, slot)?;
//!     Tiny::down(backend, &mid, slot)
//! }
//! ```
//!
//! # Launching through MLX
//!
//! With the `mlx` feature (on Apple silicon the kernels run on the GPU; MLX's
//! CPU build on Linux refuses custom kernels), launches are lazy MLX ops:
//!
//! ```ignore
//! use kernelgen::backend::mlx::{array_from_bytes, mlx_rs::{Array, Dtype}, MlxBackend};
//! use kernelgen::kernels::experts::Glm52ExpertQ4Bf16R4 as Glm52;
//!
//! // gate, up, down, gs, us, ds: the expert's tensors, as in the packing example.
//! let mlx = MlxBackend::new();
//! let slot = array_from_bytes(Glm52::pack_slot(&gate, &up, &down, &gs, &us, &ds)?)?; // no copy
//! let x = Array::zeros::<f32>(&[4, 6144])?.as_dtype(Dtype::Bfloat16)?; // x: bf16 [M, 6144]
//! let mid = Glm52::gate_up(&mlx, &x, &slot)?; // bf16 [M, 2048], not evaluated yet
//! let out = Glm52::down(&mlx, &mid, &slot)?; // bf16 [M, 6144]
//! out.eval()?; // one command buffer for both kernels
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Generated code names this crate `::kernelgen`, inside and outside it alike,
// so the proc-macro's expansion and `generated/` are the same text.
extern crate self as kernelgen;

pub mod backend;
/// The kernel contract types, shared with the generator (`kernelgen-contract`).
pub use kernelgen_contract as contract;
/// Every generated kernel, one module per spec (`generated/rust/`).
#[cfg(feature = "kernels")]
#[cfg_attr(docsrs, doc(cfg(feature = "kernels")))]
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
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use kernelgen_macros::{include_specs, kernels};
