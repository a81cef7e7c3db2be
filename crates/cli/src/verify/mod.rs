//! `kernelgen verify`: every generated kernel of every family, built and run
//! in the emulator, in two stages.
//!
//! 1. **Properties**, with no reference (`kernelgen_emu::verify`): no access
//!    outside a buffer, every output element written, no read of
//!    uninitialized threadgroup or output memory, the same bits in forward,
//!    reverse and shuffled run order (a race shows as a difference), and,
//!    under `--sanitize`, a clean AddressSanitizer and UBSan run.
//! 2. **Values**, where the family has a reference: a family file's numpy
//!    function (`[verify] reference`, see [`python`]) compared within its
//!    `[verify] tolerance` (integer outputs exactly), or, for kernelgen's own
//!    families, the Rust references of `kernelgen_reference` ([`Reference`]):
//!    bit for bit against the replay model (the kernel's own order of
//!    operations) and within the per-element bound of the f64 model.
//!
//! Inputs are random: from the contract at the family's `[verify] sizes`
//! (2 for each size not given) and `[verify] inputs` ranges, or drawn by the
//! bundled reference as its family needs them.

mod affine;
mod delta;
mod expert;
mod norms;
mod python;

use crate::out::outln;
use globset::Glob;
use kernelgen::Dtype;
use kernelgen::contract::Tolerance;
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::EmuBackend;
use kernelgen_emu::{EmuOptions, RunOrder};
use kernelgen_emu::host::HostArray;
use kernelgen_emu::verify as props;
use kernelgen_reference::{self as reference, Element, Exact, Violation};
use std::process::ExitCode;
use std::time::Instant;

/// What one output must be, by a bundled family's Rust references.
pub struct Expected {
    pub name: &'static str,
    /// The replay model's output, in the output's dtype.
    pub replay: HostArray,
    /// The f64 model: exact values and per-element tolerances.
    pub exact: Exact,
    /// The output elements `exact` covers, in its order, where the f64 model ran on a
    /// sample (every element when `None`); the replay covers every element regardless.
    pub exact_at: Option<Vec<usize>>,
}

/// One verification run of a kernel by a bundled reference.
pub struct Case {
    /// Run-time sizes used, for the report (`M=2`).
    pub sizes: String,
    /// Array inputs in contract order (size values and host integers excluded).
    pub inputs: Vec<HostArray>,
    /// Host-integer inputs in contract order (DeltaNet's kept lengths).
    pub host: Vec<Vec<i32>>,
    pub expected: Vec<Expected>,
}

/// A family's reference in Rust: the inputs to run a kernel on and what its
/// outputs must be. Each of kernelgen's own families has one (a user's family
/// names a numpy reference in its family file instead, or none).
pub trait Reference: Sync {
    fn case(&self, r: &RenderedKernel, seed: u64) -> Result<Case, String>;
}

type CaseFn = fn(&RenderedKernel, u64) -> Result<Case, String>;

/// A reference generic over the element type of the kernel's `dtype` axis.
struct PerDtype {
    f32: CaseFn,
    f16: CaseFn,
    bf16: CaseFn,
}

impl Reference for PerDtype {
    fn case(&self, r: &RenderedKernel, seed: u64) -> Result<Case, String> {
        match r.kernel.variant.str("dtype") {
            "f32" => (self.f32)(r, seed),
            "f16" => (self.f16)(r, seed),
            "bf16" => (self.bf16)(r, seed),
            other => Err(format!("no reference for dtype {other}")),
        }
    }
}

macro_rules! per_dtype {
    ($($f:ident)::+) => {
        &PerDtype { f32: $($f)::+::<f32>, f16: $($f)::+::<half::f16>, bf16: $($f)::+::<half::bf16> }
    };
}

/// The Rust references of the bundled families, by family name (a user's
/// family cannot take a bundled family's name).
const BUNDLED: &[(&str, &dyn Reference)] = &[
    ("expert", per_dtype!(expert::case)),
    ("affine", per_dtype!(affine::case)),
    ("delta", per_dtype!(delta::case)),
    ("delta_state", per_dtype!(delta::case)),
    ("silu_rms_heads", per_dtype!(norms::silu_rms_heads)),
    ("gated_rms_norm", per_dtype!(norms::gated_rms_norm)),
];

fn bundled_reference(r: &RenderedKernel) -> Option<&'static dyn Reference> {
    let family = &r.kernel.family;
    if family.dir.is_some() {
        return None;
    }
    BUNDLED.iter().find(|(name, _)| *name == family.name).map(|(_, f)| *f)
}

/// An integer value the family's plan gives its template.
pub fn param(r: &RenderedKernel, name: &str) -> Result<usize, String> {
    r.kernel.plan.params.get(name).and_then(|v| v.as_u64()).map(|v| v as usize).ok_or_else(|| format!("family `{}` plans no integer `{name}`", r.kernel.family.name))
}

