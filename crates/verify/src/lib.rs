//! Verifying generated kernels, in two stages:
//!
//! 1. **Properties**, with no reference ([`properties`], in the emulator): no access outside a
//!    buffer, every output element written, no read of uninitialized threadgroup or output
//!    memory, the same bits in forward, reverse and shuffled run order (a race shows as a
//!    difference), and, under the sanitizer, clean AddressSanitizer and UBSan runs (forward and
//!    reverse only: the other orders are the plain run's).
//! 2. **Values**, where the family file names a reference (`[verify] reference`,
//!    [`mod@reference`]): one of kernelgen's Rust references (`"rust:expert"`, [`bundled`]),
//!    compared bit for bit with its replay model (the kernel's own order of operations) and
//!    within the per-element bound of its f64 model; or a numpy function beside the family file
//!    (`"refs/x.py:function"`, [`python`]), compared within the family's tolerance (integer
//!    outputs exactly).
//!
//! A [`Case`] holds a launch's inputs by buffer name; a [`Reference`] draws one for a kernel
//! and says what each output must be ([`Expected`]); [`mod@compare`] checks them. [`run()`] verifies
//! many kernels on several threads and returns a [`Report`] in their order, which `kernelgen
//! verify` prints. The values stage runs on any backend whose arrays can be made from host
//! bytes and read back ([`VerifyBackend`]); the property stage is the emulator's. With the
//! feature `mlx`, MLX is such a backend (`mlx`): the kernels then run on the GPU MLX has (the
//! Metal bodies on a Mac, the CUDA bodies on MLX's CUDA build), held to the f64 models'
//! bounds (the replay models follow the emulator's arithmetic, not a GPU's).
//!
//! A kernel with a CUDA body (its family has a CUDA template) has both bodies verified, each
//! the same way on the same case ([`bodies`]): the CUDA one in the emulator's CUDA mode, through
//! an [`EmuBackend`] made by [`EmuBackend::with_language`]. A report has one outcome per body.
//!
//! For a test of one's own kernel with a Rust reference function, [`check`] does both stages
//! (on the CUDA body, given `emu.with_language(Language::Cuda)`).

#![warn(missing_docs)]

pub mod bodies;
pub mod bundled;
pub mod case;
pub mod compare;
pub mod error;
#[cfg(feature = "mlx")]
pub mod mlx;
pub mod properties;
pub mod python;
pub mod reference;
pub mod run;

pub use case::{Case, random_case};
pub use compare::{Compared, Expected, Replay, values};
pub use error::{Error, Finding, Mismatch};
pub use kernelgen_emu::Language;
pub use kernelgen_reference::Agreement;
pub use reference::{Declaration, Kernel, Reference};
pub use run::{Options, Outcome, Report, Values, VerifyBackend, run, verify_kernel};

use kernelgen::contract::{KernelDef, Tolerance};
use kernelgen_emu::EmuBackend;

/// A test of one's own kernel: random inputs at `sizes` (every run-time size, by name), every
/// property, then `reference` (given the case, returning each output's values in contract
/// order) compared within `tolerance` (integer outputs exactly). `emu` launches the body of its
/// language: the kernel's CUDA body for `emu.with_language(Language::Cuda)`.
///
/// ```no_run
/// # use kernelgen_emu::EmuBackend;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let def: &kernelgen::KernelDef = todo!();
/// let emu = EmuBackend::with_defaults()?;
/// kernelgen_verify::check(&emu, def, &[("R", 4)], 1, kernelgen::contract::Tolerance::Ulps(2), |case| {
///     // Compute the outputs from the inputs, by buffer name, however the model says.
///     let x = kernelgen_verify::values(&case.arrays["x"]);
///     vec![x.iter().map(|v| v * 2.0).collect()]
/// })?;
/// # Ok(()) }
/// ```
pub fn check(emu: &EmuBackend, def: &KernelDef, sizes: &[(&str, u64)], seed: u64, tolerance: Tolerance, reference: impl FnOnce(&Case) -> Vec<Vec<f64>>) -> Result<Vec<Agreement>, Error> {
    let case = random_case(def, sizes, &[], seed)?;
    let outputs = properties::check_properties(emu, def, &case, seed)?;
    let want = reference(&case);
    if want.len() != outputs.len() {
        return Err(Mismatch::Outputs { got: want.len(), want: outputs.len() }.into());
    }
    def.outputs.iter().zip(&outputs).zip(&want).map(|((b, got), want)| compare::compare_values(&b.name, got, want, tolerance)).collect()
}
