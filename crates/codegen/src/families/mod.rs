//! Kernel families. A family is one Rust module here implementing [`Family`]
//! (its axes, geometry fields, constraints, buffers and launch geometry) plus
//! one template, `templates/<module>.metal.tera`. Adding a family: write both,
//! add one line to the `families!` list below, and add a spec under `specs/`.

use crate::model::{AxisValue, Geometry, KernelPlan, Variant, Violation};

/// Declares the family modules and registers each family with its template
/// (compiled in), from one list: a module, its family's spec name and its
/// template all share one name.
macro_rules! families {
    ($($module:ident: $family:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every family kernelgen knows, by spec name.
        pub static FAMILIES: &[&dyn Family] = &[$(&$module::$family),*];

        /// Each family's template: `(file name, text)`.
        pub static TEMPLATES: &[(&str, &str)] = &[$((
            concat!(stringify!($module), ".metal.tera"),
            include_str!(concat!("../../families/", stringify!($module), ".metal.tera")),
        )),*];
    };
}

families! {
    expert: Expert,
    affine: Affine,
    delta: Delta,
    delta_state: DeltaState,
    silu_rms_heads: SiluRmsHeads,
    gated_rms_norm: GatedRmsNorm,
}

pub fn find(name: &str) -> Option<&'static dyn Family> {
    FAMILIES.iter().copied().find(|f| f.name() == name)
}

/// The values an axis may take.
#[derive(Clone, Copy, Debug)]
pub enum AxisKind {
    /// One of these names.
    Choice(&'static [&'static str]),
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// `true` or `false`; kernel names spell `true` as the axis's
    /// `name_prefix` and leave `false` out (`..._masked` and `...`).
    Bool,
}

/// A variant axis: a spec lists the values it wants, and every combination
/// of axis values becomes a kernel.
#[derive(Clone, Copy, Debug)]
pub struct Axis {
    pub name: &'static str,
    pub doc: &'static str,
    pub kind: AxisKind,
    /// Used when a spec does not list the axis.
    pub default: &'static [AxisLit],
    /// How a value is spelled in kernel names: `r` makes `4` read `r4`; for
    /// a boolean axis, the word that `true` adds (`false` adds nothing).
    pub name_prefix: &'static str,
}

/// A literal axis value in a family definition.
#[derive(Clone, Copy, Debug)]
pub enum AxisLit {
    Str(&'static str),
    Int(i64),
    Bool(bool),
}

impl AxisLit {
    pub fn value(self) -> AxisValue {
        match self {
            AxisLit::Str(s) => AxisValue::Str(s.to_string()),
            AxisLit::Int(i) => AxisValue::Int(i),
            AxisLit::Bool(b) => AxisValue::Bool(b),
        }
    }
}

impl Axis {
    /// Whether `value` is one the family accepts.
    pub fn allows(&self, value: &AxisValue) -> bool {
        match (self.kind, value) {
            (AxisKind::Choice(names), AxisValue::Str(s)) => names.contains(&s.as_str()),
            (AxisKind::Int { min, max }, AxisValue::Int(i)) => (min..=max).contains(i),
            (AxisKind::Bool, AxisValue::Bool(_)) => true,
            _ => false,
        }
    }

    /// The accepted values, for messages.
    pub fn allowed(&self) -> String {
        match self.kind {
            AxisKind::Choice(names) => names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "),
            AxisKind::Int { min, max } => format!("an integer from {min} to {max}"),
            AxisKind::Bool => "true, false".into(),
        }
    }

    /// The value as it appears in kernel names (empty: left out).
    pub fn spell(&self, value: &AxisValue) -> String {
        match value {
            AxisValue::Bool(true) => self.name_prefix.to_string(),
            AxisValue::Bool(false) => String::new(),
            _ => format!("{}{}", self.name_prefix, value),
        }
    }
}

/// The kind of a geometry field.
#[derive(Clone, Copy, Debug)]
pub enum FieldKind {
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// A finite float.
    Float,
    /// A table with one sub-table per value of `axis`, each with `fields`
    /// (the expert slot layout, one per quantization).
    PerAxisValue { axis: &'static str, fields: &'static [Field] },
}

/// A field of a spec's `[geometry.<name>]` table.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub doc: &'static str,
    pub kind: FieldKind,
    pub required: bool,
}

/// What a family is, as data: everything but its constraints and plans.
#[derive(Clone, Copy, Debug)]
pub struct FamilyInfo {
    /// The name specs use (`family = "expert"`) and kernel names spell; the
    /// template is `templates/<name>.metal.tera`.
    pub name: &'static str,
    /// One line on what the family computes.
    pub summary: &'static str,
    pub axes: &'static [Axis],
    pub fields: &'static [Field],
    /// Whether the template renders a header (helpers MLX places before the
    /// kernel) when `section == "header"`.
    pub has_header: bool,
}

/// One kernel family: everything but the MSL text, which lives in its template.
pub trait Family: Sync {
    fn info(&self) -> &'static FamilyInfo;

    /// Checks one variant at one geometry and plans its kernels (one per part),
    /// or says every constraint it violates.
    fn plan(&self, variant: &Variant, geometry: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>>;

    fn name(&self) -> &'static str {
        self.info().name
    }

    fn axes(&self) -> &'static [Axis] {
        self.info().axes
    }

    fn fields(&self) -> &'static [Field] {
        self.info().fields
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_family_is_named_after_its_module_and_template() {
        for (family, (template, _)) in super::FAMILIES.iter().zip(super::TEMPLATES) {
            assert_eq!(format!("{}.metal.tera", family.name()), *template);
        }
    }
}
