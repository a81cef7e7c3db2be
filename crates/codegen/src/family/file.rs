//! Reading a family file: TOML to a [`FamilyDef`], every problem reported
//! with file, line, column and field, all at once, like a spec's. Every
//! expression is parsed and type-checked here, so an unknown name or a type
//! error points at its span in the file.

use super::expr::{self, Expr, ExprError, Scope, Type};
use super::{Axis, AxisKind, BufferSpec, Check, CudaTemplate, DtypeSpec, FamilyDef, Field, FieldKind, FileExpr, InputValues, Located, PackedDef, PartDef, Piece, ReferenceDef, RegionDef, Role, Size, VerifyDef, RUST_REFERENCE_PREFIX};
use crate::diag::{Diagnostics, Reporter};
use crate::model::{dtype_from_short, AxisValue};
use crate::names;
use crate::schema::{join, suggest, Table};
use crate::spec::{Entry, Node, Span, SpecSource, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What reading a family's template (by its file name) found.
pub enum TemplateFile {
    /// Its text.
    Text(String),
    /// No file of that name.
    Missing,
    /// A file that does not read: not UTF-8 (a diagnostic in the template), too large, not a
    /// regular file.
    Unreadable(crate::Error),
}

/// Reads a family file and its templates (the Metal one, and the CUDA one where there is
/// one), which `template` reads by file name (what it finds is reported here, as a template
/// that does not parse).
pub fn read(source: Arc<SpecSource>, dir: Option<std::path::PathBuf>, mut template: impl FnMut(&str) -> TemplateFile) -> Result<FamilyDef, Diagnostics> {
    let r = Reporter::new(source.clone());
    let tree = match crate::spec::toml::parse(&source.text) {
        Ok(t) => t,
        Err((message, span)) => {
            r.error(span, "(syntax)", format!("TOML syntax error: {message}"), None);
            return Err(r.into_diagnostics());
        }
    };
    let mut f = Reader { r: &r, source: source.clone(), broken: Default::default(), parts_failed: false, cuda: false };
    let def = f.family(&tree, &mut template).map(|d| FamilyDef { dir, ..d });
    match def {
        Some(def) if r.count() == 0 => Ok(def),
        _ => Err(r.into_diagnostics()),
    }
}

struct Reader<'r> {
    r: &'r Reporter,
    source: Arc<SpecSource>,
    /// Fields and derived values whose own definition was already reported:
    /// their uses are not reported again as unknown names.
    broken: std::collections::BTreeSet<String>,
    /// A kernel or one of its buffers failed to read (checks across kernels are skipped).
    parts_failed: bool,
    /// The family has a CUDA template: buffer names must suit a CUDA kernel too.
    cuda: bool,
}

const TOP: &[&str] = &["family", "summary", "template", "cuda_template", "header", "axes", "fields", "let", "check", "sizes", "packed", "kernel", "verify"];

/// What names mean in the family's expressions.
struct Names {
    types: BTreeMap<String, Type>,
    /// Field paths `has` may ask about.
    fields: Vec<String>,
}

impl Scope for Names {
    fn type_of(&self, name: &str) -> Option<Type> {
        self.types.get(name).copied()
    }
    fn is_field(&self, name: &str) -> bool {
        self.fields.iter().any(|f| f == name)
    }
    fn names(&self) -> Vec<String> {
        self.types.keys().cloned().collect()
    }
}

