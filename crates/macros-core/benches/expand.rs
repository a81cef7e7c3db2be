//! Macro expansion time (target: under 20 ms for the largest bundled spec).
//!
//! `include_largest_spec` is the whole of `include_specs!` for the bundled
//! spec with the largest launcher module (chosen when the benchmark runs):
//! read, parse, validate, expand, render, lex. `generate_only` and `lex_only`
//! split it. Lexing here is proc-macro2's own lexer; inside the compiler the
//! macro uses rustc's. `kernels_small` is `kernels!` on a one-geometry spec
//! (the Rust-syntax front end included). `renderer_new` is the fixed cost
//! every expansion pays inside `generate` (tera compiling every template).

use kernelgen_codegen::Families;
use kernelgen_macros_core::{expand_include, kernels, module_text};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use std::path::PathBuf;
use syn::LitStr;

fn main() {
    divan::main();
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../../specs/<stem>.toml` of the bundled spec whose
/// `generated/rust/<stem>.rs` is largest.
fn largest_spec() -> String {
    let root = manifest_dir().join("../..");
    let mut best = (0, String::new());
    for entry in std::fs::read_dir(root.join("specs")).expect("specs/") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let size = std::fs::metadata(root.join(format!("generated/rust/{stem}.rs"))).map_or(0, |m| m.len());
        if size > best.0 {
            best = (size, stem);
        }
    }
    format!("../../specs/{}.toml", best.1)
}

#[divan::bench(args = [largest_spec()])]
fn include_largest_spec(bencher: divan::Bencher, spec: &str) {
    bencher.bench(|| expand_include(&manifest_dir(), &LitStr::new(spec, Span::call_site()), false).unwrap().is_empty());
}

#[divan::bench(args = [largest_spec()])]
fn generate_only(bencher: divan::Bencher, spec: &str) {
    let path = manifest_dir().join(spec);
    bencher.bench(|| {
        let source = kernelgen_codegen::read_specs(std::slice::from_ref(&path)).unwrap().pop().unwrap();
        module_text(source, &Families::bundled()).unwrap().len()
    });
}

#[divan::bench(args = [largest_spec()])]
fn lex_only(bencher: divan::Bencher, spec: &str) {
    let path = manifest_dir().join(spec);
    let source = kernelgen_codegen::read_specs(std::slice::from_ref(&path)).unwrap().pop().unwrap();
    let text = module_text(source, &Families::bundled()).unwrap();
    bencher.bench(|| text.parse::<TokenStream>().unwrap().is_empty());
}

#[divan::bench]
fn kernels_small(bencher: divan::Bencher) {
    let input = quote! {
        pub mod small;
        family = expert;
        axes { quant = [q4, q8], dtype = [bf16], rows_per_threadgroup = [4] }
        geometry small { hidden = 64, intermediate = 32 }
    }
    .to_string();
    bencher.with_inputs(|| input.parse::<TokenStream>().unwrap()).bench_values(|t| kernels(t).is_empty());
}

#[divan::bench]
fn renderer_new() -> bool {
    kernelgen_codegen::render::Renderer::new(Families::bundled().iter()).is_ok()
}
