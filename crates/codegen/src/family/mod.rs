//! Kernel families as data. A family file (`<name>.toml`) beside its template
//! (`<name>.metal.tera`, and `<name>.cuda.tera` for a CUDA body) says everything
//! a family is: its variant axes, the geometry fields a spec gives, derived
//! values and constraints as
//! expressions ([`expr`]), the run-time sizes, packed buffer layouts, and its
//! kernels (parts) with their buffers and launch geometry. kernelgen's own
//! families are files of the same format (bundled into the generator); a
//! user's live in their project (found next to their specs, or given with
//! `--families`). The format is documented in `docs/family-files.md`.
//!
//! Reading a file ([`file::read`]) checks everything that does not depend on
//! a spec: every key, every expression's syntax and types, every name.
//! Planning ([`FamilyDef::plan`]) evaluates it for one variant and geometry.

mod cost;
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
    /// What was read.
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
    Int {
        /// The smallest value allowed.
        min: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// `true` or `false`; kernel names spell `true` as the axis's
    /// `name_prefix` and leave `false` out (`..._masked` and `...`).
    Bool,
}

/// A variant axis: a spec lists the values it wants, and every combination
/// of axis values becomes a kernel.
#[derive(Clone, Debug)]
pub struct Axis {
    /// The axis's name, as specs and expressions write it.
    pub name: String,
    /// What the axis chooses (the family file's `doc`).
    pub doc: String,
    /// The values it may take.
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
    Int {
        /// The smallest value allowed.
        min: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// A finite float.
    Float,
    /// `true` or `false`.
    Bool,
    /// A table with one sub-table per value of `axis`, each with `fields`
    /// (the expert slot layout, one per quantization). Expressions name a
    /// sub-field as `<field>.<sub-field>`: the table of the variant's value.
    PerAxisValue {
        /// The axis whose values name the sub-tables.
        axis: String,
        /// The fields of each sub-table.
        fields: Vec<Field>,
    },
}

/// A field of a spec's `[geometry.<name>]` table.
#[derive(Clone, Debug)]
pub struct Field {
    /// The field's name, as specs and expressions write it.
    pub name: String,
    /// What the field means (the family file's `doc`).
    pub doc: String,
    /// The values it may take.
    pub kind: FieldKind,
    /// Whether every geometry must give it.
    pub required: bool,
}

/// A message with `{expression}` parts, evaluated when it is reported.
#[derive(Clone, Debug)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// An expression, replaced by its value.
    Expr(FileExpr),
}

/// A constraint: `require` must hold for every variant and geometry, or the
/// message (and help) is reported at the blamed field or axis.
#[derive(Clone, Debug)]
pub struct Check {
    /// What must hold (a boolean expression).
    pub require: FileExpr,
    /// A geometry field (`hidden`, `slot.up_weights`) or an axis
    /// (`axes.rows_per_threadgroup`); none blames the geometry as a whole.
    pub blame: Option<String>,
    /// The message reported when it does not hold.
    pub message: Vec<Piece>,
    /// The help line reported with it (empty: none).
    pub help: Vec<Piece>,
}

/// A run-time size: a value the launch reads off an argument's shape, so a
/// new value never recompiles the kernel.
#[derive(Clone, Debug)]
pub struct Size {
    /// The size's name (`M`, `T`), as launch messages and expressions write it.
    pub name: String,
    /// What it counts.
    pub doc: String,
    /// Where `[sizes]` names it in the family file.
    pub span: Span,
}

/// A named byte range of a packed buffer, with how its bytes are laid out.
#[derive(Clone, Debug)]
pub struct RegionDef {
    /// The region's name (`gate_weights`).
    pub name: String,
    /// What the region holds.
    pub doc: String,
    /// Byte offset in the buffer.
    pub offset: FileExpr,
    /// Bytes the region spans.
    pub bytes: FileExpr,
    /// Required alignment of the offset, in bytes.
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
    /// Where the region is declared in the family file.
    pub span: Span,
}