impl Reader<'_> {
    fn error(&self, span: Span, field: impl Into<String>, message: impl Into<String>, help: Option<String>) {
        self.r.error(span, field, message, help);
    }

    /// Where an expression's text starts: after the opening quote(s).
    fn text_start(&self, span: &Span) -> usize {
        let rest = &self.source.text[span.start.min(self.source.text.len())..];
        if rest.starts_with("\"\"\"") || rest.starts_with("'''") {
            span.start + 3
        } else if rest.starts_with('"') || rest.starts_with('\'') {
            span.start + 1
        } else {
            span.start
        }
    }

    fn expr_error(&mut self, at: usize, field: &str, e: ExprError) {
        if e.unknown.as_ref().is_some_and(|n| self.broken.contains(n)) {
            return;
        }
        self.error(at + e.span.start..at + e.span.end.max(e.span.start + 1), field, e.message, e.help);
    }

    /// An expression: a string (or an integer, for a constant).
    fn expr(&mut self, node: &Node, field: &str) -> Option<FileExpr> {
        let text = match &node.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format!("{f:?}"),
            Value::Bool(b) => b.to_string(),
            other => {
                self.error(node.span.clone(), field, format!("expected an expression (a string), found {}", other.kind()), None);
                return None;
            }
        };
        let at = if matches!(node.value, Value::Str(_)) { self.text_start(&node.span) } else { node.span.start };
        match expr::parse(&text) {
            Ok(e) => Some(Located { value: e, span: at..at + text.len() }),
            Err(e) => {
                self.expr_error(at, field, e);
                None
            }
        }
    }

    /// An expression checked in `scope` to have type `want`.
    fn typed(&mut self, node: &Node, field: &str, scope: &Names, want: Type, what: &str) -> Option<FileExpr> {
        let e = self.expr(node, field)?;
        match expr::check_as(&e.value, scope, want, what) {
            Ok(()) => Some(e),
            Err(errors) => {
                for err in errors {
                    self.expr_error(e.span.start, field, err);
                }
                None
            }
        }
    }

    fn family(&mut self, tree: &Node, template: &mut impl FnMut(&str) -> TemplateFile) -> Option<FamilyDef> {
        let whole = 0..self.source.text.len().min(1);
        let top = Table::new(self.r, tree, "", TOP).reported_at(whole.clone());
        let name = top.required_str("family", "the family's name, as specs write it").map(str::to_string);
        let summary = top.required_str("summary", "one line on what the family computes").map(str::to_string);
        if let Some(n) = &name {
            if !names::is_identifier(n) {
                top.error("family", format!("family name `{n}` cannot start a kernel name"), Some("use lowercase letters, digits and `_`, starting with a letter".into()));
            }
        }
        let has_header = top.bool("header", false);
        let template_name = top.str("template").map(str::to_string).or_else(|| name.as_ref().map(|n| format!("{n}.metal.tera")));
        // (before the kernels: their buffer names are checked as CUDA parameters where it is there)
        let cuda = self.cuda_template(&top, name.as_deref(), has_header, template);
        self.cuda = cuda.is_some();

        let axes = top.get("axes").map_or_else(Vec::new, |node| self.axes(node));
        let fields = top.get("fields").map_or_else(Vec::new, |node| self.fields(node, "fields", &axes));

        // The names expressions may use: axes, fields (a per-axis table's
        // sub-fields as `<field>.<sub>`), then each derived value in turn.
        let mut names = Names { types: BTreeMap::new(), fields: Vec::new() };
        for a in &axes {
            let t = match a.kind {
                AxisKind::Choice(_) => Type::Str,
                AxisKind::Int { .. } => Type::Int,
                AxisKind::Bool => Type::Bool,
            };
            names.types.insert(a.name.clone(), t);
        }
        fn add_fields(names: &mut Names, fields: &[Field], prefix: &str) {
            for f in fields {
                let path = join(prefix, &f.name);
                match &f.kind {
                    FieldKind::Int { .. } => {
                        names.types.insert(path.clone(), Type::Int);
                    }
                    FieldKind::Float => {
                        names.types.insert(path.clone(), Type::Float);
                    }
                    FieldKind::Bool => {
                        names.types.insert(path.clone(), Type::Bool);
                    }
                    FieldKind::PerAxisValue { fields, .. } => add_fields(names, fields, &path),
                }
                names.fields.push(path);
            }
        }
        add_fields(&mut names, &fields, "");

        let mut lets = Vec::new();
        if let Some(table) = top.open_table("let") {
            for entry in table.entries() {
                let field = format!("let.{}", entry.key);
                if names.types.contains_key(&entry.key) {
                    self.error(entry.key_span.clone(), field.clone(), format!("`{}` is already an axis, a field or a derived value", entry.key), Some("derived values need names of their own".into()));
                    continue;
                }
                let Some(x) = self.expr(&entry.node, &field) else {
                    self.broken.insert(entry.key.clone());
                    continue;
                };
                match expr::check(&x.value, &names) {
                    Ok(t) => {
                        names.types.insert(entry.key.clone(), t);
                        lets.push((entry.key.clone(), x));
                    }
                    Err(errors) => {
                        self.broken.insert(entry.key.clone());
                        for err in errors {
                            self.expr_error(x.span.start, &field, err);
                        }
                    }
                }
            }
        }

        let mut checks = Vec::new();
        for (i, item) in top.array("check", "[[check]] tables").unwrap_or_default().iter().enumerate() {
            if let Some(c) = self.check(item, &format!("check[{i}]"), &names, &axes, &fields) {
                checks.push(c);
            }
        }

        let mut sizes = Vec::new();
        if let Some(table) = top.open_table("sizes") {
            for entry in table.entries() {
                let field = table.field(&entry.key);
                if names.types.contains_key(&entry.key) {
                    self.error(entry.key_span.clone(), field, format!("`{}` is already an axis, a field or a derived value", entry.key), None);
                    continue;
                }
                if let Some(doc) = crate::schema::string(self.r, &entry.node, &field) {
                    sizes.push(Size { name: entry.key.clone(), doc: doc.to_string(), span: entry.key_span.clone() });
                }
            }
        }
        // Shapes, grids and byte counts may also use the run-time sizes.
        let mut with_sizes = Names { types: names.types.clone(), fields: names.fields.clone() };
        for s in &sizes {
            with_sizes.types.insert(s.name.clone(), Type::Size);
        }

        let mut packed = Vec::new();
        if let Some(table) = top.open_table("packed") {
            for entry in table.entries() {
                if let Some(p) = self.packed(entry, &names) {
                    packed.push(p);
                }
            }
        }

        let mut parts = Vec::new();
        match top.entry("kernel") {
            None => self.error(whole.clone(), "kernel", "the family defines no kernel", Some("add a [[kernel]] table with its buffers, grid and threadgroup".into())),
            Some(e) => match e.node.as_array() {
                Some([]) => self.error(e.node.span.clone(), "kernel", "the family defines no kernel: the list is empty", Some("add a [[kernel]] table with its buffers, grid and threadgroup".into())),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let errors = self.r.count();
                        if let Some(p) = self.part(item, &format!("kernel[{i}]"), &names, &with_sizes, &sizes, &packed) {
                            parts.push(p);
                        }
                        self.parts_failed |= self.r.count() > errors;
                    }
                    if parts.len() > 1 && parts.iter().any(|p| p.part.is_none()) {
                        self.error(e.node.span.clone(), "kernel", "a family of several kernels names each one's `part`", Some("add `part = \"...\"` to every [[kernel]]".into()));
                    }
                }
                None => self.error(e.node.span.clone(), "kernel", "expected [[kernel]] tables", None),
            },
        }
        // A kernel or buffer that failed to read is not in `parts`.
        if !self.parts_failed {
            self.sizes_are_readable(&sizes, &parts);
            if let Some(n) = &name {
                self.rust_names(n, &parts, &packed);
            }
        }
        let verify = match top.get("verify") {
            Some(node) => self.verify(node, &sizes, &parts),
            None => VerifyDef::default(),
        };
        let span = top.span_of("template");
        let header_span = top.span_of("header");
        top.finish();

        let template_name = template_name?;
        if !is_plain_name(&template_name) {
            self.error(span, "template", format!("`{}` is not a file name beside the family file", template_name.escape_debug()), Some("name a file in the family file's folder, such as `softcap.metal.tera`".into()));
            return None;
        }
        let help = format!("write the kernel's MSL in `{template_name}` beside this file, or name it with `template = \"...\"`");
        let template_text = self.read_template("template", &template_name, span, Some(help), has_header, template).flatten()?;
        if !self.header_is_read(has_header, &header_span, &template_name, &template_text.0) {
            return None;
        }
        let cuda = match cuda {
            Some(Some((name, (text, parsed)))) if self.header_is_read(has_header, &header_span, &name, &text) => {
                Some(CudaTemplate { path: self.beside_family_file(name), text, parsed: Arc::new(parsed) })
            }
            Some(_) => return None,
            None => None,
        };
        Some(FamilyDef {
            name: name?,
            summary: summary?,
            source: self.source.clone(),
            // Named as generated files name it: the family file's folder, then the file.
            template: (self.beside_family_file(template_name), template_text.0),
            parsed: Arc::new(template_text.1),
            cuda,
            has_header,
            axes,
            fields,
            lets,
            checks,
            sizes,
            packed,
            parts,
            verify,
            dir: None,
        })
    }

    /// A template's path as generated files name it: the family file's folder, then the file.
    fn beside_family_file(&self, file: String) -> String {
        match self.source.origin.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{file}"),
            None => file,
        }
    }

    /// Reads the template `name` (which the family file's `field` names), checking that it
    /// parses, keeps the sandbox's rules and tests for a header section only where the family
    /// has one: `None` when a problem was reported, `Some(None)` when there is no such file and
    /// `missing_help` is none (the file is optional), else its text and parse.
    fn read_template(&mut self, field: &str, name: &str, span: Span, missing_help: Option<String>, has_header: bool, template: &mut impl FnMut(&str) -> TemplateFile) -> Option<Option<(String, tera::Template)>> {
        match template(name) {
            TemplateFile::Text(t) => self.template_parses(name, t, has_header).map(Some),
            TemplateFile::Missing => match missing_help {
                None => Some(None),
                Some(help) => {
                    self.error(span, field, format!("template `{name}` was not found next to the family file"), Some(help));
                    None
                }
            },
            TemplateFile::Unreadable(crate::Error::Spec(d)) => {
                self.r.extend(d);
                None
            }
            TemplateFile::Unreadable(crate::Error::Io { path, message }) => {
                self.error(span, field, format!("template `{name}` does not read: {}: {message}", path.display()), None);
                None
            }
            TemplateFile::Unreadable(e) => {
                self.error(span, field, format!("template `{name}` does not read: {e}"), None);
                None
            }
        }
    }

    /// Whether template `file` (`text`) reads `section` where the family has `header = true`
    /// (at `header_span`); else its header would be its body again, which is reported.
    fn header_is_read(&self, has_header: bool, header_span: &Span, file: &str, text: &str) -> bool {
        if has_header && !crate::render::sandbox::reads(text, "section") {
            let message = format!("`header = true`, but template `{file}` never reads `section`: its header would be its body again");
            self.error(header_span.clone(), "header", message, Some("write {% if section == \"header\" %} ... {% else %} ... {% endif %} in the template, or remove `header = true`".into()));
            return false;
        }
        true
    }

    /// The CUDA template: the file `cuda_template` names (which must be there), else
    /// `<family>.cuda.tera` where it is there. `None`: the family is Metal-only; `Some(None)`:
    /// a problem was reported; else its file name, text and parse.
    #[allow(clippy::type_complexity)]
    fn cuda_template(&mut self, top: &Table<'_>, family: Option<&str>, has_header: bool, template: &mut impl FnMut(&str) -> TemplateFile) -> Option<Option<(String, (String, tera::Template))>> {
        let named = top.get("cuda_template").is_some();
        let name = if named {
            match top.str("cuda_template") {
                Some(n) => n.to_string(),
                None => return Some(None),
            }
        } else {
            format!("{}.cuda.tera", family?)
        };
        if !is_plain_name(&name) {
            top.error("cuda_template", format!("`{}` is not a file name beside the family file", name.escape_debug()), Some("name a file in the family file's folder, such as `softcap.cuda.tera`".into()));
            return Some(None);
        }
        let help = named.then(|| format!("write the kernel's CUDA body in `{name}` beside this file, or leave `cuda_template` out for a Metal-only family"));
        match self.read_template("cuda_template", &name, top.span_of("cuda_template"), help, has_header, template) {
            None => Some(None),
            Some(None) => None,
            Some(Some(text)) => Some(Some((name, text))),
        }
    }

    fn verify(&mut self, node: &Node, sizes: &[Size], parts: &[PartDef]) -> VerifyDef {
        let body = Table::new(self.r, node, "verify", &["reference", "tolerance", "sizes", "inputs"]);
        let mut v = VerifyDef::default();
        if let Some(e) = body.entry("reference") {
            if let Some(r) = body.str("reference") {
                if let Some(reference) = self.reference(r, &e.node.span) {
                    v.reference = Some(Located { value: reference, span: e.node.span.clone() });
                }
            }
        }
        if let Some(e) = body.entry("tolerance") {
            use kernelgen_contract::Tolerance;
            let bad = |r: &mut Reader| r.error(e.node.span.clone(), "verify.tolerance", "expected \"exact\", { ulps = N } or { abs = A, rel = R }", None);
            match &e.node.value {
                Value::Str(s) if s == "exact" => v.tolerance = Some(Tolerance::Exact),
                Value::Table(t) => {
                    let num = |k: &str| t.iter().find(|x| x.key == k).and_then(|x| match x.node.value {
                        Value::Int(i) if i >= 0 => Some(i as f64),
                        Value::Float(f) if f >= 0.0 && f.is_finite() => Some(f),
                        _ => None,
                    });
                    match (num("ulps"), num("abs"), num("rel"), t.len()) {
                        (Some(u), None, None, 1) if u.fract() == 0.0 && u <= u32::MAX as f64 => v.tolerance = Some(Tolerance::Ulps(u as u32)),
                        (None, a, r, n) if (a.is_some() || r.is_some()) && n == usize::from(a.is_some()) + usize::from(r.is_some()) => {
                            v.tolerance = Some(Tolerance::AbsRel { abs: a.unwrap_or(0.0), rel: r.unwrap_or(0.0) })
                        }
                        _ => bad(self),
                    }
                }
                _ => bad(self),
            }
        }
        if let Some(table) = body.open_table("sizes") {
            for s in table.entries() {
                let field = format!("verify.sizes.{}", s.key);
                if !sizes.iter().any(|x| x.name == s.key) {
                    self.error(s.key_span.clone(), field, format!("`{}` is not a run-time size of the family", s.key), None);
                    continue;
                }
                match s.node.as_int() {
                    Some(n) if n >= 1 => v.sizes.push((s.key.clone(), n as u64)),
                    _ => self.error(s.node.span.clone(), field, "expected a positive integer", None),
                }
            }
        }
        if let Some(table) = body.open_table("inputs") {
            for i in table.entries() {
                let field = format!("verify.inputs.{}", i.key);
                // (a kernel that failed to read is not in `parts`: then the name is not checked)
                if !self.parts_failed && !parts.iter().any(|p| p.inputs.iter().any(|b| b.name == i.key)) {
                    self.error(i.key_span.clone(), field.clone(), format!("`{}` is not an input of the family's kernels", i.key), None);
                }
                if let Some(values) = self.input_values(&i.node, &field) {
                    v.inputs.push((i.key.clone(), values));
                }
            }
        }
        body.finish();
        v
    }

    /// `[verify] reference`: `"rust:<name>"` (a Rust model compiled into kernelgen, whose names
    /// `kernelgen-verify` holds and checks) or `"<file>.py:<function>"` inside the folder.
    fn reference(&mut self, text: &str, span: &Span) -> Option<ReferenceDef> {
        if let Some(name) = text.strip_prefix(RUST_REFERENCE_PREFIX) {
            if is_reference_name(name) {
                return Some(ReferenceDef::Rust(name.to_string()));
            }
            let message = format!("`{}` is not `rust:<name>`", text.escape_debug());
            self.error(span.clone(), "verify.reference", message, Some("name one of kernelgen's Rust references by its name (letters, digits and `_`), e.g. \"rust:expert\"".into()));
            return None;
        }
        match text.rsplit_once(':') {
            Some((file, _)) if !is_inside_path(file) => self.error(
                span.clone(),
                "verify.reference",
                format!("`{}` is not a path inside the family file's folder", file.escape_debug()),
                Some("name a Python file in the family file's folder or a folder below it, e.g. \"refs/softcap.py:reference\" (no `..`, `/` first or hidden name)".into()),
            ),
            Some((file, function)) if file.ends_with(".py") && !function.is_empty() && function.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                return Some(ReferenceDef::Python { file: file.to_string(), function: function.to_string() });
            }
            _ => self.error(
                span.clone(),
                "verify.reference",
                format!("`{}` is not `<file>.py:<function>` or `rust:<name>`", text.escape_debug()),
                Some("name a Python file beside the family file and a function in it, e.g. \"refs/softcap.py:reference\"".into()),
            ),
        }
        None
    }

    /// One input's `[verify] inputs` entry: `{ min = A, max = B }` or `{ values = [...] }`.
    fn input_values(&mut self, node: &Node, field: &str) -> Option<InputValues> {
        const FORMS: &str = "expected { min = ..., max = ... } (two numbers, min <= max) or { values = [...] } (1 to 1024 numbers)";
        let t = Table::new(self.r, node, field.to_string(), &["min", "max", "values"]);
        let number = |n: &Node| match n.value {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) if f.is_finite() => Some(f),
            _ => None,
        };
        let entry = |k: &str| t.entry(k);
        if let Some(values) = entry("values") {
            if entry("min").is_some() || entry("max").is_some() {
                self.error(node.span.clone(), field, "`values` and `min`/`max` are two ways to draw an input: give one", Some(FORMS.into()));
                return None;
            }
            let vfield = format!("{field}.values");
            let Some(items) = values.node.as_array() else {
                self.error(values.node.span.clone(), vfield, format!("expected an array of numbers, found {}", values.node.value.kind()), None);
                return None;
            };
            if items.is_empty() || items.len() > MAX_INPUT_VALUES {
                self.error(values.node.span.clone(), vfield, format!("{} values: give 1 to {MAX_INPUT_VALUES}", items.len()), None);
                return None;
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match (number(item), &item.value) {
                    (Some(x), _) => out.push(x),
                    (None, Value::Float(f)) => self.error(item.span.clone(), vfield.clone(), format!("{f} is not a finite number"), None),
                    (None, other) => self.error(item.span.clone(), vfield.clone(), format!("expected a finite number, found {}", other.kind()), None),
                }
            }
            return (out.len() == items.len()).then_some(InputValues::Set(out));
        }
        match (entry("min").and_then(|e| number(&e.node)), entry("max").and_then(|e| number(&e.node))) {
            (Some(min), Some(max)) if min <= max => Some(InputValues::Range { min, max }),
            _ => {
                self.error(node.span.clone(), field, FORMS, None);
                None
            }
        }
    }

    fn axes(&mut self, node: &Node) -> Vec<Axis> {
        let mut out = Vec::new();
        for e in Table::open(self.r, node, "axes").entries() {
            let body = Table::new(self.r, &e.node, format!("axes.{}", e.key), &["doc", "values", "range", "kind", "default", "name"]);
            let prefix = body.path().to_string();
            let doc = body.str("doc").unwrap_or_default().to_string();
            let name_prefix = body.str("name").unwrap_or_default().to_string();
            if !name_prefix.is_empty() && !names::is_name_part(&name_prefix) {
                let span = body.get("name").map_or(e.key_span.clone(), |x| x.span.clone());
                self.error(span, format!("{prefix}.name"), format!("`{name_prefix}` cannot be spelled in a kernel name"), Some("use lowercase letters, digits and `_`".into()));
            }
            let Some(kind) = self.axis_kind(&body, e) else {
                body.finish();
                continue;
            };
            let mut axis = Axis { name: e.key.clone(), doc, kind, default: Vec::new(), name_prefix };
            if axis.kind == AxisKind::Bool && axis.name_prefix.is_empty() {
                self.error(e.key_span.clone(), format!("{prefix}.name"), "a boolean axis needs `name`, the word `true` adds to kernel names", None);
            }
            match body.entry("default") {
                None => self.error(e.key_span.clone(), format!("{prefix}.default"), "missing `default` (the values used when a spec does not list the axis)", None),
                Some(d) => {
                    let items = d.node.as_array().unwrap_or(&[]);
                    for item in items {
                        match AxisValue::from_value(&item.value) {
                            Some(v) if axis.allows(&v) => axis.default.push(v),
                            Some(v) => self.error(item.span.clone(), format!("{prefix}.default"), format!("{v} is not a value of this axis"), Some(format!("use {}", axis.allowed()))),
                            None => self.error(item.span.clone(), format!("{prefix}.default"), format!("expected an axis value, found {}", item.value.kind()), Some(format!("use {}", axis.allowed()))),
                        }
                    }
                    // (a list of values that are not the axis's was reported above)
                    if items.is_empty() {
                        self.error(d.node.span.clone(), format!("{prefix}.default"), "expected a non-empty list of default values", None);
                    }
                }
            }
            body.finish();
            out.push(axis);
        }
        out
    }

    /// What the axis `e`, read as `body`, chooses from: exactly one of `values`, `range` and
    /// `kind = "bool"`.
    fn axis_kind(&mut self, body: &Table<'_>, e: &Entry) -> Option<AxisKind> {
        let prefix = body.path();
        match (body.get("values"), body.get("range"), body.get("kind")) {
            (Some(v), None, None) => {
                let mut names = Vec::new();
                for n in v.as_array().unwrap_or(&[]) {
                    let Some(name) = crate::schema::string(self.r, n, &body.field("values")) else { continue };
                    if !names::is_name_part(name) {
                        self.error(n.span.clone(), body.field("values"), format!("`{name}` cannot be spelled in a kernel name"), Some("use lowercase letters, digits and `_`".into()));
                    }
                    names.push(name.to_string());
                }
                if names.is_empty() {
                    self.error(v.span.clone(), body.field("values"), "expected a non-empty list of names", None);
                }
                Some(AxisKind::Choice(names))
            }
            (None, Some(r), None) => match self.range(r, &body.field("range"))? {
                (min, _) if min < 0 => {
                    self.error(r.span.clone(), body.field("range"), "kernel names spell an integer axis's values, which therefore cannot be negative", Some("start the range at 0 or above".into()));
                    None
                }
                (min, max) => Some(AxisKind::Int { min, max }),
            },
            (None, None, Some(k)) if k.as_str() == Some("bool") => Some(AxisKind::Bool),
            _ => {
                self.error(e.key_span.clone(), prefix, "an axis has exactly one of `values` (names), `range` (integers) or `kind = \"bool\"`", None);
                None
            }
        }
    }

    /// The template's text and its parse if tera parses it, it keeps the sandbox's rules and
    /// its sections are the family's (`header`); else the problem, at its line and column in the
    /// template file.
    fn template_parses(&mut self, name: &str, text: String, has_header: bool) -> Option<(String, tera::Template)> {
        use crate::render::sandbox;
        let problem = match sandbox::check(&text) {
            Ok(parsed) if has_header => return Some((text, parsed)),
            Ok(parsed) => match sandbox::header_not_rendered(&text, &self.source.display) {
                None => return Some((text, parsed)),
                Some(p) => p,
            },
            Err(p) => p,
        };
        let source = template_source(&self.source.display, name, text);
        let mut offset = problem.offset.min(source.text.len());
        while !source.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let end = source.text[offset..].chars().next().map_or(offset, |c| offset + c.len_utf8());
        self.r.push(crate::diag::Diagnostic { source, span: offset..end, field: "(template)".into(), message: problem.message, help: problem.help });
        None
    }

    fn range(&mut self, node: &Node, field: &str) -> Option<(i64, i64)> {
        match node.as_array().map(|a| a.iter().map(Node::as_int).collect::<Option<Vec<_>>>()) {
            Some(Some(v)) if v.len() == 2 && v[0] <= v[1] => Some((v[0], v[1])),
            _ => {
                self.error(node.span.clone(), field, "expected [min, max], two integers with min <= max", None);
                None
            }
        }
    }

    fn fields(&mut self, node: &Node, prefix: &str, axes: &[Axis]) -> Vec<Field> {
        let mut out = Vec::new();
        for e in Table::open(self.r, node, prefix).entries() {
            let body = Table::new(self.r, &e.node, join(prefix, &e.key), &["doc", "kind", "range", "required", "axis", "fields"]).reported_at(e.key_span.clone());
            let doc = body.str("doc").unwrap_or_default().to_string();
            let required = body.bool("required", true);
            let kind = self.field_kind(&body, e, axes);
            body.finish();
            if let Some(kind) = kind {
                out.push(Field { name: e.key.clone(), doc, kind, required });
            }
        }
        out
    }

    /// What the field `e`, read as `body`, holds.
    fn field_kind(&mut self, body: &Table<'_>, e: &Entry, axes: &[Axis]) -> Option<FieldKind> {
        let field = body.path();
        // A key another kind of field takes is an error, not silently ignored.
        let kind = body.str("kind").unwrap_or("int");
        let unused: &[&str] = match kind {
            "int" => &["axis", "fields"],
            "float" | "bool" => &["range", "axis", "fields"],
            "table" => &["range"],
            _ => &[],
        };
        for key in unused {
            if let Some(node) = body.get(key) {
                self.error(node.span.clone(), body.field(key), format!("`{key}` does not apply to a field of kind \"{kind}\""), Some(format!("remove `{key}`")));
            }
        }
        match kind {
            "int" => {
                let (min, max) = match body.get("range") {
                    Some(r) => match self.range(r, &body.field("range")) {
                        Some(r) => r,
                        None => {
                            self.broken.insert(field.trim_start_matches("fields.").replace(".fields.", "."));
                            return None;
                        }
                    },
                    None => (i64::MIN, i64::MAX),
                };
                Some(FieldKind::Int { min, max })
            }
            "float" => Some(FieldKind::Float),
            "bool" => Some(FieldKind::Bool),
            "table" => {
                let axis = body.required_str("axis", "the axis whose values key the sub-tables")?.to_string();
                if !axes.iter().any(|a| a.name == axis && matches!(a.kind, AxisKind::Choice(_))) {
                    self.error(e.key_span.clone(), body.field("axis"), format!("`{axis}` is not an axis of names"), None);
                }
                let sub = match body.get("fields") {
                    Some(node) => self.fields(node, &body.field("fields"), axes),
                    None => Vec::new(),
                };
                Some(FieldKind::PerAxisValue { axis, fields: sub })
            }
            other => {
                self.error(e.key_span.clone(), body.field("kind"), format!("unknown field kind `{other}`"), Some("use \"int\", \"float\", \"bool\" or \"table\"".into()));
                None
            }
        }
    }

    /// A message with `{expression}` parts; `{{` and `}}` are braces.
    fn pieces(&mut self, node: &Node, field: &str, scope: &Names) -> Vec<Piece> {
        let Some(text) = crate::schema::string(self.r, node, field) else { return Vec::new() };
        let at = self.text_start(&node.span);
        let mut out = Vec::new();
        let mut literal = String::new();
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'{' if b.get(i + 1) == Some(&b'{') => {
                    literal.push('{');
                    i += 2;
                }
                b'}' if b.get(i + 1) == Some(&b'}') => {
                    literal.push('}');
                    i += 2;
                }
                b'{' => {
                    let Some(close) = text[i..].find('}') else {
                        self.error(at + i..at + text.len(), field, "`{` is not closed: write `{{` for a brace", None);
                        return out;
                    };
                    if !literal.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    let inner = &text[i + 1..i + close];
                    let start = at + i + 1;
                    match expr::parse(inner).and_then(|e| expr::check(&e, scope).map(|_| e).map_err(|mut v| v.remove(0))) {
                        Ok(e) => out.push(Piece::Expr(Located { value: e, span: start..start + inner.len() })),
                        Err(e) => self.expr_error(start, field, e),
                    }
                    i += close + 1;
                }
                _ => {
                    let len = text[i..].chars().next().map_or(1, char::len_utf8);
                    literal.push_str(&text[i..i + len]);
                    i += len;
                }
            }
        }
        if !literal.is_empty() {
            out.push(Piece::Text(literal));
        }
        out
    }

    fn check(&mut self, node: &Node, prefix: &str, names: &Names, axes: &[Axis], fields: &[Field]) -> Option<Check> {
        let body = Table::new(self.r, node, prefix, &["require", "blame", "message", "help"]);
        let require = match body.get("require") {
            Some(n) => self.typed(n, &body.field("require"), names, Type::Bool, "`require`"),
            None => {
                self.error(node.span.clone(), body.field("require"), "missing `require` (the condition that must hold)", None);
                None
            }
        };
        let blame = body.str("blame").map(str::to_string);
        if let Some(b) = &blame {
            let ok = match b.strip_prefix("axes.") {
                Some(axis) => axes.iter().any(|a| a.name == axis),
                None => field_exists(fields, b),
            };
            if !ok && !self.broken.contains(b) {
                body.error("blame", format!("`{b}` is neither a geometry field nor `axes.<axis>`"), None);
            }
        }
        let message = match body.get("message") {
            Some(n) => self.pieces(n, &body.field("message"), names),
            None => {
                self.error(node.span.clone(), body.field("message"), "missing `message` (what is wrong)", None);
                Vec::new()
            }
        };
        let help = match body.get("help") {
            Some(n) => self.pieces(n, &body.field("help"), names),
            None => Vec::new(),
        };
        body.finish();
        Some(Check { require: require?, blame, message, help })
    }

    fn packed(&mut self, entry: &Entry, names: &Names) -> Option<PackedDef> {
        let prefix = format!("packed.{}", entry.key);
        if let Some(why) = names::rust_reserved(&entry.key) {
            self.error(entry.key_span.clone(), prefix.clone(), format!("packed buffer `{}` names the launcher's `pack_{}` and its layout constant, and is {why}", entry.key, entry.key), Some("use lowercase letters, digits and `_`, starting with a letter".into()));
        }
        let body = Table::new(self.r, &entry.node, prefix.clone(), &["doc", "bytes", "align", "region"]).reported_at(entry.key_span.clone());
        let doc = body.str("doc").unwrap_or_default().to_string();
        let bytes = self.req_typed(&body, "bytes", names, Type::Int);
        let align = self.opt_typed(&body, "align", names, Type::Int, "1");
        let mut regions = Vec::new();
        match body.get("region").and_then(Node::as_array) {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    let r = Table::new(self.r, item, format!("{prefix}.region[{i}]"), &["name", "doc", "offset", "bytes", "align", "blame", "format", "shape"]);
                    let name = r.required_str("name", "the region's name").map(str::to_string);
                    if let Some(why) = name.as_deref().and_then(names::rust_reserved) {
                        r.error("name", format!("region `{}` names an argument of the launcher's `pack_{}`, and is {why}", name.as_deref().unwrap_or_default(), entry.key), Some("use lowercase letters, digits and `_`, starting with a letter".into()));
                    }
                    let doc = r.str("doc").unwrap_or_default().to_string();
                    let offset = self.req_typed(&r, "offset", names, Type::Int);
                    let bytes = self.req_typed(&r, "bytes", names, Type::Int);
                    let align = self.opt_typed(&r, "align", names, Type::Int, "1");
                    let blame = r.str("blame").map(str::to_string);
                    let format = r.get("format").and_then(|n| self.typed(n, &r.field("format"), names, Type::Str, "`format`"));
                    let shape = r.get("shape").map_or_else(Vec::new, |n| self.exprs(n, &r.field("shape"), names, Type::Int));
                    r.finish();
                    if let (Some(name), Some(offset), Some(bytes), Some(align)) = (name, offset, bytes, align) {
                        regions.push(RegionDef { name, doc, offset, bytes, align, blame, format, shape, span: item.span.clone() });
                    }
                }
            }
            None => self.error(entry.key_span.clone(), format!("{prefix}.region"), "a packed buffer lists its regions as [[packed.<name>.region]] tables", None),
        }
        body.finish();
        Some(PackedDef { name: entry.key.clone(), doc, bytes: bytes?, align: align?, regions })
    }

    /// The expression at `key` of `body`, which must be there, checked to have type `want`.
    fn req_typed(&mut self, body: &Table<'_>, key: &str, names: &Names, want: Type) -> Option<FileExpr> {
        match body.get(key) {
            Some(n) => self.typed(n, &body.field(key), names, want, &format!("`{key}`")),
            None => {
                self.error(body.span(), body.field(key), format!("missing `{key}`"), None);
                None
            }
        }
    }

    /// The expression at `key` of `body`, checked to have type `want`; `default` where it is not there.
    fn opt_typed(&mut self, body: &Table<'_>, key: &str, names: &Names, want: Type, default: &str) -> Option<FileExpr> {
        match body.get(key) {
            Some(n) => self.typed(n, &body.field(key), names, want, &format!("`{key}`")),
            None => Some(Located { value: expr::parse(default).expect("defaults parse"), span: 0..0 }),
        }
    }

    fn exprs(&mut self, node: &Node, field: &str, names: &Names, want: Type) -> Vec<FileExpr> {
        match node.as_array() {
            Some(items) => items.iter().enumerate().filter_map(|(i, n)| self.typed(n, &format!("{field}[{i}]"), names, want, "a dimension")).collect(),
            None => {
                self.error(node.span.clone(), field, format!("expected a list of expressions, found {}", node.value.kind()), None);
                Vec::new()
            }
        }
    }

    fn three(&mut self, body: &Table<'_>, key: &str, names: &Names) -> Option<[FileExpr; 3]> {
        let field = body.field(key);
        let Some(node) = body.get(key) else {
            self.error(body.span(), field, format!("missing `{key}` (three expressions: x, y, z)"), None);
            return None;
        };
        let list = self.exprs(node, &field, names, Type::Size);
        if node.as_array().is_some_and(|a| a.len() != 3) {
            self.error(node.span.clone(), field, "expected three expressions: x, y, z", None);
            return None;
        }
        list.try_into().ok()
    }

    #[allow(clippy::too_many_arguments)]
    fn part(&mut self, node: &Node, prefix: &str, names: &Names, with_sizes: &Names, sizes: &[Size], packed: &[PackedDef]) -> Option<PartDef> {
        let body = Table::new(self.r, node, prefix, &["part", "doc", "input", "output", "grid", "threadgroup", "threadgroup_memory", "cuda_threadgroup", "cuda_shared_memory", "cost"]);
        let part = body.str("part").map(str::to_string);
        if let Some(p) = &part {
            let why = names::rust_reserved(p).or_else(|| p.starts_with("pack_").then_some("the prefix of the launcher's packing functions"));
            if let Some(why) = why {
                body.error("part", format!("part `{p}` names a launcher method, and is {why}"), Some("use lowercase letters, digits and `_`, starting with a letter, and not a Rust keyword".into()));
            }
        }
        let doc = body.str("doc").unwrap_or_default().to_string();
        let grid = self.three(&body, "grid", with_sizes);
        let threadgroup = self.three(&body, "threadgroup", names);
        let threadgroup_memory = self.opt_typed(&body, "threadgroup_memory", names, Type::Int, "0");
        let cuda_threadgroup = match body.get("cuda_threadgroup") {
            Some(_) => Some(self.three(&body, "cuda_threadgroup", names)?),
            None => None,
        };
        let cuda_shared_memory = match body.get("cuda_shared_memory") {
            Some(n) => Some(self.typed(n, &body.field("cuda_shared_memory"), names, Type::Int, "`cuda_shared_memory`")?),
            None => None,
        };
        let mut buffers = |key: &str, output: bool| -> Vec<BufferSpec> {
            let Some(items) = body.array(key, &format!("[[kernel.{key}]] tables")) else { return Vec::new() };
            items.iter().enumerate().filter_map(|(i, item)| self.buffer(item, &format!("{prefix}.{key}[{i}]"), names, with_sizes, sizes, packed, output)).collect()
        };
        let inputs = buffers("input", false);
        let outputs = buffers("output", true);
        let (mut bytes_read, mut bytes_written, mut flops) = (None, None, None);
        if let Some(cost) = body.table("cost", &["bytes_read", "bytes_written", "flops"]) {
            for c in cost.entries() {
                let x = self.typed(&c.node, &cost.field(&c.key), with_sizes, Type::Size, &format!("`{}`", c.key));
                match c.key.as_str() {
                    "bytes_read" => bytes_read = x,
                    "bytes_written" => bytes_written = x,
                    "flops" => flops = x,
                    _ => {}
                }
            }
            cost.finish();
        }
        // (an output that failed to read was reported: the list is not empty)
        let no_outputs = body.get("output").and_then(Node::as_array).is_none_or(<[Node]>::is_empty);
        body.finish();
        if no_outputs {
            self.error(node.span.clone(), format!("{prefix}.output"), "a kernel writes at least one output", None);
        }
        let mut seen: Vec<&str> = Vec::new();
        for b in inputs.iter().chain(&outputs) {
            if seen.contains(&b.name.as_str()) {
                self.error(b.span.clone(), prefix, format!("two buffers are named `{}`", b.name), None);
            }
            seen.push(&b.name);
        }
        Some(PartDef { part, doc, inputs, outputs, grid: grid?, threadgroup: threadgroup?, cuda_threadgroup, threadgroup_memory: threadgroup_memory?, cuda_shared_memory, bytes_read, bytes_written, flops, span: node.span.clone() })
    }

    #[allow(clippy::too_many_arguments)]
    fn buffer(&mut self, node: &Node, prefix: &str, names: &Names, with_sizes: &Names, sizes: &[Size], packed: &[PackedDef], output: bool) -> Option<BufferSpec> {
        let body = Table::new(self.r, node, prefix, &["name", "doc", "dtype", "shape", "holds", "host", "at_most", "packed", "reads", "align", "when"]);
        let buffer = self.buffer_in(&body, node, names, with_sizes, sizes, packed, output);
        body.finish();
        buffer
    }

    #[allow(clippy::too_many_arguments)]
    fn buffer_in(&mut self, body: &Table<'_>, node: &Node, names: &Names, with_sizes: &Names, sizes: &[Size], packed: &[PackedDef], output: bool) -> Option<BufferSpec> {
        let name = body.required_str("name", "the buffer's name, as the kernel body uses it")?.to_string();
        if !is_msl_identifier(&name) {
            body.error("name", format!("`{name}` cannot name a Metal kernel parameter and a Rust argument"), Some("use letters, digits and `_`, starting with a letter".into()));
        } else if let Some(why) = names::msl_reserved(&name) {
            body.error("name", format!("buffer `{name}` names a Metal kernel parameter, and is {why}"), Some("rename the buffer (and its uses in the template)".into()));
        } else if let Some(why) = kernelgen_cuda::vocab::reserved(&name).filter(|_| self.cuda) {
            body.error("name", format!("buffer `{name}` names a CUDA kernel parameter, and is {why}"), Some("rename the buffer (and its uses in the templates)".into()));
        }
        let doc = body.str("doc").unwrap_or_default().to_string();
        let size_ref = |key: &str| -> Option<String> {
            let s = body.str(key)?;
            if sizes.iter().any(|x| x.name == s) {
                Some(s.to_string())
            } else {
                body.error(key, format!("`{s}` is not a run-time size of the family"), Some(format!("declare it under [sizes]{}", suggest(s, sizes.iter().map(|x| x.name.as_str())))));
                None
            }
        };
        let holds = size_ref("holds");
        let at_most = size_ref("at_most");
        let host = body.bool("host", false);
        let role = match (holds, host) {
            (Some(s), false) => Role::Holds(s),
            (None, true) => Role::Host,
            (None, false) => Role::Data,
            (Some(_), true) => {
                self.error(node.span.clone(), body.path(), "a buffer either holds a size or comes from the host, not both", None);
                Role::Data
            }
        };
        if output && role != Role::Data {
            self.error(node.span.clone(), body.path(), "an output is written by the kernel: it neither holds a size nor comes from the host", None);
        }
        // the launcher takes data and host inputs as arguments and returns outputs by name
        // (a buffer holding a size is computed, and appears in no Rust)
        if !matches!(role, Role::Holds(_)) && is_msl_identifier(&name) {
            if let Some(why) = names::rust_reserved(&name) {
                body.error("name", format!("buffer `{name}` names a launcher {}, and is {why}", if output { "output" } else { "argument" }), Some("use lowercase letters, digits and `_`, starting with a letter, and not a Rust keyword".into()));
            }
        }
        let packed_ref = match body.str("packed") {
            None => None,
            Some(p) => match packed.iter().find(|x| x.name == p) {
                None => {
                    self.error(node.span.clone(), body.field("packed"), format!("`{p}` is not a packed buffer of the family"), Some("declare it as [packed.<name>]".into()));
                    None
                }
                Some(layout) => {
                    let reads: Vec<String> = match body.get("reads") {
                        Some(n) => n.as_array().unwrap_or(&[]).iter().filter_map(|n| crate::schema::string(self.r, n, &body.field("reads"))).map(str::to_string).collect(),
                        None => layout.regions.iter().map(|r| r.name.clone()).collect(),
                    };
                    // A packed buffer is known by the regions it reads (its gaps poisoned, its cost
                    // the regions'): with none it would pass for a plain byte array.
                    if let Some(n) = body.get("reads").filter(|n| n.as_array().is_some_and(<[Node]>::is_empty)) {
                        self.error(n.span.clone(), body.field("reads"), format!("a kernel reading `{p}` reads at least one of its regions, and this lists none"), Some("leave `reads` out to read every region".into()));
                    }
                    for r in &reads {
                        if !layout.regions.iter().any(|x| &x.name == r) {
                            self.error(node.span.clone(), body.field("reads"), format!("`{r}` is not a region of `{p}`"), None);
                        }
                    }
                    Some((p.to_string(), reads))
                }
            },
        };
        let dtype = match body.get("dtype") {
            // A packed buffer is bytes: its layout's offsets and sizes count them.
            Some(n) if packed_ref.is_some() => {
                let dtype = self.dtype(n, &body.field("dtype"), names);
                if !matches!(dtype, Some(DtypeSpec::Fixed(kernelgen_contract::Dtype::U8))) {
                    self.error(n.span.clone(), body.field("dtype"), "a packed buffer is bytes: its dtype is u8", Some("leave `dtype` out (it is u8)".into()));
                }
                dtype
            }
            Some(n) => self.dtype(n, &body.field("dtype"), names),
            None if packed_ref.is_some() => Some(DtypeSpec::Fixed(kernelgen_contract::Dtype::U8)),
            None => {
                self.error(node.span.clone(), body.field("dtype"), "missing `dtype` (a dtype such as \"f32\", or an axis naming one)", Some(format!("the dtypes are {}", crate::model::dtype_names())));
                None
            }
        };
        if matches!(role, Role::Holds(_) | Role::Host) && !matches!(dtype, Some(DtypeSpec::Fixed(kernelgen_contract::Dtype::I32))) {
            self.error(node.span.clone(), body.field("dtype"), "size values and host integers are int32", Some("write `dtype = \"i32\"`".into()));
        }
        let shape = match (body.get("shape"), &packed_ref) {
            (Some(n), None) => self.exprs(n, &body.field("shape"), with_sizes, Type::Size),
            (None, Some(_)) => Vec::new(),
            // An array of packed buffers: `shape` lists its leading dimensions, and each buffer
            // of it is laid out as the packed layout (`shape = ["S"]` is `[S, bytes]`).
            (Some(n), Some(_)) => {
                let dims = self.exprs(n, &body.field("shape"), with_sizes, Type::Size);
                if n.as_array().is_some_and(<[Node]>::is_empty) {
                    self.error(
                        n.span.clone(),
                        body.field("shape"),
                        "an array of packed buffers lists its leading dimensions, and this lists none",
                        Some("leave `shape` out for one packed buffer, or write its count, such as `shape = [\"S\"]` for `[S, bytes]`".into()),
                    );
                }
                if output {
                    self.error(n.span.clone(), body.field("shape"), "an array of packed buffers is an input: kernels read packed buffers, they do not write them", None);
                }
                dims
            }
            (None, None) => {
                self.error(node.span.clone(), body.field("shape"), "missing `shape` (a list of dimensions)", None);
                Vec::new()
            }
        };
        let align = body.get("align").and_then(|n| self.typed(n, &body.field("align"), names, Type::Int, "`align`"));
        let when = body.get("when").and_then(|n| self.typed(n, &body.field("when"), names, Type::Bool, "`when`"));
        Some(BufferSpec { name, doc, dtype: dtype?, shape, role, packed: packed_ref, align, at_most, when, span: node.span.clone() })
    }

    /// A buffer's `dtype`: a dtype's name, or a string expression naming one (an axis). A name
    /// that is neither is told the dtypes, and the names it could have meant.
    fn dtype(&mut self, node: &Node, field: &str, names: &Names) -> Option<DtypeSpec> {
        let text = node.as_str();
        if let Some(d) = text.and_then(dtype_from_short) {
            return Some(DtypeSpec::Fixed(d));
        }
        let unknown_name = text.filter(|t| is_msl_identifier(t) && names.type_of(t).is_none() && !self.broken.contains(*t));
        if let Some(t) = unknown_name {
            let dtypes = kernelgen_contract::Dtype::ALL.map(kernelgen_contract::Dtype::short_name);
            let known = names.names();
            let hint = suggest(t, dtypes.into_iter().chain(known.iter().map(String::as_str)));
            let at = self.text_start(&node.span);
            self.error(at..at + t.len(), field, format!("`{t}` is neither a dtype nor a name of the family{hint}"), Some(format!("the dtypes are {}; or name an axis (or [let] value) whose value is one", crate::model::dtype_names())));
            return None;
        }
        self.typed(node, field, names, Type::Str, "a dtype").map(DtypeSpec::Expr)
    }

    /// The names the launcher module defines for the family's own kernels and packed buffers must
    /// differ in each scope whatever the spec: checked as the expansion checks every kernel's
    /// (`names::kernel_items`), after a launcher name standing for any geometry and axis values,
    /// and blamed on the family file.
    fn rust_names(&mut self, family: &str, parts: &[PartDef], packed: &[PackedDef]) {
        let launcher = format!("<geometry>_{family}");
        let mut scopes = names::RustScopes::launcher_module();
        for (i, p) in parts.iter().enumerate() {
            let kernel = p.part.as_ref().map_or(launcher.clone(), |part| format!("{launcher}_{part}"));
            let reads: Vec<(&str, Vec<&str>)> = p
                .inputs
                .iter()
                .filter_map(|b| b.packed.as_ref())
                .filter_map(|(buffer, _)| packed.iter().find(|x| x.name == *buffer))
                .map(|x| (x.name.as_str(), x.regions.iter().map(|r| r.name.as_str()).collect()))
                .collect();
            let names = names::KernelNames {
                launcher: &launcher,
                kernel: &kernel,
                part: p.part.as_deref().map(|part| (i, part)),
                outputs: p.outputs.iter().map(|b| b.name.as_str()).collect(),
                packed: reads,
            };
            let mut collided: Vec<String> = Vec::new();
            for item in names::kernel_items(&names) {
                if item.owner().is_some_and(|o| collided.iter().any(|c| c == o)) {
                    continue; // (inside an item already reported)
                }
                let Err(other) = scopes.define(item.clone()) else { continue };
                collided.push(item.name.clone());
                let help = names::collision_help(&item, other);
                let (span, field) = match &item.spelled {
                    names::Spelled::Region(buffer, r, _) => {
                        let region = packed.iter().find(|x| x.name == *buffer).and_then(|x| x.regions.get(*r));
                        (region.map_or(p.span.clone(), |r| r.span.clone()), format!("packed.{buffer}.region[{r}]"))
                    }
                    _ => (p.span.clone(), format!("kernel[{i}]")),
                };
                let message = format!("`{}`, {}, is also {}: the generated Rust would not compile", item.name, item.what, other.what);
                self.error(span, field, message, Some(help));
            }
        }
    }

    /// Every run-time size a kernel uses must be readable off one of its inputs' shapes: some
    /// dimension of an array or host input is `size` or `c * size`. A size no kernel uses is
    /// a mistake too (a launch could never learn it).
    fn sizes_are_readable(&mut self, sizes: &[Size], parts: &[PartDef]) {
        // (after another error, the expression that used a size may be the one that failed)
        let clean = self.r.count() == 0;
        for s in sizes.iter().filter(|_| clean) {
            if !parts.iter().any(|p| p.sizes_used(sizes).contains(&s.name)) {
                self.error(s.span.clone(), format!("sizes.{}", s.name), format!("run-time size `{}` is used by no kernel", s.name), Some(format!("use `{}` in a kernel's buffer shapes and grid, or remove it from [sizes]", s.name)));
            }
        }
        for p in parts {
            for s in p.sizes_used(sizes) {
                let readable = p.inputs.iter().filter(|b| matches!(b.role, Role::Data | Role::Host)).any(|b| b.shape.iter().any(|d| linear_in(&d.value, &s)));
                if !readable {
                    self.error(p.span.clone(), "kernel", format!("run-time size `{s}` cannot be read off any input's shape"), Some(format!("give some array input a dimension `{s}` (or `c * {s}`), so each launch knows it")));
                }
            }
        }
    }
}

