//! Verifying a kernel in the emulator, with or without a reference: random
//! inputs drawn from its contract ([`random_case`]), the properties every
//! kernel must have ([`check_properties`]), and comparisons with a
//! reference's values ([`compare`]). `kernelgen verify` runs these for every
//! kernel of every family; [`check`] is the same for a test of one's own
//! (`cargo test`, with a Rust reference function).
//!
//! The properties, checked with no reference at all:
//! - no access outside a buffer (the guard regions fault, naming the buffer;
//!   the runs alternate the data's placement in its pages, [`Placement`], so one
//!   just before the start faults as surely as one just past the end);
//! - every output element written: the outputs are filled with poison bytes
//!   (0xFF, 0x00), and an element that keeps the poison of each run was never
//!   written;
//! - no read of uninitialized threadgroup memory, nor of an output before it
//!   is written: the poison bytes differ between the runs, so such a read
//!   changes the results;
//! - the same bits in every run order of threads and threadgroups (forward,
//!   reverse, and a seeded shuffle): a race or a missing barrier shows as a
//!   difference.
//!
//! A passing kernel costs four launches: forward with poison `0xFF`, forward
//! again with other poison bytes, reverse, and shuffled; only when they
//! disagree do more runs find which property failed. No poison can catch a
//! read whose value never matters to the outputs for any of the three poison
//! bytes (`0xFF`, `0x00`, `0x5A`); the sanitizer run (`--sanitize`) does not
//! track threadgroup reads either.

pub use crate::backend::RunConfig;
use crate::{EmuBackend, EmuError, HostArray, Placement, RunOrder};
use kernelgen::backend;
use kernelgen::contract::{Dtype, Format, KernelDef, Source, Tolerance};
use half::{bf16, f16};
use std::fmt;

/// Inputs of more than this many bytes make a kernel *large* (a vocabulary head's 635 MB of
/// weights): `kernelgen verify` runs it alone (two at once would double the peak memory) and
/// in fewer configurations, as the test of every worker count and order does.
pub const LARGE_INPUT_BYTES: u64 = 128 << 20;

/// The inputs of one verification launch.
#[derive(Clone, Debug)]
pub struct Case {
    /// The run-time sizes, in the kernel's order.
    pub sizes: Vec<u64>,
    /// The array inputs, in contract order.
    pub arrays: Vec<HostArray>,
    /// The host-integer inputs, in contract order.
    pub host: Vec<Vec<i32>>,
}

/// A deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }
}

/// The range values of an input are drawn from: `[min, max)` for floats,
/// `min..=max` for integers.
fn default_range(dtype: Dtype) -> (f64, f64) {
    match dtype {
        Dtype::Bool => (0.0, 1.0),
        Dtype::I8 => (-8.0, 7.0),
        Dtype::U8 => (0.0, 255.0),
        Dtype::U16 => (0.0, 65535.0),
        Dtype::U32 => (0.0, u32::MAX as f64),
        Dtype::I32 => (0.0, 15.0),
        _ => (-1.0, 1.0),
    }
}

fn value_bytes(dtype: Dtype, rng: &mut Rng, (lo, hi): (f64, f64), out: &mut Vec<u8>) {
    match dtype {
        Dtype::F32 => out.extend(((lo + (hi - lo) * rng.unit()) as f32).to_le_bytes()),
        Dtype::F16 => out.extend(f16::from_f64(lo + (hi - lo) * rng.unit()).to_le_bytes()),
        Dtype::Bf16 => out.extend(bf16::from_f64(lo + (hi - lo) * rng.unit()).to_le_bytes()),
        Dtype::I8 => out.push(rng.int(lo as i64, hi as i64) as i8 as u8),
        Dtype::U8 | Dtype::Bool => out.push(rng.int(lo as i64, hi as i64) as u8),
        Dtype::U16 => out.extend((rng.int(lo as i64, hi as i64) as u16).to_le_bytes()),
        Dtype::I32 => out.extend((rng.int(lo as i64, hi as i64) as i32).to_le_bytes()),
        Dtype::U32 => out.extend((rng.int(lo as i64, hi as i64) as u32).to_le_bytes()),
        _ => out.push(0),
    }
}

