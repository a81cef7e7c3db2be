//! Planning a family's kernels for one variant and geometry: evaluate the
//! derived values, check every constraint and every packed layout, then the
//! buffers, grid and threadgroup of each part.

use super::expr::{self, Env, ExprError, Value};
use super::{DtypeSpec, FamilyDef, FieldKind, FileExpr, PackedDef, PartDef, Piece, Role};
use crate::diag::line_col;
use crate::model::{array, dtype_from_short, AxisValue, Blame, BufferDef, Cost, Dim, Format, PackedLayout, Geometry, KernelPlan, Params, Region, Source, Violation};
use std::collections::BTreeMap;

/// What a family's expressions see for one variant and geometry.
struct Bindings<'a> {
    def: &'a FamilyDef,
    axes: &'a [(&'a str, &'a AxisValue)],
    geometry: &'a Geometry,
    lets: BTreeMap<String, Value>,
    /// The run-time sizes in scope, in the order their indices count: the family's while the
    /// derived values and checks evaluate, one part's own while its kernel is planned.
    sizes: Vec<String>,
}

impl Bindings<'_> {
    fn axis(&self, name: &str) -> Option<&AxisValue> {
        self.axes.iter().find(|(a, _)| *a == name).map(|(_, v)| *v)
    }

    /// The geometry path of a field name: a per-axis table's sub-field
    /// `slot.bytes` is `slot.<the variant's value>.bytes`.
    fn field_path(&self, name: &str) -> Option<String> {
        let (head, rest) = name.split_once('.').map_or((name, None), |(h, r)| (h, Some(r)));
        let field = self.def.field(head)?;
        match (&field.kind, rest) {
            (FieldKind::PerAxisValue { axis, .. }, Some(rest)) => Some(format!("{head}.{}.{rest}", self.axis(axis)?)),
            (_, None) => Some(head.to_string()),
            _ => None,
        }
    }
}

impl Env for Bindings<'_> {
    fn value(&self, name: &str) -> Result<Option<Value>, String> {
        if let Some(v) = self.axis(name) {
            return Ok(Some(match v {
                AxisValue::Str(s) => Value::Str(s.clone()),
                AxisValue::Int(i) => Value::Int(*i),
                AxisValue::Bool(b) => Value::Bool(*b),
            }));
        }
        if let Some(v) = self.lets.get(name) {
            return Ok(Some(v.clone()));
        }
        if self.def.sizes.iter().any(|s| s.name == name) {
            return Ok(None);
        }
        let path = self.field_path(name).ok_or_else(|| format!("`{name}` has no value here"))?;
        match self.geometry.fields.get(&path) {
            Some((crate::model::FieldValue::Int(i), _)) => Ok(Some(Value::Int(*i))),
            Some((crate::model::FieldValue::Float(f), _)) => Ok(Some(Value::Float(*f))),
            Some((crate::model::FieldValue::Bool(b), _)) => Ok(Some(Value::Bool(*b))),
            None => Err(format!("geometry field `{path}` is not given (guard its use with `has({name})`)")),
        }
    }

    fn size_index(&self, name: &str) -> Option<usize> {
        self.sizes.iter().position(|s| *s == name)
    }

    fn has(&self, name: &str) -> bool {
        self.field_path(name).is_some_and(|p| self.geometry.fields.contains_key(&p))
    }
}

