//! Stage 1: read a spec into a spanned tree. Nothing is checked here but syntax.

pub mod toml;
pub mod tree;

pub use tree::{Entry, Node, Span, Value};

/// A spec's source: where it came from and its text.
#[derive(Clone, Debug)]
pub struct SpecSource {
    /// The path as the user named it, for messages.
    pub display: String,
    /// A stable name recorded in generated files: `specs/<file>.toml`,
    /// independent of the working directory.
    pub origin: String,
    /// The file stem, used as the Rust module name of its launchers.
    pub stem: String,
    /// The spec's text.
    pub text: String,
}
