//! kernelgen's Rust references: for each bundled family, the inputs it needs (drawn as the
//! family's models expect them: DeltaNet decays in (0, 1), say) and the outputs of
//! `kernelgen-reference`'s two models, compared bit for bit with the replay model (the kernel's
//! own order of operations) and within the per-element bound of the f64 model. A family file
//! names one as `[verify] reference = "rust:<name>"`; each declares what it reads
//! ([`Declaration`]).

mod affine;
mod delta;
mod expert;
mod norms;

use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel, Reference};
use kernelgen_emu::HostArray;
use kernelgen_reference::{Element, SplitMix64};

type CaseFn = fn(&Kernel<'_>, u64) -> Result<Case, Error>;
type ExpectedFn = fn(&Kernel<'_>, &Case, u64) -> Result<Vec<(String, Expected)>, Error>;

/// One function per element type of the kernel's `dtype` axis.
struct PerDtype<F> {
    f32: F,
    f16: F,
    bf16: F,
}

macro_rules! per_dtype {
    ($($f:ident)::+) => {
        crate::bundled::PerDtype { f32: $($f)::+::<f32>, f16: $($f)::+::<half::f16>, bf16: $($f)::+::<half::bf16> }
    };
}
use per_dtype;

/// A Rust reference of a bundled family: its name in family files (`rust:<name>`), what it
/// reads, and its models, generic over the element type of the kernel's `dtype` parameter.
pub struct RustReference {
    /// The name a family file gives after `rust:`.
    pub name: &'static str,
    /// The parameters and buffers it reads.
    pub declared: Declaration,
    case: PerDtype<CaseFn>,
    expected: PerDtype<ExpectedFn>,
}

impl RustReference {
    fn pick<'k, F: Copy>(&'static self, kernel: &Kernel<'k>, of: &PerDtype<F>) -> Result<(Kernel<'k>, F), Error> {
        let kernel = kernel.declaring(self.name, &self.declared);
        let f = match kernel.string("dtype")? {
            "f32" => of.f32,
            "f16" => of.f16,
            "bf16" => of.bf16,
            other => return Err(Error::Unmodelled { reference: self.name, what: format!("for dtype {other}") }),
        };
        Ok((kernel, f))
    }
}

impl Reference for &'static RustReference {
    fn case(&self, kernel: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
        let (kernel, case) = self.pick(kernel, &self.case)?;
        let case = case(&kernel, seed)?;
        kernel.check_declared(case.arrays.keys().chain(case.host.keys()), std::iter::empty())?;
        Ok(case)
    }

    fn expected(&self, kernel: &Kernel<'_>, case: &Case, seed: u64) -> Result<Vec<(String, Expected)>, Error> {
        let (kernel, expected) = self.pick(kernel, &self.expected)?;
        let expected = expected(&kernel, case, seed)?;
        kernel.check_declared(std::iter::empty(), expected.iter().map(|(name, _)| name))?;
        Ok(expected)
    }
}

/// Every Rust reference, by the name family files give it.
pub static BUNDLED: &[&RustReference] = &[&expert::REFERENCE, &affine::REFERENCE, &delta::REFERENCE, &delta::STATE_REFERENCE, &norms::SILU_RMS_HEADS, &norms::GATED_RMS_NORM];

/// The Rust reference a family file names `rust:<name>`.
pub fn find(name: &str) -> Option<&'static RustReference> {
    BUNDLED.iter().copied().find(|r| r.name == name)
}

/// Random values in `[-1, 1)`, rounded to `T`.
pub(crate) fn random<T: Element>(rng: &mut SplitMix64, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect()
}

/// Element values as host bytes of their dtype (a large array in guarded memory, which the
/// emulator backend binds without copying).
pub(crate) fn host<T: Element>(shape: Vec<u64>, values: &[T]) -> HostArray {
    // Inlined into each arm below with its size a constant, so every element is one
    // fixed-size move (the heads' scales are 20 M elements).
    #[inline(always)]
    fn put<T: Element>(data: &mut [u8], values: &[T], size: usize) {
        for (c, v) in data.chunks_exact_mut(size).zip(values) {
            c.copy_from_slice(&v.to_bits().to_le_bytes()[..size]);
        }
    }
    let size = T::DTYPE.size();
    let mut a = HostArray::zeros(T::DTYPE, shape);
    assert_eq!(a.data.len(), values.len() * size, "host: shape and values disagree");
    match size {
        2 => put(&mut a.data, values, 2),
        4 => put(&mut a.data, values, 4),
        n => put(&mut a.data, values, n),
    }
    a
}

/// The elements of the case's input `name` as `T`.
pub(crate) fn input<T: Element>(case: &Case, name: &str) -> Result<Vec<T>, Error> {
    Ok(crate::compare::elements(case.get(name)?))
}