/// The bytes of a packed buffer: each region's values drawn by its format
/// (f32 scales from the input's range), zeros between regions.
fn packed_bytes(len: usize, regions: &[kernelgen::contract::Region], rng: &mut Rng, range: Option<(f64, f64)>) -> Vec<u8> {
    let mut out = vec![0u8; len];
    for r in regions {
        let region = &mut out[r.offset as usize..(r.offset + r.bytes) as usize];
        match r.format {
            Format::F32 => {
                let (lo, hi) = range.unwrap_or((-1.0, 1.0));
                for c in region.chunks_exact_mut(4) {
                    c.copy_from_slice(&((lo + (hi - lo) * rng.unit()) as f32).to_le_bytes());
                }
            }
            Format::F16 | Format::Bf16 => {
                let (lo, hi) = range.unwrap_or((-1.0, 1.0));
                for c in region.chunks_exact_mut(2) {
                    let v = lo + (hi - lo) * rng.unit();
                    c.copy_from_slice(&if r.format == Format::F16 { f16::from_f64(v).to_le_bytes() } else { bf16::from_f64(v).to_le_bytes() });
                }
            }
            _ => region.iter_mut().for_each(|b| *b = rng.next_u64() as u8),
        }
    }
    out
}

/// This machine's physical memory in bytes (no bound where it cannot be read).
fn physical_memory() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages > 0 && page > 0 {
            return (pages as u64).saturating_mul(page as u64);
        }
    }
    u64::MAX
}

/// Random inputs for `def` at `sizes`, from its contract: floats uniform in
/// `[-1, 1)`, small integers, packed regions by their format, host integers
/// within the size that bounds them; `ranges` overrides the range of an
/// input by name.
pub fn random_case(def: &KernelDef, sizes: &[u64], ranges: &[(String, f64, f64)], seed: u64) -> Result<Case, String> {
    let mut rng = Rng::new(seed);
    let range_of = |name: &str| ranges.iter().find(|(n, _, _)| n == name).map(|(_, lo, hi)| (*lo, *hi));
    let mut arrays = Vec::new();
    let mut host = Vec::new();
    for b in def.inputs.iter() {
        let at = || def.sizes.iter().zip(sizes).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(", ");
        let shape = b.shape_at(sizes).ok_or_else(|| format!("input `{}`: its shape overflows at sizes {}", b.name, at()))?;
        // sizes a family file or a caller gave: refused, not a panic or an abort, when the
        // input cannot be held
        let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = n.and_then(|n| n.checked_mul(b.dtype.size() as u64).filter(|&x| x <= physical_memory()));
        let (Some(n), Some(_)) = (n, bytes) else {
            return Err(format!(
                "input `{}` at sizes {} is {shape:?} elements of {}: more than this machine's memory holds",
                b.name,
                at(),
                b.dtype
            ));
        };
        match b.source {
            Source::Data if !b.regions.is_empty() => arrays.push(HostArray::new(b.dtype, shape, packed_bytes(n as usize, &b.regions, &mut rng, range_of(&b.name)))),
            Source::Data => {
                let range = range_of(&b.name).unwrap_or_else(|| default_range(b.dtype));
                let mut bytes = Vec::with_capacity(n as usize * b.dtype.size());
                for _ in 0..n {
                    value_bytes(b.dtype, &mut rng, range, &mut bytes);
                }
                arrays.push(HostArray::new(b.dtype, shape, bytes));
            }
            Source::HostInts => {
                let hi = match b.at_most {
                    Some(i) => sizes[i] as i64,
                    None => range_of(&b.name).map_or(15, |r| r.1 as i64),
                };
                let lo = range_of(&b.name).map_or(0, |r| r.0 as i64).min(hi);
                host.push((0..n).map(|_| rng.int(lo, hi) as i32).collect());
            }
            _ => {}
        }
    }
    Ok(Case { sizes: sizes.to_vec(), arrays, host })
}

