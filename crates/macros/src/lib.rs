//! kernelgen's proc-macros. Use them through the runtime crate with its
//! `macros` feature (`kernelgen::kernels!`, `kernelgen::include_specs!`);
//! the generated code names `::kernelgen`, so the calling crate depends on
//! `kernelgen` under that name. The syntax, the `debug` option and how errors
//! map to tokens are documented in `kernelgen-macros-core`, which holds the
//! logic (and runs the generator library itself: `kernelgen-codegen`).

#![warn(missing_docs)]

use proc_macro::TokenStream;

/// A kernel spec written in Rust syntax, expanded to a module of typed
/// launchers with the MSL embedded:
///
/// ```ignore
/// kernelgen::kernels! {
///     pub mod small;
///     family = "expert";
///     axes { quant = [q4], dtype = [bf16], rows_per_threadgroup = [4] }
///     geometry small { hidden = 64, intermediate = 32 }
/// }
/// // small::SmallExpertQ4Bf16R4::gate_up(&backend, &x, &slot)
/// ```
///
/// The same model and names as a TOML spec: `key = value;`, tables as
/// `key { ... }`, `geometry <name> { ... }` for `[geometry.<name>]`, bare
/// names as strings. `debug;` prints the expansion while compiling. A spec
/// problem is a compile error at the offending token, worded as the CLI
/// words it.
#[proc_macro]
pub fn kernels(input: TokenStream) -> TokenStream {
    kernelgen_macros_core::kernels(input.into()).into()
}

/// TOML spec files, relative to the calling crate's `CARGO_MANIFEST_DIR`,
/// each expanded to `pub mod <file stem> { ... }`: exactly the code
/// `generated/rust/<stem>.rs` holds for the same spec. The crate rebuilds when
/// a file changes. `include_specs!("specs/a.toml", debug)` prints the
/// expansion. A spec problem is a compile error at the path, its message
/// starting with `file:line:col`.
#[proc_macro]
pub fn include_specs(input: TokenStream) -> TokenStream {
    kernelgen_macros_core::include_specs(input.into()).into()
}
