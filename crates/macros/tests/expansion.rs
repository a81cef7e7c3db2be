//! The macros' expansions against `generated/`, through the macros' own
//! expansion functions (kernelgen-macros-core):
//! - `include_specs!` of every `specs/*.toml` is exactly the tokens of
//!   `generated/rust/<stem>.rs`, in `pub mod <stem>`, plus the rebuild hook;
//! - every bundled spec rewritten in `kernels!` syntax (from its TOML tree)
//!   reads back to the same tree and expands to the same module;
//! - `include_specs!` problems are errors naming file:line:col.

use kernelgen_codegen::spec::{Entry, Node, Value};
use kernelgen_macros_core::{expand_include, expand_inline_as, syntax};
use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote};
use std::path::{Path, PathBuf};
use syn::LitStr;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn root() -> PathBuf {
    manifest_dir().join("../..").canonicalize().unwrap()
}

/// Every `specs/*.toml` at the time the test runs (other families land while
/// this one is written), sorted.
fn bundled_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(root().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    specs.sort();
    assert!(!specs.is_empty(), "no bundled specs under specs/");
    specs
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The module `generated/rust/<stem>.rs` holds, as tokens (none when the
/// spec generates no kernel), with each `include_str!` of a `.metal` beside
/// it replaced by that file's text: the macros have no file to include.
fn generated(stem: &str) -> TokenStream {
    let path = root().join(format!("generated/rust/{stem}.rs"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    while let Some(at) = text.find("include_str!(\"../metal/") {
        let end = at + text[at..].find(")").unwrap() + 1;
        let relative = &text[at + "include_str!(\"".len()..end - "\")".len()];
        let metal = std::fs::read_to_string(path.parent().unwrap().join(relative)).unwrap();
        text.replace_range(at..end, &kernelgen_codegen::render::rust::raw_string(&metal));
    }
    text.parse().unwrap_or_else(|e| panic!("{} does not lex: {e}", path.display()))
}

/// Where two token strings first differ, with some context.
fn first_difference(got: &str, want: &str) -> String {
    let at = got.bytes().zip(want.bytes()).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    let context =
        |s: &str| String::from_utf8_lossy(&s.as_bytes()[at.saturating_sub(120)..(at + 120).min(s.len())]).into_owned();
    format!("at byte {at}:\n  expansion: ...{}...\n  generated: ...{}...", context(got), context(want))
}

#[test]
fn include_specs_expands_to_generated_for_every_bundled_spec() {
    let mut differences = Vec::new();
    for path in bundled_specs() {
        let stem = stem(&path);
        let written = format!("../../specs/{stem}.toml");
        let lit = LitStr::new(&written, Span::call_site());
        let got = match expand_include(&manifest_dir(), &lit, false) {
            Ok(tokens) => tokens.to_string(),
            Err(e) => {
                differences.push(format!(
                    "{stem}: include_specs! failed: {}",
                    e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
                ));
                continue;
            }
        };
        let body = generated(&stem);
        let name = format_ident!("{stem}");
        let absolute = path.canonicalize().unwrap().display().to_string();
        let want = quote! {
            pub mod #name {
                #body
                const _: &str = ::core::include_str!(#absolute);
            }
        }
        .to_string();
        if got != want {
            differences.push(format!("{stem}: {}", first_difference(&got, &want)));
        }
    }
    assert!(
        differences.is_empty(),
        "include_specs! and generated/ disagree (run `make generate`?):\n{}",
        differences.join("\n")
    );
}

/// A TOML tree written as the body of `kernels!`.
fn as_rust_syntax(stem: &str, root: &Node) -> TokenStream {
    let name = format_ident!("{stem}");
    let mut out = quote!(pub mod #name;);
    for e in root.as_table().unwrap() {
        let k = key(&e.key);
        out.extend(match &e.node.value {
            Value::Table(entries) => {
                let body = entries_tokens(entries);
                quote!(#k { #body })
            }
            _ => {
                let v = value(&e.node);
                quote!(#k = #v;)
            }
        });
    }
    out
}

fn entries_tokens(entries: &[Entry]) -> TokenStream {
    let mut out = TokenStream::new();
    for e in entries {
        let k = key(&e.key);
        out.extend(match &e.node.value {
            Value::Table(inner) => {
                let body = entries_tokens(inner);
                quote!(#k { #body })
            }
            _ => {
                let v = value(&e.node);
                quote!(#k = #v,)
            }
        });
    }
    out
}

fn is_plain_ident(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok() && !matches!(s, "true" | "false")
}

fn key(k: &str) -> TokenStream {
    if is_plain_ident(k) {
        let id = format_ident!("{k}");
        quote!(#id)
    } else {
        let lit = Literal::string(k);
        quote!(#lit)
    }
}

fn value(n: &Node) -> TokenStream {
    match &n.value {
        Value::Int(i) if *i < 0 => {
            let lit = Literal::u64_unsuffixed(i.unsigned_abs());
            quote!(-#lit)
        }
        Value::Int(i) => {
            let lit = Literal::i64_unsuffixed(*i);
            quote!(#lit)
        }
        Value::Float(x) if *x < 0.0 => {
            let lit = Literal::f64_unsuffixed(-x);
            quote!(-#lit)
        }
        Value::Float(x) => {
            let lit = Literal::f64_unsuffixed(*x);
            quote!(#lit)
        }
        Value::Bool(b) => quote!(#b),
        // Bare names where they can be, as a user would write them.
        Value::Str(s) if is_plain_ident(s) => {
            let id = format_ident!("{s}");
            quote!(#id)
        }
        Value::Str(s) => quote!(#s),
        Value::Array(items) => {
            let items = items.iter().map(value);
            quote!([#(#items),*])
        }
        Value::Table(entries) => {
            let body = entries_tokens(entries);
            quote!({ #body })
        }
    }
}

/// The tree without its spans.
fn shape(n: &Node) -> String {
    match &n.value {
        Value::Table(entries) => {
            format!(
                "{{{}}}",
                entries.iter().map(|e| format!("{}: {}", e.key, shape(&e.node))).collect::<Vec<_>>().join(", ")
            )
        }
        Value::Array(items) => format!("[{}]", items.iter().map(shape).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

#[test]
fn kernels_syntax_reads_every_bundled_spec_to_the_same_tree_and_module() {
    let mut differences = Vec::new();
    for path in bundled_specs() {
        let stem = stem(&path);
        let toml_tree = kernelgen_codegen::spec::toml::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let tokens = as_rust_syntax(&stem, &toml_tree);
        let spec = syntax::parse(tokens.clone()).unwrap_or_else(|e| panic!("{stem}: {e}\n{tokens}"));
        let tree = kernelgen_codegen::spec::toml::parse(&spec.text.text).unwrap();
        if shape(&tree) != shape(&toml_tree) {
            differences.push(format!(
                "{stem}: trees differ:\n  kernels!: {}\n  TOML:     {}",
                shape(&tree),
                shape(&toml_tree)
            ));
            continue;
        }
        let got = match expand_inline_as(&spec, &format!("specs/{stem}.toml")) {
            Ok(t) => t.to_string(),
            Err(e) => {
                differences.push(format!("{stem}: kernels! failed: {e}"));
                continue;
            }
        };
        let body = generated(&stem);
        let name = format_ident!("{stem}");
        let want = quote!(pub mod #name { #body }).to_string();
        if got != want {
            differences.push(format!("{stem}: {}", first_difference(&got, &want)));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The messages of `include_specs!(<path>)`, relative to this crate.
fn include_errors(path: &str) -> Vec<String> {
    let lit = LitStr::new(path, Span::call_site());
    match expand_include(&manifest_dir(), &lit, false) {
        Ok(_) => Vec::new(),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn include_specs_reports_file_line_col_at_the_literal() {
    assert_eq!(
        include_errors("tests/specs/bad_dimension.toml"),
        [
            "tests/specs/bad_dimension.toml:6:10: geometry.odd.hidden: hidden = 250 is not a multiple of 8, but a Q4 row is whole 32-bit words of 8 weights\n\
             help: use a multiple of 8, such as 248 or 256",
            "tests/specs/bad_dimension.toml:6:10: geometry.odd.hidden: hidden = 250 is not a multiple of rows_per_threadgroup = 4, so the last threadgroup would be partial\n\
             help: use a multiple of 4, such as 248 or 252, or another rows_per_threadgroup",
        ]
    );
    assert_eq!(
        include_errors("tests/specs/unknown_dtype.toml"),
        [
            "tests/specs/unknown_dtype.toml:3:18: axes.dtype: \"f64\" is not a value of axis `dtype` (activation dtype T of x, mid and out)\n\
          help: use \"bf16\", \"f16\", \"f32\""
        ]
    );
    let syntax = include_errors("tests/specs/bad_syntax.toml");
    assert_eq!(syntax.len(), 1);
    assert!(syntax[0].starts_with("tests/specs/bad_syntax.toml:2:9: (syntax): TOML syntax error: "), "{syntax:?}");
    let missing = include_errors("tests/specs/none.toml");
    assert_eq!(missing.len(), 1);
    assert!(missing[0].starts_with("tests/specs/none.toml: cannot read the spec ("), "{missing:?}");
    assert!(missing[0].ends_with("help: the path is relative to the crate's manifest directory"), "{missing:?}");
    assert!(include_errors("tests/specs").iter().any(|e| e.contains("it is a directory")));
}

#[test]
fn include_specs_names_the_module_after_the_file_and_takes_several_files() {
    let tokens = kernelgen_macros_core::include_specs_in(
        quote!("tests/specs/small.toml", "tests/specs/small_q8.toml", debug),
        &manifest_dir(),
    );
    let file: syn::File = syn::parse2(tokens).unwrap();
    let names: Vec<String> = file
        .items
        .iter()
        .map(|i| match i {
            syn::Item::Mod(m) => m.ident.to_string(),
            other => panic!("expected modules, found {}", quote!(#other)),
        })
        .collect();
    assert_eq!(names, ["small", "small_q8"]);
}
