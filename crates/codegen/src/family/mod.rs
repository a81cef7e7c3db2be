//! Kernel families as data. A family file (`<name>.toml`) beside its template
//! (`<name>.metal.tera`) says everything a family is: its variant axes, the
//! geometry fields a spec gives, derived values and constraints as
//! expressions ([`expr`]), the run-time sizes, packed buffer layouts, and its
//! kernels (parts) with their buffers and launch geometry. kernelgen's own
//! families are files of the same format (bundled into the generator); a
//! user's live in their project (found next to their specs, or given with
//! `--families`). The format is documented in `docs/family-files.md`.
//!
//! Reading a file ([`file::read`]) checks everything that does not depend on
//! a spec: every key, every expression's syntax and types, every name.
//! Planning ([`FamilyDef::plan`]) evaluates it for one variant and geometry.

pub mod expr;
pub mod file;
mod plan;

use crate::model::AxisValue;
use crate::spec::{Span, SpecSource};
use expr::Expr;
use kernelgen_contract::Dtype;
use std::sync::Arc;

/// Something read from a family file, with where it was written.
#[derive(Clone, Debug)]
pub struct Located<T> {
    pub value: T,
    /// Byte range in the family file.
    pub span: Span,
}

/// An expression of the family file: its tree, and where its text starts in
/// the file (expression spans are relative to that).
pub type FileExpr = Located<Expr>;

/// The values an axis may take.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisKind {
    /// One of these names.
    Choice(Vec<String>),
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// `true` or `false`; kernel names spell `true` as the axis's
    /// `name_prefix` and leave `false` out (`..._masked` and `...`).
    Bool,
}

/// A variant axis: a spec lists the values it wants, and every combination
/// of axis values becomes a kernel.
#[derive(Clone, Debug)]
pub struct Axis {
    pub name: String,
    pub doc: String,
    pub kind: AxisKind,
    /// Used when a spec does not list the axis.
    pub default: Vec<AxisValue>,
    /// How a value is spelled in kernel names: `r` makes `4` read `r4`; for
    /// a boolean axis, the word that `true` adds (`false` adds nothing).
    pub name_prefix: String,
}

impl Axis {
    /// Whether `value` is one the family accepts.
    pub fn allows(&self, value: &AxisValue) -> bool {
        match (&self.kind, value) {
            (AxisKind::Choice(names), AxisValue::Str(s)) => names.contains(s),
            (AxisKind::Int { min, max }, AxisValue::Int(i)) => (min..=max).contains(&i),
            (AxisKind::Bool, AxisValue::Bool(_)) => true,
            _ => false,
        }
    }

    /// The accepted values, for messages.
    pub fn allowed(&self) -> String {
        match &self.kind {
            AxisKind::Choice(names) => names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "),
            AxisKind::Int { min, max } => format!("an integer from {min} to {max}"),
            AxisKind::Bool => "true, false".into(),
        }
    }

    /// The value as it appears in kernel names (empty: left out).
    pub fn spell(&self, value: &AxisValue) -> String {
        match value {
            AxisValue::Bool(true) => self.name_prefix.clone(),
            AxisValue::Bool(false) => String::new(),
            _ => format!("{}{}", self.name_prefix, value),
        }
    }
}

/// The kind of a geometry field.
#[derive(Clone, Debug)]
pub enum FieldKind {
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// A finite float.
    Float,
    /// A table with one sub-table per value of `axis`, each with `fields`
    /// (the expert slot layout, one per quantization). Expressions name a
    /// sub-field as `<field>.<sub-field>`: the table of the variant's value.
    PerAxisValue { axis: String, fields: Vec<Field> },
}

/// A field of a spec's `[geometry.<name>]` table.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub doc: String,
    pub kind: FieldKind,
    pub required: bool,
}

/// A message with `{expression}` parts, evaluated when it is reported.
#[derive(Clone, Debug)]
pub enum Piece {
    Text(String),
    Expr(FileExpr),
}

/// A constraint: `require` must hold for every variant and geometry, or the
/// message (and help) is reported at the blamed field or axis.
#[derive(Clone, Debug)]
pub struct Check {
    pub require: FileExpr,
    /// A geometry field (`hidden`, `slot.up_weights`) or an axis
    /// (`axes.rows_per_threadgroup`); none blames the geometry as a whole.
    pub blame: Option<String>,
    pub message: Vec<Piece>,
    pub help: Vec<Piece>,
}