/// The most values one input's `[verify] inputs` set may list.
pub const MAX_INPUT_VALUES: usize = 1024;

/// A Rust reference's name after `rust:`: an identifier of ASCII letters, digits and `_` (not
/// starting with a digit), at most 64 bytes.
pub fn is_reference_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A family's template `name` as a source problems point into, named beside the family file
/// (whose path as the user wrote it is `family_display`).
pub(crate) fn template_source(family_display: &str, name: &str, text: String) -> Arc<SpecSource> {
    let display = std::path::Path::new(family_display).with_file_name(name).display().to_string();
    Arc::new(SpecSource { display, origin: String::new(), stem: String::new(), text })
}

/// Whether `name` names a file (or folder) right inside a folder, as a family file names its
/// template and each step of its reference's path: printable ASCII without `/` or `\\`, not
/// empty and not starting with `.` (so neither `.` nor `..`, nor a hidden file).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && name.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'/' && b != b'\\')
}

/// Whether `path` (`/`-separated) stays inside the folder it is relative to: plain names only
/// ([`is_plain_name`]), so no `..`, no absolute path, no empty step.
pub fn is_inside_path(path: &str) -> bool {
    path.split('/').all(is_plain_name)
}

fn field_exists(fields: &[Field], path: &str) -> bool {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    fields.iter().any(|f| {
        f.name == head
            && match (&f.kind, rest) {
                (FieldKind::PerAxisValue { fields, .. }, Some(rest)) => field_exists(fields, rest),
                (_, None) => true,
                _ => false,
            }
    })
}

/// `name` or `expr * name` or `name * expr` where `expr` names no size
/// (syntactically: it is not `name`).
fn linear_in(e: &Expr, size: &str) -> bool {
    use super::expr::{BinOp, ExprKind};
    match &e.kind {
        ExprKind::Name(n) => n == size,
        ExprKind::Binary(BinOp::Mul, a, b) => (matches!(&a.kind, ExprKind::Name(n) if n == size) && !b.names().contains(&size)) || (matches!(&b.kind, ExprKind::Name(n) if n == size) && !a.names().contains(&size)),
        _ => false,
    }
}

fn is_msl_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic()) && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}