/// Random values in `[-1, 1)`, rounded to `T`.
pub fn random<T: Element>(rng: &mut reference::SplitMix64, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect()
}

/// Element values as host bytes of their dtype (a large array in guarded memory, which the
/// emulator backend binds without copying).
pub fn host<T: Element>(shape: Vec<u64>, values: &[T]) -> HostArray {
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

fn elements<T: Element>(a: &HostArray) -> Vec<T> {
    let size = T::DTYPE.size();
    a.data
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..size].copy_from_slice(c);
            T::from_bits(u32::from_le_bytes(b))
        })
        .collect()
}

/// Compares one output with a bundled reference: `(exact, max error, bound)`, errors and
/// bound in ulps of the output's largest exact magnitude (per-element ulps blow up where a
/// dot product cancels to near zero; the check itself is per element).
fn compare(got: &HostArray, want: &Expected) -> Result<(bool, f64, f64), String> {
    fn typed<T: Element>(got: &HostArray, want: &Expected) -> Result<(bool, f64, f64), String> {
        let g: Vec<T> = elements(got);
        let sampled: Vec<T>;
        let (checked, index): (&[T], &dyn Fn(usize) -> usize) = match &want.exact_at {
            None => (&g, &|i| i),
            Some(at) => {
                sampled = at.iter().map(|&i| g[i]).collect();
                (&sampled, &|i| at[i])
            }
        };
        want.exact.check::<T>(checked).map_err(|v| format!("`{}` against the f64 model: {}", want.name, Violation { index: index(v.index), ..v }))?;
        let r: Vec<T> = elements(&want.replay);
        if let Some(i) = g.iter().zip(&r).position(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(format!(
                "`{}` differs from the replay model at element {i}: got {:?}, replay {:?} ({} elements differ)",
                want.name,
                g[i],
                r[i],
                g.iter().zip(&r).filter(|(a, b)| a.to_bits() != b.to_bits()).count()
            ));
        }
        let scale = want.exact.value.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let unit = reference::ulp::<T>(scale);
        let err = checked.iter().zip(&want.exact.value).fold(0.0f64, |m, (a, e)| m.max((f64::from(a.to_f32()) - e).abs()));
        let tol = want.exact.tol.iter().fold(0.0f64, |m, t| m.max(*t));
        Ok((true, err / unit, tol / unit))
    }
    if got.shape != want.replay.shape || got.dtype != want.replay.dtype {
        return Err(format!("`{}`: output {:?} {:?} where the reference has {:?} {:?}", want.name, got.dtype, got.shape, want.replay.dtype, want.replay.shape));
    }
    match got.dtype {
        Dtype::F32 => typed::<f32>(got, want),
        Dtype::Bf16 => typed::<half::bf16>(got, want),
        Dtype::F16 => typed::<half::f16>(got, want),
        other => Err(format!("`{}`: no ulp comparison for dtype {other}", want.name)),
    }
}

/// How a kernel's values were checked.
enum Values {
    /// Bundled: bit for bit against the replay model, within the f64 model's bound.
    Replay { max_ulp: f64, bound: f64 },
    /// A numpy reference, within the family's tolerance.
    Python { max_ulp: f64, tolerance: Tolerance },
    /// No reference: the properties only.
    None,
}

/// How one kernel fared.
pub struct Outcome {
    kernel: String,
    sizes: String,
    values: Values,
    seconds: f64,
    failure: Option<String>,
}

fn sizes_text(r: &RenderedKernel, sizes: &[u64]) -> String {
    let text: Vec<String> = r.def.sizes.iter().zip(sizes).map(|(n, v)| format!("{n}={v}")).collect();
    if text.is_empty() { "-".into() } else { text.join(",") }
}