/// A property a kernel broke.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finding {
    /// A launch failed: an access outside a buffer (with the buffer and
    /// offset), a divergent barrier, a compile error.
    Failed(String),
    /// Elements of an output were never written.
    Unwritten {
        /// The output buffer's name.
        output: String,
        /// How many elements keep their poison.
        count: usize,
        /// The index of the first.
        first: usize,
    },
    /// An output depends on the initial contents of threadgroup memory.
    UninitializedThreadgroup {
        /// The output buffer's name.
        output: String,
        /// The first element that changes with the poison.
        first: usize,
    },
    /// An output depends on its own initial contents: read before written.
    ReadsOutput {
        /// The output buffer's name.
        output: String,
        /// The first element that changes with the poison.
        first: usize,
    },
    /// An output differs between run orders: a race or a missing barrier.
    OrderDependent {
        /// The output buffer's name.
        output: String,
        /// The first element that differs.
        first: usize,
        /// The run order that differs from forward.
        order: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Failed(e) => f.write_str(e),
            Finding::Unwritten { output, count, first } => write!(f, "{count} elements of output `{output}` are never written (the first at index {first})"),
            Finding::UninitializedThreadgroup { output, first } => write!(f, "output `{output}` depends on uninitialized threadgroup memory (element {first} changes with the memory's initial bytes): a read before any thread wrote it, or a missing barrier"),
            Finding::ReadsOutput { output, first } => write!(f, "output `{output}` is read before it is written (element {first} changes with the buffer's initial bytes)"),
            Finding::OrderDependent { output, first, order } => write!(f, "output `{output}` differs in {order} run order (element {first}): a race or a missing barrier"),
        }
    }
}

/// One launch of `case` with `config`.
pub fn launch(emu: &EmuBackend, def: &KernelDef, case: &Case, config: RunConfig) -> Result<Vec<HostArray>, String> {
    let arrays: Vec<&HostArray> = case.arrays.iter().collect();
    let host: Vec<&[i32]> = case.host.iter().map(Vec::as_slice).collect();
    let given: Vec<(String, u64)> = def.sizes.iter().zip(&case.sizes).map(|(n, v)| (n.to_string(), *v)).collect();
    let checked = backend::check(emu, def, &arrays, &host, &given).map_err(|e| e.to_string())?;
    emu.run_with(&checked, config).map_err(|e: EmuError| kernelgen::launch::LaunchError::backend(def, e).to_string())
}

fn elements(a: &HostArray) -> Vec<&[u8]> {
    a.data.chunks(a.dtype.size().max(1)).collect()
}

fn first_difference(a: &HostArray, b: &HostArray) -> Option<usize> {
    elements(a).iter().zip(elements(b)).position(|(x, y)| *x != y)
}

/// Runs `case` in several configurations and checks every property; the
/// outputs of the forward run come back when all hold. `shuffle_seed` seeds
/// the shuffled run order.
pub fn check_properties(emu: &EmuBackend, def: &KernelDef, case: &Case, shuffle_seed: u64) -> Result<Vec<HostArray>, Finding> {
    check_properties_in(emu, def, case, &[RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(shuffle_seed)])
}

