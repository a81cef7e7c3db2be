//! kernelgen-build's tests: every file in this folder is a module of one test binary
//! (`--test integration`).

mod directives;
mod out_dir;

use std::fs;
use std::path::{Path, PathBuf};

/// A one-kernel spec of a bundled family.
pub const TINY: &str = "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n";

/// Writes `text` at `dir/rel`, making its folders.
pub fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

/// kernelgen's repository.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}
