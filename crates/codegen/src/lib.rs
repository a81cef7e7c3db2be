//! kernelgen's generator. Data flows one way, one module per stage:
//!
//! ```text
//! spec/      TOML text (or the proc-macro's tokens) -> spanned tree
//! validate/  tree -> SpecModel, checked against the family's schema
//! expand/    SpecModel -> [Kernel]: axes x geometries, named, planned, limits checked
//! render/    Kernel -> MSL (tera + MLX's assembly), launcher Rust, manifest
//! emit/      rendered tree -> files under generated/ (or a staleness report)
//! ```
//! Both readers of TOML, the spec's (`validate/`) and the family file's (`family/file.rs`),
//! read through [`schema`]'s table cursor.
//! Families ([`family`]) say what each kernel family needs: a family file
//! (`<family>.toml`) and its MSL template beside it (`<family>.metal.tera`);
//! kernelgen's own are bundled from this crate's `families/` folder.
//!
//! [`Config`] is the entry point: the specs, the family folders and the
//! [`Layout`] of the files; `load`, `generate` (no I/O), `write` and `check`.
//! `load` finds and reads the files through [`read_specs`] and [`read_families`].

#![warn(missing_docs)]

mod config;
pub mod diag;
mod discover;
pub mod emit;
mod error;
pub mod expand;
pub mod family;
pub mod model;
pub mod names;
pub mod render;
pub mod schema;
pub mod spec;
pub mod validate;

pub use config::{generate, Config, Generated, Input, Layout};
pub use discover::{read_families, read_specs, MAX_SPEC_BYTES};
pub use error::Error;
pub use family::Families;
pub use validate::validate_all;