/// [`check_properties`] with the first run (forward, poison 0xFF) compared
/// with runs in `orders` (at least one), their poison bytes alternating:
/// fewer launches for a kernel too large to run often. A forward run with
/// other poison catches most reads of uninitialized memory (in forward order
/// a thread reads before later threads write), the other orders races.
pub fn check_properties_in(emu: &EmuBackend, def: &KernelDef, case: &Case, orders: &[RunOrder]) -> Result<Vec<HostArray>, Finding> {
    let run = |order, output_poison, threadgroup_poison, placement| {
        launch(emu, def, case, RunConfig { order, output_poison, threadgroup_poison, placement }).map_err(Finding::Failed)
    };
    // Every later run differs from the first in its order and its poison bytes: outputs
    // start as 0xFF (NaN, -1) or 0x00, threadgroup memory as 0xFF, 0x00 or 0x5A (a large
    // positive number in every float and integer type: a kernel that drops NaNs, like an
    // argmax, still sees it). A kernel that gives the same bits in all has every property.
    // Their placements alternate too (the first end-placed, the next start-placed, ...):
    // every access just before a buffer or just past it faults in one of them, for the time
    // of one run each (in sanitize mode ASan sees both sides in every run).
    const THREADGROUP_POISONS: [u8; 2] = [0x00, 0x5A];
    let forward = run(RunOrder::Forward, 0xFF, 0xFF, Placement::End)?;
    let mut others = Vec::new();
    for (k, &order) in orders.iter().enumerate() {
        let (output, threadgroup, placement) = if k % 2 == 0 { (0x00, 0x5A, Placement::Start) } else { (0xFF, 0x00, Placement::End) };
        others.push((order, run(order, output, threadgroup, placement)?));
    }
    if others.iter().all(|(_, o)| *o == forward) {
        return Ok(forward);
    }
    let first = &others[0].1;
    let names: Vec<String> = def.outputs.iter().map(|b| b.name.to_string()).collect();
    // Which property failed: unwritten elements keep each run's poison.
    for (i, name) in names.iter().enumerate() {
        let (a, b) = (elements(&forward[i]), elements(&first[i]));
        let unwritten: Vec<usize> = (0..a.len()).filter(|&k| a[k].iter().all(|&x| x == 0xFF) && b[k].iter().all(|&x| x == 0x00)).collect();
        if let Some(&first) = unwritten.first() {
            return Err(Finding::Unwritten { output: name.clone(), count: unwritten.len(), first });
        }
    }
    // Forward again with one poison changed at a time.
    for poison in THREADGROUP_POISONS {
        let changed = run(RunOrder::Forward, 0xFF, poison, Placement::End)?;
        for (i, name) in names.iter().enumerate() {
            if let Some(first) = first_difference(&forward[i], &changed[i]) {
                return Err(Finding::UninitializedThreadgroup { output: name.clone(), first });
            }
        }
    }
    let output_zero = run(RunOrder::Forward, 0x00, 0xFF, Placement::End)?;
    for (i, name) in names.iter().enumerate() {
        if let Some(first) = first_difference(&forward[i], &output_zero[i]) {
            return Err(Finding::ReadsOutput { output: name.clone(), first });
        }
    }
    // What is left is the order.
    for (order, other) in &others {
        for (i, name) in names.iter().enumerate() {
            if let Some(first) = first_difference(&forward[i], &other[i]) {
                let order = match order {
                    RunOrder::Forward => "forward".to_string(),
                    RunOrder::Reverse => "reverse".to_string(),
                    RunOrder::Shuffle(seed) => format!("shuffled (seed {seed})"),
                };
                return Err(Finding::OrderDependent { output: name.clone(), first, order });
            }
        }
    }
    Ok(forward)
}

