//! The validated, typed vocabulary shared by every stage after parsing:
//! dtypes, axis values, geometries, and the plan a family makes for a kernel.
//! Buffers and dimensions are the runtime's own contract types
//! (`kernelgen-contract`), so nothing is converted between the two.

use crate::spec::Span;
use std::collections::BTreeMap;
use std::fmt;

pub use kernelgen_contract::{BufferDef, Cost, Dim, Dtype, Format, Op, PackedLayout, Region, Source};

/// The dtype a spec or kernel name spells `short` (`bf16`, `f32`, ...).
pub fn dtype_from_short(short: &str) -> Option<Dtype> {
    Dtype::ALL.into_iter().find(|d| d.short_name() == short)
}

/// Every dtype name, for messages: `` `f32`, `f16`, ..., `bool` ``.
pub fn dtype_names() -> String {
    crate::schema::key_list(Dtype::ALL.map(Dtype::short_name))
}

/// One value of a variant axis.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AxisValue {
    /// A name (`q4`, `bf16`).
    Str(String),
    /// An integer (`4`).
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl AxisValue {
    /// The axis value a spec or family file writes as `value` (a string, an integer or a
    /// boolean); `None` for another kind of value.
    pub fn from_value(value: &crate::spec::Value) -> Option<Self> {
        use crate::spec::Value;
        match value {
            Value::Str(s) => Some(AxisValue::Str(s.clone())),
            Value::Int(i) => Some(AxisValue::Int(*i)),
            Value::Bool(b) => Some(AxisValue::Bool(*b)),
            _ => None,
        }
    }
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
    /// Every axis and its value, in the family's axis order.
    pub values: Vec<(String, AxisValue)>,
}

impl Variant {
    /// The value of `axis` (panics if the family does not declare it: a family bug).
    pub fn get(&self, axis: &str) -> &AxisValue {
        &self
            .values
            .iter()
            .find(|(name, _)| *name == axis)
            .unwrap_or_else(|| panic!("family bug: axis `{axis}` is not declared"))
            .1
    }

    /// The value of a string axis.
    pub fn str(&self, axis: &str) -> &str {
        match self.get(axis) {
            AxisValue::Str(s) => s,
            _ => panic!("family bug: axis `{axis}` is not a string axis"),
        }
    }

    /// The value of an integer axis.
    pub fn int(&self, axis: &str) -> i64 {
        match self.get(axis) {
            AxisValue::Int(i) => *i,
            _ => panic!("family bug: axis `{axis}` is not an integer axis"),
        }
    }

    /// The value of a boolean axis.
    pub fn bool(&self, axis: &str) -> bool {
        match self.get(axis) {
            AxisValue::Bool(b) => *b,
            _ => panic!("family bug: axis `{axis}` is not a boolean axis"),
        }
    }

    /// The dtype named by a dtype axis.
    pub fn dtype(&self, axis: &str) -> Dtype {
        dtype_from_short(self.str(axis))
            .unwrap_or_else(|| panic!("family bug: axis `{axis}` holds a value that is not a dtype"))
    }
}

/// A scalar a geometry field holds.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    /// An integer field.
    Int(i64),
    /// A float field.
    Float(f64),
    /// A boolean field.
    Bool(bool),
}

/// A named model geometry, validated against the family's field schema.
/// Fields are keyed by their dotted path inside the geometry table
/// (`hidden`, `slot.q4.gate_weights`).
#[derive(Clone, Debug)]
pub struct Geometry {
    /// The geometry's name (`[geometry.<name>]`).
    pub name: String,
    /// Where its table is in the spec.
    pub span: Span,
    /// Every field given, with where its value is.
    pub fields: BTreeMap<String, (FieldValue, Span)>,
}

/// An ordinary array argument: caller data aligned to its element size.
pub fn array(name: &'static str, dtype: Dtype, shape: Vec<Dim>) -> BufferDef {
    BufferDef {
        name: name.into(),
        dtype,
        shape: shape.into(),
        source: Source::Data,
        regions: Vec::new().into(),
        align: dtype.size() as u64,
        at_most: None,
    }
}

/// What a template sees: parameter names and their values.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// What a family decides for one kernel of one variant at one geometry.
#[derive(Clone, Debug)]
pub struct KernelPlan {
    /// The kernel's part within the family (`gate_up`, `down`), if it has several.
    pub part: Option<String>,
    /// Run-time sizes: they come from the launch, never from the source.
    pub sizes: Vec<String>,
    /// The kernel's inputs, in argument order.
    pub inputs: Vec<BufferDef>,
    /// The kernel's outputs, after the inputs.
    pub outputs: Vec<BufferDef>,
    /// Threads in the grid (MLX counts threads, not threadgroups).
    pub grid: [Dim; 3],
    /// Threads in a threadgroup.
    pub threadgroup: [u64; 3],
    /// Threads in a block of its CUDA body (the family's `cuda_threadgroup`, by default the
    /// same as `threadgroup`); the grid, in threads, is the same for both bodies.
    pub cuda_threadgroup: [u64; 3],
    /// Threadgroup memory the kernel declares, in bytes.
    pub threadgroup_memory_bytes: u64,
    /// Static `__shared__` memory its CUDA body declares, in bytes (the family's
    /// `cuda_shared_memory`, by default the same as `threadgroup_memory_bytes`).
    pub cuda_shared_memory_bytes: u64,
    /// What one launch moves and computes.
    pub cost: Cost,
    /// The whole layout of each packed buffer the kernel reads (all regions).
    pub packed: Vec<PackedLayout>,
    /// Values the family's template is rendered with.
    pub params: Params,
}

/// What a family's constraint check blames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blame {
    /// A field of the geometry, by dotted path (`hidden`, `slot.q4.bytes`).
    Field(String),
    /// The value of an axis in the variant being planned.
    Axis(String),
    /// The geometry as a whole.
    Geometry,
}

/// A violated constraint: what is wrong and what would be right.
#[derive(Clone, Debug)]
pub struct Violation {
    /// What to point at.
    pub blame: Blame,
    /// What is wrong.
    pub message: String,
    /// What would be right.
    pub help: String,
}
