//! Generating kernelgen's launchers from a build script, in the style of
//! prost-build and tonic-build: the specs and family files of a crate become
//! typed launchers in `OUT_DIR`, rebuilt when any of them changes.
//!
//! `build.rs`:
//! ```no_run
//! fn main() -> std::io::Result<()> {
//!     kernelgen_build::Config::new().specs("kernels/specs").compile()
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
    specs: Vec<PathBuf>,
    families: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    check: Option<PathBuf>,
}

fn fail(message: impl Into<String>) -> io::Error {
    io::Error::other(message.into())
}

impl Config {
    /// A configuration with no specs yet (add them with [`Config::specs`]).
    pub fn new() -> Self {
        Config::default()
    }

    /// A spec file, or a folder of `*.toml` specs (repeatable), relative to
    /// the crate's root.
    pub fn specs(mut self, path: impl AsRef<Path>) -> Self {
        self.specs.push(path.as_ref().to_path_buf());
        self
    }

    /// A folder of family files besides the one beside the specs (repeatable).
    pub fn families(mut self, dir: impl AsRef<Path>) -> Self {
        self.families.push(dir.as_ref().to_path_buf());
        self
    }

    /// Where to write (default `$OUT_DIR/kernelgen`). `kernels.rs` there includes the
    /// other generated files by paths relative to itself: `include!` it from this folder.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Check a committed generated folder instead of writing to `OUT_DIR`:
    /// [`compile`](Config::compile) fails when it is stale.
    pub fn check(mut self, dir: impl AsRef<Path>) -> Self {
        self.check = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Generates (or checks), printing `cargo:rerun-if-changed` for every
    /// spec, family file and template read.
    pub fn compile(self) -> io::Result<()> {
        let root = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
        let at = |p: &PathBuf| if p.is_absolute() { p.clone() } else { root.join(p) };
        if self.specs.is_empty() {
            return Err(fail("kernelgen-build: no specs given (Config::specs)"));
        }
        let generator = self.specs.iter().map(at).fold(Generator::new(), Generator::specs);
        let generator = self.families.iter().map(at).fold(generator, Generator::families);
        for p in generator.spec_paths().iter().chain(&generator.family_dirs()) {
            rerun_if_changed(p);
        }
        if let Some(dir) = &self.check {
            let dir = at(dir);
            let (_, diffs) = generator.check(&dir).map_err(|e| fail(e.to_string()))?;
            if !diffs.is_empty() {
                let list: Vec<String> = diffs.iter().map(|d| format!("  {d}")).collect();
                return Err(fail(format!("{} is not what the specs generate:\n{}\nregenerate it with `kernelgen generate --specs ... --out {}`", dir.display(), list.join("\n"), dir.display())));
            }
            return Ok(());
        }
        let out = match &self.out_dir {
            Some(d) => at(d),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| fail("OUT_DIR is not set: call compile() from a build script, or give Config::out_dir"))?).join("kernelgen"),
        };
        generator.layout(Layout::OutDir).write(&out).map_err(|e| fail(e.to_string()))?;
        Ok(())
    }
}

/// Every file under `path` (or `path` itself), for cargo.
fn rerun_if_changed(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                rerun_if_changed(&p);
            } else {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
