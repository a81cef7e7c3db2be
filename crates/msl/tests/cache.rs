//! The check's caches: a folder only its owner can write, and results named by a keyed hash,
//! so that no one else can plant a verdict.
use std::os::unix::fs::PermissionsExt;

use kernelgen_msl::{Checker, Options};

const DOUBLE: &str = "#include <metal_stdlib>\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  double d = 1;\n  y[i] = d;\n}\n";

fn opts(cache: &std::path::Path) -> Options {
    Options { cache_dir: Some(cache.to_path_buf()), cache_results: true, ..Options::default() }
}

/// A cache folder others can write is refused (as one another user owns: whoever can write
/// it chooses the verdicts), and so is a subfolder in use.
#[test]
fn a_cache_folder_others_can_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Checker::new(opts(&open)).err().expect("a world-writable cache was used");
    assert!(e.to_string().contains("other users") && e.to_string().contains(&open.display().to_string()), "{e}");
    let cache = dir.path().join("cache");
    drop(Checker::new(opts(&cache)).unwrap_or_else(|e| panic!("{e}")));
    let results = cache.join("results");
    std::fs::set_permissions(&results, std::fs::Permissions::from_mode(0o770)).unwrap();
    let e = Checker::new(opts(&cache)).err().expect("a group-writable results folder was used");
    assert!(e.to_string().contains(&results.display().to_string()), "{e}");
    // a folder another user owns (root can give it away: the tests run as root in CI)
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        let e = Checker::new(opts(&theirs)).err().expect("another user's cache was used");
        assert!(e.to_string().contains("another user"), "{e}");
    }
}

/// A result planted under the name anyone can compute from the inputs (the content key) is
/// not the verdict: the check still finds the `double`.
#[test]
fn a_planted_result_is_not_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let c = Checker::new(opts(&cache)).unwrap_or_else(|e| panic!("{e}"));
    let results = cache.join("results");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::write(results.join(c.content_key(DOUBLE, "k.metal", &[])), "kgmsl-result 1\n").unwrap();
    let p = c.check(DOUBLE, "k.metal", &[]).expect_err("the planted result passed a kernel using double");
    assert!(p.iter().any(|p| p.message.contains("double is not supported")), "{p:?}");
    // and the real verdict is cached, under a name of the cache's own
    assert_eq!(c.check(DOUBLE, "k.metal", &[]).unwrap_err(), p);
}
