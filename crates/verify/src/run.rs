//! Verifying kernels: one kernel ([`verify_kernel`]), or many on several threads in catalog
//! order ([`run`]), on any backend whose arrays can be made from host bytes and read back
//! ([`VerifyBackend`]). In the emulator every kernel first has its properties checked (the
//! forward run's outputs are then compared); elsewhere the kernel is launched once.

use crate::bodies;
use crate::case::Case;
use crate::compare::{Compared, Expected, Replay, compare};
use crate::error::{Error, Finding, Mismatch};
use crate::properties::{check_properties_in, every_order};
use crate::reference::{Kernel, Resolved, family_at, family_case, resolve};
use kernelgen::backend::{self, Backend};
use kernelgen::contract::{KernelDef, Tolerance};
use kernelgen::launch::LaunchError;
use kernelgen_codegen::family::ReferenceDef;
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::host::LARGE_INPUT_BYTES;
use kernelgen_emu::{EmuBackend, HostArray, Language, RunOrder};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// A backend verify can run kernels on: its arrays are made from host bytes and read back.
/// The emulator's is one; another (MLX's) needs these two conversions.
pub trait VerifyBackend: Backend + Sync {
    /// An array of this backend holding `array`'s dtype, shape and bytes.
    fn upload(&self, array: &HostArray) -> Result<Self::Array, Self::Error>;
    /// The dtype, shape and bytes of one of this backend's arrays (evaluating it if need be).
    fn download(&self, array: &Self::Array) -> Result<HostArray, Self::Error>;
    /// The emulator, when this backend is it: the property checks (poison, run orders,
    /// guards, sanitizer) run there only.
    fn emulator(&self) -> Option<&EmuBackend> {
        None
    }
    /// Whether the Rust references' replay models bind this backend's bits (the emulator's);
    /// elsewhere outputs are held to the f64 models' bounds.
    fn replay(&self) -> Replay {
        Replay::Skipped
    }
    /// The body this backend runs: the emulator's language, else the one its GPU runs.
    fn body(&self) -> Language {
        Language::Metal
    }
    /// How many kernels may be verified at once on this backend.
    fn jobs(&self) -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

impl VerifyBackend for EmuBackend {
    fn upload(&self, array: &HostArray) -> Result<HostArray, Self::Error> {
        Ok(array.clone())
    }

    fn download(&self, array: &HostArray) -> Result<HostArray, Self::Error> {
        Ok(array.clone())
    }

    fn emulator(&self) -> Option<&EmuBackend> {
        Some(self)
    }

    fn replay(&self) -> Replay {
        Replay::BitForBit
    }

    fn body(&self) -> Language {
        self.language()
    }
}

/// How a run verifies.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The seed of the random inputs (and of the shuffled run order).
    pub seed: u64,
    /// Properties only: no reference is called, even where the family names one (a Rust
    /// reference still draws the inputs its models expect).
    pub no_reference: bool,
}

/// How a kernel's values were checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// A Rust reference: within the f64 model's bound (both in ulps of each output's largest
    /// exact value; the largest over the outputs), and bit for bit against the replay model
    /// where `replay` says so (the emulator).
    Model {
        /// The largest error.
        max_ulp: f64,
        /// The largest bound.
        bound: f64,
        /// Whether the replay model was compared bit for bit.
        replay: Replay,
    },
    /// A numpy reference, within the family's tolerance.
    Tolerance {
        /// The largest error, in ulps of each element's reference value.
        max_ulp: f64,
        /// The tolerance.
        tolerance: Tolerance,
    },
    /// The family names no reference: the properties only.
    None,
    /// The reference was not called (`--no-reference`): the properties only.
    Skipped,
}

/// How one kernel fared.
#[derive(Debug)]
pub struct Outcome {
    /// The kernel's name.
    pub kernel: String,
    /// The body verified: Metal, or the kernel's CUDA body ([`crate::bodies`]).
    pub body: Language,
    /// The run-time sizes it ran at, `M=2,T=3` (`-` for none, or where it failed before).
    pub sizes: String,
    /// Its values, or why it failed.
    pub result: Result<Values, Error>,
    /// The time it took, in seconds.
    pub seconds: f64,
}

/// Every kernel's outcome, in the order they were given.
#[derive(Debug, Default)]
pub struct Report {
    /// The outcomes.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// How many passed.
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.result.is_ok()).count()
    }

    /// The kernels that failed, with why.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.outcomes.iter().filter_map(|o| o.result.as_ref().err().map(|e| (o.kernel.as_str(), e)))
    }
}