fn run_one(backend: &EmuBackend, r: &RenderedKernel, seed: u64) -> Outcome {
    let start = Instant::now();
    let mut outcome = Outcome { kernel: r.kernel.name.clone(), sizes: "-".into(), values: Values::None, seconds: 0.0, failure: None };
    let result = (|| -> Result<Values, String> {
        // The kernel loads first (the Metal check, then the build), so a kernel that is not
        // valid Metal fails with its .metal lines before any reference is computed.
        backend.program(&r.def).map_err(|e| e.to_string())?;
        let family = &r.kernel.family;
        if let Some(rust) = bundled_reference(r) {
            let case = rust.case(r, seed)?;
            outcome.sizes = case.sizes.clone();
            // The sizes follow from the inputs' shapes.
            let run = props::Case { sizes: Vec::new(), arrays: case.inputs, host: case.host };
            // Every run check_properties makes, but for a kernel too large to run often: one
            // other run order (reverse, with the other poison bytes).
            let orders: &[RunOrder] = if exclusive(r) { &[RunOrder::Reverse] } else { &[RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(seed)] };
            let outputs = props::check_properties_in(backend, &r.def, &run, orders).map_err(|f| f.to_string())?;
            let (mut max_ulp, mut bound) = (0f64, 0f64);
            for (got, want) in outputs.iter().zip(&case.expected) {
                let (_, ulp, b) = compare(got, want)?;
                max_ulp = max_ulp.max(ulp);
                bound = bound.max(b);
            }
            return Ok(Values::Replay { max_ulp, bound });
        }
        let v = &family.verify;
        let sizes: Vec<u64> = r.def.sizes.iter().map(|n| v.sizes.iter().find(|(s, _)| s == n.as_ref()).map_or(2, |(_, x)| *x)).collect();
        outcome.sizes = sizes_text(r, &sizes);
        let case = props::random_case(&r.def, &sizes, &v.ranges, seed)?;
        let outputs = props::check_properties(backend, &r.def, &case, seed).map_err(|f| f.to_string())?;
        let Some(reference) = family.reference() else { return Ok(Values::None) };
        let (file, function) = reference?;
        let want = python::call(&file, function, r, &case)?;
        let tolerance = v.tolerance.unwrap_or(Tolerance::Exact);
        let mut max_ulp = 0f64;
        for ((b, got), want) in r.def.outputs.iter().zip(&outputs).zip(&want) {
            max_ulp = max_ulp.max(props::compare(&b.name, got, want, tolerance)?.max_ulps);
        }
        Ok(Values::Python { max_ulp, tolerance })
    })();
    match result {
        Ok(v) => outcome.values = v,
        Err(e) => outcome.failure = Some(e),
    }
    outcome.seconds = start.elapsed().as_secs_f64();
    outcome
}

pub fn verify(specs: &crate::SpecArgs, filter: Option<&str>, sanitize: bool, seed: u64) -> Result<ExitCode, String> {
    if sanitize {
        kernelgen_emu::reexec_with_sanitizer_if_needed().map_err(|e| format!("error: cannot start under the sanitizer runtime: {e}"))?;
    }
    let generated = crate::codegen_cmds::run_pipeline(specs)?;
    let matcher = match filter {
        Some(f) => Some(Glob::new(f).map_err(|e| format!("error: --filter {f}: {e}"))?.compile_matcher()),
        None => None,
    };
    let selected: Vec<&RenderedKernel> = generated.kernels.iter().filter(|r| matcher.as_ref().is_none_or(|m| m.is_match(&r.kernel.name))).collect();
    if selected.is_empty() {
        return Err(format!("error: no kernel matches --filter {}", filter.unwrap_or("")));
    }
    let backend = EmuBackend::new(EmuOptions { sanitize, ..EmuOptions::default() }).map_err(|e| format!("error: {e}"))?;
    let width = selected.iter().map(|r| r.kernel.name.len()).max().unwrap_or(6).max(6);
    outln!("Every kernel is checked for out-of-bounds accesses, unwritten outputs, reads of uninitialized memory and");
    outln!("run-order dependence{}, then compared with its reference: the replay model bit for bit and the f64 model", if sanitize { ", under AddressSanitizer and UBSan" } else { "" });
    outln!("within its bound (kernelgen's families), or a family file's numpy reference within its tolerance.");
    outln!("MAX ULP and BOUND: the largest error and the largest allowed, in ulps (of the output's largest value for the f64 model).");
    outln!("{:<width$}  {:<10}  {:<10}  {:>8}  {:>8}  {:>7}", "KERNEL", "SIZES", "REFERENCE", "MAX ULP", "BOUND", "TIME");
    let mut failures = Vec::new();
    let outcomes = Outcomes::new(selected.len());
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(selected.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(i) = outcomes.take(|i| exclusive(selected[i])) {
                    // A panic (a kernelgen bug) fails this kernel: the table waits for every
                    // row, so a worker that died with its kernel would hang the run.
                    let o = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_one(&backend, selected[i], seed)))
                        .unwrap_or_else(|p| panicked(selected[i], p.as_ref()));
                    outcomes.done(i, o, exclusive(selected[i]));
                }
            });
        }
        for i in 0..selected.len() {
            let o = outcomes.wait(i);
            report(&o, width, &mut failures);
        }
    });
    let passed = selected.len() - failures.len();
    for f in &failures {
        eprintln!("FAILED {f}");
    }
    outln!("verify: {passed} passed, {} failed", failures.len());
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The outcome of a kernel whose verification panicked.
fn panicked(r: &RenderedKernel, payload: &(dyn std::any::Any + Send)) -> Outcome {
    let what = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default();
    Outcome {
        kernel: r.kernel.name.clone(),
        sizes: "-".into(),
        values: Values::None,
        seconds: 0.0,
        failure: Some(format!("kernelgen panicked while verifying it ({what}): a bug in kernelgen, please report it")),
    }
}

