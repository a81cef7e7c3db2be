//! The checks every launch passes before anything runs, shared by all
//! backends, and the [`LaunchPlan`] they return.
//!
//! A kernel's memory safety rests on its [`KernelDef`]: the spec knows every
//! buffer's dtype, shape and region, so these checks are what discharge the
//! obligations of MLX's `unsafe` `MetalKernel::apply`. They run on what a
//! backend says about its arrays ([`ArgInfo`]) and on host values only, never
//! on device memory, so a launch stays lazy. Every violation of one launch is
//! reported at once, and nothing launches when there is one.
//!
//! The plan holds everything a backend needs to bind and run the kernel: the
//! run-time sizes, the grid and threadgroup, where each kernel input comes from
//! and each output's shape. Backends only bind and run it.

use crate::contract::{BufferDef, Dtype, KernelDef, Source};
use std::fmt;

/// Kernels index with 32-bit integers and MLX's shapes and grids are int32:
/// no buffer may hold more elements, and no grid extent be larger, than this.
pub const MAX_ELEMENTS: u64 = i32::MAX as u64;

/// What kind of precondition a launch violated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Wrong number of array or host arguments.
    ArgumentCount,
    /// An argument has another dtype than the contract's.
    Dtype,
    /// An argument has another number of dimensions than the contract's.
    Rank,
    /// A dimension differs from the contract (fixed, or a run-time size
    /// already fixed by an earlier argument).
    Dim,
    /// The data holds a different number of bytes than shape and dtype say.
    ByteLength,
    /// A run-time size that is missing, zero, given twice, unknown, or does
    /// not fit the backend's integers.
    Size,
    /// An argument is not row-contiguous.
    Layout,
    /// An argument's data is not aligned as the kernel's loads need.
    Alignment,
    /// An argument holds a value the kernel cannot take (a count above the
    /// run-time size it loops over).
    Value,
}

/// One broken precondition: which argument, what was expected, what was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The argument or run-time size concerned, if any.
    pub argument: Option<String>,
    /// What kind of precondition it is.
    pub kind: ErrorKind,
    /// What the contract asks for (`shape [M, 256]`, `dtype bf16`).
    pub expected: String,
    /// What the call passed.
    pub given: String,
    /// What would help, when something is known (another kernel of the same
    /// spec that takes what was given, say).
    pub hint: Option<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(a) = &self.argument {
            write!(f, "argument `{a}`: ")?;
        }
        write!(f, "expected {}, given {}", self.expected, self.given)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}

/// A backend's own error, kept whole (MLX's `Exception`, the emulator's
/// `EmuError`) so callers can inspect or downcast it.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a launch did not happen, or failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LaunchError {
    /// The arguments break the kernel's contract; nothing was launched.
    Contract {
        /// The kernel's name.
        kernel: String,
        /// Every violation found, in argument order (never empty).
        violations: Vec<Violation>,
    },
    /// The backend failed (a compile error, a fault, no Metal device).
    Backend {
        /// The kernel's name.
        kernel: String,
        /// The backend's own error.
        source: BackendError,
    },
}

impl LaunchError {
    /// The kernel concerned.
    pub fn kernel(&self) -> &str {
        match self {
            LaunchError::Contract { kernel, .. } | LaunchError::Backend { kernel, .. } => kernel,
        }
    }

    /// Every contract violation (none for a backend failure).
    pub fn violations(&self) -> &[Violation] {
        match self {
            LaunchError::Contract { violations, .. } => violations,
            LaunchError::Backend { .. } => &[],
        }
    }

    /// Whether a violation of this kind is among them.
    pub fn has(&self, kind: ErrorKind) -> bool {
        self.violations().iter().any(|v| v.kind == kind)
    }

    /// A backend failure of `def`'s launch, keeping the backend's error as the source.
    pub fn backend(def: &KernelDef, source: impl Into<BackendError>) -> Self {
        LaunchError::Backend { kernel: def.name.to_string(), source: source.into() }
    }