/// A packed buffer: one byte buffer holding several regions (an expert's
/// residency slot), shared by the parts that read it.
#[derive(Clone, Debug)]
pub struct PackedDef {
    /// The buffer's name (the kernel argument).
    pub name: String,
    /// What the buffer holds.
    pub doc: String,
    /// Total bytes.
    pub bytes: FileExpr,
    /// Alignment of the buffer's start, in bytes.
    pub align: FileExpr,
    /// The regions, in offset order.
    pub regions: Vec<RegionDef>,
}

/// Where a buffer's dtype comes from.
#[derive(Clone, Debug)]
pub enum DtypeSpec {
    /// This dtype, whatever the variant.
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
    /// The buffer's name (the kernel argument).
    pub name: String,
    /// What the buffer holds (the launcher docs show it).
    pub doc: String,
    /// Its dtype.
    pub dtype: DtypeSpec,
    /// Its shape, outermost first.
    pub shape: Vec<FileExpr>,
    /// How the caller passes it.
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
    /// Where the buffer is declared in the family file.
    pub span: Span,
}

/// One kernel of the family.
#[derive(Clone, Debug)]
pub struct PartDef {
    /// The part's name (`gate_up`, `down`) when the family has several.
    pub part: Option<String>,
    /// What the kernel computes.
    pub doc: String,
    /// Its inputs, in argument order.
    pub inputs: Vec<BufferSpec>,
    /// Its outputs, after the inputs.
    pub outputs: Vec<BufferSpec>,
    /// Threads in the grid.
    pub grid: [FileExpr; 3],
    /// Threads in a threadgroup.
    pub threadgroup: [FileExpr; 3],
    /// Threads in a block of the CUDA body, where they differ from the threadgroup
    /// (`cuda_threadgroup`; `None`: the same). The grid, in threads, is the kernel's own.
    pub cuda_threadgroup: Option<[FileExpr; 3]>,
    /// Threadgroup memory, in bytes.
    pub threadgroup_memory: FileExpr,
    /// The CUDA body's static `__shared__` memory, in bytes, where it differs from the Metal
    /// body's threadgroup memory (`cuda_shared_memory`; `None`: the same).
    pub cuda_shared_memory: Option<FileExpr>,
    /// What a launch costs, where the family states it (by default: every
    /// byte of the inputs it reads and of its outputs, and no flop count).
    pub bytes_read: Option<FileExpr>,
    /// Bytes written per launch, where the family states it.
    pub bytes_written: Option<FileExpr>,
    /// Floating-point operations per launch, where the family states it.
    pub flops: Option<FileExpr>,
    /// Where the part is declared in the family file.
    pub span: Span,
}

impl PartDef {
    /// The run-time sizes the kernel uses (in its buffers' shapes, its grid, its costs, a
    /// buffer it fills with a size or bounds by one), in the family's order: its contract's
    /// sizes. Parts of one family may use different ones (a grouped part its route count).
    pub fn sizes_used(&self, sizes: &[Size]) -> Vec<String> {
        let mut named: Vec<String> = Vec::new();
        let mut add = |e: &FileExpr| named.extend(e.value.names().into_iter().map(str::to_string));
        for b in self.inputs.iter().chain(&self.outputs) {
            b.shape.iter().for_each(&mut add);
        }
        self.grid.iter().for_each(&mut add);
        [&self.bytes_read, &self.bytes_written, &self.flops].into_iter().flatten().for_each(&mut add);
        for b in self.inputs.iter().chain(&self.outputs) {
            if let Role::Holds(s) = &b.role {
                named.push(s.clone());
            }
            named.extend(b.at_most.clone());
        }
        sizes.iter().filter(|s| named.contains(&s.name)).map(|s| s.name.clone()).collect()
    }
}

/// A family's CUDA template (`<name>.cuda.tera`, or what `cuda_template` names): rendered with
/// the same parameters and sections as the Metal one into the body (and header) MLX's
/// `cuda_kernel` takes.
#[derive(Clone, Debug)]
pub struct CudaTemplate {
    /// Its path as generated files name it (`families/softcap.cuda.tera`).
    pub path: String,
    /// Its text.
    pub text: String,
    /// Its parse, checked against the sandbox's rules (`render::sandbox`).
    pub(crate) parsed: Arc<tera::Template>,
}

