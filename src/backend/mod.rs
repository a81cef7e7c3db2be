//! Backends run checked launches. The launch path is the same for all of
//! them: describe the arguments, check them against the kernel's contract
//! (`crate::launch`), then hand them to the backend.

pub mod emu;

use crate::contract::KernelDef;
use crate::launch::{ArgInfo, LaunchError, check_inputs};

/// Something that can run generated kernels.
pub trait Backend {
    /// The backend's array type.
    type Array;

    /// What the launch checks need to know about an array.
    fn describe(&self, array: &Self::Array) -> ArgInfo;

    /// Runs `def` on inputs that [`check_inputs`] accepted, at the run-time
    /// sizes it derived, and returns the outputs in contract order.
    ///
    /// # Safety
    /// The inputs must have passed `check_inputs(def, ..)` giving `sizes`:
    /// the kernel reads and writes within its buffers only under that contract.
    unsafe fn run_unchecked(
        &self,
        def: &'static KernelDef,
        inputs: &[&Self::Array],
        sizes: &[u64],
    ) -> Result<Vec<Self::Array>, LaunchError>;
}

/// Checks every precondition of `def` on `inputs` (in contract order, size
/// values excluded), then runs it. Nothing runs when a check fails.
pub fn launch<B: Backend>(
    backend: &B,
    def: &'static KernelDef,
    inputs: &[&B::Array],
) -> Result<Vec<B::Array>, LaunchError> {
    let infos: Vec<ArgInfo> = inputs.iter().map(|a| backend.describe(a)).collect();
    let sizes = check_inputs(def, &infos, &[])?;
    // SAFETY: `check_inputs` accepted every input and derived `sizes`.
    unsafe { backend.run_unchecked(def, inputs, &sizes) }
}

/// [`launch`] with the outputs as an array of the contract's length (what
/// the generated typed launchers destructure).
pub fn launch_outputs<B: Backend, const N: usize>(
    backend: &B,
    def: &'static KernelDef,
    inputs: &[&B::Array],
) -> Result<[B::Array; N], LaunchError> {
    let outputs = launch(backend, def, inputs)?;
    let n = outputs.len();
    outputs.try_into().map_err(|_| {
        LaunchError::backend(
            def,
            format!("the backend returned {n} outputs where the contract has {N}"),
        )
    })
}