    /// Adds, to every argument whose size is wrong, the kernels among
    /// `siblings` (the other kernels of the same spec) whose contract takes
    /// exactly what was given: a packed slot of another geometry, say.
    pub fn with_hints_from(mut self, siblings: &[&KernelDef]) -> Self {
        let LaunchError::Contract { kernel, violations } = &mut self else { return self };
        let Some(def) = siblings.iter().find(|d| d.name == kernel.as_str()) else { return self };
        for v in violations.iter_mut().filter(|v| matches!(v.kind, ErrorKind::Dim | ErrorKind::ByteLength)) {
            let Some(argument) = &v.argument else { continue };
            let Some(own) = def.inputs.iter().find(|b| b.name == argument.as_str()) else { continue };
            let takes: Vec<&str> = siblings
                .iter()
                .filter(|d| d.name != def.name)
                .filter(|d| d.inputs.iter().any(|b| b.name == own.name && b.dtype == own.dtype && fixed_text(b).is_some_and(|t| v.given.ends_with(&t))))
                .map(|d| d.name.as_ref())
                .collect();
            if !takes.is_empty() {
                v.hint = Some(format!("that is the `{argument}` of {}", takes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")));
            }
        }
        self
    }
}

/// `shape [18923520]` for a buffer whose shape is fixed.
fn fixed_text(b: &BufferDef) -> Option<String> {
    let shape: Option<Vec<u64>> = b.shape.iter().map(|d| d.as_fixed()).collect();
    shape.map(|s| format!("shape {}", shown(&s)))
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Contract { kernel, violations } => match violations.as_slice() {
                [one] => write!(f, "kernel `{kernel}`, {one}; nothing was launched"),
                many => {
                    write!(f, "kernel `{kernel}`: {} problems, nothing was launched:", many.len())?;
                    for v in many {
                        write!(f, "\n  - {v}")?;
                    }
                    Ok(())
                }
            },
            LaunchError::Backend { kernel, source } => write!(f, "kernel `{kernel}`: {source}"),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Backend { source, .. } => Some(source.as_ref()),
            LaunchError::Contract { .. } => None,
        }
    }
}

/// What the checks need to know of an array, whatever the backend's array type.
#[derive(Clone, Debug)]
pub struct ArgInfo {
    /// The dtype, or the backend's name for one no contract has (MLX's float64, say).
    pub dtype: Result<Dtype, String>,
    /// The array's shape, outermost dimension first.
    pub shape: Vec<u64>,
    /// Bytes of data behind the array (elements x dtype size for a dense array).
    pub bytes: u64,
    /// Whether the elements are dense and row-major (no strides, no offset view).
    pub row_contiguous: bool,
    /// Address of the data, when the backend knows it (alignment check).
    pub address: Option<usize>,
}

/// Values the launch makes for a kernel input: a run-time size (DeltaNet's
/// `Tin`) or the caller's host integers (DeltaNet's kept lengths), as int32.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostValues {
    /// The shape of the buffer the kernel reads them from.
    pub shape: Vec<u64>,
    /// The values, row-major.
    pub values: Vec<i32>,
}

impl HostValues {
    /// Little-endian bytes, as a device buffer holds them.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// Where one kernel input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// The caller's array at this index (of the arrays passed to the launch).
    Array(usize),
    /// Values the launch made; the backend uploads them as int32.
    Values(HostValues),
}

/// One output the backend allocates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The output's dtype.
    pub dtype: Dtype,
    /// Its shape at the launch's run-time sizes.
    pub shape: Vec<u64>,
    /// Its size in bytes (elements x dtype size).
    pub bytes: u64,
}