/// A run-time size: a value the launch reads off an argument's shape, so a
/// new value never recompiles the kernel.
#[derive(Clone, Debug)]
pub struct Size {
    pub name: String,
    pub doc: String,
}

/// A named byte range of a packed buffer, with how its bytes are laid out.
#[derive(Clone, Debug)]
pub struct RegionDef {
    pub name: String,
    pub doc: String,
    pub offset: FileExpr,
    pub bytes: FileExpr,
    pub align: FileExpr,
    /// The geometry field that sets `offset` in an explicit layout: a problem
    /// with the region blames it when the geometry gives it.
    pub blame: Option<String>,
    /// The element format (`q4`: two 4-bit values a byte, least significant
    /// first, zero point 8; `i8`; `f32`; ...), for the generated packer; an
    /// expression, so it may depend on an axis.
    pub format: Option<FileExpr>,
    /// The region's logical shape (row-major), for the generated packer.
    pub shape: Vec<FileExpr>,
}

/// A packed buffer: one byte buffer holding several regions (an expert's
/// residency slot), shared by the parts that read it.
#[derive(Clone, Debug)]
pub struct PackedDef {
    pub name: String,
    pub doc: String,
    pub bytes: FileExpr,
    pub align: FileExpr,
    pub regions: Vec<RegionDef>,
}

/// Where a buffer's dtype comes from.
#[derive(Clone, Debug)]
pub enum DtypeSpec {
    Fixed(Dtype),
    /// An expression giving a dtype's short name (usually an axis).
    Expr(FileExpr),
}

/// How a kernel input is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The caller's array (an input) or the kernel's result (an output).
    Data,
    /// A one-element int32 the launcher fills with this run-time size.
    Holds(String),
    /// Host integers the caller passes and the launcher checks.
    Host,
}

/// One buffer of a kernel.
#[derive(Clone, Debug)]
pub struct BufferSpec {
    pub name: String,
    pub doc: String,
    pub dtype: DtypeSpec,
    pub shape: Vec<FileExpr>,
    pub role: Role,
    /// A packed buffer of the family and the regions this kernel reads.
    pub packed: Option<(String, Vec<String>)>,
    /// Alignment of the buffer's start; the element size when not given.
    pub align: Option<FileExpr>,
    /// Every element must be at most this run-time size.
    pub at_most: Option<String>,
    /// The buffer exists only where this holds (DeltaNet's mask, for the
    /// masked variant).
    pub when: Option<FileExpr>,
    pub span: Span,
}

/// One kernel of the family.
#[derive(Clone, Debug)]
pub struct PartDef {
    /// The part's name (`gate_up`, `down`) when the family has several.
    pub part: Option<String>,
    pub doc: String,
    pub inputs: Vec<BufferSpec>,
    pub outputs: Vec<BufferSpec>,
    pub grid: [FileExpr; 3],
    pub threadgroup: [FileExpr; 3],
    pub threadgroup_memory: FileExpr,
    pub span: Span,
}

/// A family, as its file defines it.
#[derive(Clone, Debug)]
pub struct FamilyDef {
    /// The name specs use (`family = "expert"`) and kernel names spell.
    pub name: String,
    /// One line on what the family computes.
    pub summary: String,
    /// The family file (diagnostics point into it).
    pub source: Arc<SpecSource>,
    /// The template's file name (for messages) and text.
    pub template: (String, String),
    /// Whether the template renders a header (helpers MLX places before the
    /// kernel) when `section == "header"`.
    pub has_header: bool,
    pub axes: Vec<Axis>,
    pub fields: Vec<Field>,
    /// Derived values, in order; each may use axes, fields and earlier ones.
    pub lets: Vec<(String, FileExpr)>,
    pub checks: Vec<Check>,
    pub sizes: Vec<Size>,
    pub packed: Vec<PackedDef>,
    pub parts: Vec<PartDef>,
}

