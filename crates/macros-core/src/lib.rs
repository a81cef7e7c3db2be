//! The logic of kernelgen's proc-macros, as an ordinary library so tests and
//! benchmarks can call it (a proc-macro crate can export only macros).
//! `kernelgen-macros` is a shell over [`kernels`] and [`include_specs`].
//!
//! Nothing here parses, validates or renders a spec on its own: both forms
//! end in [`kernelgen_codegen::Config::generate`] and expand to the module text it
//! renders for `generated/rust/<stem>.rs` (in its `Inline` layout: each kernel's
//! MSL inline), lexed into tokens.
//!
//! # `kernels! { ... }`: a spec in Rust syntax
//!
//! The same model and names as a TOML spec (`crates/codegen/src/validate/mod.rs`),
//! written as Rust tokens:
//!
//! ```text
//! kernelgen::kernels! {
//!     /// Attributes and visibility go on the module.
//!     pub mod small_experts;          // required: the module the launchers go in
//!     debug;                          // optional: print the expansion while compiling
//!     family = "expert";              // `family = expert` works too: a bare name is a string
//!     description = "one small expert geometry";
//!     axes {                          // TOML: [axes]
//!         quant = [q4, q8],           // ["q4", "q8"]
//!         dtype = [bf16],
//!         rows_per_threadgroup = [4],
//!     }
//!     exclude = [{ quant = q8, dtype = f32 }];
//!     geometry tiny {                 // TOML: [geometry.tiny]; `geometry.tiny { ... }` is the same
//!         hidden = 256,
//!         intermediate = 128,
//!         slot.q4 {                   // TOML: [geometry.tiny.slot.q4]
//!             bytes = 73728,
//!             gate_weights = 0,
//!             // ...
//!         }
//!     }
//! }
//! ```
//!
//! Entries are `key = value` or `key { ... }` (a table), separated by `,` or
//! `;` (optional after a table). A key is a name, a string or an integer;
//! `a.b` is a dotted key as in TOML and `a b { ... }` names the table `a.b`.
//! Values are strings, integers (`6_144` is fine, suffixes are not), floats,
//! `true`/`false`, bare names (strings), lists `[...]` and tables `{...}`.
//! As in TOML, a table is defined once: put `slot.q4 { ... }` inside
//! `geometry tiny { ... }`, not in a second `geometry tiny.slot.q4` entry.
//! The expansion is `<attrs> <vis> mod <name> { <launcher module> }`; the
//! kernels' `spec` field (and their generated comments) read `kernels!(<name>)`.
//!
//! # `include_specs!("path/to/spec.toml", ...)`
//!
//! Each TOML spec, relative to the calling crate's `CARGO_MANIFEST_DIR`,
//! expands to `pub mod <file stem> { ... }`, exactly the tokens of
//! `generated/rust/<stem>.rs` for the same spec, plus
//! `const _: &str = ::core::include_str!("<absolute path>");` so the crate rebuilds
//! when the file changes. A trailing `debug` argument prints the expansion.
//!
//! # Errors
//!
//! Every problem becomes a compile error with the CLI's wording
//! (`<field>: <message>` and `help: ...`). In `kernels!` it points at the
//! offending tokens: the synthetic TOML text the tokens are rendered into
//! records the span of every token ([`syntax::Synthetic`]), and each
//! diagnostic's byte range maps back through it. In `include_specs!` it
//! points at the path literal and the message starts with `file:line:col`.

#![warn(missing_docs)]

pub mod syntax;

use kernelgen_codegen::diag::Diagnostic;
use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Error, Families, Input, Layout, names, read_specs};
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::quote;
use std::path::{Path, PathBuf};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{LitStr, Token};
pub use syntax::{InlineSpec, Synthetic};

/// `kernels! { ... }`: the module, or the compile errors.
pub fn kernels(input: TokenStream) -> TokenStream {
    match syntax::parse(input).and_then(|spec| expand_inline(&spec)) {
        Ok(tokens) => tokens,
        Err(e) => e.to_compile_error(),
    }
}

/// The `origin` an inline spec records: `kernels!(<name>)`.
pub fn inline_origin(spec: &InlineSpec) -> String {
    format!("kernels!({})", spec.name.unraw())
}

