//! Stage 2: check a spec tree against its family's schema and produce the
//! typed model. Every problem is collected; nothing stops at the first one.
//!
//! A spec (TOML form):
//! ```toml
//! family = "expert"            # which family (crates/codegen/src/families/)
//! description = "..."          # optional
//! [axes]                       # optional: each axis's values; unlisted axes take the family default
//! quant = ["q4", "q8"]
//! exclude = [{ quant = "q8", dtype = "f32" }]   # optional, top level: combinations to skip
//! [geometry.glm52]             # one or more named model geometries
//! hidden = 6144
//! ```

mod specs;

pub use specs::validate_all;

use crate::diag::{Diagnostics, Reporter};
use crate::family::{Axis, AxisKind, Families, FamilyDef, Field, FieldKind};
use crate::model::{AxisValue, FieldValue, Geometry};
use crate::schema::{join, suggest, Table};
use crate::spec::{Entry, Node, Span, SpecSource, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The values a spec chose for one axis.
#[derive(Clone, Debug)]
pub struct AxisChoice {
    /// The axis.
    pub axis: Axis,
    /// The values chosen, with where each is written.
    pub values: Vec<(AxisValue, Span)>,
}

/// A validated spec.
pub struct SpecModel {
    /// The spec file.
    pub source: Arc<SpecSource>,
    /// The family it names.
    pub family: Arc<FamilyDef>,
    /// Where `family` is written.
    pub family_span: Span,
    /// In the family's axis order.
    pub axes: Vec<AxisChoice>,
    /// Axis-value combinations left out (`exclude`), each a list of axis and value.
    pub excludes: Vec<Vec<(String, AxisValue)>>,
    /// Where `exclude` is written, when it is.
    pub exclude_span: Option<Span>,
    /// The geometries, in the order written.
    pub geometries: Vec<Geometry>,
}

const TOP_KEYS: &[&str] = &["family", "description", "axes", "exclude", "geometry"];

/// Checks one parsed spec. The model comes back whenever the family is
/// known, with the invalid parts left out, so the later stages can report
/// their problems in the same run.
pub fn validate(source: Arc<SpecSource>, root: &Node, families: &Families) -> (Option<SpecModel>, Diagnostics) {
    let r = Reporter::new(source.clone());
    let model = read_spec(&r, source, root, families);
    (model, r.into_diagnostics())
}

fn read_spec(r: &Reporter, source: Arc<SpecSource>, root: &Node, families: &Families) -> Option<SpecModel> {
    let whole = 0..source.text.len().min(1);
    let top = Table::new(r, root, "", TOP_KEYS);
    let family = match top.get("family") {
        None => {
            r.error(whole.clone(), "family", "the spec names no kernel family", Some(format!("add `family = \"...\"` with one of: {}", family_names(families))));
            None
        }
        Some(node) => match node.as_str() {
            None => {
                top.error("family", format!("expected a string, found {}", node.value.kind()), Some(format!("one of: {}", family_names(families))));
                None
            }
            Some(name) => match families.find(name) {
                Some(f) => Some((f.clone(), node.span.clone())),
                None => {
                    let help = format!("use one of: {}{}{}", family_names(families), suggest(name, families.names()), searched(families));
                    top.error("family", format!("unknown family \"{name}\""), Some(help));
                    None
                }
            },
        },
    };
    top.str("description");
    let Some((family, family_span)) = family else {
        top.finish();
        return None;
    };

    let axes = read_axes(r, &family, top.entry("axes"));
    let excludes = read_excludes(r, &family, &axes, top.entry("exclude"));
    let geometries = read_geometries(r, &family, top.entry("geometry"), whole);

    let exclude_span = top.entry("exclude").map(|e| e.key_span.clone());
    top.finish();
    Some(SpecModel { source, family, family_span, axes, excludes, exclude_span, geometries })
}

/// `; family files were looked for in ...`, or nothing when no folder was searched.
pub(crate) fn searched(families: &Families) -> String {
    searched_folders(families).map(|s| format!("; family files were looked for in {s}")).unwrap_or_default()
}

/// The folders searched for family files, `A, B (not there) and C`; `None` if none was.
fn searched_folders(families: &Families) -> Option<String> {
    let folders: Vec<String> =
        families.searched().iter().map(|(dir, there)| format!("{}{}", dir.display(), if *there { "" } else { " (not there)" })).collect();
    match folders.split_last()? {
        (last, []) => Some(last.clone()),
        (last, rest) => Some(format!("{} and {last}", rest.join(", "))),
    }
}

fn family_names(families: &Families) -> String {
    families.names().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
}

fn axis_value(r: &Reporter, axis: &Axis, node: &Node, field: &str) -> Option<AxisValue> {
    let Some(value) = AxisValue::from_value(&node.value) else {
        r.error(node.span.clone(), field, format!("expected an axis value, found {}", node.value.kind()), Some(format!("one of: {}", axis.allowed())));
        return None;
    };
    if axis.allows(&value) {
        return Some(value);
    }
    let hint = match (&value, &axis.kind) {
        (AxisValue::Str(s), AxisKind::Choice(names)) => suggest(s, names.iter().map(String::as_str)),
        _ => String::new(),
    };
    let shown = match &value {
        AxisValue::Str(s) => format!("\"{s}\""),
        AxisValue::Int(i) => i.to_string(),
        AxisValue::Bool(b) => b.to_string(),
    };
    r.error(node.span.clone(), field, format!("{shown} is not a value of axis `{}` ({})", axis.name, axis.doc), Some(format!("use {}{hint}", axis.allowed())));
    None
}

fn read_axes(r: &Reporter, family: &FamilyDef, node: Option<&Entry>) -> Vec<AxisChoice> {
    let names: Vec<&str> = family.axes.iter().map(|a| a.name.as_str()).collect();
    let listed = node.map(|e| Table::expecting(r, &e.node, "axes", &names, "a table of axis lists"));
    let mut choices = Vec::new();
    for axis in &family.axes {
        let Some(node) = listed.as_ref().and_then(|t| t.get(&axis.name)) else {
            let span = node.map_or(0..0, |e| e.key_span.clone());
            choices.push(AxisChoice { axis: axis.clone(), values: axis.default.iter().map(|v| (v.clone(), span.clone())).collect() });
            continue;
        };
        let field = format!("axes.{}", axis.name);
        let Some(items) = node.as_array() else {
            r.error(node.span.clone(), field, format!("expected a list of values, found {}", node.value.kind()), Some(format!("write a list, e.g. [{}]", axis.allowed())));
            continue;
        };
        if items.is_empty() {
            r.error(node.span.clone(), field.clone(), "the list is empty, so no kernel would be generated", Some(format!("list at least one of: {}", axis.allowed())));
        }
        let mut values: Vec<(AxisValue, Span)> = Vec::new();
        for item in items {
            if let Some(v) = axis_value(r, axis, item, &field) {
                if values.iter().any(|(seen, _)| *seen == v) {
                    r.error(item.span.clone(), field.clone(), format!("value {v} is listed twice"), Some("list each value once".into()));
                } else {
                    values.push((v, item.span.clone()));
                }
            }
        }
        choices.push(AxisChoice { axis: axis.clone(), values });
    }
    if let Some(listed) = listed {
        listed.finish();
    }
    choices
}

fn read_excludes(r: &Reporter, family: &FamilyDef, axes: &[AxisChoice], node: Option<&Entry>) -> Vec<Vec<(String, AxisValue)>> {
    let Some(e) = node else { return Vec::new() };
    let Some(items) = e.node.as_array() else {
        r.error(e.node.span.clone(), "exclude", format!("expected a list of tables, found {}", e.node.value.kind()), Some("write exclude = [{ quant = \"q8\", dtype = \"f32\" }]".into()));
        return Vec::new();
    };
    let names: Vec<&str> = family.axes.iter().map(|a| a.name.as_str()).collect();
    let mut out = Vec::new();
    for item in items {
        let Some(entries) = item.as_table() else {
            r.error(item.span.clone(), "exclude", format!("expected a table of axis values, found {}", item.value.kind()), Some("write { axis = value, ... }".into()));
            continue;
        };
        if entries.is_empty() {
            r.error(item.span.clone(), "exclude", "an empty exclusion would exclude every kernel", Some("name at least one axis value".into()));
        }
        let exclusion = Table::new(r, item, "exclude", &names);
        let mut pattern = Vec::new();
        for entry in entries {
            let Some(choice) = axes.iter().find(|c| c.axis.name == entry.key) else { continue };
            let field = exclusion.field(&entry.key);
            if let Some(v) = axis_value(r, &choice.axis, &entry.node, &field) {
                if !choice.values.iter().any(|(x, _)| *x == v) {
                    r.error(entry.node.span.clone(), field, format!("{v} is not among the values listed for axis `{}`, so this exclusion matches nothing", entry.key), Some("exclude a listed value or remove the exclusion".into()));
                }
                pattern.push((choice.axis.name.clone(), v));
            }
        }
        exclusion.finish();
        out.push(pattern);
    }
    out
}

fn read_geometries(r: &Reporter, family: &FamilyDef, node: Option<&Entry>, whole: Span) -> Vec<Geometry> {
    let Some(e) = node else {
        r.error(whole, "geometry", "the spec has no geometry", Some("add at least one [geometry.<name>] table with the model's sizes".into()));
        return Vec::new();
    };
    let geometries = Table::open_expecting(r, &e.node, "geometry", "a table of named geometries");
    if e.node.as_table().is_some_and(<[Entry]>::is_empty) {
        r.error(e.node.span.clone(), "geometry", "no geometry is defined", Some("add a [geometry.<name>] table".into()));
    }
    let mut out = Vec::new();
    for g in geometries.entries() {
        let field = geometries.field(&g.key);
        if !crate::names::is_identifier(&g.key) {
            r.error(g.key_span.clone(), field.clone(), format!("geometry name `{}` cannot start a kernel name", g.key.escape_debug()), Some("use lowercase letters, digits and `_`, starting with a letter (e.g. `glm52`)".into()));
        } else if g.key.len() > crate::names::MAX_NAME_LEN {
            r.error(
                g.key_span.clone(),
                format!("geometry.{}...", &g.key[..16]),
                format!("the geometry name is {} bytes long; at most {} fit in kernel and file names", g.key.len(), crate::names::MAX_NAME_LEN),
                Some("use a shorter name".into()),
            );
            continue;
        }
        let names: Vec<&str> = family.fields.iter().map(|f| f.name.as_str()).collect();
        if g.node.as_table().is_none() {
            r.error(g.node.span.clone(), field, format!("expected a table of sizes, found {}", g.node.value.kind()), None);
            continue;
        }
        let mut fields = BTreeMap::new();
        let before = r.count();
        read_fields(family, Table::new(r, &g.node, field, &names), &family.fields, "", g.key_span.clone(), &mut fields);
        // A geometry with a bad field is not planned: its constraints would
        // be checked against values that are not there.
        if r.count() == before {
            out.push(Geometry { name: g.key.clone(), span: g.key_span.clone(), fields });
        }
    }
    out
}

/// The geometry fields of `schema` in `table` into `out`, keyed by their path (`slot.q4.bytes`
/// for a per-axis table's sub-field); `table_span` is where a missing field is reported.
fn read_fields(family: &FamilyDef, table: Table<'_>, schema: &[Field], path_prefix: &str, table_span: Span, out: &mut BTreeMap<String, (FieldValue, Span)>) {
    let r = table.reporter();
    for f in schema {
        let field = table.field(&f.name);
        let path = join(path_prefix, &f.name);
        let Some(node) = table.get(&f.name) else {
            if f.required {
                r.error(table_span.clone(), field, format!("missing required field `{}` ({})", f.name, f.doc), Some(format!("add `{} = ...`", f.name)));
            }
            continue;
        };
        let span = node.span.clone();
        match &f.kind {
            &FieldKind::Int { min, max } => match node.value {
                Value::Int(i) if (min..=max).contains(&i) => {
                    out.insert(path, (FieldValue::Int(i), span));
                }
                Value::Int(i) => r.error(span, field, format!("{i} is out of range for {} ({})", f.name, f.doc), Some(format!("use an integer from {min} to {max}"))),
                ref other => r.error(span, field, format!("expected an integer, found {}", other.kind()), Some(format!("{} is {}", f.name, f.doc))),
            },
            FieldKind::Float => match node.value {
                Value::Float(x) if x.is_finite() => {
                    out.insert(path, (FieldValue::Float(x), span));
                }
                Value::Int(i) => {
                    out.insert(path, (FieldValue::Float(i as f64), span));
                }
                ref other => r.error(span, field, format!("expected a finite number, found {}", other.kind()), Some(format!("{} is {}", f.name, f.doc))),
            },
            FieldKind::Bool => match node.value {
                Value::Bool(b) => {
                    out.insert(path, (FieldValue::Bool(b), span));
                }
                ref other => r.error(span, field, format!("expected `true` or `false`, found {}", other.kind()), Some(format!("{} is {}", f.name, f.doc))),
            },
            FieldKind::PerAxisValue { axis, fields } => {
                let Some(axis_def) = family.axis(axis) else { continue };
                let sub = Table::open_expecting(r, node, field, &format!("a table keyed by `{axis}` values"));
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                for s in sub.entries() {
                    let sub_field = sub.field(&s.key);
                    if !axis_def.allows(&AxisValue::Str(s.key.clone())) {
                        r.error(s.key_span.clone(), sub_field, format!("`{}` is not a value of axis `{axis}`", s.key), Some(format!("key the table by one of: {}", axis_def.allowed())));
                        continue;
                    }
                    read_fields(family, Table::new(r, &s.node, sub_field, &names), fields, &join(&path, &s.key), s.key_span.clone(), out);
                }
            }
        }
    }
    table.finish();
}