/// One row of the table (and the failure, for the summary).
fn report(o: &Outcome, width: usize, failures: &mut Vec<String>) {
    let (reference, max_ulp, bound) = match (&o.failure, &o.values) {
        (Some(_), _) => ("FAIL".to_string(), "-".to_string(), "-".to_string()),
        (None, Values::Replay { max_ulp, bound }) => ("replay+f64".into(), format!("{max_ulp:.3}"), format!("{bound:.3}")),
        (None, Values::Python { max_ulp, tolerance }) => ("numpy".into(), format!("{max_ulp:.3}"), tolerance.to_string()),
        (None, Values::None) => ("none".into(), "-".into(), "-".into()),
    };
    outln!("{:<width$}  {:<10}  {:<10}  {:>8}  {:>8}  {:>6.2}s", o.kernel, o.sizes, reference, max_ulp, bound, o.seconds);
    if let Some(f) = &o.failure {
        failures.push(format!("{}: {f}", o.kernel));
    }
}

/// A large kernel (inputs of more than `LARGE_INPUT_BYTES` at the contract's fixed sizes) runs
/// alone.
fn exclusive(r: &RenderedKernel) -> bool {
    let bytes: u64 = r.def.inputs.iter().filter_map(|b| b.fixed_elements().map(|n| n * b.dtype.size() as u64)).sum();
    bytes > props::LARGE_INPUT_BYTES
}

/// Kernels run on several threads at once (each launch's threadgroups on the emulator's
/// workers too), taken in catalog order; a large one runs alone. The table is printed in
/// catalog order as the outcomes arrive.
struct Outcomes {
    state: std::sync::Mutex<Jobs>,
    changed: std::sync::Condvar,
}

struct Jobs {
    next: usize,
    running: usize,
    exclusive_running: bool,
    done: Vec<Option<Outcome>>,
}

impl Outcomes {
    fn new(n: usize) -> Self {
        Outcomes {
            state: std::sync::Mutex::new(Jobs { next: 0, running: 0, exclusive_running: false, done: (0..n).map(|_| None).collect() }),
            changed: std::sync::Condvar::new(),
        }
    }

    /// The next kernel to run, once it may start (`None` when none is left).
    fn take(&self, exclusive: impl Fn(usize) -> bool) -> Option<usize> {
        let mut j = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if j.next >= j.done.len() {
                return None;
            }
            let alone = exclusive(j.next);
            if !j.exclusive_running && !(alone && j.running > 0) {
                let i = j.next;
                j.next += 1;
                j.running += 1;
                j.exclusive_running = alone;
                return Some(i);
            }
            j = self.changed.wait(j).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn done(&self, i: usize, o: Outcome, exclusive: bool) {
        let mut j = self.state.lock().unwrap_or_else(|p| p.into_inner());
        j.running -= 1;
        if exclusive {
            j.exclusive_running = false;
        }
        j.done[i] = Some(o);
        self.changed.notify_all();
    }

    fn wait(&self, i: usize) -> Outcome {
        let mut j = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(o) = j.done[i].take() {
                return o;
            }
            j = self.changed.wait(j).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(replay: &[f32], exact: Exact, exact_at: Option<Vec<usize>>) -> Expected {
        Expected { name: "y", replay: host(vec![replay.len() as u64], replay), exact, exact_at }
    }

    /// The f64 model on a sample of the elements: checked at those elements, a violation
    /// reported at the output's index, the others left to the replay.
    #[test]
    fn a_sampled_f64_model_checks_its_elements_and_names_the_output_index() {
        let got = host(vec![4], &[1.0f32, 2.0, 3.0, 4.5]);
        // elements 1 and 3 sampled: 3 is 0.5 off a bound of 0.1
        let exact = Exact { value: vec![2.0, 4.0], tol: vec![0.1, 0.1] };
        let err = compare(&got, &expected(&[1.0, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))).unwrap_err();
        assert!(err.contains("element 3:"), "{err}");
        // within the bound at the sampled elements: passes, whatever the others are
        let exact = Exact { value: vec![2.0, 4.45], tol: vec![0.1, 0.1] };
        let (ok, _, _) = compare(&got, &expected(&[1.0, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))).unwrap();
        assert!(ok);
        // the replay still covers every element
        let exact = Exact { value: vec![2.0, 4.45], tol: vec![0.1, 0.1] };
        let err = compare(&got, &expected(&[1.5, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))).unwrap_err();
        assert!(err.contains("differs from the replay model at element 0"), "{err}");
    }
}
