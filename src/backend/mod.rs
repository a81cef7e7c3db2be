//! Backends run checked launches. The launch path is the same for all of
//! them: describe the arguments, check them against the kernel's contract
//! (`crate::launch`), then hand them to the backend.

#[cfg(feature = "mlx")]
pub mod mlx;

use crate::contract::KernelDef;
use crate::launch::{ArgInfo, ErrorKind, LaunchError, check_inputs, check_values, data_inputs};

/// Something that can run generated kernels.
pub trait Backend {
    /// The backend's array type.
    type Array;

    /// What the launch checks need to know about an array.
    fn describe(&self, array: &Self::Array) -> ArgInfo;

    /// The elements of a small integer array, for the contracts that bound
    /// an argument's values (`BufferDef::at_most`); `None` if the array is
    /// not an integer array this backend can read.
    fn read_ints(&self, array: &Self::Array) -> Option<Vec<i64>>;

    /// Runs `def` on inputs that [`check`] accepted, at the run-time sizes it
    /// derived, and returns the outputs in contract order.
    ///
    /// # Safety
    /// The inputs must have passed `check(self, def, ..)` giving `sizes`: the
    /// kernel reads and writes within its buffers only under that contract.
    unsafe fn run_unchecked(
        &self,
        def: &'static KernelDef,
        inputs: &[&Self::Array],
        sizes: &[u64],
    ) -> Result<Vec<Self::Array>, LaunchError>;
}

/// Every precondition of `def` on `inputs` (in contract order, size values
/// excluded): shapes, dtypes, bytes, layout, alignment and bounded values.
/// Returns the run-time sizes; `given_sizes` must agree with the shapes.
pub fn check<B: Backend>(
    backend: &B,
    def: &'static KernelDef,
    inputs: &[&B::Array],
    given_sizes: &[(String, u64)],
) -> Result<Vec<u64>, LaunchError> {
    let infos: Vec<ArgInfo> = inputs.iter().map(|a| backend.describe(a)).collect();
    let sizes = check_inputs(def, &infos, given_sizes)?;
    let mut values = Vec::new();
    for (b, a) in data_inputs(def).zip(inputs) {
        values.push(match b.at_most {
            None => None,
            Some(_) => Some(backend.read_ints(a).ok_or_else(|| {
                LaunchError::new(def, Some(b.name), ErrorKind::Value, "integers the backend can read", "an array it cannot read")
            })?),
        });
    }
    check_values(def, &values, &sizes)?;
    Ok(sizes)
}

/// Checks every precondition of `def` on `inputs` (in contract order, size
/// values excluded), then runs it. Nothing runs when a check fails.
pub fn launch<B: Backend>(
    backend: &B,
    def: &'static KernelDef,
    inputs: &[&B::Array],
) -> Result<Vec<B::Array>, LaunchError> {
    let sizes = check(backend, def, inputs, &[])?;
    // SAFETY: `check` accepted every input and derived `sizes`.
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
