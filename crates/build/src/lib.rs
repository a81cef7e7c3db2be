//! Generating kernelgen's launchers from a build script, in the style of
//! prost-build and tonic-build: the specs and family files of a crate become
//! typed launchers in `OUT_DIR`, rebuilt when any of them changes.
//!
//! `build.rs`:
//! ```no_run
//! fn main() {
//!     // As text: an error returned from `main` would print Debug-escaped.
//!     if let Err(e) = kernelgen_build::Config::new().specs("kernels/specs").compile() {
//!         eprintln!("{e}");
//!         std::process::exit(1);
//!     }
//! }
//! ```
//! `src/lib.rs`:
//! ```ignore
//! pub mod kernels {
//!     include!(concat!(env!("OUT_DIR"), "/kernelgen/kernels.rs"));
//! }
//! // kernels::<spec>::<Launcher>::<part>(&backend, ...)
//! ```
//! Family files are found in a `families/` folder beside the specs folder
//! (`kernels/families/` for `kernels/specs/`) and in any folder given with
//! [`Config::families`]. A problem in a spec or a family file fails the build
//! with the file, line, column and field.
//!
//! A crate that commits its generated folder (to review shader diffs, as
//! kernelgen itself does) calls [`Config::check`] instead: the build then fails
//! when the folder is not exactly what the specs generate, naming each stale,
//! missing or orphaned file and the command that regenerates it.

#![warn(missing_docs)]

use kernelgen_codegen::{Config as Generator, Layout};
use std::io;
use std::path::{Path, PathBuf};

/// What to generate, and where.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The specs and family folders, resolved against the crate's root.
    generator: Generator,
    out_dir: Option<PathBuf>,
    check: Option<PathBuf>,
}

fn fail(message: impl Into<String>) -> io::Error {
    io::Error::other(message.into())
}

/// `path` relative to the crate's root (`CARGO_MANIFEST_DIR`, set for build scripts).
fn in_crate(path: &Path) -> PathBuf {
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    root.join(path)
}

impl Config {
    /// A configuration with no specs yet (add them with [`Config::specs`]).
    pub fn new() -> Self {
        Config::default()
    }

    /// A spec file, or a folder of `*.toml` specs (repeatable), relative to
    /// the crate's root.
    pub fn specs(self, path: impl AsRef<Path>) -> Self {
        Config { generator: self.generator.specs(in_crate(path.as_ref())), ..self }
    }

    /// A folder of family files besides the one beside the specs (repeatable).
    pub fn families(self, dir: impl AsRef<Path>) -> Self {
        Config { generator: self.generator.families(in_crate(dir.as_ref())), ..self }
    }

    /// Where to write (default `$OUT_DIR/kernelgen`). `kernels.rs` there includes the
    /// other generated files by paths relative to itself: `include!` it from this folder.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(in_crate(dir.as_ref()));
        self
    }

    /// Check a committed generated folder instead of writing to `OUT_DIR`:
    /// [`compile`](Config::compile) fails when it is stale.
    pub fn check(mut self, dir: impl AsRef<Path>) -> Self {
        self.check = Some(in_crate(dir.as_ref()));
        self
    }

    /// Generates (or checks), printing `cargo:rerun-if-changed` for each spec path and
    /// family folder and everything under them, and a `cargo:warning` for what an
    /// earlier run left that could not be removed. A path whose name holds a control
    /// character or is not UTF-8 is refused before anything is printed: nothing from a
    /// file name reaches cargo's directives. The error's text (its `Display`) names the
    /// file, line, column and field of each problem; print it with `eprintln!("{e}")`.
    pub fn compile(self) -> io::Result<()> {
        let generator = self.generator;
        if generator.spec_paths().is_empty() {
            return Err(fail("kernelgen-build: no specs given (Config::specs)"));
        }
        // Every path is checked before the first line is printed.
        let roots: Vec<PathBuf> = generator.spec_paths().iter().cloned().chain(generator.family_dirs()).collect();
        let watched = watched(&roots).iter().map(|p| directive_text(p).map(str::to_owned)).collect::<io::Result<Vec<_>>>()?;
        for path in watched {
            println!("cargo:rerun-if-changed={path}");
        }
        if let Some(dir) = &self.check {
            let (_, diffs) = generator.check(dir).map_err(|e| fail(e.to_string()))?;
            if !diffs.is_empty() {
                let list: Vec<String> = diffs.iter().map(|d| format!("  {d}")).collect();
                return Err(fail(format!("{} is not what the specs generate:\n{}\nregenerate it with `kernelgen generate --specs ... --out {}`", dir.display(), list.join("\n"), dir.display())));
            }
            return Ok(());
        }
        let out = match self.out_dir {
            Some(d) => d,
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| fail("OUT_DIR is not set: call compile() from a build script, or give Config::out_dir"))?).join("kernelgen"),
        };
        let (_, written) = generator.layout(Layout::OutDir).write(&out).map_err(|e| fail(e.to_string()))?;
        for warning in written.warnings {
            println!("cargo:warning={}", one_line(&warning));
        }
        Ok(())
    }
}

/// Each of `roots` and everything under it, for cargo; symbolic links are listed, not
/// followed (a link to a parent folder would never end).
fn watched(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = roots.iter().rev().cloned().collect();
    while let Some(path) = stack.pop() {
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        out.push(path.clone());
        if let Some(entries) = is_dir.then(|| std::fs::read_dir(&path).ok()).flatten() {
            let mut inside: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            inside.sort_unstable_by(|a, b| b.cmp(a));
            stack.extend(inside);
        }
    }
    out
}

/// A path as the value of one `cargo:` line. A control character (a newline would start a
/// directive of its own, such as `cargo:rustc-link-arg=...`) or a name that is not UTF-8
/// (cargo would watch another path) is refused, naming the path escaped.
fn directive_text(path: &Path) -> io::Result<&str> {
    match path.to_str() {
        Some(text) if !text.contains(char::is_control) => Ok(text),
        _ => Err(fail(format!(
            "kernelgen-build: refusing the path \"{}\": a name with a control character (a newline, a carriage return) \
             or that is not UTF-8 cannot be given to cargo to watch (cargo:rerun-if-changed); rename it",
            path.display().to_string().escape_debug()
        ))),
    }
}

/// `text` on one line: control characters escaped, so it is one `cargo:` directive.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_one_line() {
        assert_eq!(one_line("left\ncargo:rustc-link-arg=x\r\u{1b}"), "left\\ncargo:rustc-link-arg=x\\r\\u{1b}");
        assert_eq!(one_line("plain text, ünïcode"), "plain text, ünïcode");
    }
}
