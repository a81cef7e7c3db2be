//! Why a run of the generator failed: one type for every stage, worded for the command
//! line, the build script and the proc-macros alike.

use crate::diag::Diagnostics;
use crate::emit;
use crate::render::RenderError;
use std::fmt;
use std::path::PathBuf;

/// Why a generation run failed.
#[derive(Debug)]
pub enum Error {
    /// A spec path could not be read.
    Io {
        /// The path that could not be read.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// One or more problems in the specs.
    Spec(Diagnostics),
    /// A template failed to render (a template bug, not a spec problem).
    Render(RenderError),
    /// The spec paths hold no spec file.
    NoSpecs(Vec<PathBuf>),
    /// The output tree could not be written or read.
    Emit(emit::EmitError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, message } => write!(f, "error: {}: {message}", path.display()),
            Error::Spec(d) => write!(f, "{d}"),
            // (a problem located in the template is shown as the specs' are)
            Error::Render(e) if e.location.is_some() => write!(f, "{e}"),
            Error::Render(e) => write!(f, "error: {e}"),
            Error::NoSpecs(paths) => {
                let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(f, "error: no spec files (*.toml) found in {}", paths.join(", "))
            }
            Error::Emit(e) => write!(f, "error: {e}"),
        }
    }
}

impl std::error::Error for Error {}
