//! The validated, typed vocabulary shared by every stage after parsing:
//! dtypes, axis values, geometries, and the plan a family makes for a kernel.

use crate::spec::Span;
use std::collections::BTreeMap;
use std::fmt;

/// Element types of kernel buffers (mirrors the runtime crate's `Dtype`,
/// which the generated Rust names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    I8,
    U8,
    U16,
    I32,
    U32,
    Bool,
}

impl Dtype {
    pub const fn size(self) -> u64 {
        match self {
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 | Dtype::U16 => 2,
            Dtype::I8 | Dtype::U8 | Dtype::Bool => 1,
        }
    }

    /// MLX's `get_type_string`: the name in kernel signatures and MLX kernel names.
    pub const fn metal_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::F16 => "float16_t",
            Dtype::Bf16 => "bfloat16_t",
            Dtype::I8 => "int8_t",
            Dtype::U8 => "uint8_t",
            Dtype::U16 => "uint16_t",
            Dtype::I32 => "int32_t",
            Dtype::U32 => "uint32_t",
            Dtype::Bool => "bool",
        }
    }

    /// The name used in specs and kernel names.
    pub const fn short_name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::Bool => "bool",
        }
    }

    /// The variant of `kernelgen::Dtype` in generated Rust.
    pub const fn rust_variant(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "Bf16",
            Dtype::I8 => "I8",
            Dtype::U8 => "U8",
            Dtype::U16 => "U16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::Bool => "Bool",
        }
    }

    pub fn from_short(name: &str) -> Option<Dtype> {
        [
            Dtype::F32,
            Dtype::F16,
            Dtype::Bf16,
            Dtype::I8,
            Dtype::U8,
            Dtype::U16,
            Dtype::I32,
            Dtype::U32,
            Dtype::Bool,
        ]
        .into_iter()
        .find(|d| d.short_name() == name)
    }
}

/// One value of a variant axis.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AxisValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Str(s) => f.write_str(s),
            AxisValue::Int(i) => write!(f, "{i}"),
            AxisValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// One point of a family's variant space: a value for every axis, in the
/// family's axis order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub values: Vec<(&'static str, AxisValue)>,
}

impl Variant {
    pub fn get(&self, axis: &str) -> &AxisValue {
        &self
            .values
            .iter()
            .find(|(name, _)| *name == axis)
            .unwrap_or_else(|| panic!("family bug: axis `{axis}` is not declared"))
            .1
    }

    pub fn str(&self, axis: &str) -> &str {
        match self.get(axis) {
            AxisValue::Str(s) => s,
            _ => panic!("family bug: axis `{axis}` is not a string axis"),
        }
    }

    pub fn int(&self, axis: &str) -> i64 {
        match self.get(axis) {
            AxisValue::Int(i) => *i,
            _ => panic!("family bug: axis `{axis}` is not an integer axis"),
        }
    }

    pub fn bool(&self, axis: &str) -> bool {
        match self.get(axis) {
            AxisValue::Bool(b) => *b,
            _ => panic!("family bug: axis `{axis}` is not a boolean axis"),
        }
    }

    /// The dtype named by a dtype axis.
    pub fn dtype(&self, axis: &str) -> Dtype {
        Dtype::from_short(self.str(axis))
            .unwrap_or_else(|| panic!("family bug: axis `{axis}` holds a value that is not a dtype"))
    }
}

/// A scalar a geometry field holds.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    Int(i64),
    Float(f64),
}

/// A named model geometry, validated against the family's field schema.
/// Fields are keyed by their dotted path inside the geometry table
/// (`hidden`, `slot.q4.gate_weights`).
#[derive(Clone, Debug)]
pub struct Geometry {
    pub name: String,
    pub span: Span,
    pub fields: BTreeMap<String, (FieldValue, Span)>,
}

impl Geometry {
    pub fn opt_int(&self, path: &str) -> Option<i64> {
        match self.fields.get(path) {
            Some((FieldValue::Int(i), _)) => Some(*i),
            _ => None,
        }
    }

    /// A required integer field (the schema guarantees presence).
    pub fn int(&self, path: &str) -> i64 {
        self.opt_int(path)
            .unwrap_or_else(|| panic!("family bug: required integer field `{path}` missing after validation"))
    }

    pub fn opt_float(&self, path: &str) -> Option<f64> {
        match self.fields.get(path) {
            Some((FieldValue::Float(f), _)) => Some(*f),
            Some((FieldValue::Int(i), _)) => Some(*i as f64),
            None => None,
        }
    }

