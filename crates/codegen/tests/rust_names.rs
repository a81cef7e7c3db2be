//! The generated Rust defines every name once in its scope (module, launcher type, function,
//! struct): a name two things would define is an error naming both, before anything is
//! written, not a `generated/` that does not compile.

use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Families, Input, read_families};
use std::collections::BTreeMap;

/// The user families `(name, family file)` with a one-line template each.
fn families(files: &[(&str, String)]) -> Result<Families, String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
        std::fs::write(dir.path().join(format!("{name}.metal.tera")), "  // {{ kernel }}\n  y[0] = x[0];\n").unwrap();
    }
    read_families(&[dir.path().to_path_buf()]).map_err(|e| e.to_string())
}

/// The generated Rust files, or the error's text.
fn generated(families: &Families, spec: &str) -> Result<Vec<(String, String)>, String> {
    let source = SpecSource { display: "specs/s.toml".into(), origin: "specs/s.toml".into(), stem: "s".into(), text: spec.into() };
    let g = Config::new().generate(Input { specs: vec![source], families: families.clone() }).map_err(|e| e.to_string())?;
    Ok(g.files.into_iter().filter(|(p, _)| p.ends_with(".rs")).collect())
}

/// A family with a packed buffer `slot`, one kernel (part `part`, if any) reading it, and the
/// axes `axes` (TOML of `[axes.*]` tables).
fn packed_family(name: &str, axes: &str, part: Option<&str>) -> String {
    format!(
        "family = \"{name}\"\nsummary = \"s\"\n{axes}\n[fields]\nN = {{ range = [1, 4096] }}\n[sizes]\nR = \"rows\"\n\
         [packed.slot]\nbytes = 64\n[[packed.slot.region]]\nname = \"w\"\noffset = 0\nbytes = 16\n\
         [[kernel]]\n{}grid = [\"R * 32\", 1, 1]\nthreadgroup = [32, 1, 1]\n\
         input = [{{ name = \"x\", dtype = \"f32\", shape = [\"R\", \"N\"] }}, {{ name = \"slot\", packed = \"slot\" }}]\n\
         output = [{{ name = \"y\", dtype = \"f32\", shape = [\"R\"] }}]\n",
        part.map_or(String::new(), |p| format!("part = \"{p}\"\n"))
    )
}

/// A boolean axis whose word is the packed buffer's name: the true variant's `KernelDef`
/// static `G_PK_SLOT` is the false variant's layout static `G_PK` + `_SLOT`.
#[test]
fn a_boolean_axis_named_like_the_packed_buffer_is_an_error() {
    let f = families(&[("pk", packed_family("pk", "[axes.masked]\nkind = \"bool\"\nname = \"slot\"\ndefault = [false]\n", None))]).unwrap_or_else(|e| panic!("{e}"));
    let text = generated(&f, "family = \"pk\"\n[axes]\nmasked = [false, true]\n[geometry.g]\nN = 8\n").unwrap_err();
    assert!(text.contains("`G_PK_SLOT`") && text.contains("the generated Rust would not compile"), "{text}");
    assert!(text.contains("packed buffer `slot`") && text.contains("specs/s.toml:"), "{text}");
    // either variant alone is fine
    generated(&f, "family = \"pk\"\n[axes]\nmasked = [true]\n[geometry.g]\nN = 8\n").unwrap_or_else(|e| panic!("{e}"));
}

/// A launcher type that is a name the module imports (`KernelDef`, `LaunchError`).
#[test]
fn a_launcher_named_like_an_import_is_an_error() {
    for (family, geometry, item) in [("def", "kernel", "KernelDef"), ("error", "launch", "LaunchError"), ("layout", "packed", "PackedLayout")] {
        let f = families(&[(family, packed_family(family, "", None))]).unwrap_or_else(|e| panic!("{e}"));
        let text = generated(&f, &format!("family = \"{family}\"\n[geometry.{geometry}]\nN = 8\n")).unwrap_err();
        assert!(text.contains(&format!("`{item}`")) && text.contains("the launcher module imports") && text.contains(&format!("geometry.{geometry}")), "{text}");
    }
}

/// Two axis values that spell one kernel name with different splits (`a_b` + `c`, `a` + `b_c`)
/// are blamed on the axis values, with help that can fix it.
#[test]
fn axis_values_that_spell_one_kernel_name_are_blamed() {
    let axes = "[axes.p]\nvalues = [\"a\", \"a_b\"]\ndefault = [\"a\"]\n[axes.q]\nvalues = [\"c\", \"b_c\"]\ndefault = [\"c\"]\n";
    let f = families(&[("pk", packed_family("pk", axes, None))]).unwrap_or_else(|e| panic!("{e}"));
    let text = generated(&f, "family = \"pk\"\n[axes]\np = [\"a\", \"a_b\"]\nq = [\"c\", \"b_c\"]\n[geometry.g]\nN = 8\n").unwrap_err();
    assert!(text.contains("g_pk_a_b_c"), "{text}");
    assert!(text.contains("axes.") && text.contains("rename one of the values") && !text.contains("rename this geometry"), "{text}");
    assert!(text.contains("specs/s.toml:3:") || text.contains("specs/s.toml:4:"), "at an axis value: {text}");
}

