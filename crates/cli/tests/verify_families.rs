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

/// A family file's `rust:<name>` is looked up among kernelgen's Rust references: an unknown
/// name fails at the family file's line, listing the names; a known one that the family's
/// kernels do not fit says what the reference reads and the family lacks.
#[test]
fn a_rust_reference_is_found_by_name() {
    let dir = project("[verify]\nreference = \"rust:expret\"\n");
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "{text}");
    let f = failure(&text, "none");
    let line = std::fs::read_to_string(dir.path().join("families/planted.toml")).unwrap().lines().position(|l| l.starts_with("reference = ")).unwrap() + 1;
    assert!(f.contains(&format!("families/planted.toml:{line}:13: verify.reference: kernelgen has no Rust reference `expret`")), "{f}");
    for name in ["expert", "affine", "delta", "delta_state", "silu_rms_heads", "gated_rms_norm"] {
        assert!(text.contains(&format!("`rust:{name}`")), "lists {name}: {text}");
    }
    let dir = project("[verify]\nreference = \"rust:gated_rms_norm\"\n");
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "{text}");
    assert!(failure(&text, "none").contains("family `planted` plans no string `dtype`"), "{text}");
}

/// `[verify] inputs = { x = { values = [...] } }`: every element of `x` is one of the values,
/// and each of them occurs (the reference sees the kernel's inputs).
#[test]
fn an_input_is_drawn_from_its_value_set() {
    let dir = project("[verify]\nreference = \"refs/planted.py:reference\"\nsizes = { R = 3 }\ninputs = { x = { values = [-1.0, 0.0, 3.0] } }\n");
    let refs = dir.path().join("families/refs/planted.py");
    let text = std::fs::read_to_string(&refs).unwrap();
    let check = "\n\ndef from_the_set(x, R, params):\n    assert sorted(set(x.flatten().tolist())) == [-1.0, 0.0, 3.0], x\n    return reference(x, R, params)\n";
    std::fs::write(&refs, format!("{text}{check}")).unwrap();
    let family = dir.path().join("families/planted.toml");
    let text = std::fs::read_to_string(&family).unwrap();
    std::fs::write(&family, text.replace("refs/planted.py:reference", "refs/planted.py:from_the_set")).unwrap();
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(" numpy "), "{text}");
}

/// `--no-reference`: the properties only, whatever reference the family names. A numpy
/// reference that would fail (or could not even run) is not called; every planted bug is
/// still caught; a bundled kernel still gets the inputs its Rust reference draws.
#[test]
fn no_reference_checks_the_properties_only() {
    let dir = project("[verify]\nreference = \"refs/planted.py:off_by_one_ulp\"\nsizes = { R = 3 }\n");
    std::fs::write(dir.path().join("families/refs/planted.py"), "raise SystemExit('this reference must not run')\n").unwrap();
    let (code, text) = verify(dir.path(), &["--filter", "*_none", "--no-reference"]);
    assert_eq!(code, 0, "{text}");
    let row = text.lines().find(|l| l.starts_with("w64_planted_none ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("R=3") && row.contains(" skipped "), "{row}");
    assert!(text.contains("no reference is called (--no-reference)"), "{text}");
    let (code, text) = verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "without the flag the reference runs: {text}");
    let (code, text) = verify(dir.path(), &["--no-reference"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("verify: 1 passed, 4 failed"), "{text}");

    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
        .current_dir(&repo)
        .args(["verify", "--no-reference", "--filter", "head128x_gated_rms_norm_f32"])
        .output()
        .expect("kernelgen runs");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let row = text.lines().find(|l| l.starts_with("head128x_gated_rms_norm_f32 ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("R=3") && row.contains(" skipped "), "the Rust reference's sizes, its models not run: {row}");
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
    let (code, text) = verify(dir.path(), &["--no-reference"]);
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
