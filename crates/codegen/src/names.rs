//! The rules names must follow to become Rust, Metal and file names: spec file
//! stems name modules (`pub mod <stem>;`, `rust/<stem>.rs`), geometry names start
//! kernel names, which the family and axis values continue and which name files
//! (`<kernel>.metal`), statics (upper case) and launcher types (CamelCase); a family
//! file's parts name launcher methods, and its buffers name Metal kernel parameters
//! and Rust arguments. Metal's own words are `kernelgen_msl::vocab`'s.

use kernelgen_msl::vocab;

/// The longest spec file stem or geometry name, in bytes. Kernel names (a
/// geometry name, the family and the axis values) then stay far below the
/// 255-byte limit on file names.
pub const MAX_NAME_LEN: usize = 64;

/// The longest kernel file name, `<kernel>.metal`, most file systems allow.
pub const MAX_FILE_NAME_LEN: usize = 255;

/// Every Rust keyword, strict or reserved, in any edition: none can name a
/// module (`pub mod fn;` does not parse, nor does `r#self`).
pub const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super",
    "trait", "true", "type", "unsafe", "use", "where", "while", // strict, 2015
    "async", "await", "dyn", // strict since 2018
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield",
    "try", "gen", // reserved
];

/// Whether `s` is a Rust keyword (strict or reserved), which no generated name may be.
pub fn is_rust_keyword(s: &str) -> bool {
    RUST_KEYWORDS.contains(&s)
}

/// Lowercase ASCII letters, digits and `_`, starting with a letter.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase()) && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The CamelCase launcher type name of a kernel name: `glm52_expert_q4` ->
/// `Glm52ExpertQ4`. Expansion uses it to find names that collide; the Rust renderer
/// to name the types.
pub fn camel(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// What every launcher module imports, in the two groups its template writes (the contract's
/// types; the launch and packing API): `(path, names)`. No item the module defines may take one
/// of these names, nor one of [`USED_NAMES`].
pub const IMPORTS: [&[(&str, &[&str])]; 2] = [
    &[
        ("::kernelgen::contract", &["BufferDef", "Cost", "Dim", "Dtype", "Format", "KernelDef", "Op", "PackedLayout", "Region", "Source", "TextRange"]),
        ("::std::borrow", &["Cow"]),
    ],
    &[("::kernelgen::backend", &["launch", "Backend"]), ("::kernelgen::launch", &["LaunchError"]), ("::kernelgen::pack", &["pack", "AlignedBytes", "PackError", "RegionData"])],
];

/// The names a launcher module uses besides its imports: its list of kernels, and the prelude's
/// `Result` and `Ok` (an item named so would shadow them).
pub const USED_NAMES: &[&str] = &["KERNELS", "Result", "Ok"];

/// The `KernelDef` static of a kernel (`glm52_expert_q4_bf16_r4_down` ->
/// `GLM52_EXPERT_Q4_BF16_R4_DOWN`).
pub fn kernel_static(kernel: &str) -> String {
    kernel.to_uppercase()
}

/// The launcher type of the kernels of one variant and geometry.
pub fn launcher_type(launcher: &str) -> String {
    camel(launcher)
}

/// The struct a kernel of several outputs returns them in.
pub fn outputs_struct(kernel: &str) -> String {
    format!("{}Outputs", camel(kernel))
}

/// The static holding a packed buffer's layout for one launcher.
pub fn layout_static(launcher: &str, buffer: &str) -> String {
    format!("{}_{}", launcher.to_uppercase(), buffer.to_uppercase())
}

/// The launcher type's constant naming a packed buffer's layout.
pub fn layout_const(buffer: &str) -> String {
    buffer.to_uppercase()
}

/// The launcher type's function that packs a buffer from its regions.
pub fn pack_fn(buffer: &str) -> String {
    format!("pack_{buffer}")
}

/// The launcher method of a kernel: its part, or `launch` for a family of one kernel.
pub fn method(part: Option<&str>) -> String {
    part.unwrap_or("launch").to_string()
}

/// What a generated name is spelled from: what to rename to change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spelled {
    /// Nothing: the launcher module imports or uses it.
    Fixed,
    /// A kernel or launcher name: the geometry and the axis values (and no part).
    Variant(String),
    /// Kernel `index` of the family file, part `name`.
    Part(usize, String),
    /// A packed buffer of the family file.
    Packed(String),
    /// Region `index` (named `name`) of a packed buffer.
    Region(String, usize, String),
    /// An output of a kernel (a field of its outputs struct).
    Output(String),
}

