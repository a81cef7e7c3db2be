//! `kernelgen verify` of a family with both bodies (tests/planted_cuda: a warp-shuffle and
//! shared-memory row sum): each body verified as its own row on the same inputs, the CUDA one
//! as `<kernel> [cuda]`, and each bug planted in the CUDA body caught, named by that row and,
//! where the emulator stops at it, by the .cu file's line.

use crate::verify_families::{copy_project, verify};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of tests/planted_cuda in a temporary folder.
fn project() -> tempfile::TempDir {
    copy_project(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/planted_cuda"), &["families", "families/refs", "kernels"])
}

/// The failure of the CUDA body of `w64_warpsum_<bug>`.
fn cuda_failure<'a>(text: &'a str, bug: &str) -> &'a str {
    let tag = format!("FAILED w64_warpsum_{bug} [cuda]: ");
    text.lines().find_map(|l| l.strip_prefix(tag.as_str())).unwrap_or_else(|| panic!("no failure for the CUDA body of `{bug}`:\n{text}"))
}

/// The line of the .cu file that holds `text` (1-based), read from what the generator wrote.
fn cu_line(dir: &Path, bug: &str, text: &str) -> String {
    let path = format!("generated/cuda/warpsum/w64_warpsum_{bug}.cu");
    let source = std::fs::read_to_string(dir.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let line = source.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{path} has no `{text}`")) + 1;
    format!("{path}:{line}:")
}

#[test]
fn both_bodies_are_verified_and_every_planted_cuda_bug_is_caught() {
    let dir = project();
    let generated = Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir.path()).args(["generate", "--specs", "kernels"]).output().expect("kernelgen runs");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let (code, text) = verify(dir.path(), &[]);
    assert_eq!(code, 1, "{text}");
    // six Metal bodies (all correct) and the correct CUDA body pass: one count per body
    assert!(text.contains("verify: 7 passed, 5 failed"), "{text}");
    for bug in ["none", "missing_syncthreads", "off_by_one", "shuffle_mask", "shuffle_width", "odd_width"] {
        let metal = text.lines().find(|l| l.starts_with(&format!("w64_warpsum_{bug} "))).unwrap_or_else(|| panic!("no Metal row for {bug}:\n{text}"));
        assert!(metal.contains("R=3") && metal.contains("numpy") && metal.contains("exact"), "{metal}");
    }
    let cuda = text.lines().find(|l| l.starts_with("w64_warpsum_none [cuda] ")).unwrap_or_else(|| panic!("no CUDA row:\n{text}"));
    assert!(cuda.contains("R=3") && cuda.contains("numpy") && cuda.contains("exact"), "the same case and reference: {cuda}");

    // the threadgroup-memory check names the array, both accesses' lines and the barrier
    let barrier = cuda_failure(&text, "missing_syncthreads");
    assert!(barrier.contains("data race on element") && barrier.contains("threadgroup array `partial`") && barrier.contains("(__syncthreads())"), "{barrier}");
    assert!(barrier.matches("generated/cuda/warpsum/w64_warpsum_missing_syncthreads.cu:").count() >= 3, "the declaration and both accesses: {barrier}");
    let off_by_one = cuda_failure(&text, "off_by_one");
    assert!(off_by_one.contains("`x` at offset 768, past the end of the 768-byte buffer"), "{off_by_one}");
    assert!(off_by_one.contains(&cu_line(dir.path(), "off_by_one", "+ i + 1]")), "names the .cu line: {off_by_one}");
    let mask = cuda_failure(&text, "shuffle_mask");
    assert!(mask.contains("with mask 0x0000ffff, which leaves out the calling lane 16"), "{mask}");
    assert!(mask.contains(&cu_line(dir.path(), "shuffle_mask", "__shfl_xor_sync(0xffffu")), "names the .cu line: {mask}");
    let odd = cuda_failure(&text, "odd_width");
    assert!(odd.contains("with width 24") && odd.contains(&cu_line(dir.path(), "odd_width", "offset, 24)")), "{odd}");
    // a width of 16 is valid CUDA that sums the wrong lanes: the reference catches it
    let width = cuda_failure(&text, "shuffle_width");
    assert!(width.contains("output `sums` element 0: got") && width.contains("(tolerance exact); 3 of 3 elements are outside it"), "{width}");
}