/// Expands a parsed inline spec.
pub fn expand_inline(spec: &InlineSpec) -> syn::Result<TokenStream> {
    expand_inline_as(spec, &inline_origin(spec))
}

/// Expands a parsed inline spec, recording `origin` as where it came from
/// (tests give a bundled spec's origin to compare with `generated/`).
pub fn expand_inline_as(spec: &InlineSpec, origin: &str) -> syn::Result<TokenStream> {
    let stem = spec.name.unraw().to_string();
    if !names::is_identifier(&stem) {
        return Err(syn::Error::new(
            spec.name.span(),
            format!(
                "(module name): module name `{stem}` cannot name a spec\n\
                 help: use lowercase letters, digits and `_`, starting with a letter"
            ),
        ));
    }
    let source = SpecSource {
        display: format!("kernels!({stem})"),
        origin: origin.to_string(),
        stem: stem.clone(),
        text: spec.text.text.clone(),
    };
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_default();
    let (families, family_files) = families_for(&manifest_dir, None).map_err(|e| syn::Error::new(spec.name.span(), e.to_string()))?;
    let hooks = rebuild_hooks(&family_files);
    let module = match module_text(source, &families) {
        Ok(m) => m,
        Err(Error::Spec(diags)) => {
            let errors = diags.0.iter().map(|d| {
                let (first, last) = spec.text.locate(&d.span).unwrap_or((spec.name.span(), spec.name.span()));
                spanning(first, last, inline_message(d))
            });
            return Err(combine(errors).expect("a spec error has at least one diagnostic"));
        }
        Err(e) => return Err(syn::Error::new(spec.name.span(), e.to_string())),
    };
    let body = lex(&module, spec.name.span())?;
    let (attrs, vis, name) = (&spec.attrs, &spec.vis, &spec.name);
    if spec.debug {
        eprintln!(
            "kernels! debug: `mod {stem}` as a TOML spec:\n{}\nkernels! debug: the expansion:\n{} {}mod {stem} {{\n{module}}}\n",
            spec.text.text,
            quote!(#(#attrs)*),
            quote!(#vis),
        );
    }
    Ok(quote! {
        #(#attrs)*
        #vis mod #name {
            #body
            #hooks
        }
    })
}

/// `kernels!` messages: the CLI's `field: message` and `help: ...`; the
/// span says where.
fn inline_message(d: &Diagnostic) -> String {
    // The tokens reached the TOML front end as synthetic text: its syntax
    // errors (a key defined twice) are the user's syntax errors.
    let message = d.message.strip_prefix("TOML syntax error: ").unwrap_or(&d.message);
    with_help(format!("{}: {message}", d.field), d)
}

fn with_help(mut s: String, d: &Diagnostic) -> String {
    if let Some(help) = &d.help {
        s.push_str("\nhelp: ");
        s.push_str(help);
    }
    s
}

/// An error covering the tokens from `first` to `last`.
fn spanning(first: Span, last: Span, message: String) -> syn::Error {
    let tokens: TokenStream =
        [TokenTree::Ident(Ident::new("a", first)), TokenTree::Ident(Ident::new("b", last))].into_iter().collect();
    syn::Error::new_spanned(tokens, message)
}

fn combine(errors: impl IntoIterator<Item = syn::Error>) -> Option<syn::Error> {
    errors.into_iter().reduce(|mut all, e| {
        all.combine(e);
        all
    })
}

/// The families a macro call sees: kernelgen's, those in `families/` beside
/// the spec's folder (`include_specs!`), and those in the calling crate's
/// `families/`; with the files read, so the crate rebuilds when one changes.
pub fn families_for(manifest_dir: &Path, spec: Option<&Path>) -> Result<(Families, Vec<PathBuf>), Error> {
    let config = spec.into_iter().fold(Config::new(), Config::specs);
    let own = manifest_dir.join("families");
    let config = if own.is_dir() { config.families(own) } else { config };
    let families = config.load_families()?;
    let mut files = Vec::new();
    for d in families.iter().filter_map(|f| f.dir.as_ref().map(|dir| (dir, f))) {
        let (dir, f) = d;
        files.push(PathBuf::from(&f.source.display));
        if let Some(name) = f.template.0.rsplit('/').next() {
            files.push(dir.join(name));
        }
    }
    Ok((families, files))
}

/// `const _: &str = include_str!(...)` for each file, so cargo rebuilds the
/// calling crate when one changes.
fn rebuild_hooks(files: &[PathBuf]) -> TokenStream {
    let paths: Vec<String> = files.iter().map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()).display().to_string()).collect();
    quote! { #(const _: &str = ::core::include_str!(#paths);)* }
}