/// One of a family's templates (the Metal one or the CUDA one) as the renderer reads it: its
/// path as generated files name it, its text and its parse.
#[derive(Clone, Copy)]
pub(crate) struct TemplateView<'a> {
    pub path: &'a str,
    pub text: &'a str,
    pub parsed: &'a tera::Template,
}

/// How `kernelgen verify` runs the family's kernels (`[verify]`).
#[derive(Clone, Debug, Default)]
pub struct VerifyDef {
    /// The reference the outputs are compared with, where the family names one.
    pub reference: Option<Located<ReferenceDef>>,
    /// How close the outputs must be to a Python reference's.
    pub tolerance: Option<kernelgen_contract::Tolerance>,
    /// The run-time sizes verify launches at (2 for each one not given).
    pub sizes: Vec<(String, u64)>,
    /// How random values of an input are drawn, per input name (the others: by dtype).
    pub inputs: Vec<(String, InputValues)>,
}

/// What `[verify] reference` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReferenceDef {
    /// `"rust:<name>"`: one of the Rust models compiled into kernelgen. Any identifier reads;
    /// `kernelgen-verify` holds the names and reports an unknown one at the family file's line.
    Rust(String),
    /// `"<file>.py:<function>"`: a Python function over numpy arrays, the file relative to the
    /// family file's folder and inside it ([`FamilyDef::python_reference`] finds it on disk).
    Python {
        /// The file, `/`-separated, relative to the family file's folder.
        file: String,
        /// The function to call.
        function: String,
    },
}

/// The prefix of a [`ReferenceDef::Rust`] in a family file.
pub const RUST_REFERENCE_PREFIX: &str = "rust:";

/// How the random values of one input are drawn (`[verify] inputs`).
#[derive(Clone, Debug, PartialEq)]
pub enum InputValues {
    /// `{ min = A, max = B }`: uniform in `[min, max)` for floats, in `min..=max` for integers.
    Range {
        /// The smallest value.
        min: f64,
        /// The largest (floats: the bound above).
        max: f64,
    },
    /// `{ values = [...] }`: each element one of these, each as likely (ties on purpose).
    Set(Vec<f64>),
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
    /// The template: its path as generated files name it (`crates/codegen/
    /// families/expert.metal.tera`, `families/softcap.metal.tera`), and its text.
    pub template: (String, String),
    /// The template, parsed and checked against the sandbox's rules (`render::sandbox`).
    pub(crate) parsed: Arc<tera::Template>,
    /// The CUDA template, where the family has one (`None`: the family is Metal-only).
    pub cuda: Option<CudaTemplate>,
    /// Whether the template renders a header (helpers MLX places before the
    /// kernel) when `section == "header"`.
    pub has_header: bool,
    /// The variant axes, in the order kernel names spell them.
    pub axes: Vec<Axis>,
    /// The geometry fields a spec gives.
    pub fields: Vec<Field>,
    /// Derived values, in order; each may use axes, fields and earlier ones.
    pub lets: Vec<(String, FileExpr)>,
    /// The constraints every variant and geometry must meet.
    pub checks: Vec<Check>,
    /// The run-time sizes.
    pub sizes: Vec<Size>,
    /// The packed buffers.
    pub packed: Vec<PackedDef>,
    /// The kernels (one part, or several sharing a packed buffer).
    pub parts: Vec<PartDef>,
    /// How `kernelgen verify` runs its kernels.
    pub verify: VerifyDef,
    /// The folder the family file was read from (`None` for a bundled family):
    /// paths in the family file are relative to it.
    pub dir: Option<std::path::PathBuf>,
}

impl FamilyDef {
    /// The template as a source problems point into: named beside the family file as the user
    /// wrote it (`families/softcap.metal.tera`).
    pub fn template_source(&self) -> Arc<SpecSource> {
        self.source_of(self.metal_template())
    }