impl FamilyDef {
    pub fn axis(&self, name: &str) -> Option<&Axis> {
        self.axes.iter().find(|a| a.name == name)
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// kernelgen's own families, compiled in: `(family file, template)` by name.
const BUNDLED: &[(&str, &str, &str)] = &[
    ("expert", include_str!("../../families/expert.toml"), include_str!("../../families/expert.metal.tera")),
    ("affine", include_str!("../../families/affine.toml"), include_str!("../../families/affine.metal.tera")),
    ("delta", include_str!("../../families/delta.toml"), include_str!("../../families/delta.metal.tera")),
    ("delta_state", include_str!("../../families/delta_state.toml"), include_str!("../../families/delta_state.metal.tera")),
    ("silu_rms_heads", include_str!("../../families/silu_rms_heads.toml"), include_str!("../../families/silu_rms_heads.metal.tera")),
    ("gated_rms_norm", include_str!("../../families/gated_rms_norm.toml"), include_str!("../../families/gated_rms_norm.metal.tera")),
];

/// Where the bundled families live in kernelgen's repository (what generated
/// files name, and where to edit them).
pub const BUNDLED_DIR: &str = "crates/codegen/families";

/// kernelgen's own families, read from their compiled-in files.
pub fn bundled() -> Result<Vec<Arc<FamilyDef>>, crate::diag::Diagnostics> {
    let mut out = Vec::new();
    let mut problems = crate::diag::Diagnostics::default();
    for (name, text, template) in BUNDLED {
        let source = Arc::new(SpecSource {
            display: format!("{BUNDLED_DIR}/{name}.toml"),
            origin: format!("{BUNDLED_DIR}/{name}.toml"),
            stem: name.to_string(),
            text: text.to_string(),
        });
        match file::read(source, |t| (t == format!("{name}.metal.tera")).then(|| template.to_string())) {
            Ok(def) => out.push(Arc::new(def)),
            Err(d) => problems.extend(d),
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_families_read_cleanly() {
        let defs = bundled().unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(defs.len(), BUNDLED.len());
    }

    /// During the move from Rust families to family files: for every
    /// bundled spec, every variant and geometry, the file plans exactly what
    /// the Rust family plans.
    #[test]
    fn family_files_plan_what_the_rust_families_plan() {
        let defs = bundled().unwrap_or_else(|d| panic!("{d}"));
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut sources = crate::read_specs(&[root.join("specs")]).unwrap();
        for dir in ["tests/fixtures", "tests/bad_specs"] {
            sources.extend(crate::read_specs(&[std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)]).unwrap());
        }
        let (models, _) = crate::validate_all(sources);
        let mut compared = 0;
        for m in &models {
            let def = defs.iter().find(|d| d.name == m.family.name()).unwrap();
            let mut variants = vec![Vec::<(&str, crate::model::AxisValue)>::new()];
            for c in &m.axes {
                variants = variants.into_iter().flat_map(|v| c.values.iter().map(move |(x, _)| { let mut v = v.clone(); v.push((c.axis.name, x.clone())); v })).collect();
            }
            for g in &m.geometries {
                for v in &variants {
                    let variant = crate::model::Variant { values: v.clone() };
                    let axes: Vec<(&str, &crate::model::AxisValue)> = v.iter().map(|(a, x)| (*a, x)).collect();
                    let old = m.family.plan(&variant, g);
                    let new = def.plan(&axes, g);
                    let what = format!("{} {} {:?}", m.source.display, g.name, v);
                    match (old, new) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a.len(), b.len(), "{what}");
                            for (a, b) in a.iter().zip(&b) {
                                assert_eq!((&a.part, &a.sizes, &a.inputs, &a.outputs, &a.grid, a.threadgroup, a.threadgroup_memory_bytes), (&b.part, &b.sizes, &b.inputs, &b.outputs, &b.grid, b.threadgroup, b.threadgroup_memory_bytes), "{what}");
                                for (k, val) in &a.params {
                                    // Values no template or verifier reads.
                                    if (m.family.name() == "gated_rms_norm" && k == "eps") || (m.family.name() == "affine" && k == "group_size") {
                                        continue;
                                    }
                                    assert_eq!(Some(val), b.params.get(k), "{what}: param {k}");
                                }
                            }
                        }
                        (Err(a), Err(b)) => {
                            let show = |v: &[crate::model::Violation]| v.iter().map(|x| format!("{:?}: {} / {}", x.blame, x.message, x.help)).collect::<Vec<_>>();
                            assert_eq!(show(&a), show(&b), "{what}");
                        }
                        (a, b) => panic!("{what}: Rust {:?} vs file {:?}", a.map(|_| ()).map_err(|v| v.iter().map(|x| x.message.clone()).collect::<Vec<_>>()), b.map(|_| ()).map_err(|v| v.iter().map(|x| x.message.clone()).collect::<Vec<_>>())),
                    }
                    compared += 1;
                }
            }
        }
        assert!(compared > 60, "{compared}");
    }
}