/// The launcher module the generator renders for one spec: the text of
/// `generated/rust/<stem>.rs`, with each kernel's `.metal` text inline where
/// that file `include_str!`s it.
pub fn module_text(source: SpecSource, families: &Families) -> Result<String, Error> {
    let path = format!("rust/{}.rs", source.stem);
    let input = Input { specs: vec![source], families: families.clone() };
    let generated = Config::new().layout(Layout::Inline).generate(input)?;
    Ok(generated.files.get(&path).cloned().unwrap_or_default())
}

fn lex(text: &str, span: Span) -> syn::Result<TokenStream> {
    text.parse::<TokenStream>().map_err(|e| {
        syn::Error::new(span, format!("the generated launcher module does not lex (a kernelgen bug): {e}"))
    })
}

/// The arguments of `include_specs!`: paths, then optionally `debug`.
struct IncludeArgs {
    paths: Vec<LitStr>,
    debug: bool,
}

impl Parse for IncludeArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = IncludeArgs { paths: Vec::new(), debug: false };
        for arg in Punctuated::<IncludeArg, Token![,]>::parse_terminated(input)? {
            match arg {
                IncludeArg::Path(p) => args.paths.push(p),
                IncludeArg::Debug => args.debug = true,
            }
        }
        if args.paths.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "(syntax): name a spec file, relative to the crate's manifest: include_specs!(\"specs/file.toml\")",
            ));
        }
        Ok(args)
    }
}

enum IncludeArg {
    Path(LitStr),
    Debug,
}

impl Parse for IncludeArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitStr) {
            return Ok(IncludeArg::Path(input.parse()?));
        }
        match input.call(Ident::parse_any) {
            Ok(id) if id == "debug" => Ok(IncludeArg::Debug),
            Ok(id) => Err(syn::Error::new(id.span(), "(syntax): expected a spec path (a string) or `debug`")),
            Err(_) => Err(input.error("(syntax): expected a spec path (a string) or `debug`")),
        }
    }
}

/// `include_specs!(...)` in the calling crate (`CARGO_MANIFEST_DIR`).
pub fn include_specs(input: TokenStream) -> TokenStream {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_default();
    include_specs_in(input, &dir)
}

/// `include_specs!(...)` with paths relative to `manifest_dir`.
pub fn include_specs_in(input: TokenStream, manifest_dir: &Path) -> TokenStream {
    let args: IncludeArgs = match syn::parse2(input) {
        Ok(a) => a,
        Err(e) => return e.to_compile_error(),
    };
    let mut out = TokenStream::new();
    let mut errors = Vec::new();
    for lit in &args.paths {
        match expand_include(manifest_dir, lit, args.debug) {
            Ok(tokens) => out.extend(tokens),
            Err(e) => errors.push(e),
        }
    }
    match combine(errors) {
        Some(e) => e.to_compile_error(),
        None => out,
    }
}