    /// One of the family's templates as a source problems point into ([`FamilyDef::template_source`]).
    pub(crate) fn source_of(&self, template: TemplateView<'_>) -> Arc<SpecSource> {
        let name = template.path.rsplit('/').next().unwrap_or_default();
        file::template_source(&self.source.display, name, template.text.to_string())
    }

    /// The Metal template, as the renderer reads it.
    pub(crate) fn metal_template(&self) -> TemplateView<'_> {
        TemplateView { path: &self.template.0, text: &self.template.1, parsed: &self.parsed }
    }

    /// The CUDA template, where the family has one, as the renderer reads it.
    pub(crate) fn cuda_template(&self) -> Option<TemplateView<'_>> {
        self.cuda.as_ref().map(|c| TemplateView { path: &c.path, text: &c.text, parsed: &c.parsed })
    }

    /// The axis of this name.
    pub fn axis(&self, name: &str) -> Option<&Axis> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// The geometry field of this name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The `[verify] reference`, if it is a Python one: its file, checked on disk to be a
    /// regular file inside the family file's folder reached through no symbolic link, and the
    /// function to call. (A family file names its reference as it names its template, and the
    /// reader checked the path's form.)
    pub fn python_reference(&self) -> Option<Result<(std::path::PathBuf, &str), String>> {
        let ReferenceDef::Python { file, function } = &self.verify.reference.as_ref()?.value else { return None };
        let Some(dir) = &self.dir else {
            return Some(Err(format!("family `{}` is bundled: its reference `{file}` has no folder to be read from", self.name)));
        };
        Some(file_inside(dir, file).map(|path| (path, function.as_str())))
    }
}

/// `relative` under `dir`, checked step by step: folders, then a regular file, none of them a
/// symbolic link (which could lead anywhere).
fn file_inside(dir: &std::path::Path, relative: &str) -> Result<std::path::PathBuf, String> {
    if !file::is_inside_path(relative) {
        return Err(format!("`{}` is not a path inside {}", relative.escape_debug(), dir.display()));
    }
    let steps: Vec<&str> = relative.split('/').collect();
    let mut path = dir.to_path_buf();
    for (i, step) in steps.iter().enumerate() {
        path.push(step);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let last = i + 1 == steps.len();
        if meta.file_type().is_symlink() {
            return Err(format!("{}: {}", path.display(), crate::discover::NO_LINKS));
        } else if last && !meta.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        } else if !last && !meta.is_dir() {
            return Err(format!("{}: not a folder", path.display()));
        }
    }
    Ok(path)
}

/// kernelgen's own families, compiled in: `(name, family file, Metal template, CUDA template)`,
/// the CUDA template `None` for a family that is still Metal-only.
const BUNDLED: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "expert",
        include_str!("../../families/expert.toml"),
        include_str!("../../families/expert.metal.tera"),
        Some(include_str!("../../families/expert.cuda.tera")),
    ),
    (
        "affine",
        include_str!("../../families/affine.toml"),
        include_str!("../../families/affine.metal.tera"),
        Some(include_str!("../../families/affine.cuda.tera")),
    ),
    (
        "delta",
        include_str!("../../families/delta.toml"),
        include_str!("../../families/delta.metal.tera"),
        Some(include_str!("../../families/delta.cuda.tera")),
    ),
    (
        "delta_state",
        include_str!("../../families/delta_state.toml"),
        include_str!("../../families/delta_state.metal.tera"),
        Some(include_str!("../../families/delta_state.cuda.tera")),
    ),
    (
        "silu_rms_heads",
        include_str!("../../families/silu_rms_heads.toml"),
        include_str!("../../families/silu_rms_heads.metal.tera"),
        Some(include_str!("../../families/silu_rms_heads.cuda.tera")),
    ),
    (
        "gated_rms_norm",
        include_str!("../../families/gated_rms_norm.toml"),
        include_str!("../../families/gated_rms_norm.metal.tera"),
        Some(include_str!("../../families/gated_rms_norm.cuda.tera")),
    ),
];