/// Whether `def` is large (inputs of more than [`LARGE_INPUT_BYTES`] at its fixed sizes): it
/// runs alone, and in the emulator in one other run order than forward.
pub fn is_large(def: &KernelDef) -> bool {
    let bytes: u64 = def.inputs.iter().filter_map(|b| b.fixed_elements().map(|n| n * b.dtype.size() as u64)).sum();
    bytes > LARGE_INPUT_BYTES
}

/// Runs `case` on `backend`: in the emulator with every property checked (the forward run's
/// outputs come back), elsewhere launched once. The outputs are in contract order.
pub fn run_case<B: VerifyBackend>(backend: &B, def: &KernelDef, case: &Case, seed: u64) -> Result<Vec<HostArray>, Error> {
    if let Some(emu) = backend.emulator() {
        // Every run check_properties makes, but for a kernel too large to run often, and
        // under the sanitizers: one other run order (reverse, with the other poison bytes).
        // Under the sanitizers each run is several times as slow, and what they add (every
        // access checked) needs no second order; the orders' agreement is the plain run's.
        let few = is_large(def) || emu.emulator().options().sanitize;
        let orders: &[RunOrder] = if few { &[RunOrder::Reverse] } else { &every_order(seed) };
        return check_properties_in(emu, def, case, orders);
    }
    let bound = case.bind(def)?;
    let transfer = |buffer: &str| {
        let buffer = buffer.to_string();
        move |e: B::Error| Error::Transfer { buffer, source: Box::new(e) }
    };
    let arrays = bound.names.iter().zip(&bound.arrays).map(|(name, a)| backend.upload(a).map_err(transfer(name))).collect::<Result<Vec<_>, _>>()?;
    let arrays: Vec<&B::Array> = arrays.iter().collect();
    let checked = backend::check(backend, def, &arrays, &bound.host, &bound.sizes)?;
    let outputs = backend.run(&checked).map_err(|e| LaunchError::backend(def, e))?;
    def.outputs.iter().zip(&outputs).map(|(b, o)| backend.download(o).map_err(transfer(&b.name))).collect()
}

/// Compares a kernel's outputs (contract order) with what a reference says of each, by name.
pub fn compare_outputs(def: &KernelDef, outputs: &[HostArray], expected: &[(String, Expected)], replay: Replay) -> Result<Values, Error> {
    if let Some((name, _)) = expected.iter().find(|(name, _)| !def.outputs.iter().any(|b| b.name.as_ref() == name.as_str())) {
        return Err(Mismatch::Unknown { output: name.clone() }.into());
    }
    let (mut max_ulp, mut bound, mut tolerance) = (0f64, 0f64, None);
    for (b, got) in def.outputs.iter().zip(outputs) {
        let want = expected.iter().find(|(name, _)| name.as_str() == b.name.as_ref()).ok_or_else(|| Mismatch::Missing { output: b.name.to_string() })?;
        if let Expected::Values { tolerance: t, .. } = &want.1 {
            tolerance = Some(*t);
        }
        match compare(&b.name, got, &want.1, replay)? {
            Compared::Model { max_ulp: u, bound: m } => (max_ulp, bound) = (max_ulp.max(u), bound.max(m)),
            Compared::Values(a) => max_ulp = max_ulp.max(a.max_ulp),
        }
    }
    Ok(match tolerance {
        Some(tolerance) => Values::Tolerance { max_ulp, tolerance },
        None => Values::Model { max_ulp, bound, replay },
    })
}

/// Verifies one kernel on `backend`: its inputs from its family's reference (or its contract),
/// then, in the emulator, every property, and the values where the family names a reference.
pub fn verify_kernel<B: VerifyBackend>(backend: &B, r: &RenderedKernel, options: &Options) -> Outcome {
    let start = Instant::now();
    let mut sizes = "-".to_string();
    let result = (|| {
        // The kernel loads first (the Metal check, then the build), so a kernel that is not
        // valid Metal fails with its .metal lines before any reference is computed.
        if let Some(emu) = backend.emulator() {
            emu.program(&r.def)?;
        }
        let kernel = Kernel::new(r, backend.body());
        let resolved = match (&r.kernel.family.verify.reference, options.no_reference) {
            // a Python reference is not called, and not looked for
            (Some(named), true) if !matches!(named.value, ReferenceDef::Rust(_)) => Resolved::None,
            _ => resolve(&r.kernel.family)?,
        };
        let reference = resolved.reference();
        let case = match reference {
            Some(reference) => reference.case(&kernel, options.seed)?,
            None => family_case(&kernel, options.seed)?,
        };
        sizes = case.sizes_text(&r.def);
        let outputs = run_case(backend, &r.def, &case, options.seed).map_err(|e| declared_at(e, r))?;
        match reference {
            None if r.kernel.family.verify.reference.is_none() => Ok(Values::None),
            _ if options.no_reference => Ok(Values::Skipped),
            None => Ok(Values::None),
            Some(reference) => compare_outputs(&r.def, &outputs, &reference.expected(&kernel, &case, options.seed)?, backend.replay()),
        }
    })();
    let body = backend.body();
    Outcome { kernel: r.kernel.name.clone(), body, sizes, result, seconds: start.elapsed().as_secs_f64() }
}