/// One TOML spec file, `lit` relative to `manifest_dir`: `pub mod <stem> {
/// <generated/rust/<stem>.rs> const _: &str = ::core::include_str!("<abs>"); }`.
/// Every problem is an error at `lit`, its message starting with
/// `<lit>:line:col`.
pub fn expand_include(manifest_dir: &Path, lit: &LitStr, debug: bool) -> syn::Result<TokenStream> {
    let written = lit.value();
    let path = manifest_dir.join(&written);
    let cannot = |message: String| {
        syn::Error::new(
            lit.span(),
            format!(
                "{written}: cannot read the spec ({}): {message}\nhelp: the path is relative to the crate's manifest directory",
                path.display()
            ),
        )
    };
    if path.is_dir() {
        return Err(cannot("it is a directory; name a spec file".into()));
    }
    let mut sources = read_specs(std::slice::from_ref(&path)).map_err(|e| match e {
        Error::Io { message, .. } => cannot(message),
        other => cannot(other.to_string()),
    })?;
    let mut source = sources.pop().expect("a file path reads as one spec");
    source.display = written.clone();
    let stem = source.stem.clone();
    let (families, family_files) = families_for(manifest_dir, Some(&path)).map_err(|e| syn::Error::new(lit.span(), format!("{written}: {e}")))?;
    let hooks = rebuild_hooks(&family_files);
    let module = match module_text(source, &families) {
        Ok(m) => m,
        Err(Error::Spec(diags)) => {
            let errors = diags.0.iter().map(|d| syn::Error::new(lit.span(), with_help(d.headline(), d)));
            return Err(combine(errors).expect("a spec error has at least one diagnostic"));
        }
        Err(e) => return Err(syn::Error::new(lit.span(), format!("{written}: {e}"))),
    };
    let body = lex(&module, lit.span())?;
    let name = module_ident(&stem, lit.span());
    let absolute = path.canonicalize().unwrap_or(path).display().to_string();
    if debug {
        eprintln!(
            "include_specs! debug: the expansion of {written}:\npub mod {stem} {{\n{module}const _: &str = ::core::include_str!({absolute:?});\n}}\n"
        );
    }
    Ok(quote! {
        pub mod #name {
            #body
            const _: &str = ::core::include_str!(#absolute);
            #hooks
        }
    })
}

/// The module name of a stem the generator accepted (a keyword goes raw).
fn module_ident(stem: &str, span: Span) -> Ident {
    match syn::parse_str::<Ident>(stem) {
        Ok(_) => Ident::new(stem, span),
        Err(_) => Ident::new_raw(stem, span),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: TokenStream) -> InlineSpec {
        syntax::parse(body).unwrap()
    }

    #[test]
    fn module_takes_the_attributes_and_visibility_written() {
        let s = spec(quote! {
            #[allow(dead_code)]
            pub(crate) mod small;
            family = expert;
            axes { quant = [q4] }
            geometry small { hidden = 64, intermediate = 32 }
        });
        assert_eq!(inline_origin(&s), "kernels!(small)");
        let file: syn::File = syn::parse2(expand_inline(&s).unwrap()).unwrap();
        let [syn::Item::Mod(m)] = &file.items[..] else { panic!("one module") };
        assert_eq!(m.ident, "small");
        assert!(matches!(m.vis, syn::Visibility::Restricted(_)));
        assert_eq!(m.attrs.iter().filter(|a| a.path().is_ident("allow")).count(), 1);
        let text = quote!(#m).to_string();
        assert!(text.contains("SMALL_EXPERT_Q4_BF16_R4_GATE_UP"), "{}", &text[..200]);
        assert!(text.contains("\"kernels!(small)\""));
    }

    #[test]
    fn every_problem_is_one_error() {
        let s = spec(quote! {
            mod bad;
            family = expert;
            axes { dtype = [f64], quant = [q5] }
            geometry g { hidden = 250 }
        });
        let messages: Vec<String> = expand_inline(&s).unwrap_err().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:#?}");
        assert!(messages[0].starts_with("axes.quant: \"q5\" is not a value of axis `quant`"), "{messages:#?}");
        assert!(messages[1].starts_with("axes.dtype: \"f64\" is not a value of axis `dtype`"), "{messages:#?}");
        assert!(
            messages[2].starts_with("geometry.g.intermediate: missing required field `intermediate`"),
            "{messages:#?}"
        );
        assert!(messages[2].contains("\nhelp: add `intermediate = ...`"), "{messages:#?}");
    }

    #[test]
    fn debug_flag_and_include_arguments() {
        assert!(spec(quote! { debug, mod a; }).debug);
        assert!(!spec(quote! { mod a; debug = 1; }).debug);
        let err = include_specs_in(quote!(debug), Path::new(".")).to_string();
        assert!(err.contains("name a spec file"), "{err}");
        let err = include_specs_in(quote!("a.toml", verbose), Path::new(".")).to_string();
        assert!(err.contains("expected a spec path (a string) or `debug`"), "{err}");
    }
}