impl FamilyDef {
    /// Checks one variant at one geometry and plans its kernels (one per
    /// part), or says every constraint it violates.
    pub fn plan(&self, axes: &[(&str, &AxisValue)], g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let mut b = Bindings { def: self, axes, geometry: g, lets: BTreeMap::new(), sizes: self.sizes.iter().map(|s| s.name.clone()).collect() };
        let mut bad = Vec::new();
        for (name, e) in &self.lets {
            match expr::eval(&e.value, &b) {
                Ok(v) => {
                    b.lets.insert(name.clone(), v);
                }
                Err(err) => {
                    bad.push(self.broken(e, &format!("let.{name}"), err));
                    return Err(bad);
                }
            }
        }
        for c in &self.checks {
            match expr::eval(&c.require.value, &b) {
                Ok(Value::Bool(true)) => {}
                Ok(_) => {
                    let blame = match c.blame.as_deref() {
                        None => Blame::Geometry,
                        Some(b2) => match b2.strip_prefix("axes.") {
                            Some(axis) => Blame::Axis(axis.to_string()),
                            None => Blame::Field(b.field_path(b2).unwrap_or_else(|| b2.to_string())),
                        },
                    };
                    match (self.text(&c.message, &b), self.text(&c.help, &b)) {
                        (Ok(message), Ok(help)) => bad.push(Violation { blame, message, help }),
                        (Err(v), _) | (_, Err(v)) => bad.push(v),
                    }
                }
                Err(err) => bad.push(self.broken(&c.require, "check", err)),
            }
        }
        // Layout problems are reported with the constraints' (one run, every problem).
        let mut layouts = BTreeMap::new();
        for p in &self.packed {
            match self.layout(p, &b) {
                Ok((l, problems)) if problems.is_empty() => {
                    layouts.insert(p.name.clone(), l);
                }
                Ok((_, problems)) => bad.extend(problems),
                Err(v) => bad.push(v),
            }
        }
        // In an array of packed buffers the next one starts `bytes` on, which must keep its
        // alignment and its regions' (reported once, whichever parts read the array).
        for (name, l) in &layouts {
            let arrayed = self.parts.iter().flat_map(|p| &p.inputs).any(|i| !i.shape.is_empty() && i.packed.as_ref().is_some_and(|(n, _)| n == name));
            let align = l.regions.iter().map(|r| r.align).fold(l.align, u64::max);
            if arrayed && l.bytes % align != 0 {
                bad.push(Violation {
                    blame: Blame::Geometry,
                    message: format!("`{name}` is {} bytes, not a multiple of the alignment {align} it and its regions need, and a kernel reads an array of them: the second one would start misaligned", l.bytes),
                    help: format!("make `{name}` a multiple of {align} bytes, such as {}", expr::near_multiples(l.bytes as i64, align as i64)),
                });
            }
        }
        if !bad.is_empty() {
            return Err(bad);
        }
        let mut params = Params::new();
        for (axis, v) in axes {
            params.insert(axis.to_string(), serde_json::to_value(AxisJson(v)).expect("plain values"));
        }
        for (path, (v, _)) in &g.fields {
            if !path.contains('.') {
                let json = match v {
                    crate::model::FieldValue::Int(i) => serde_json::json!(i),
                    crate::model::FieldValue::Float(f) => serde_json::json!(f),
                    crate::model::FieldValue::Bool(b) => serde_json::json!(b),
                };
                params.insert(path.clone(), json);
            }
        }
        for (name, v) in &b.lets {
            params.insert(name.clone(), v.json());
        }
        let mut plans = Vec::new();
        for part in &self.parts {
            let b = Bindings { def: self, axes, geometry: g, lets: b.lets.clone(), sizes: part.sizes_used(&self.sizes) };
            match self.plan_part(part, &b, &layouts, &params) {
                Ok(p) => plans.push(p),
                Err(v) => bad.push(v),
            }
        }
        if bad.is_empty() { Ok(plans) } else { Err(bad) }
    }

    /// An expression of the family that failed to evaluate for this geometry
    /// (a family bug, or a geometry the family's checks let through).
    fn broken(&self, e: &FileExpr, what: &str, err: ExprError) -> Violation {
        let (line, col) = line_col(&self.source.text, e.span.start + err.span.start);
        Violation {
            blame: Blame::Geometry,
            message: format!("family `{}` cannot be planned for this geometry: {what} ({}:{line}:{col}): {}", self.name, self.source.display, err.message),
            help: "fix the geometry, or add a [[check]] to the family that rejects it with a message".into(),
        }
    }

