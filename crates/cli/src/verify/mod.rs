//! `kernelgen verify`: every generated kernel, built and run in the
//! emulator on seeded random inputs at its spec's geometry (small run-time
//! sizes), compared with the family's references in `kernelgen_reference`:
//! bit for bit against the replay model (the kernel's own accumulation order
//! and the emulator's reduction order), and within the per-element bound of
//! the f64 model.
//!
//! A family gets a verifier by adding a module here that builds a [`Case`].

mod affine;
mod delta;
mod expert;
mod norms;

use crate::out::outln;
use globset::Glob;
use kernelgen::backend;
use kernelgen_emu::EmuBackend;
use kernelgen_emu::EmuOptions;
use kernelgen_emu::host::HostArray;
use kernelgen_reference::{self as reference, Element, Exact};
use kernelgen::Dtype;
use kernelgen_codegen::render::RenderedKernel;
use std::process::ExitCode;
use std::time::Instant;

/// What one output must be.
pub struct Expected {
    pub name: &'static str,
    /// The replay model's output, in the output's dtype.
    pub replay: HostArray,
    /// The f64 model: exact values and per-element tolerances.
    pub exact: Exact,
}

/// One verification run of a kernel.
pub struct Case {
    /// Run-time sizes used, for the report (`M=2`).
    pub sizes: String,
    /// Array inputs in contract order (size values and host integers excluded).
    pub inputs: Vec<HostArray>,
    /// Host-integer inputs in contract order (DeltaNet's kept lengths).
    pub host: Vec<Vec<i32>>,
    pub expected: Vec<Expected>,
}

/// How one kernel fared.
pub struct Outcome {
    pub kernel: String,
    pub sizes: String,
    pub exact: bool,
    pub max_ulp: f64,
    pub bound: f64,
    pub seconds: f64,
    pub failure: Option<String>,
}

/// Builds the case for a kernel of a family kernelgen can verify, with the
/// references instantiated at the element type of the kernel's `dtype` axis.
pub fn case(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    macro_rules! by_dtype {
        ($($f:ident)::+) => {
            match r.kernel.variant.str("dtype") {
                "f32" => $($f)::+::<f32>(r, seed),
                "f16" => $($f)::+::<half::f16>(r, seed),
                "bf16" => $($f)::+::<half::bf16>(r, seed),
                other => return Err(format!("no verifier for dtype {other}")),
            }
        };
    }
    match r.kernel.family.name.as_str() {
        "expert" => Ok(by_dtype!(expert::case)),
        "affine" => Ok(by_dtype!(affine::case)),
        "delta" | "delta_state" => by_dtype!(delta::case),
        "silu_rms_heads" => Ok(by_dtype!(norms::silu_rms_heads)),
        "gated_rms_norm" => Ok(by_dtype!(norms::gated_rms_norm)),
        other => Err(format!("no verifier for family `{other}`: add one in crates/cli/src/verify/")),
    }
}

/// A JSON integer parameter of the kernel's plan.
pub fn param(r: &RenderedKernel, name: &str) -> usize {
    r.kernel.plan.params.get(name).and_then(|v| v.as_u64()).unwrap_or_else(|| panic!("family `{}` plans no integer `{name}`", r.kernel.family.name.as_str())) as usize
}

/// Random values in `[-1, 1)`, rounded to `T`.
pub fn random<T: Element>(rng: &mut reference::SplitMix64, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect()
}