/// A wrong `threadgroup_memory`, located in the family file.
fn declared_at(e: Error, r: &RenderedKernel) -> Error {
    match e {
        Error::Property(Finding::ThreadgroupMemory { at: None, body, declared, allocated, arrays }) => {
            let family = &r.kernel.family;
            let at = family.parts.iter().find(|p| p.part == r.kernel.plan.part).map(|part| {
                // the key's value (a CUDA body's own where it has one), or the kernel's table
                // where the default (0) applies
                let declared_at = match (&part.cuda_shared_memory, body) {
                    (Some(cuda), Language::Cuda) => cuda,
                    _ => &part.threadgroup_memory,
                };
                let span = if declared_at.span.is_empty() { &part.span } else { &declared_at.span };
                family_at(family, span.start)
            });
            Finding::ThreadgroupMemory { at, body, declared, allocated, arrays }.into()
        }
        e => e,
    }
}

/// Verifies `kernels` on `backend`, several at once (each launch's threadgroups on the
/// emulator's workers too), taken in the order given; a large one ([`is_large`]) runs alone.
/// In the emulator a kernel with a CUDA body has it verified too, as a job of its own right
/// after its Metal body's ([`crate::bodies`]): one outcome per body.
/// `on_outcome` sees each outcome in that order as soon as it and those before it are done
/// (what a table printed as the run goes needs); the report holds them all.
pub fn run<B: VerifyBackend>(backend: &B, kernels: &[&RenderedKernel], options: &Options, mut on_outcome: impl FnMut(&Outcome)) -> Report {
    let cuda = bodies::cuda_backend(backend);
    let bodies = bodies::bodies(kernels, cuda.as_ref());
    let outcomes = Outcomes::new(bodies.len());
    let large: Vec<bool> = bodies.iter().map(|b| is_large(&kernels[b.kernel].def)).collect();
    let jobs = backend.jobs().clamp(1, bodies.len().max(1));
    let mut report = Report::default();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(i) = outcomes.take(|i| large[i]) {
                    // A panic (a kernelgen bug) fails this kernel: the report waits for every
                    // outcome, so a worker that died with its kernel would hang the run.
                    let (body, r) = (bodies[i], kernels[bodies[i].kernel]);
                    let o = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bodies::verify_body(backend, cuda.as_ref(), r, body, options))).unwrap_or_else(|p| Outcome {
                        kernel: r.kernel.name.clone(),
                        body: body.language,
                        sizes: "-".into(),
                        result: Err(Error::Panicked(panic_text(p.as_ref()))),
                        seconds: 0.0,
                    });
                    outcomes.done(i, o, large[i]);
                }
            });
        }
        for i in 0..bodies.len() {
            let o = outcomes.wait(i);
            on_outcome(&o);
            report.outcomes.push(o);
        }
    });
    report
}

/// What a panic said.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// The kernels of a run and their outcomes: which may start, and each outcome once done.
struct Outcomes {
    state: Mutex<Jobs>,
    changed: Condvar,
}

struct Jobs {
    next: usize,
    running: usize,
    large_running: bool,
    done: Vec<Option<Outcome>>,
}

impl Outcomes {
    fn new(n: usize) -> Self {
        Outcomes { state: Mutex::new(Jobs { next: 0, running: 0, large_running: false, done: (0..n).map(|_| None).collect() }), changed: Condvar::new() }
    }

    /// The next kernel to run, once it may start (`None` when none is left): a large one
    /// waits for the others to finish, and the others for it.
    fn take(&self, large: impl Fn(usize) -> bool) -> Option<usize> {
        let mut j = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if j.next >= j.done.len() {
                return None;
            }
            let alone = large(j.next);
            if !j.large_running && !(alone && j.running > 0) {
                let i = j.next;
                j.next += 1;
                j.running += 1;
                j.large_running = alone;
                return Some(i);
            }
            j = self.changed.wait(j).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn done(&self, i: usize, o: Outcome, large: bool) {
        let mut j = self.state.lock().unwrap_or_else(|p| p.into_inner());
        j.running -= 1;
        if large {
            j.large_running = false;
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
