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

use kernelgen_codegen::{emit, family_dirs_near, generate_with, read_families, read_specs, Options};
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

    /// Where to write (default `$OUT_DIR/kernelgen`).
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
        let specs: Vec<PathBuf> = self.specs.iter().map(at).collect();
        if specs.is_empty() {
            return Err(fail("kernelgen-build: no specs given (Config::specs)"));
        }
        let mut dirs: Vec<PathBuf> = self.families.iter().map(at).collect();
        for near in family_dirs_near(&specs) {
            if !dirs.iter().any(|x| x.canonicalize().ok().as_ref() == Some(&near)) {
                dirs.push(near);
            }
        }
        for p in specs.iter().chain(&dirs) {
            rerun_if_changed(p);
        }
        let sources = read_specs(&specs).map_err(|e| fail(e.to_string()))?;
        let families = read_families(&dirs).map_err(|e| fail(e.to_string()))?;
        let generated = generate_with(sources, &families, Options::default()).map_err(|e| fail(e.to_string()))?;
        if let Some(dir) = &self.check {
            let dir = at(dir);
            let diffs = emit::check(&dir, &generated.files).map_err(|e| fail(e.to_string()))?;
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
        let mut files = generated.files.clone();
        // `include!` takes no inner attributes: the modules' `//!` lines become `//`.
        for (path, text) in files.iter_mut() {
            if path.starts_with("rust/") {
                *text = text.lines().map(|l| l.strip_prefix("//!").map_or(l.to_string(), |rest| format!("//{rest}"))).collect::<Vec<_>>().join("\n") + "\n";
            }
        }
        let mut kernels = String::from("// Generated by kernelgen-build. Do not edit: change the specs or family files.\n\n");
        for path in files.keys().filter(|p| p.starts_with("rust/") && *p != "rust/mod.rs") {
            let module = path.trim_start_matches("rust/").trim_end_matches(".rs");
            kernels.push_str(&format!("pub mod {module} {{\n    include!(concat!(env!(\"OUT_DIR\"), \"/kernelgen/{path}\"));\n}}\n"));
        }
        files.insert("kernels.rs".into(), kernels);
        files.remove("rust/mod.rs");
        emit::write(&out, &files).map_err(|e| fail(e.to_string()))?;
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
