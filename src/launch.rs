//! The checks every launch passes before anything runs, shared by all
//! backends: a kernel's memory safety rests on its `KernelDef` (the spec
//! knows every buffer's dtype, shape and region), so these checks are what
//! discharge the obligations of MLX's `unsafe` `MetalKernel::apply`.

use crate::contract::{BufferDef, Dtype, KernelDef, Source};
use std::fmt;

/// What kind of precondition a launch violated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Wrong number of inputs.
    ArgumentCount,
    Dtype,
    Rank,
    /// A dimension differs from the contract (fixed, or a run-time size
    /// already fixed by an earlier argument).
    Dim,
    /// The data holds a different number of bytes than shape and dtype say.
    ByteLength,
    /// A run-time size that is zero or does not fit the backend's integers.
    Size,
    /// An argument is not row-contiguous.
    Layout,
    /// An argument's data is not aligned as the kernel's loads need.
    Alignment,
    /// An argument holds a value the kernel cannot take (a count above the
    /// run-time size it loops over).
    Value,
    /// The backend failed (compile error, fault, no Metal device).
    Backend,
}

/// Why a launch did not happen (or failed), naming the kernel and argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchError {
    pub kernel: String,
    /// The argument or run-time size concerned, if any.
    pub argument: Option<String>,
    pub kind: ErrorKind,
    pub expected: String,
    pub given: String,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}`", self.kernel)?;
        if let Some(a) = &self.argument {
            write!(f, ", argument `{a}`")?;
        }
        if self.kind == ErrorKind::Backend {
            write!(f, ": {}", self.given)
        } else {
            write!(f, ": expected {}, given {}", self.expected, self.given)
        }
    }
}

impl std::error::Error for LaunchError {}

impl LaunchError {
    pub fn new(
        def: &KernelDef,
        argument: Option<&str>,
        kind: ErrorKind,
        expected: impl Into<String>,
        given: impl Into<String>,
    ) -> Self {
        LaunchError {
            kernel: def.name.to_string(),
            argument: argument.map(str::to_string),
            kind,
            expected: expected.into(),
            given: given.into(),
        }
    }

    pub fn backend(def: &KernelDef, message: impl Into<String>) -> Self {
        LaunchError::new(def, None, ErrorKind::Backend, "", message)
    }
}

/// What the checks need to know of an argument, whatever the backend's array type.
#[derive(Clone, Debug)]
pub struct ArgInfo {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// Bytes of data behind the array (elements x dtype size for a dense array).
    pub bytes: u64,
    pub row_contiguous: bool,
    /// Address of the data, when the backend knows it (alignment check).
    pub address: Option<usize>,
    /// The backend's name for a dtype outside [`Dtype`] (MLX's float64, say),
    /// which no contract accepts; `dtype` is then meaningless.
    pub unsupported_dtype: Option<String>,
}

/// Kernels index with 32-bit integers and MLX's shapes and grids are int32:
/// no buffer may hold more elements, and no grid extent be larger, than this.
pub const MAX_ELEMENTS: u64 = i32::MAX as u64;

/// The caller-provided inputs: every input but the size values the launcher fills.
pub fn data_inputs(def: &KernelDef) -> impl Iterator<Item = &'static BufferDef> {
    def.inputs.iter().filter(|b| b.source == Source::Data)
}

fn shape_text(b: &BufferDef, names: &[&str]) -> String {
    format!(
        "[{}]",
        b.shape
            .iter()
            .map(|d| d.describe(names))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn shown(shape: &[u64]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Checks the caller's inputs (in the order of [`data_inputs`]) against the
/// contract and derives the run-time sizes from their shapes. `given_sizes`
/// (from a command line, say) must agree with what the shapes imply.
pub fn check_inputs(
    def: &KernelDef,
    args: &[ArgInfo],
    given_sizes: &[(String, u64)],
) -> Result<Vec<u64>, LaunchError> {
    let expected: Vec<&BufferDef> = data_inputs(def).collect();
    if args.len() != expected.len() {
        return Err(LaunchError::new(
            def,
            None,
            ErrorKind::ArgumentCount,
            format!(
                "{} inputs ({})",
                expected.len(),
                expected
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!("{}", args.len()),
        ));
    }
    for (name, _) in given_sizes {
        if !def.sizes.contains(&name.as_str()) {
            return Err(LaunchError::new(
                def,
                Some(name),
                ErrorKind::Size,
                format!("one of the run-time sizes [{}]", def.sizes.join(", ")),
                format!("`{name}`"),
            ));
        }
    }
    // Each run-time size is taken from the first dimension that is exactly
    // `coeff * size`, then every dimension is checked against its expression.
    let mut sizes: Vec<Option<(u64, String)>> = def
        .sizes
        .iter()
        .map(|n| {
            given_sizes
                .iter()
                .find(|(g, _)| g == n)
                .map(|(_, v)| (*v, "given".to_string()))
        })
        .collect();
    for (b, a) in expected.iter().zip(args) {
        if let Some(name) = &a.unsupported_dtype {
            return Err(LaunchError::new(def, Some(b.name), ErrorKind::Dtype, format!("dtype {}", b.dtype), format!("dtype {name}")));
        }
        if a.dtype != b.dtype {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Dtype,
                format!("dtype {}", b.dtype),
                format!("dtype {}", a.dtype),
            ));
        }
        if a.shape.len() != b.shape.len() {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Rank,
                format!("{} dimensions {}", b.shape.len(), shape_text(b, def.sizes)),
                format!("shape {}", shown(&a.shape)),
            ));
        }
        for (d, &n) in b.shape.iter().zip(&a.shape) {
            if let [i] = d.sizes {
                if sizes[*i].is_none() && d.coeff != 0 && n % d.coeff == 0 {
                    sizes[*i] = Some((n / d.coeff, format!("from `{}`", b.name)));
                }
            }
        }
    }
    let mut values = Vec::with_capacity(sizes.len());
    for (i, s) in sizes.iter().enumerate() {
        let name = def.sizes[i];
        let Some((v, _)) = s else {
            return Err(LaunchError::new(
                def,
                Some(name),
                ErrorKind::Size,
                "a value implied by the input shapes",
                "none",
            ));
        };
        if *v == 0 || *v > MAX_ELEMENTS {
            return Err(LaunchError::new(
                def,
                Some(name),
                ErrorKind::Size,
                format!("{name} from 1 to {MAX_ELEMENTS}"),
                format!("{name} = {v}"),
            ));
        }
        values.push(*v);
    }
    for (b, a) in expected.iter().zip(args) {
        let want = b
            .shape_at(&values)
            .filter(|s| s.iter().all(|&d| d <= MAX_ELEMENTS));
        let Some(want) = want else {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Size,
                format!("dimensions up to {MAX_ELEMENTS}"),
                format!("shape {} overflows", shape_text(b, def.sizes)),
            ));
        };
        if want != a.shape {
            let at: Vec<String> = def
                .sizes
                .iter()
                .zip(&values)
                .zip(&sizes)
                .map(|((n, v), s)| format!("{n} = {v} {}", s.as_ref().map_or("", |x| x.1.as_str())))
                .collect();
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Dim,
                format!(
                    "shape {} = {} (with {})",
                    shape_text(b, def.sizes),
                    shown(&want),
                    at.join(", ")
                ),
                format!("shape {}", shown(&a.shape)),
            ));
        }
        let elements: u64 = want.iter().product();
        if elements > MAX_ELEMENTS {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Size,
                format!("at most {MAX_ELEMENTS} elements"),
                format!("{elements}"),
            ));
        }
        let bytes = elements * b.dtype.size() as u64;
        if a.bytes != bytes {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::ByteLength,
                format!("{bytes} bytes"),
                format!("{} bytes", a.bytes),
            ));
        }
        if !a.row_contiguous {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Layout,
                "a row-contiguous array",
                "a strided view (make it contiguous first)",
            ));
        }
        if let Some(addr) = a.address {
            if b.align > 1 && addr % b.align as usize != 0 {
                return Err(LaunchError::new(
                    def,
                    Some(b.name),
                    ErrorKind::Alignment,
                    format!("data aligned to {} bytes", b.align),
                    format!("address {addr:#x}"),
                ));
            }
        }
    }
    check_outputs_and_grid(def, &values)?;
    Ok(values)
}

/// Output sizes and the grid at `sizes` must fit the backend's integers.
fn check_outputs_and_grid(def: &KernelDef, sizes: &[u64]) -> Result<(), LaunchError> {
    for b in def.outputs {
        match b.elements(sizes) {
            Some(n) if n <= MAX_ELEMENTS => {}
            other => {
                return Err(LaunchError::new(
                    def,
                    Some(b.name),
                    ErrorKind::Size,
                    format!("an output of at most {MAX_ELEMENTS} elements"),
                    other.map_or("an overflowing size".into(), |n| format!("{n} elements")),
                ));
            }
        }
    }
    match def.grid_at(sizes) {
        Some(g) if g.iter().all(|&x| x <= MAX_ELEMENTS) => Ok(()),
        _ => Err(LaunchError::new(
            def,
            None,
            ErrorKind::Size,
            format!("grid extents up to {MAX_ELEMENTS}"),
            "a larger grid",
        )),
    }
}

/// The value a size-value input carries (an int32 holding a run-time size).
pub fn size_value_bytes(def: &KernelDef, b: &BufferDef, sizes: &[u64]) -> Vec<u8> {
    match b.source {
        Source::SizeValue(i) => (sizes[i] as i32).to_le_bytes().to_vec(),
        Source::Data => panic!("kernel {}: `{}` is not a size value", def.name, b.name),
    }
}

/// Checks the values of the arguments whose contract bounds them
/// (`BufferDef::at_most`), given as integers in contract order of
/// [`data_inputs`] (`None` for unbounded arguments).
pub fn check_values(def: &KernelDef, values: &[Option<Vec<i64>>], sizes: &[u64]) -> Result<(), LaunchError> {
    for (b, v) in data_inputs(def).zip(values) {
        let (Some(i), Some(v)) = (b.at_most, v) else { continue };
        let limit = sizes[i];
        if let Some((at, x)) = v.iter().enumerate().find(|(_, x)| **x > limit as i64) {
            return Err(LaunchError::new(
                def,
                Some(b.name),
                ErrorKind::Value,
                format!("every value at most {} = {limit}", def.sizes[i]),
                format!("{x} at index {at}"),
            ));
        }
    }
    Ok(())
}
