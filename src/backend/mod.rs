//! Backends run checked launches. The launch path is the same for all of
//! them: describe the arrays, check them and the host values against the
//! kernel's contract ([`check`], which returns the [`LaunchPlan`] with the
//! arrays it was checked on as a [`Checked`]), then hand that to the backend,
//! which only binds and runs it.
//!
//! kernelgen ships the MLX backend (`mlx`, feature `mlx`); the emulator's
//! backend is `kernelgen_emu::EmuBackend`.

#[cfg(feature = "mlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx")))]
pub mod mlx;

use crate::contract::KernelDef;
use crate::launch::{self, ArgInfo, LaunchError, LaunchPlan};
use std::marker::PhantomData;

/// Something that can run generated kernels.
pub trait Backend {
    /// The backend's array type.
    type Array;
    /// The backend's own error, kept as the source of [`LaunchError::Backend`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// What the launch checks need to know about an array. Must not read the
    /// array's contents (a launch never evaluates or synchronizes), and must
    /// describe an array the same way whatever the backend value: [`run`](Backend::run)
    /// relies on what it said.
    fn describe(&self, array: &Self::Array) -> ArgInfo;

    /// Binds and runs a checked launch, returning the outputs in contract order.
    ///
    /// Safe to call: a [`Checked`] is made only by [`check`], from its arrays
    /// as this backend's own [`describe`](Backend::describe) reports them, and
    /// can be neither written nor changed, so it is the proof that the plan
    /// is `check`'s for exactly the arrays it binds. That was the whole of the
    /// caller's obligation when this took a plan and the arrays separately.
    ///
    /// What no check can establish is that the kernel's source honours its
    /// [`KernelDef`] (stays inside its buffers, writes every output element,
    /// has no races): every launch path trusts the `KernelDef` for that, the
    /// typed launchers and [`launch_vec`] alike. kernelgen's are generated
    /// from the same spec as their source, and `kernelgen verify` establishes
    /// it; a backend whose own API is `unsafe` (MLX's `MetalKernel::apply`)
    /// discharges it on that ground and says so where it calls it.
    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<Self::Array>, Self::Error>;
}

/// A launch [`check`] accepted: its [`LaunchPlan`] and the very arrays it was
/// checked on, through backend `B`'s [`describe`](Backend::describe). Only
/// [`check`] makes one, so a backend can bind the arrays by the plan without
/// checking anything again. Neither can be swapped for others:
///
/// ```compile_fail
/// # use kernelgen::backend::{Backend, Checked};
/// # fn forge<B: Backend>(plan: kernelgen::launch::LaunchPlan<'static>, arrays: &'static [&'static B::Array]) {
/// // error[E0451]: fields `plan`, `arrays` and `backend` of struct `Checked` are private
/// let forged: Checked<'static, B> = Checked { plan, arrays, backend: std::marker::PhantomData };
/// # }
/// ```
pub struct Checked<'a, B: Backend + ?Sized> {
    plan: LaunchPlan<'a>,
    arrays: &'a [&'a B::Array],
    /// Whose `describe` the arrays were checked through.
    backend: PhantomData<fn(&B)>,
}

impl<'a, B: Backend + ?Sized> Checked<'a, B> {
    /// The plan: sizes, grid, threadgroup, where each input comes from, the outputs.
    pub fn plan(&self) -> &LaunchPlan<'a> {
        &self.plan
    }

    /// The kernel checked.
    pub fn def(&self) -> &'a KernelDef {
        self.plan.def()
    }

    /// The caller's arrays, as checked (the plan's [`Input::Array`](launch::Input::Array) indexes them).
    pub fn arrays(&self) -> &'a [&'a B::Array] {
        self.arrays
    }

    /// The same launch checked again for `inner`, a backend of the same arrays that `B`
    /// wraps (one that counts or logs launches, say), so the wrapper can hand it on: the
    /// arrays, host integers and sizes are the ones this launch was checked with.
    pub fn for_inner<I: Backend<Array = B::Array> + ?Sized>(&self, inner: &I) -> Result<Checked<'a, I>, LaunchError> {
        let def = self.def();
        // the host integers, in contract order (size values are made again from the sizes)
        let host: Vec<&[i32]> = def
            .inputs
            .iter()
            .zip(self.plan.inputs())
            .filter_map(|(b, input)| match input {
                launch::Input::Values(v) if b.source == crate::contract::Source::HostInts => Some(v.values.as_slice()),
                _ => None,
            })
            .collect();
        let sizes: Vec<(String, u64)> = def.sizes.iter().zip(self.plan.sizes()).map(|(n, &v)| (n.to_string(), v)).collect();
        check(inner, def, self.arrays, &host, &sizes)
    }
}

impl<B: Backend + ?Sized> Clone for Checked<'_, B> {
    fn clone(&self) -> Self {
        Checked { plan: self.plan.clone(), arrays: self.arrays, backend: PhantomData }
    }
}

impl<B: Backend + ?Sized> std::fmt::Debug for Checked<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked").field("plan", &self.plan).field("arrays", &self.arrays.len()).finish()
    }
}

/// Every precondition of `def` on `arrays` (its data inputs, in contract
/// order) and `host` (its host-integer inputs, in contract order): dtypes,
/// shapes, bytes, layout, alignment and bounded values, all reported at once.
/// `given_sizes` must agree with the shapes. The launch it returns runs with
/// [`Backend::run`].
pub fn check<'a, B: Backend + ?Sized>(
    backend: &B,
    def: &'a KernelDef,
    arrays: &'a [&'a B::Array],
    host: &[&[i32]],
    given_sizes: &[(String, u64)],
) -> Result<Checked<'a, B>, LaunchError> {
    let infos: Vec<ArgInfo> = arrays.iter().map(|a| backend.describe(a)).collect();
    let plan = launch::check(def, &infos, host, given_sizes)?;
    Ok(Checked { plan, arrays, backend: PhantomData })
}

/// Checks every precondition, then runs the kernel; nothing runs when a
/// check fails. The outputs come back in contract order.
pub fn launch_vec<B: Backend>(backend: &B, def: &KernelDef, arrays: &[&B::Array], host: &[&[i32]]) -> Result<Vec<B::Array>, LaunchError> {
    let checked = check(backend, def, arrays, host, &[])?;
    let outputs = backend.run(&checked).map_err(|e| LaunchError::backend(def, e))?;
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