/// One output's values, widened to f64 (integers and bools by value).
pub fn values(a: &HostArray) -> Result<Vec<f64>, String> {
    let d = &a.data;
    Ok(match a.dtype {
        Dtype::F32 => d.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        Dtype::F16 => d.chunks_exact(2).map(|c| f64::from(f16::from_le_bytes([c[0], c[1]]).to_f32())).collect(),
        Dtype::Bf16 => d.chunks_exact(2).map(|c| f64::from(bf16::from_le_bytes([c[0], c[1]]).to_f32())).collect(),
        Dtype::I8 => d.iter().map(|&b| f64::from(b as i8)).collect(),
        Dtype::U8 | Dtype::Bool => d.iter().map(|&b| f64::from(b)).collect(),
        Dtype::U16 => d.chunks_exact(2).map(|c| f64::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
        Dtype::I32 => d.chunks_exact(4).map(|c| f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        Dtype::U32 => d.chunks_exact(4).map(|c| f64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        other => return Err(format!("no values for dtype {other}")),
    })
}

/// The unit in the last place of `x` in `dtype` (1 for integers).
pub fn ulp(dtype: Dtype, x: f64) -> f64 {
    let (precision, min_exp) = match dtype {
        Dtype::F32 => (24, -126),
        Dtype::F16 => (11, -14),
        Dtype::Bf16 => (8, -126),
        _ => return 1.0,
    };
    let e = if x == 0.0 { min_exp } else { (x.abs().log2().floor() as i32).max(min_exp) };
    2f64.powi(e - (precision - 1))
}

/// How an output compared with its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    /// The largest error, in ulps of the output's dtype at each element.
    pub max_ulps: f64,
    /// How many elements were compared.
    pub elements: usize,
}

/// Compares `got` with the reference's `want`, element by element, within
/// `tolerance` (integer outputs exactly); the first failing element is named.
pub fn compare(name: &str, got: &HostArray, want: &[f64], tolerance: Tolerance) -> Result<Agreement, String> {
    let tolerance = if got.dtype.is_float() { tolerance } else { Tolerance::Exact };
    let g = values(got)?;
    if g.len() != want.len() {
        return Err(format!("output `{name}` has {} elements where the reference gave {}", g.len(), want.len()));
    }
    let mut max_ulps = 0f64;
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        let unit = ulp(got.dtype, b);
        if !tolerance.accepts(a, b, unit) {
            let bad = g.iter().zip(want).filter(|(x, y)| !tolerance.accepts(**x, **y, ulp(got.dtype, **y))).count();
            return Err(format!("output `{name}` element {i}: got {a}, reference {b} (tolerance {tolerance}); {bad} of {} elements are outside it", g.len()));
        }
        if a.is_finite() && b.is_finite() {
            max_ulps = max_ulps.max((a - b).abs() / unit);
        }
    }
    Ok(Agreement { max_ulps, elements: g.len() })
}

/// A test of one's own kernel: random inputs at `sizes`, every property,
/// then `reference` (given the case, returning each output's values in
/// contract order) compared within `tolerance`.
///
/// ```no_run
/// # use kernelgen_emu::{EmuBackend, verify};
/// # fn main() -> Result<(), String> {
/// # let def: &kernelgen::KernelDef = todo!();
/// let emu = EmuBackend::with_defaults().map_err(|e| e.to_string())?;
/// verify::check(&emu, def, &[4], 1, kernelgen::contract::Tolerance::Ulps(2), |case| {
///     // Compute the outputs from case.arrays however the model says.
///     vec![verify::values(&case.arrays[0]).unwrap().iter().map(|x| x * 2.0).collect()]
/// })?;
/// # Ok(()) }
/// ```
pub fn check(emu: &EmuBackend, def: &KernelDef, sizes: &[u64], seed: u64, tolerance: Tolerance, reference: impl FnOnce(&Case) -> Vec<Vec<f64>>) -> Result<Vec<Agreement>, String> {
    let case = random_case(def, sizes, &[], seed)?;
    let outputs = check_properties(emu, def, &case, seed).map_err(|f| format!("kernel `{}`: {f}", def.name))?;
    let want = reference(&case);
    if want.len() != outputs.len() {
        return Err(format!("kernel `{}`: the reference gave {} outputs for the kernel's {}", def.name, want.len(), outputs.len()));
    }
    def.outputs.iter().zip(&outputs).zip(&want).map(|((b, got), want)| compare(&b.name, got, want, tolerance).map_err(|e| format!("kernel `{}`: {e}", def.name))).collect()
}