impl Spelled {
    /// What to rename and where, for help lines (`None`: nothing can be).
    fn rename(&self) -> Option<(String, &'static str)> {
        let family = "in the family file";
        match self {
            Spelled::Fixed => None,
            Spelled::Variant(name) => Some((format!("the geometry or an axis value spelling `{name}`"), "")),
            Spelled::Part(_, p) => Some((format!("part `{p}`"), family)),
            Spelled::Packed(b) => Some((format!("packed buffer `{b}`"), family)),
            Spelled::Region(b, _, r) => Some((format!("a region `{r}` of `{b}`"), family)),
            Spelled::Output(o) => Some((format!("output `{o}`"), family)),
        }
    }
}

/// A name the generated Rust defines: its scope (`module`, `impl <Type>`, `fn <Type>::<fn>`,
/// `struct <Type>`), the name, what it is (for messages) and what it is spelled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RustItem {
    /// Where the name is defined.
    pub scope: String,
    /// The name.
    pub name: String,
    /// What defines it (`the launcher type of ...`).
    pub what: String,
    /// What it is spelled from.
    pub spelled: Spelled,
}

/// The names of one kernel, as its launcher module spells them.
pub struct KernelNames<'a> {
    /// The kernel's name without its part (the launcher's).
    pub launcher: &'a str,
    /// The kernel's name.
    pub kernel: &'a str,
    /// Its part: the index of its `[[kernel]]` in the family file, and its name.
    pub part: Option<(usize, &'a str)>,
    /// Its outputs' names.
    pub outputs: Vec<&'a str>,
    /// The packed buffers it reads, with their regions' names.
    pub packed: Vec<(&'a str, Vec<&'a str>)>,
}

/// Every name one kernel's Rust defines (`render::rust` writes these, through the functions
/// above). A launcher's own names come with each of its kernels: defined again alike, they
/// are no collision.
pub fn kernel_items(k: &KernelNames<'_>) -> Vec<RustItem> {
    let item = |scope: &str, name: String, what: String, spelled: Spelled| RustItem { scope: scope.to_string(), name, what, spelled };
    let ty = launcher_type(k.launcher);
    let of_kernel = || k.part.map_or(Spelled::Variant(k.kernel.to_string()), |(i, p)| Spelled::Part(i, p.to_string()));
    let impl_scope = format!("impl {ty}");
    let mut out = vec![
        item("module", ty.clone(), format!("the launcher type of `{}`", k.launcher), Spelled::Variant(k.launcher.to_string())),
        item("module", kernel_static(k.kernel), format!("the `KernelDef` of `{}`", k.kernel), of_kernel()),
        item(&impl_scope, method(k.part.map(|p| p.1)), format!("the launcher method of `{}`", k.kernel), of_kernel()),
    ];
    if k.outputs.len() > 1 {
        let outputs = outputs_struct(k.kernel);
        out.push(item("module", outputs.clone(), format!("the outputs struct of `{}`", k.kernel), of_kernel()));
        for o in &k.outputs {
            out.push(item(&format!("struct {outputs}"), o.to_string(), format!("output `{o}` of `{}`", k.kernel), Spelled::Output(o.to_string())));
        }
    }
    for (buffer, regions) in &k.packed {
        let packed = || Spelled::Packed(buffer.to_string());
        out.push(item("module", layout_static(k.launcher, buffer), format!("the layout of packed buffer `{buffer}` of `{}`", k.launcher), packed()));
        out.push(item(&impl_scope, layout_const(buffer), format!("the layout constant of packed buffer `{buffer}`"), packed()));
        out.push(item(&impl_scope, pack_fn(buffer), format!("the packer of packed buffer `{buffer}`"), packed()));
        for (i, r) in regions.iter().enumerate() {
            let what = format!("the name of region {i} of `{buffer}` (an argument of `{}`)", pack_fn(buffer));
            out.push(item(&format!("fn {ty}::{}", pack_fn(buffer)), r.to_string(), what, Spelled::Region(buffer.to_string(), i, r.to_string())));
        }
    }
    out
}

/// The names one launcher module defines, by scope: one collision check for all of them.
pub struct RustScopes(std::collections::BTreeMap<(String, String), RustItem>);

impl RustScopes {
    /// A module's scopes, holding what it imports and uses.
    pub fn launcher_module() -> Self {
        let mut scopes = RustScopes(Default::default());
        for name in IMPORTS.iter().flat_map(|g| g.iter().flat_map(|(_, names)| names.iter())).chain(USED_NAMES) {
            let what = "a name the launcher module imports or uses".to_string();
            scopes.0.insert(("module".into(), name.to_string()), RustItem { scope: "module".into(), name: name.to_string(), what, spelled: Spelled::Fixed });
        }
        scopes
    }

