#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kernelgen_msl::{Checker, Options};

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One checker per test binary. Tests need clang: without it they fail with the install hint.
/// The prelude goes under target-msl; no result cache, so every test really runs clang.
pub fn checker() -> &'static Checker {
    static C: OnceLock<Checker> = OnceLock::new();
    C.get_or_init(|| {
        let cache = crate_dir().join("../../target-msl/msl-cache");
        match Checker::new(Options { cache_dir: Some(cache), ..Options::default() }) {
            Ok(c) => c,
            Err(e) => panic!("{e}\n(these tests need clang: `apt-get install -y clang`)"),
        }
    })
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Files under `dir` with extension `ext`, sorted.
pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A checker that declares function constants as Metal does (MLX's headers use them).
pub fn declaring_checker() -> &'static Checker {
    static C: OnceLock<Checker> = OnceLock::new();
    C.get_or_init(|| {
        let cache = crate_dir().join("../../target-msl/msl-cache");
        let opts = Options {
            cache_dir: Some(cache),
            function_constants: kernelgen_msl::FunctionConstants::Declare,
            ..Options::default()
        };
        Checker::new(opts).unwrap_or_else(|e| panic!("{e}\n(these tests need clang: `apt-get install -y clang`)"))
    })
}