/// A checked launch: everything a backend binds and runs.
///
/// Only [`check`] makes one, and its fields are private, so a plan always
/// holds what the checks computed for its kernel: a backend binds and runs it
/// as it is (through [`Checked`](crate::backend::Checked), which also holds
/// the arrays it was checked on). A plan cannot be written by hand:
///
/// ```compile_fail
/// use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
/// use kernelgen::launch::LaunchPlan;
///
/// // error[E0451]: fields `def`, `sizes`, ... of struct `LaunchPlan` are private
/// let forged = LaunchPlan { def: &DEF, sizes: vec![1 << 20], grid: [1 << 20, 1, 1], threadgroup: [32, 1, 1], inputs: vec![], outputs: vec![] };
/// ```
///
/// nor changed once made:
///
/// ```compile_fail
/// # use kernelgen::Dtype;
/// # use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
/// # use kernelgen::launch::{self, ArgInfo};
/// # let arg = |dtype: Dtype, shape: &[u64]| ArgInfo { dtype: Ok(dtype), shape: shape.to_vec(), bytes: shape.iter().product::<u64>() * dtype.size() as u64, row_contiguous: true, address: None };
/// let mut plan = launch::check(&DEF, &[arg(Dtype::Bf16, &[3, 256]), arg(Dtype::U8, &[73728])], &[], &[]).unwrap();
/// // error[E0616]: field `grid` of struct `LaunchPlan` is private
/// plan.grid = [1 << 20, 1, 1];
/// ```
///
/// and what it holds is read through its accessors:
///
/// ```
/// # use kernelgen::Dtype;
/// # use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
/// # use kernelgen::launch::{self, ArgInfo};
/// # let arg = |dtype: Dtype, shape: &[u64]| ArgInfo { dtype: Ok(dtype), shape: shape.to_vec(), bytes: shape.iter().product::<u64>() * dtype.size() as u64, row_contiguous: true, address: None };
/// let plan = launch::check(&DEF, &[arg(Dtype::Bf16, &[3, 256]), arg(Dtype::U8, &[73728])], &[], &[]).unwrap();
/// assert_eq!((plan.sizes(), plan.grid()), (&[3][..], [128, 32, 3]));
/// ```
#[derive(Clone, Debug)]
pub struct LaunchPlan<'d> {
    def: &'d KernelDef,
    sizes: Vec<u64>,
    grid: [u32; 3],
    threadgroup: [u32; 3],
    inputs: Vec<Input>,
    outputs: Vec<Output>,
}

impl<'d> LaunchPlan<'d> {
    /// The kernel checked.
    pub fn def(&self) -> &'d KernelDef {
        self.def
    }

    /// The run-time sizes, in [`KernelDef::sizes`] order.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Threads in the grid (MLX's `dispatchThreads` convention: threads, not threadgroups).
    pub fn grid(&self) -> [u32; 3] {
        self.grid
    }

    /// Threads in one threadgroup.
    pub fn threadgroup(&self) -> [u32; 3] {
        self.threadgroup
    }

    /// Where each kernel input comes from, one per input, in buffer order.
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }

    /// What the backend allocates, one per kernel output, in buffer order after the inputs.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }
}