    /// Defines `item`; if its scope has the name already for something else, that.
    pub fn define(&mut self, item: RustItem) -> Result<(), &RustItem> {
        use std::collections::btree_map::Entry;
        match self.0.entry((item.scope.clone(), item.name.clone())) {
            Entry::Vacant(v) => {
                v.insert(item);
                Ok(())
            }
            // (the same thing again: a launcher's names come with each of its kernels)
            Entry::Occupied(o) if o.get().what == item.what && o.get().spelled == item.spelled => Ok(()),
            Entry::Occupied(o) => Err(o.into_mut()),
        }
    }
}

/// The help for two things of one name: rename what spells either.
pub fn collision_help(a: &RustItem, b: &RustItem) -> String {
    let place = |w: &str| if w.is_empty() { String::new() } else { format!(" {w}") };
    match (a.spelled.rename(), b.spelled.rename()) {
        (Some((x, w)), Some((y, v))) if x == y => format!("rename {x}{}", place(if w == v { w } else { "" })),
        (Some((x, w)), Some((y, v))) if w == v => format!("rename {x} or {y}{}", place(w)),
        (Some((x, w)), Some((y, v))) => format!("rename {x}{} or {y}{}", place(w), place(v)),
        (Some((x, w)), None) | (None, Some((x, w))) => format!("rename {x}{}: `{}` is a name the launcher module imports or uses", place(w), a.name),
        (None, None) => "this is a kernelgen bug".into(),
    }
}

impl RustItem {
    /// The item whose body holds this one's scope (`impl T`, `fn T::f` and `struct T` are in
    /// `T`'s), if any: when two items collide, what is inside the second is not reported again.
    pub fn owner(&self) -> Option<&str> {
        let rest = self.scope.strip_prefix("impl ").or_else(|| self.scope.strip_prefix("struct ")).or_else(|| self.scope.strip_prefix("fn "))?;
        Some(rest.split("::").next().unwrap_or(rest))
    }
}

/// Lowercase ASCII letters, digits and `_`, at least one: a piece of a kernel name (an
/// axis value, the word a boolean or integer axis adds).
pub fn is_name_part(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Names a generated launcher gives its own argument and functions.
pub const LAUNCHER_NAMES: &[&str] = &["backend", "launch", "pack"];

/// Why `s` cannot name an argument, a field or a method of a generated launcher, if it
/// cannot (the names are the family file's buffers, regions and parts).
pub fn rust_reserved(s: &str) -> Option<&'static str> {
    if !is_identifier(s) {
        Some("not snake_case (lowercase letters, digits and `_`, starting with a letter)")
    } else if is_rust_keyword(s) {
        Some("a Rust keyword")
    } else if LAUNCHER_NAMES.contains(&s) {
        Some("a name the generated launcher uses itself")
    } else {
        None
    }
}

/// Why `s` cannot name a parameter of a generated Metal kernel, if it cannot: a C++ or
/// Metal keyword, a Metal type ([`vocab::reserved`]), or an attribute parameter MLX adds
/// to the signature.
pub fn msl_reserved(s: &str) -> Option<&'static str> {
    vocab::reserved(s).or_else(|| vocab::Attribute::from_name(s).map(|_| "a parameter MLX adds to the kernel itself"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_joins_the_parts_capitalized() {
        assert_eq!(camel("glm52_expert_q4_bf16_r4"), "Glm52ExpertQ4Bf16R4");
        assert_eq!(camel("a_1b_c2"), "A1bC2");
        assert_eq!(camel("v2"), camel("v_2"));
        assert_eq!(camel("w_expert"), camel("w__expert"));
    }

    #[test]
    fn reserved_names() {
        for s in ["float", "half4", "float4x4", "int32_t", "bfloat16_t", "device", "thread_position_in_grid", "class"] {
            assert!(msl_reserved(s).is_some(), "{s}");
        }
        for s in ["x", "state_in", "Tin", "weights4", "floaty", "q4"] {
            assert_eq!(msl_reserved(s), None, "{s}");
        }
        for s in ["fn", "self", "backend", "launch", "pack", "Main", "x-y", "9x", ""] {
            assert!(rust_reserved(s).is_some(), "{s}");
        }
        assert_eq!(rust_reserved("gate_up"), None);
        assert!(is_name_part("bf16") && is_name_part("4bit") && !is_name_part("a\"b") && !is_name_part("x/y") && !is_name_part("") && !is_name_part("m\u{e4}in"));
    }

    #[test]
    fn keywords_are_not_identifiers_we_accept() {
        for kw in ["fn", "type", "self", "mod", "gen", "try", "async", "yield"] {
            assert!(is_identifier(kw) && is_rust_keyword(kw), "{kw}");
        }
        assert!(!is_rust_keyword("union") && !is_rust_keyword("experts"));
    }
}