/// Where the bundled families live in kernelgen's repository (what generated
/// files name, and where to edit them).
pub const BUNDLED_DIR: &str = "crates/codegen/families";

/// kernelgen's own families, read from their compiled-in files.
pub fn bundled() -> Result<Vec<Arc<FamilyDef>>, crate::diag::Diagnostics> {
    let mut out = Vec::new();
    let mut problems = crate::diag::Diagnostics::default();
    for (name, text, metal, cuda) in BUNDLED {
        let source = Arc::new(SpecSource {
            display: format!("{BUNDLED_DIR}/{name}.toml"),
            origin: format!("{BUNDLED_DIR}/{name}.toml"),
            stem: name.to_string(),
            text: text.to_string(),
        });
        let template = |t: &str| match cuda {
            _ if t == format!("{name}.metal.tera") => file::TemplateFile::Text(metal.to_string()),
            Some(cuda) if t == format!("{name}.cuda.tera") => file::TemplateFile::Text(cuda.to_string()),
            _ => file::TemplateFile::Missing,
        };
        match file::read(source, None, template) {
            Ok(def) => out.push(Arc::new(def)),
            Err(d) => problems.extend(d),
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

/// The families a run knows: kernelgen's own, and the user's family files.
#[derive(Clone, Debug)]
pub struct Families {
    defs: Vec<Arc<FamilyDef>>,
    /// The folders searched for family files, each with whether it was there.
    searched: Vec<(std::path::PathBuf, bool)>,
}

impl Families {
    /// kernelgen's bundled families only (read once a process).
    pub fn bundled() -> Self {
        static DEFS: std::sync::LazyLock<Vec<Arc<FamilyDef>>> =
            std::sync::LazyLock::new(|| bundled().unwrap_or_else(|d| panic!("a bundled family file does not read (a kernelgen bug):\n{d}")));
        Families { defs: DEFS.clone(), searched: Vec::new() }
    }

    /// These families, recording the folders searched for family files (each with
    /// whether it was there), which an unknown family's message names.
    pub fn searched_in(mut self, folders: Vec<(std::path::PathBuf, bool)>) -> Self {
        self.searched = folders;
        self
    }

    /// The folders searched for family files, each with whether it was there.
    pub fn searched(&self) -> &[(std::path::PathBuf, bool)] {
        &self.searched
    }

    /// The bundled families and those of `user`; a user family may not take
    /// a bundled family's name, nor two user families one name.
    pub fn with(user: Vec<FamilyDef>) -> Result<Self, crate::diag::Diagnostics> {
        let mut all = Families::bundled();
        let mut problems = crate::diag::Diagnostics::default();
        for def in user {
            if let Some(other) = all.find(&def.name) {
                let span = 0..def.source.text.len().min(1);
                problems.push(crate::diag::Diagnostic {
                    source: def.source.clone(),
                    span,
                    field: "family".into(),
                    message: format!("family `{}` is already defined by {}", def.name, other.source.display),
                    help: Some("give the family another name".into()),
                });
                continue;
            }
            all.defs.push(Arc::new(def));
        }
        if problems.is_empty() { Ok(all) } else { Err(problems) }
    }

    /// The family of this name.
    pub fn find(&self, name: &str) -> Option<&Arc<FamilyDef>> {
        self.defs.iter().find(|d| d.name == name)
    }

    /// Every family, bundled ones first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<FamilyDef>> {
        self.defs.iter()
    }

    /// Every family's name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.defs.iter().map(|d| d.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_families_read_cleanly() {
        let defs = bundled().unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(defs.len(), BUNDLED.len());
        for (d, (name, _, _, cuda)) in defs.iter().zip(BUNDLED) {
            assert_eq!(d.name, *name, "each bundled family file is named after its family");
            assert_eq!(d.cuda.is_some(), cuda.is_some(), "{name}: a bundled CUDA template is read as the family's");
        }
    }
}