    pub fn has(&self, path: &str) -> bool {
        self.fields.contains_key(path)
    }
}

/// `coeff * product of run-time sizes` (indices into the kernel's sizes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimExpr {
    pub coeff: u64,
    pub sizes: Vec<usize>,
}

impl DimExpr {
    pub fn fixed(n: u64) -> Self {
        DimExpr { coeff: n, sizes: Vec::new() }
    }

    pub fn size(index: usize) -> Self {
        DimExpr { coeff: 1, sizes: vec![index] }
    }

    pub fn scaled(coeff: u64, sizes: &[usize]) -> Self {
        DimExpr { coeff, sizes: sizes.to_vec() }
    }

    pub fn as_fixed(&self) -> Option<u64> {
        self.sizes.is_empty().then_some(self.coeff)
    }

    /// `"4*M"`, `"128"`: how the manifest and `kernelgen list` show it.
    pub fn describe(&self, names: &[&str]) -> String {
        let mut parts = Vec::new();
        if self.coeff != 1 || self.sizes.is_empty() {
            parts.push(self.coeff.to_string());
        }
        parts.extend(self.sizes.iter().map(|&i| names[i].to_string()));
        parts.join("*")
    }
}

/// A declared byte range of a packed buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionPlan {
    pub name: &'static str,
    pub offset: u64,
    pub bytes: u64,
    pub align: u64,
}

/// Where a buffer's contents come from (mirrors the runtime's `Source`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferSource {
    Data,
    /// A one-element int32 input carrying run-time size `sizes[i]`.
    SizeValue(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPlan {
    pub name: &'static str,
    pub dtype: Dtype,
    pub shape: Vec<DimExpr>,
    pub source: BufferSource,
    pub regions: Vec<RegionPlan>,
    pub align: u64,
    /// Every element must be at most run-time size `sizes[i]`: a count the
    /// kernel loops over (DeltaNet's kept lengths), checked before launch.
    pub at_most: Option<usize>,
}

impl BufferPlan {
    /// An ordinary array argument aligned to its element size.
    pub fn array(name: &'static str, dtype: Dtype, shape: Vec<DimExpr>) -> Self {
        BufferPlan { name, dtype, shape, source: BufferSource::Data, regions: Vec::new(), align: dtype.size(), at_most: None }
    }

    /// Elements when every dimension is fixed.
    pub fn fixed_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.as_fixed()?))
    }
}

/// What a template sees: parameter names and their values.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// What a family decides for one kernel of one variant at one geometry.
#[derive(Clone, Debug)]
pub struct KernelPlan {
    /// The kernel's part within the family (`gate_up`, `down`), if it has several.
    pub part: Option<&'static str>,
    /// Run-time sizes: they come from the launch, never from the source.
    pub sizes: Vec<&'static str>,
    pub inputs: Vec<BufferPlan>,
    pub outputs: Vec<BufferPlan>,
    /// Threads in the grid (MLX counts threads, not threadgroups).
    pub grid: [DimExpr; 3],
    pub threadgroup: [u64; 3],
    pub threadgroup_memory_bytes: u64,
    /// Values the family's template is rendered with.
    pub params: Params,
}

/// What a family's constraint check blames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blame {
    /// A field of the geometry, by dotted path (`hidden`, `slot.q4.bytes`).
    Field(String),
    /// The value of an axis in the variant being planned.
    Axis(&'static str),
    /// The geometry as a whole.
    Geometry,
}

/// A violated constraint: what is wrong and what would be right.
#[derive(Clone, Debug)]
pub struct Violation {
    pub blame: Blame,
    pub message: String,
    pub help: String,
}

impl Violation {
    pub fn field(path: impl Into<String>, message: impl Into<String>, help: impl Into<String>) -> Self {
        Violation { blame: Blame::Field(path.into()), message: message.into(), help: help.into() }
    }

    pub fn axis(axis: &'static str, message: impl Into<String>, help: impl Into<String>) -> Self {
        Violation { blame: Blame::Axis(axis), message: message.into(), help: help.into() }
    }
}

/// Nearest multiples of `m` around `n`, for "what would be right" hints.
pub fn multiples_near(n: i64, m: i64) -> String {
    let below = (n / m) * m;
    let above = below + m;
    if below > 0 { format!("{below} or {above}") } else { format!("{above}") }
}
