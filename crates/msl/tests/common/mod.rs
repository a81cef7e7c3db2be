#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kernelgen_msl::{Checker, Options};

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the tests keep the precompiled prelude and scratch trees (the build's tmp dir).
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernelgen-msl-tests")
}

/// One checker per test binary (default options: function constants declared, as Metal
/// does). Tests need clang: without it they fail with the install hint (`make deps` installs
/// it). No result cache, so every test really runs clang.
pub fn checker() -> &'static Checker {
    static C: OnceLock<Checker> = OnceLock::new();
    C.get_or_init(|| match Checker::new(Options { cache_dir: Some(cache_dir()), ..Options::default() }) {
        Ok(c) => c,
        Err(e) => panic!("{e}\n(these tests need clang: `apt-get install -y clang`, as `make deps` does)"),
    })
}

/// A checker that reports every function constant (`FunctionConstants::Reject`).
pub fn rejecting_checker() -> &'static Checker {
    static C: OnceLock<Checker> = OnceLock::new();
    C.get_or_init(|| {
        let opts = Options {
            cache_dir: Some(cache_dir()),
            function_constants: kernelgen_msl::FunctionConstants::Reject,
            ..Options::default()
        };
        Checker::new(opts).unwrap_or_else(|e| panic!("{e}\n(these tests need clang: `apt-get install -y clang`)"))
    })
}

/// MLX 0.32.2's `include/` directory from the `mlx-metal` wheel, as
/// `crates/emu/tests/mlx-metal/fetch.sh` unpacks it (`make deps` runs it), or
/// `$KERNELGEN_MLX_METAL_INCLUDE`. `None` (the caller skips, printing why) when the headers
/// are absent, unless `$KERNELGEN_MLX_METAL_REQUIRED` is set (as `make test` sets it once
/// the fetch succeeded): then absent headers fail the test.
pub fn mlx_include() -> Option<PathBuf> {
    let dir = std::env::var_os("KERNELGEN_MLX_METAL_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../../target/mlx-metal/mlx-metal-0.32.2/include"));
    if dir.join("mlx/backend/metal/kernels/utils.h").is_file() {
        return Some(dir);
    }
    let why = format!(
        "MLX's Metal headers are not in {} (run crates/emu/tests/mlx-metal/fetch.sh, as `make deps` does, \
         or set KERNELGEN_MLX_METAL_INCLUDE)",
        dir.display()
    );
    if std::env::var_os("KERNELGEN_MLX_METAL_REQUIRED").is_some_and(|v| !v.is_empty()) {
        panic!("{why}; KERNELGEN_MLX_METAL_REQUIRED is set, so this test must not skip");
    }
    println!("skipping: {why}");
    None
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
    checker()
}

/// `f` over `items` on as many threads as the machine has cores (each check is one clang
/// process and a parse of its output), results in the items' order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}