    fn text(&self, pieces: &[Piece], b: &Bindings<'_>) -> Result<String, Violation> {
        let mut out = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Expr(e) => out.push_str(&expr::eval(&e.value, b).map_err(|err| self.broken(e, "a message", err))?.text()),
            }
        }
        Ok(out)
    }

    fn int(&self, e: &FileExpr, b: &Bindings<'_>, what: &str) -> Result<i64, Violation> {
        match expr::eval(&e.value, b) {
            Ok(Value::Int(i)) => Ok(i),
            Ok(other) => Err(self.broken(e, what, ExprError::new(e.value.span.clone(), format!("expected an integer, found {}", other.text())))),
            Err(err) => Err(self.broken(e, what, err)),
        }
    }

    /// An integer that must lie in `range` (a count, an extent, an alignment): a value
    /// outside it is an error, never clamped.
    fn int_in(&self, e: &FileExpr, b: &Bindings<'_>, what: &str, range: std::ops::RangeInclusive<i64>) -> Result<i64, Violation> {
        let n = self.int(e, b, what)?;
        if range.contains(&n) {
            return Ok(n);
        }
        let want = if *range.end() == i64::MAX { format!("at least {}", range.start()) } else { format!("{} to {}", range.start(), range.end()) };
        Err(self.broken(e, what, ExprError::new(e.value.span.clone(), format!("this is {n}, and must be {want}"))))
    }

    fn dim(&self, e: &FileExpr, b: &Bindings<'_>, what: &str) -> Result<Dim, Violation> {
        expr::eval_dim(&e.value, b).map_err(|err| self.broken(e, what, err))
    }

    /// A packed layout's size, alignment and regions, and what is wrong with
    /// them: every region inside the buffer, aligned, and disjoint from the
    /// others. A problem blames the first field the region's offset reads that
    /// the geometry gives (an explicit layout), else the geometry.
    fn layout(&self, p: &PackedDef, b: &Bindings<'_>) -> Result<(PackedLayout, Vec<Violation>), Violation> {
        let what = format!("packed.{}", p.name);
        let bytes = self.int_in(&p.bytes, b, &format!("{what}.bytes"), 0..=i64::MAX)?;
        let align = self.int_in(&p.align, b, &format!("{what}.align"), 1..=i64::MAX)?;
        let mut regions = Vec::new();
        for r in &p.regions {
            let at = format!("{what}.region `{}`", r.name);
            let blame = r.blame.as_deref().filter(|f| b.has(f)).and_then(|f| b.field_path(f)).map_or(Blame::Geometry, Blame::Field);
            let format = match &r.format {
                None => Format::Bytes,
                Some(e) => match expr::eval(&e.value, b) {
                    Ok(Value::Str(f)) => Format::parse(&f).ok_or_else(|| self.broken(e, &at, ExprError::new(e.value.span.clone(), format!("`{f}` is not a region format (u8, q4, i8, i32, u32, f16, bf16, f32)"))))?,
                    Ok(other) => return Err(self.broken(e, &at, ExprError::new(e.value.span.clone(), format!("expected a format name, found {}", other.text())))),
                    Err(err) => return Err(self.broken(e, &at, err)),
                },
            };
            let mut shape = Vec::new();
            for d in &r.shape {
                shape.push(self.int_in(d, b, &format!("{at} shape"), 0..=i64::MAX)? as u64);
            }
            let align = self.int_in(&r.align, b, &format!("{at} align"), 1..=i64::MAX)?;
            regions.push(((r.name.clone(), self.int(&r.offset, b, &at)?, self.int(&r.bytes, b, &at)?, align, blame), format, shape));
        }
        // A region's shape and format must account for its bytes exactly.
        let mut problems = Vec::new();
        for ((name, _, len, _, _), format, shape) in &regions {
            if shape.is_empty() {
                continue;
            }
            let values = shape.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
            if values.and_then(|v| format.bytes_for(v)) != Some(*len as u64) {
                problems.push(Violation {
                    blame: Blame::Geometry,
                    message: format!("family `{}`: region `{name}` of `{}` is {len} bytes, but {:?} values in format {} take {}", self.name, p.name, shape, format.name(), values.and_then(|v| format.bytes_for(v)).map_or("an odd or overflowing count".to_string(), |b| format!("{b} bytes"))),
                    help: "fix the region's bytes, shape or format in the family file".into(),
                });
            }
        }
        let (regions, described): (Vec<_>, Vec<_>) = regions.into_iter().map(|(r, f, s)| (r, (f, s))).unzip();
        let buffer = &p.name;
        let mut bad = Vec::new();
        // (in 128 bits: offsets and lengths are any i64, and their sums must not overflow)
        let end = |offset: i64, len: i64| i128::from(offset) + i128::from(len);
        for (name, offset, len, align, blame) in &regions {
            let (offset, len, align) = (*offset, *len, *align);
            if len < 0 {
                bad.push(Violation { blame: blame.clone(), message: format!("{name} are {len} bytes long, and a length cannot be negative"), help: format!("fix the bytes of region {name} in the family file") });
            } else if offset < 0 || end(offset, len) > i128::from(bytes) {
                let help = match (len <= bytes, offset < 0) {
                    (true, true) => format!("move {name} to an offset from 0 to {}", bytes - len),
                    (true, false) => format!("move {name} to an offset of at most {} or make the {buffer} at least {} bytes", bytes - len, end(offset, len)),
                    (false, _) => format!("make the {buffer} at least {} bytes: {name} alone take {len}", end(offset.max(0), len)),
                };
                bad.push(Violation { blame: blame.clone(), message: format!("{name} occupy bytes {offset}..{} but the {buffer} has only {bytes} bytes", end(offset, len)), help });
            }
            if align > 1 && offset % align != 0 {
                bad.push(Violation {
                    blame: blame.clone(),
                    message: format!("offset {offset} of {name} is not a multiple of {align}, which the kernel's loads need"),
                    help: format!("use a multiple of {align}, such as {}", expr::near_multiples(offset, align)),
                });
            }
        }
        // (a region of negative length was reported above: it overlaps nothing)
        let sized: Vec<_> = regions.iter().filter(|r| r.2 >= 0).collect();
        for (i, a) in sized.iter().enumerate() {
            for r in &sized[i + 1..] {
                let (a_end, r_end) = (end(a.1, a.2), end(r.1, r.2));
                if i128::from(a.1) < r_end && i128::from(r.1) < a_end {
                    let help = if r.2 <= a.1 {
                        format!("regions must be disjoint: start {} at {a_end} or later, or at {} or earlier", r.0, a.1 - r.2)
                    } else {
                        format!("regions must be disjoint: start {} at {a_end} or later", r.0)
                    };
                    bad.push(Violation { blame: r.4.clone(), message: format!("{} (bytes {}..{r_end}) overlap {} (bytes {}..{a_end})", r.0, r.1, a.0, a.1), help });
                }
            }
        }
        bad.extend(problems);
        let regions = regions
            .into_iter()
            .zip(described)
            .map(|((name, offset, len, align, _), (format, shape))| Region {
                name: name.into(),
                offset: offset.max(0) as u64,
                bytes: len.max(0) as u64,
                align: align as u64,
                format,
                shape: shape.into(),
            })
            .collect();
        Ok((PackedLayout { name: p.name.clone().into(), bytes: bytes as u64, align: align as u64, regions }, bad))
    }

    fn plan_part(&self, part: &PartDef, b: &Bindings<'_>, layouts: &BTreeMap<String, PackedLayout>, params: &Params) -> Result<KernelPlan, Violation> {
        let buffers = |list: &[super::BufferSpec]| -> Result<Vec<BufferDef>, Violation> {
            let mut out = Vec::new();
            for spec in list {
                let what = format!("buffer `{}`", spec.name);
                if let Some(w) = &spec.when {
                    match expr::eval(&w.value, b) {
                        Ok(Value::Bool(true)) => {}
                        Ok(_) => continue,
                        Err(err) => return Err(self.broken(w, &what, err)),
                    }
                }
                let dtype = match &spec.dtype {
                    DtypeSpec::Fixed(d) => *d,
                    DtypeSpec::Expr(e) => match expr::eval(&e.value, b) {
                        Ok(Value::Str(s)) => dtype_from_short(&s).ok_or_else(|| self.broken(e, &what, ExprError::new(e.value.span.clone(), format!("`{s}` is not a dtype (the dtypes are {})", crate::model::dtype_names()))))?,
                        Ok(other) => return Err(self.broken(e, &what, ExprError::new(e.value.span.clone(), format!("expected a dtype name, found {}", other.text())))),
                        Err(err) => return Err(self.broken(e, &what, err)),
                    },
                };
                let mut def = match &spec.packed {
                    Some((layout, reads)) => {
                        let l = &layouts[layout];
                        // An array of packed buffers is `[leading dims..., bytes]`, each buffer laid
                        // out alike: the next one starts `bytes` on, which must keep its alignment.
                        // (an array of them is `[leading dims..., bytes]`; `plan` checked that
                        // `bytes` keeps each one of it aligned)
                        let mut shape = spec.shape.iter().map(|d| self.dim(d, b, &what)).collect::<Result<Vec<_>, _>>()?;
                        shape.push(Dim::Fixed(l.bytes));
                        BufferDef {
                            regions: l.regions.iter().filter(|r| reads.iter().any(|x| *x == r.name)).cloned().collect::<Vec<_>>().into(),
                            align: l.align,
                            ..array_of(&spec.name, dtype, shape)
                        }
                    }
                    None => {
                        let shape = spec.shape.iter().map(|d| self.dim(d, b, &what)).collect::<Result<Vec<_>, _>>()?;
                        array_of(&spec.name, dtype, shape)
                    }
                };
                def.source = match &spec.role {
                    Role::Data => Source::Data,
                    Role::Holds(size) => Source::SizeValue(size_index(b, size)),
                    Role::Host => Source::HostInts,
                };
                if let Some(a) = &spec.align {
                    def.align = self.int_in(a, b, &format!("{what} align"), 1..=i64::MAX)? as u64;
                }
                def.at_most = spec.at_most.as_deref().map(|s| size_index(b, s));
                out.push(def);
            }
            Ok(out)
        };
        let inputs = buffers(&part.inputs)?;
        let outputs = buffers(&part.outputs)?;
        let grid = [self.dim(&part.grid[0], b, "grid")?, self.dim(&part.grid[1], b, "grid")?, self.dim(&part.grid[2], b, "grid")?];
        // (a threadgroup's product is checked against Apple's limit, a CUDA block's against
        // CUDA's, with the other limits)
        let block = |exprs: &[FileExpr; 3], what: &str| -> Result<[u64; 3], Violation> {
            let mut t = [0u64; 3];
            for (t, e) in t.iter_mut().zip(exprs) {
                *t = self.int_in(e, b, what, 1..=i64::from(u32::MAX))? as u64;
            }
            Ok(t)
        };
        let threadgroup = block(&part.threadgroup, "threadgroup")?;
        let cuda_threadgroup = match &part.cuda_threadgroup {
            Some(exprs) => block(exprs, "cuda_threadgroup")?,
            None => threadgroup,
        };
        let threadgroup_memory_bytes = self.int_in(&part.threadgroup_memory, b, "threadgroup_memory", 0..=i64::MAX)? as u64;
        let cuda_shared_memory_bytes = match &part.cuda_shared_memory {
            Some(e) => self.int_in(e, b, "cuda_shared_memory", 0..=i64::MAX)? as u64,
            None => threadgroup_memory_bytes,
        };
        let stated = |e: &Option<FileExpr>, what: &str| e.as_ref().map(|e| self.dim(e, b, what)).transpose();
        let derived = |list: &[BufferDef], what: &str| {
            super::cost::bytes(list).ok_or_else(|| Violation {
                blame: Blame::Geometry,
                message: format!("family `{}`: the {what} of a launch cannot be derived from shapes that are not sums of products", self.name),
                help: format!("state it in the family file as [kernel.cost] {what} = \"...\""),
            })
        };
        let cost = Cost {
            bytes_read: match stated(&part.bytes_read, "cost.bytes_read")? {
                Some(d) => d,
                None => derived(&inputs, "bytes_read")?,
            },
            bytes_written: match stated(&part.bytes_written, "cost.bytes_written")? {
                Some(d) => d,
                None => derived(&outputs, "bytes_written")?,
            },
            flops: stated(&part.flops, "cost.flops")?,
        };
        let mut params = params.clone();
        if let Some(p) = &part.part {
            params.insert("part".into(), serde_json::json!(p));
        }
        Ok(KernelPlan {
            part: part.part.clone(),
            sizes: b.sizes.clone(),
            inputs,
            outputs,
            grid,
            threadgroup,
            cuda_threadgroup,
            threadgroup_memory_bytes,
            cuda_shared_memory_bytes,
            cost,
            packed: layouts.values().filter(|l| part.inputs.iter().any(|i| i.packed.as_ref().is_some_and(|(n, _)| *n == *l.name))).cloned().collect(),
            params,
        })
    }

}

/// The index of a size the part uses ([`super::PartDef::sizes_used`] lists every size a buffer
/// holds or is bounded by).
fn size_index(b: &Bindings<'_>, name: &str) -> usize {
    b.size_index(name).expect("the reader checked size names, and the part uses it")
}

fn array_of(name: &str, dtype: kernelgen_contract::Dtype, shape: Vec<Dim>) -> BufferDef {
    BufferDef { name: name.to_string().into(), ..array("", dtype, shape) }
}

/// An axis value as a template sees it (a string, an integer or a boolean).
struct AxisJson<'a>(&'a AxisValue);

impl serde::Serialize for AxisJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AxisValue::Str(v) => s.serialize_str(v),
            AxisValue::Int(v) => s.serialize_i64(*v),
            AxisValue::Bool(v) => s.serialize_bool(*v),
        }
    }
}