/// Element values as host bytes of their dtype (a large array in guarded memory, which the
/// emulator backend binds without copying).
pub fn host<T: Element>(shape: Vec<u64>, values: &[T]) -> HostArray {
    let size = T::DTYPE.size();
    let mut a = HostArray::zeros(T::DTYPE, shape);
    assert_eq!(a.data.len(), values.len() * size, "host: shape and values disagree");
    for (c, v) in a.data.chunks_exact_mut(size).zip(values) {
        c.copy_from_slice(&v.to_bits().to_le_bytes()[..size]);
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

/// Compares one output: `(exact, max error, bound)`, errors and bound in
/// ulps of the output's largest exact magnitude (per-element ulps blow up
/// where a dot product cancels to near zero; the check itself is per element).
fn compare(got: &HostArray, want: &Expected) -> Result<(bool, f64, f64), String> {
    fn typed<T: Element>(got: &HostArray, want: &Expected) -> Result<(bool, f64, f64), String> {
        let g: Vec<T> = elements(got);
        want.exact.check::<T>(&g).map_err(|v| format!("`{}` against the f64 model: {v}", want.name))?;
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
        let err = g.iter().zip(&want.exact.value).fold(0.0f64, |m, (a, e)| m.max((f64::from(a.to_f32()) - e).abs()));
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

fn run_one(backend: &EmuBackend, r: &RenderedKernel, seed: u64) -> Outcome {
    let start = Instant::now();
    let mut outcome = Outcome { kernel: r.kernel.name.clone(), sizes: String::new(), exact: false, max_ulp: 0.0, bound: 0.0, seconds: 0.0, failure: None };
    let result = (|| -> Result<(), String> {
        // The kernel loads first (the Metal check, then the build), so a kernel that is not
        // valid Metal fails with its .metal lines even where no verifier exists for it.
        backend.program(&r.def).map_err(|e| e.to_string())?;
        let case = case(r, seed)?;
        outcome.sizes = case.sizes.clone();
        let inputs: Vec<&HostArray> = case.inputs.iter().collect();
        let host: Vec<&[i32]> = case.host.iter().map(Vec::as_slice).collect();
        let outputs = backend::launch_vec(backend, &r.def, &inputs, &host).map_err(|e| e.to_string())?;
        outcome.exact = true;
        for (got, want) in outputs.iter().zip(&case.expected) {
            let (exact, ulp, bound) = compare(got, want)?;
            outcome.exact &= exact;
            outcome.max_ulp = outcome.max_ulp.max(ulp);
            outcome.bound = outcome.bound.max(bound);
        }
        Ok(())
    })();
    if let Err(e) = result {
        outcome.exact = false;
        outcome.failure = Some(e);
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
    outln!("Each output is compared bit for bit with its replay model and element by element with its f64 model;");
    outln!("MAX ULP and BOUND are the largest error and the largest allowed error, in ulps of the output's largest value.");
    outln!("{:<width$}  {:<10}  {:<5}  {:>8}  {:>8}  {:>7}", "KERNEL", "SIZES", "EXACT", "MAX ULP", "BOUND", "TIME");
    let mut failures = Vec::new();
    let outcomes = Outcomes::new(selected.len());
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(selected.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(i) = outcomes.take(|i| exclusive(selected[i])) {
                    let o = run_one(&backend, selected[i], seed);
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

/// One row of the table (and the failure, for the summary).
fn report(o: &Outcome, width: usize, failures: &mut Vec<String>) {
    let status = if o.failure.is_some() { "FAIL" } else if o.exact { "yes" } else { "no" };
    outln!("{:<width$}  {:<10}  {:<5}  {:>8.3}  {:>8.3}  {:>6.2}s", o.kernel, o.sizes, status, o.max_ulp, o.bound, o.seconds);
    if let Some(f) = &o.failure {
        failures.push(format!("{}: {f}", o.kernel));
    }
}

/// Inputs of more than this many bytes (at the contract's fixed sizes) make a kernel run
/// alone: verifying two 635 MB vocabulary heads at once would double the peak memory.
const EXCLUSIVE_INPUT_BYTES: u64 = 128 << 20;

fn exclusive(r: &RenderedKernel) -> bool {
    let bytes: u64 = r.def.inputs.iter().filter_map(|b| b.fixed_elements().map(|n| n * b.dtype.size() as u64)).sum();
    bytes > EXCLUSIVE_INPUT_BYTES
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
