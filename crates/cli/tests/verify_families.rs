//! `kernelgen verify` of a user's family (tests/planted: family file, template
//! and spec outside kernelgen's families): each planted bug caught with no
//! reference at all, and the family's numpy reference compared when it has one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/planted")
}

/// A copy of the fixture in a temporary folder, its family file's `[verify]`
/// section replaced by `verify` (the family file without one when empty).
pub(crate) fn project(verify: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for sub in ["families", "families/refs", "kernels"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(fixture().join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    let family = dir.path().join("families/planted.toml");
    let text = std::fs::read_to_string(&family).unwrap();
    let head = &text[..text.find("\n[verify]").expect("the fixture has a [verify] section")];
    std::fs::write(&family, format!("{head}\n{verify}")).unwrap();
    dir
}

pub(crate) fn verify(dir: &Path, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
        .current_dir(dir)
        .args(["verify", "--specs", "kernels"])
        .args(args)
        .output()
        .expect("kernelgen runs");
    (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

pub(crate) fn failure<'a>(text: &'a str, kernel: &str) -> &'a str {
    let tag = format!("FAILED w64_planted_{kernel}: ");
    text.lines().find_map(|l| l.strip_prefix(tag.as_str())).unwrap_or_else(|| panic!("no failure for `{kernel}`:\n{text}"))
}

#[test]
fn every_planted_bug_is_caught_without_a_reference() {
    let dir = project("");
    let (code, text) = verify(dir.path(), &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("verify: 1 passed, 4 failed"), "{text}");
    let row = text.lines().find(|l| l.starts_with("w64_planted_none ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(" none "), "no reference, so none: {row}");
    let off_by_one = failure(&text, "off_by_one");
    assert!(off_by_one.contains("`x` at offset 512, past the end of the 512-byte buffer"), "{off_by_one}");
    assert!(off_by_one.contains("w64_planted_off_by_one.metal:"), "names the .metal line: {off_by_one}");
    let barrier = failure(&text, "missing_barrier");
    assert!(barrier.contains("depends on uninitialized threadgroup memory") && barrier.contains("missing barrier"), "{barrier}");
    let unwritten = failure(&text, "unwritten");
    assert!(unwritten.contains("2 elements of output `out` are never written (the first at index 63)"), "{unwritten}");
    let uninit = failure(&text, "uninit_threadgroup");
    assert!(uninit.contains("output `out` depends on uninitialized threadgroup memory (element 63"), "{uninit}");
}

#[test]
fn a_numpy_reference_is_compared_within_the_family_tolerance() {
    let only_none = ["--filter", "*_none"];
    let dir = project("[verify]\nreference = \"refs/planted.py:reference\"\ntolerance = \"exact\"\nsizes = { R = 3 }\n");
    let (code, text) = verify(dir.path(), &only_none);
    assert_eq!(code, 0, "{text}");
    let row = text.lines().find(|l| l.starts_with("w64_planted_none ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("R=3") && row.contains("numpy") && row.contains("exact"), "{row}");

    // One element one ulp off: outside `exact`, inside one ulp.
    let wrong = "[verify]\nreference = \"refs/planted.py:off_by_one_ulp\"\nsizes = { R = 3 }\ntolerance = ";
    let dir = project(&format!("{wrong}\"exact\"\n"));
    let (code, text) = verify(dir.path(), &only_none);
    assert_eq!(code, 1, "{text}");
    let f = failure(&text, "none");
    assert!(f.contains("output `out` element 67: got") && f.contains("(tolerance exact); 1 of 192 elements are outside it"), "{f}");
    let dir = project(&format!("{wrong}{{ ulps = 1 }}\n"));
    let (code, text) = verify(dir.path(), &only_none);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_broken_reference_is_reported_with_its_error() {
    let dir = project("[verify]\nreference = \"refs/planted.py:reference\"\n");
    std::fs::write(dir.path().join("families/refs/planted.py"), "def reference(x, R, params):\n    raise ValueError('not yet')\n").unwrap();
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "{text}");
    assert!(failure(&text, "none").contains("refs/planted.py:reference failed"), "{text}");
    assert!(text.contains("ValueError: not yet"), "the Python error follows: {text}");

    let dir = project("[verify]\nreference = \"refs/planted.py:missing\"\n");
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("has no function `missing`"), "{text}");
}

/// The tutorial's family (examples/softcap_argmax) with its barrier deleted, no reference:
/// an argmax ignores NaN, so NaN poison alone would hide the read; the other poison bytes
/// show it in every kernel with more than one SIMD-group.
#[test]
fn a_deleted_barrier_is_caught_in_a_kernel_that_ignores_nan() {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/softcap_argmax");
    let dir = tempfile::tempdir().unwrap();
    for sub in ["families", "kernels"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(example.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    let template = dir.path().join("families/softcap_argmax.metal.tera");
    let text = std::fs::read_to_string(&template).unwrap();
    let barrier = "  threadgroup_barrier(metal::mem_flags::mem_threadgroup);\n";
    assert_eq!(text.matches(barrier).count(), 1, "the template has one barrier");
    std::fs::write(&template, text.replace(barrier, "")).unwrap();
    let family = dir.path().join("families/softcap_argmax.toml");
    let text = std::fs::read_to_string(&family).unwrap();
    let reference = text.lines().find(|l| l.starts_with("reference = ")).expect("a reference line").to_string();
    std::fs::write(&family, text.replace(&format!("{reference}\n"), "")).unwrap();
    let (code, text) = verify(dir.path(), &[]);
    assert_eq!(code, 1, "{text}");
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAILED ")).collect();
    assert_eq!(failed.len(), 6, "{text}");
    assert!(failed.iter().all(|l| l.contains("uninitialized threadgroup memory") && !l.contains("tiny_")), "{text}");
}

/// A kernel that never ends fails verify at `--timeout`, naming the kernel and the
/// threadgroups still running, and the other kernels are verified as usual.
#[test]
fn a_kernel_that_never_ends_fails_at_the_timeout() {
    let dir = project("");
    let template = dir.path().join("families/planted.metal.tera");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(&template, format!("{text}\n{{%- if bug == \"unwritten\" %}}\n  while (true) {{}}\n{{%- endif %}}\n")).unwrap();
    let start = std::time::Instant::now();
    let (code, text) = verify(dir.path(), &["--timeout", "1"]);
    assert_eq!(code, 1, "{text}");
    assert!(start.elapsed() < std::time::Duration::from_secs(60), "took {:?}", start.elapsed());
    let hang = failure(&text, "unwritten");
    assert!(hang.contains("ran past the time limit of 1 s") && hang.contains("(0, 0, 0)"), "{hang}");
    assert!(text.contains("verify: 1 passed, 4 failed"), "{text}");
}
