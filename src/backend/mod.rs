//! Backends run checked launches. The launch path is the same for all of
//! them: describe the arrays, check them and the host values against the
//! kernel's contract ([`crate::launch::check`], which returns a
//! [`LaunchPlan`]), then hand the plan to the backend, which only binds and
//! runs it.
//!
//! kernelgen ships the MLX backend (`mlx`, feature `mlx`); the emulator's
//! backend is `kernelgen_emu::EmuBackend`.

#[cfg(feature = "mlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx")))]
pub mod mlx;

use crate::contract::KernelDef;
use crate::launch::{self, ArgInfo, LaunchError, LaunchPlan};

/// Something that can run generated kernels.
pub trait Backend {
    /// The backend's array type.
    type Array;
    /// The backend's own error, kept as the source of [`LaunchError::Backend`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// What the launch checks need to know about an array. Must not read the
    /// array's contents (a launch never evaluates or synchronizes).
    fn describe(&self, array: &Self::Array) -> ArgInfo;

    /// Binds and runs a checked launch, returning the outputs in contract order.
    ///
    /// # Safety
    /// `plan` must be what [`check`] returned for exactly these `arrays`: the
    /// kernel reads and writes within its buffers only under that contract.
    unsafe fn run(&self, plan: &LaunchPlan<'_>, arrays: &[&Self::Array]) -> Result<Vec<Self::Array>, Self::Error>;
}

/// Every precondition of `def` on `arrays` (its data inputs, in contract
/// order) and `host` (its host-integer inputs, in contract order): dtypes,
/// shapes, bytes, layout, alignment and bounded values, all reported at once.
/// `given_sizes` must agree with the shapes.
pub fn check<'d, B: Backend>(
    backend: &B,
    def: &'d KernelDef,
    arrays: &[&B::Array],
    host: &[&[i32]],
    given_sizes: &[(String, u64)],
) -> Result<LaunchPlan<'d>, LaunchError> {
    let infos: Vec<ArgInfo> = arrays.iter().map(|a| backend.describe(a)).collect();
    launch::check(def, &infos, host, given_sizes)
}

/// Checks every precondition, then runs the kernel; nothing runs when a
/// check fails. The outputs come back in contract order.
pub fn launch_vec<B: Backend>(backend: &B, def: &KernelDef, arrays: &[&B::Array], host: &[&[i32]]) -> Result<Vec<B::Array>, LaunchError> {
    let plan = check(backend, def, arrays, host, &[])?;
    // SAFETY: `check` accepted exactly these arrays and made `plan`.
    let outputs = unsafe { backend.run(&plan, arrays) }.map_err(|e| LaunchError::backend(def, e))?;
    if outputs.len() != def.outputs.len() {
        return Err(LaunchError::backend(def, format!("the backend returned {} outputs where the contract has {}", outputs.len(), def.outputs.len())));
    }
    Ok(outputs)
}

/// [`launch_vec`] with the outputs as an array of the contract's length (what
/// the generated typed launchers destructure).
pub fn launch<B: Backend, const N: usize>(backend: &B, def: &KernelDef, arrays: &[&B::Array], host: &[&[i32]]) -> Result<[B::Array; N], LaunchError> {
    let outputs = launch_vec(backend, def, arrays, host)?;
    let n = outputs.len();
    outputs.try_into().map_err(|_| LaunchError::backend(def, format!("the launcher expects {N} outputs where the contract has {n}")))
}