fn shown(shape: &[u64]) -> String {
    format!("[{}]", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

/// Collects the violations of one launch.
struct Checker {
    found: Vec<Violation>,
}

impl Checker {
    fn push(&mut self, argument: Option<&str>, kind: ErrorKind, expected: impl Into<String>, given: impl Into<String>) {
        self.found.push(Violation { argument: argument.map(str::to_string), kind, expected: expected.into(), given: given.into(), hint: None });
    }
}

/// Where each run-time size was read from, for messages.
struct Sizes {
    values: Vec<Option<u64>>,
    from: Vec<String>,
}

impl Sizes {
    fn learn(&mut self, i: usize, value: u64, from: String) {
        if self.values[i].is_none() {
            self.values[i] = Some(value);
            self.from[i] = from;
        }
    }
}

/// Expected-shape text: `shape [163840]` for a fixed shape; with run-time
/// sizes `shape [M, 6144] = [3, 6144] (M = 3 from `x`)`.
fn expected_shape(def: &KernelDef, b: &BufferDef, want: &[Option<u64>], sizes: &Sizes) -> String {
    let names = def.size_names();
    let used: Vec<usize> = {
        let mut u = Vec::new();
        for d in b.shape.iter() {
            for i in d.sizes_used() {
                if !u.contains(&i) {
                    u.push(i);
                }
            }
        }
        u
    };
    let values = format!("[{}]", want.iter().map(|w| w.map_or("?".to_string(), |n| n.to_string())).collect::<Vec<_>>().join(", "));
    if used.is_empty() {
        return format!("shape {values}");
    }
    let at: Vec<String> = used
        .iter()
        .map(|&i| match sizes.values[i] {
            Some(v) => format!("{} = {v} {}", names[i], sizes.from[i]),
            None => format!("{} unknown", names[i]),
        })
        .collect();
    format!("shape {} = {values} ({})", b.shape_text(&names), at.join(", "))
}

/// Checks a launch of `def`: the caller's `arrays` (the data inputs, in
/// contract order), `host` (the host-integer inputs, in contract order) and
/// any run-time sizes the caller states (`given_sizes`, from a command line
/// say; they must agree with the shapes). Returns the plan, or every
/// violation found.
pub fn check<'d>(def: &'d KernelDef, arrays: &[ArgInfo], host: &[&[i32]], given_sizes: &[(String, u64)]) -> Result<LaunchPlan<'d>, LaunchError> {
    let mut c = Checker { found: Vec::new() };
    let data: Vec<&BufferDef> = def.data_inputs().collect();
    let hosted: Vec<&BufferDef> = def.host_inputs().collect();
    let names = |list: &[&BufferDef]| list.iter().map(|b| b.name.as_ref()).collect::<Vec<_>>().join(", ");
    if arrays.len() != data.len() {
        c.push(None, ErrorKind::ArgumentCount, format!("{} arrays ({})", data.len(), names(&data)), arrays.len().to_string());
    }
    if host.len() != hosted.len() {
        c.push(None, ErrorKind::ArgumentCount, format!("{} host integer arguments ({})", hosted.len(), names(&hosted)), host.len().to_string());
    }
    if !c.found.is_empty() {
        return Err(LaunchError::Contract { kernel: def.name.to_string(), violations: c.found });
    }

    let n = def.sizes.len();
    let mut sizes = Sizes { values: vec![None; n], from: vec![String::new(); n] };
    for (k, (name, value)) in given_sizes.iter().enumerate() {
        match def.sizes.iter().position(|s| s == name.as_str()) {
            None => c.push(Some(name), ErrorKind::Size, format!("one of the run-time sizes [{}]", def.size_names().join(", ")), format!("`{name}`")),
            Some(_) if given_sizes[..k].iter().any(|(g, _)| g == name) => c.push(Some(name), ErrorKind::Size, "each run-time size given once", format!("{name} given twice")),
            Some(i) => sizes.learn(i, *value, "given".into()),
        }
    }

    // Dtype and rank first; an argument of the wrong rank says nothing about sizes.
    let mut rank_ok = vec![true; data.len()];
    for (k, (b, a)) in data.iter().zip(arrays).enumerate() {
        match &a.dtype {
            Err(other) => c.push(Some(&b.name), ErrorKind::Dtype, format!("dtype {}", b.dtype), format!("dtype {other}")),
            Ok(d) if *d != b.dtype => c.push(Some(&b.name), ErrorKind::Dtype, format!("dtype {}", b.dtype), format!("dtype {d}")),
            Ok(_) => {}
        }
        if a.shape.len() != b.shape.len() {
            rank_ok[k] = false;
            c.push(Some(&b.name), ErrorKind::Rank, format!("{} dimensions {}", b.shape.len(), b.shape_text(&def.size_names())), format!("shape {}", shown(&a.shape)));
        }
    }
    // Each run-time size is read off the first dimension that is `c * size`.
    let host_shapes: Vec<Vec<u64>> = host.iter().map(|h| vec![h.len() as u64]).collect();
    let mut shaped: Vec<(&BufferDef, &[u64])> = Vec::new();
    for (k, (b, a)) in data.iter().zip(arrays).enumerate() {
        if rank_ok[k] {
            shaped.push((b, &a.shape));
        }
    }
    for (b, s) in hosted.iter().zip(&host_shapes) {
        if b.shape.len() == s.len() {
            shaped.push((b, s));
        }
    }
    // A size no argument could give is reported only when no argument's own violation
    // (a wrong rank, a dimension that is no multiple of its size's coefficient) explains it.
    let mut explained = vec![false; n];
    for (k, b) in data.iter().enumerate() {
        if !rank_ok[k] {
            b.shape.iter().flat_map(|d| d.sizes_used()).for_each(|i| explained[i] = true);
        }
    }
    for (b, shape) in shaped {
        for (axis, (d, &len)) in b.shape.iter().zip(shape).enumerate() {
            if let Some((i, coeff)) = d.linear_in_one_size() {
                if coeff != 0 && len % coeff == 0 {
                    sizes.learn(i, len / coeff, format!("from `{}`", b.name));
                } else if coeff != 0 {
                    explained[i] = true;
                    c.push(Some(&b.name), ErrorKind::Dim, format!("dimension {axis} a multiple of {coeff} ({})", d.describe(&def.size_names())), format!("shape {}", shown(shape)));
                }
            }
        }
    }
    for i in 0..n {
        let name = def.sizes[i].as_ref();
        match sizes.values[i] {
            None if explained[i] => {}
            None => c.push(Some(name), ErrorKind::Size, "a value implied by the argument shapes", "none"),
            Some(v) if v == 0 || v > MAX_ELEMENTS => c.push(Some(name), ErrorKind::Size, format!("{name} from 1 to {MAX_ELEMENTS}"), format!("{name} = {v} {}", sizes.from[i])),
            Some(_) => {}
        }
    }
    let known: Vec<u64> = sizes.values.iter().map(|v| v.unwrap_or(0)).collect();
    let all_known = sizes.values.iter().all(|v| v.is_some_and(|v| v > 0 && v <= MAX_ELEMENTS));

    // Shapes, bytes, layout and alignment of every array argument.
    for (k, (b, a)) in data.iter().zip(arrays).enumerate() {
        if !rank_ok[k] {
            continue;
        }
        let want: Vec<Option<u64>> = b
            .shape
            .iter()
            .map(|d| if d.sizes_used().iter().all(|&i| sizes.values[i].is_some()) { d.eval(&known) } else { None })
            .collect();
        let mismatch = want.iter().zip(&a.shape).any(|(w, g)| w.is_some_and(|w| w != *g)) || want.iter().any(|w| w.is_some_and(|w| w > MAX_ELEMENTS));
        if mismatch {
            c.push(Some(&b.name), ErrorKind::Dim, expected_shape(def, b, &want, &sizes), format!("shape {}", shown(&a.shape)));
            continue;
        }
        if want.iter().any(Option::is_none) {
            continue;
        }
        // (each dimension is at most MAX_ELEMENTS; their product may pass 2^64)
        let elements = a.shape.iter().try_fold(1u128, |n, &d| n.checked_mul(u128::from(d)));
        // An array of packed buffers ([S, bytes]) may pass MAX_ELEMENTS in all: a kernel
        // indexes each buffer of it with 32 bits, and finds the buffer with 64-bit arithmetic
        // (S residency slots of a large expert are gigabytes).
        let limit = if b.packed_bytes().is_some() && b.shape.len() > 1 { i64::MAX as u64 } else { MAX_ELEMENTS };
        let elements = match elements {
            Some(n) if n <= u128::from(limit) => n as u64,
            _ => {
                c.push(Some(&b.name), ErrorKind::Size, format!("at most {limit} elements"), elements.map_or_else(|| format!("shape {}", shown(&a.shape)), |n| n.to_string()));
                continue;
            }
        };
        let bytes = elements * b.dtype.size() as u64;
        if a.dtype == Ok(b.dtype) && a.bytes != bytes {
            c.push(Some(&b.name), ErrorKind::ByteLength, format!("{bytes} bytes"), format!("{} bytes", a.bytes));
        }
        if !a.row_contiguous {
            c.push(Some(&b.name), ErrorKind::Layout, "a row-contiguous array", "a strided view (make it contiguous first)");
        }
        if let Some(addr) = a.address {
            if b.align > 1 && addr % b.align as usize != 0 {
                c.push(Some(&b.name), ErrorKind::Alignment, format!("data aligned to {} bytes", b.align), format!("address {addr:#x}"));
            }
        }
    }

    // Host integers: their length, and the values the contract bounds.
    for (b, values) in hosted.iter().zip(host) {
        let want = if all_known { b.elements(&known) } else { None };
        if let Some(w) = want {
            if w != values.len() as u64 {
                c.push(Some(&b.name), ErrorKind::Dim, format!("{w} integers ({} {})", b.dtype, b.shape_text(&def.size_names())), format!("{}", values.len()));
                continue;
            }
        }
        if let (Some(i), true) = (b.at_most, all_known) {
            let limit = known[i];
            if let Some((at, x)) = values.iter().enumerate().find(|(_, x)| **x < 0 || **x as u64 > limit) {
                c.push(Some(&b.name), ErrorKind::Value, format!("every value from 0 to {} = {limit}", def.sizes[i]), format!("{x} at index {at}"));
            }
        }
    }

    if !all_known {
        return Err(LaunchError::Contract { kernel: def.name.to_string(), violations: c.found });
    }
    // Outputs and the grid at these sizes must fit the backend's integers.
    let mut outputs = Vec::with_capacity(def.outputs.len());
    for b in def.outputs.iter() {
        match b.shape_at(&known).filter(|s| s.iter().all(|&d| d <= MAX_ELEMENTS)).zip(b.elements(&known)) {
            Some((shape, elements)) if elements <= MAX_ELEMENTS => outputs.push(Output { dtype: b.dtype, bytes: elements * b.dtype.size() as u64, shape }),
            _ => c.push(Some(&b.name), ErrorKind::Size, format!("an output of at most {MAX_ELEMENTS} elements"), format!("shape {} at these sizes", b.shape_text(&def.size_names()))),
        }
    }
    let grid = def.grid_at(&known).filter(|g| g.iter().all(|&x| x <= MAX_ELEMENTS));
    if grid.is_none() {
        c.push(None, ErrorKind::Size, format!("grid extents up to {MAX_ELEMENTS}"), format!("grid [{}] at these sizes", def.grid.iter().map(|g| g.describe(&def.size_names())).collect::<Vec<_>>().join(", ")));
    }
    if !c.found.is_empty() {
        return Err(LaunchError::Contract { kernel: def.name.to_string(), violations: c.found });
    }
    let grid = grid.expect("checked above").map(|x| x as u32);

    let (mut next_array, mut next_host) = (0, 0);
    let mut inputs = Vec::with_capacity(def.inputs.len());
    for b in def.inputs.iter() {
        let shape = b.shape_at(&known).expect("input shapes were checked");
        inputs.push(match b.source {
            Source::Data => {
                next_array += 1;
                Input::Array(next_array - 1)
            }
            Source::SizeValue(i) => Input::Values(HostValues { shape, values: vec![known[i] as i32] }),
            Source::HostInts => {
                next_host += 1;
                Input::Values(HostValues { shape, values: host[next_host - 1].to_vec() })
            }
            other => {
                c.push(Some(&b.name), ErrorKind::ArgumentCount, "an input source this version of kernelgen knows", format!("{other:?}"));
                return Err(LaunchError::Contract { kernel: def.name.to_string(), violations: c.found });
            }
        });
    }
    Ok(LaunchPlan { def, sizes: known, grid, threadgroup: def.threadgroup, inputs, outputs })
}