// ------------------------------------------------------------------ random families

/// A deterministic generator (a failure reproduces) that picks names.
struct Rng(kernelgen_reference::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.0.int(0, from.len() as i64 - 1) as usize]
    }
}

/// Names chosen to collide: with each other, with what the launcher module defines itself,
/// and after upper case and CamelCase.
const WORDS: &[&str] = &["slot", "a", "a_1", "a1", "w", "x", "y", "outputs", "kernel", "def", "slot_a", "g", "g_pk", "launch", "pk", "pack_slot", "kernels", "b_c", "a_b", "c", "ok", "result"];

/// A random family file (maybe rejected) and a spec of it with two geometries.
fn random_case(rng: &mut Rng) -> (String, String, String) {
    let family = rng.pick(&["pk", "def", "error", "g", "outputs"]);
    let mut axes = String::new();
    let mut spec_axes = String::new();
    if rng.next() % 2 == 0 {
        let word = rng.pick(WORDS);
        axes.push_str(&format!("[axes.m]\nkind = \"bool\"\nname = \"{word}\"\ndefault = [false]\n"));
        spec_axes.push_str("m = [false, true]\n");
    }
    if rng.next() % 2 == 0 {
        let (v1, v2) = (rng.pick(WORDS), rng.pick(WORDS));
        axes.push_str(&format!("[axes.v]\nvalues = [\"{v1}\", \"{v2}\"]\ndefault = [\"{v1}\"]\n"));
        spec_axes.push_str(&format!("v = [\"{v1}\", \"{v2}\"]\n"));
    }
    let packed = rng.pick(WORDS);
    let regions: Vec<&str> = (0..1 + rng.next() % 3).map(|_| rng.pick(WORDS)).collect();
    let mut text = format!("family = \"{family}\"\nsummary = \"s\"\n{axes}[fields]\nN = {{ range = [1, 4096] }}\n[sizes]\nR = \"rows\"\n[packed.{packed}]\nbytes = 256\n");
    for (i, r) in regions.iter().enumerate() {
        text.push_str(&format!("[[packed.{packed}.region]]\nname = \"{r}\"\noffset = {}\nbytes = 16\n", i * 16));
    }
    let parts: Vec<&str> = (0..1 + rng.next() % 3).map(|_| rng.pick(WORDS)).collect();
    for p in &parts {
        let outputs = if rng.next() % 2 == 0 { "{ name = \"y\", dtype = \"f32\", shape = [\"R\"] }, { name = \"z\", dtype = \"f32\", shape = [\"R\"] }" } else { "{ name = \"y\", dtype = \"f32\", shape = [\"R\"] }" };
        let part = if parts.len() > 1 { format!("part = \"{p}\"\n") } else { String::new() };
        text.push_str(&format!(
            "[[kernel]]\n{part}grid = [\"R * 32\", 1, 1]\nthreadgroup = [32, 1, 1]\ninput = [{{ name = \"x\", dtype = \"f32\", shape = [\"R\", \"N\"] }}, {{ name = \"{packed}\", packed = \"{packed}\" }}]\noutput = [{outputs}]\n"
        ));
    }
    let (g1, g2) = (rng.pick(WORDS), rng.pick(WORDS));
    let mut spec = format!("family = \"{family}\"\n[axes]\n{spec_axes}[geometry.{g1}]\nN = 8\n");
    if g1 != g2 {
        spec.push_str(&format!("[geometry.{g2}]\nN = 16\n"));
    }
    (family.to_string(), text, spec)
}

