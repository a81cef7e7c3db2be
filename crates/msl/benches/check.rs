//! The Metal check of one generated kernel, as every emulator load and `kernelgen lint` run
//! it: the prelude precompiled once, no result cache, so every iteration runs clang (on
//! the 2-core development VM, well under 400 ms).

use kernelgen_msl::{Checker, Options};
use std::path::PathBuf;

fn main() {
    divan::main();
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn one_generated_kernel(bencher: divan::Bencher) {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernelgen-msl-bench");
    let checker = Checker::new(Options { cache_dir: Some(cache), ..Options::default() }).unwrap_or_else(|e| panic!("{e}"));
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../generated/metal/affine/small_affine_q3_bf16.metal");
    let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let check = || checker.check(&source, "small_affine_q3_bf16.metal", &[]);
    // the first run builds the prelude, and a kernel that fails is no measurement
    if let Err(problems) = check() {
        panic!("{}: {problems:?}", file.display());
    }
    bencher.bench(check);
}