/// Every name a Rust file defines, by scope: a name twice in one scope is listed.
fn duplicates(file: &syn::File) -> Vec<String> {
    let mut scopes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |scope: &str, name: String| scopes.entry(scope.to_string()).or_default().push(name);
    fn use_names(t: &syn::UseTree, out: &mut Vec<String>) {
        match t {
            syn::UseTree::Path(p) => use_names(&p.tree, out),
            syn::UseTree::Name(n) => out.push(n.ident.to_string()),
            syn::UseTree::Rename(r) => out.push(r.rename.to_string()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|i| use_names(i, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    for item in &file.items {
        match item {
            syn::Item::Static(s) => add("module", s.ident.to_string()),
            syn::Item::Const(c) => add("module", c.ident.to_string()),
            syn::Item::Fn(f) => add("module", f.sig.ident.to_string()),
            syn::Item::Mod(m) => add("module", m.ident.to_string()),
            syn::Item::Struct(s) => {
                add("module", s.ident.to_string());
                for f in &s.fields {
                    add(&format!("struct {}", s.ident), f.ident.as_ref().map_or(String::new(), ToString::to_string));
                }
            }
            syn::Item::Use(u) => {
                let mut names = Vec::new();
                use_names(&u.tree, &mut names);
                names.into_iter().for_each(|n| add("module", n));
            }
            syn::Item::Impl(i) => {
                let syn::Type::Path(ty) = &*i.self_ty else { continue };
                let ty = ty.path.segments.last().map_or(String::new(), |s| s.ident.to_string());
                for x in &i.items {
                    match x {
                        syn::ImplItem::Fn(f) => {
                            add(&format!("impl {ty}"), f.sig.ident.to_string());
                            for arg in &f.sig.inputs {
                                if let syn::FnArg::Typed(t) = arg {
                                    if let syn::Pat::Ident(p) = &*t.pat {
                                        add(&format!("fn {ty}::{}", f.sig.ident), p.ident.to_string());
                                    }
                                }
                            }
                        }
                        syn::ImplItem::Const(c) => add(&format!("impl {ty}"), c.ident.to_string()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (scope, mut names) in scopes {
        names.sort();
        for w in names.windows(2).filter(|w| w[0] == w[1]) {
            out.push(format!("{scope}: `{}` twice", w[0]));
        }
    }
    out.dedup();
    out
}

/// Random families and specs built from names that collide: each is refused with an error,
/// or its generated Rust parses and defines every name once in its scope.
#[test]
fn random_accepted_families_generate_rust_with_unique_names() {
    let mut rng = Rng(kernelgen_reference::SplitMix64::new(0x5eed_2024));
    let mut accepted = 0;
    for case in 0..300 {
        let (family, text, spec) = random_case(&mut rng);
        let Ok(f) = families(&[(&family, text.clone())]) else { continue };
        let Ok(files) = generated(&f, &spec) else { continue };
        accepted += 1;
        for (path, rust) in files {
            let file = syn::parse_file(&rust).unwrap_or_else(|e| panic!("case {case}: {path} does not parse: {e}\n{text}\n{spec}"));
            let dups = duplicates(&file);
            assert!(dups.is_empty(), "case {case}: {path}: {dups:?}\n--- family\n{text}\n--- spec\n{spec}");
        }
    }
    assert!(accepted > 50, "only {accepted} of 300 cases were accepted");
}

/// The generated Rust of an accepted family with hostile docs and names that come close to
/// colliding (parts `a1` and `a_2` with two outputs each, a boolean axis, a packed buffer)
/// compiles against the `kernelgen` crate, docs included (`cargo check` of a crate holding it).
#[test]
#[ignore = "slow (builds a crate against kernelgen): `make test-slow`"]
fn an_accepted_hostile_family_compiles() {
    let family = "family = \"pk\"\nsummary = \"s\"\n[axes.m]\nkind = \"bool\"\nname = \"masked\"\ndefault = [false]\n[fields]\nN = { range = [1, 4096] }\n[sizes]\nR = \"rows\"\n\
        [packed.slot]\nbytes = 64\n[[packed.slot.region]]\nname = \"w\"\ndoc = \"x\\n}\\npub fn evil() {}\\n```\\nfn main() {}\\n```\\n    indented */ <b>\\u2028\\r\"\noffset = 0\nbytes = 16\n\
        [[packed.slot.region]]\nname = \"launch_w\"\noffset = 16\nbytes = 16\n";
    let kernel = |part: &str| format!(
        "[[kernel]]\npart = \"{part}\"\ngrid = [\"R * 32\", 1, 1]\nthreadgroup = [32, 1, 1]\ninput = [{{ name = \"x\", dtype = \"f32\", shape = [\"R\", \"N\"] }}, {{ name = \"slot\", packed = \"slot\" }}]\noutput = [{{ name = \"y\", dtype = \"f32\", shape = [\"R\"] }}, {{ name = \"z\", dtype = \"f32\", shape = [\"R\"] }}]\n"
    );
    let f = families(&[("pk", format!("{family}{}{}", kernel("a1"), kernel("a_2")))]).unwrap_or_else(|e| panic!("{e}"));
    let source = SpecSource { display: "specs/s.toml".into(), origin: "specs/s.toml".into(), stem: "s".into(), text: "family = \"pk\"\n[axes]\nm = [false, true]\n[geometry.g]\nN = 8\n[geometry.g_2]\nN = 16\n".into() };
    let generated = Config::new().generate(Input { specs: vec![source], families: f }).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in &generated.files {
        let file = dir.path().join("generated").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        format!("[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n[dependencies]\nkernelgen = {{ path = {:?}, default-features = false }}\n[workspace]\n", root.display().to_string()),
    )
    .unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "#![deny(warnings)]\n#[path = \"../generated/rust/mod.rs\"]\npub mod kernels;\n").unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = std::process::Command::new(cargo).args(["check", "--offline", "--quiet"]).current_dir(dir.path()).env("CARGO_TARGET_DIR", root.join("target/rust-names-probe")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
