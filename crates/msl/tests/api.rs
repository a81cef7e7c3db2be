//! The API around a check: errors without clang, content keys, the result cache. (The check's
//! time is a benchmark: `benches/check.rs`.)
use crate::common;

use kernelgen_msl::{Checker, Error, Options};

const KERNEL: &str = "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  y[i] = metal::exp(y[i]);\n}\n";

#[test]
fn a_missing_clang_is_a_one_line_error() {
    let opts = Options { clang: Some("/nonexistent/clang".into()), ..Options::default() };
    match Checker::new(opts) {
        Err(Error::ClangNotFound(m)) => {
            assert!(m.contains("apt-get install -y clang"), "{m}");
            assert!(!m.contains('\n'), "{m}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a checker without clang"),
    }
}

#[test]
fn content_key_follows_the_inputs() {
    let c = common::checker();
    let a = c.content_key(KERNEL, "k.metal", &[]);
    assert_eq!(a, c.content_key(KERNEL, "k.metal", &[]));
    assert_ne!(a, c.content_key(&KERNEL.replace("exp", "log"), "k.metal", &[]));
    assert_ne!(a, c.content_key(KERNEL, "other.metal", &[]));
}

/// A fresh folder for test `name` and in it a script that runs `prefix(folder)` (shell lines),
/// then the checker's clang with its arguments: a clang whose runs a test can see or change.
fn wrapped_clang(name: &str, prefix: impl FnOnce(&std::path::Path) -> String) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    // in the build's own tmp dir: a system /tmp may be mounted noexec
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("kgmsl-{name}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = dir.join(format!("{name}-clang"));
    let script = format!("#!/bin/sh\n{}\nexec '{}' \"$@\"\n", prefix(&dir), common::checker().clang_path().display());
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, wrapper)
}

/// A cache hit gives the same problems and runs no clang: the checker's clang is a script that
/// counts its runs.
#[test]
fn cached_results_are_reused_and_equal() {
    let (dir, wrapper) = wrapped_clang("cache", |dir| format!("echo run >> '{}'", dir.join("runs").display()));
    let runs = dir.join("runs");
    let count = || std::fs::read_to_string(&runs).map_or(0, |t| t.lines().count());
    let opts = Options { clang: Some(wrapper.clone()), cache_dir: Some(dir.join("cache")), cache_results: true, ..Options::default() };
    let c = Checker::new(opts).unwrap_or_else(|e| panic!("{e}"));
    let bad = KERNEL.replace("y[i] = ", "double d = 1; y[i] = ");
    let before = count();
    let first = c.check(&bad, "k.metal", &[]).unwrap_err();
    let after_first = count();
    assert!(after_first > before, "the first check ran no clang: the wrapper is not in use");
    let second = c.check(&bad, "k.metal", &[]).unwrap_err();
    assert_eq!(count(), after_first, "a cache hit ran clang");
    assert_eq!(first, second);
    assert!(c.check(KERNEL, "k.metal", &[]).is_ok());
    let after_ok = count();
    assert!(c.check(KERNEL, "k.metal", &[]).is_ok());
    assert_eq!(count(), after_ok, "a cache hit ran clang");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input gives problems, never a panic: truncated sources, stray bytes, unbalanced
/// brackets and attributes, non-ASCII text.
#[test]
fn bad_input_is_reported_not_a_panic() {
    let c = common::checker();
    let mut cases: Vec<String> = vec![
        String::new(),
        "[[".into(),
        "[[kernel]]".into(),
        "[[kernel]] void k(device float* x [[buffer(".into(),
        "template [[host_name(\"x\")]] [[kernel".into(),
        "threadgroup".into(),
        "void f() { threadgroup float a[; }".into(),
        "void f() { float4 v = float4(1, 2".into(),
        "/* unterminated".into(),
        "\"unterminated string".into(),
        "#include <metal_stdlib>\n#define X(a) [[kernel]] void a(\nX(k)".into(),
        "constant bool b [[function_constant(".into(),
        "é ü 中文 \u{1F600} [[kernel]] void k() {}".into(),
        "\\\n\\\n#".into(),
    ];
    // Every prefix of a real kernel.
    let k = KERNEL;
    cases.extend((0..k.len()).step_by(7).filter(|&i| k.is_char_boundary(i)).map(|i| k[..i].to_string()));
    for src in &cases {
        // Either outcome is fine; a panic fails the test.
        let _ = c.check(src, "bad.metal", &[]);
    }
}

/// Function constants are declared by default (valid MSL, section 5.8); `Reject` reports
/// each declaration at its line.
#[test]
fn function_constants_are_declared_by_default_and_rejected_on_request() {
    let f = common::crate_dir().join("tests/valid/function_constant.metal");
    let src = common::read(&f);
    assert!(common::checker().check(&src, "fc.metal", &[]).is_ok());
    let p = common::rejecting_checker().check(&src, "fc.metal", &[]).unwrap_err();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!((p[0].line, p[0].col), (7, 26), "{}", p[0]);
    assert!(p[0].message.contains("function constants ([[function_constant(n)]], MSL 5.8) are not supported"), "{}", p[0]);
}

/// `check_with`'s defines reach the preprocessor and the cache key; a define of
/// `__METAL_VERSION__` checks at that version.
#[test]
fn defines_select_code_and_the_metal_version() {
    let c = common::checker();
    // (The token rules see every line, selected or not; clang's AST only the selected
    // branch, so select on something only clang can see.)
    let src = "#include <metal_stdlib>\n#ifdef BAD\n#define T constant float\n#else\n#define T device float\n#endif\n\
               [[kernel]] void k(T* x [[buffer(0)]], device float* y [[buffer(1)]]) {\n  device float* p = x;\n  y[0] = p[0];\n}\n";
    let defines = [("BAD".to_string(), None)];
    assert_ne!(c.content_key_with(src, "d.metal", &[], &defines), c.content_key(src, "d.metal", &[]));
    assert!(c.check(src, "d.metal", &[]).is_ok());
    let p = c.check_with(src, "d.metal", &[], &defines).unwrap_err();
    assert!(!p.is_empty() && p.iter().all(|p| p.line == 8), "{p:?}");
    // `__METAL_VERSION__`: lambdas are Metal 3.2's (MSL section 1.5).
    let lambda = "#include <metal_stdlib>\n[[kernel]] void k(device float* y [[buffer(0)]]) {\n  auto f = [](float v) { return v * 2.0f; };\n  y[0] = f(y[0]);\n}\n";
    let v = |v: &str| [("__METAL_VERSION__".to_string(), Some(v.to_string()))];
    assert!(c.check_with(lambda, "l.metal", &[], &v("310")).unwrap_err().iter().any(|p| p.line == 3));
    assert!(c.check_with(lambda, "l.metal", &[], &v("320")).is_ok());
    assert!(c.check_with(lambda, "l.metal", &[], &v("400")).is_ok());
    let bad = c.check_with(lambda, "l.metal", &[], &v("four")).unwrap_err();
    assert!(bad[0].message.contains("__METAL_VERSION__"), "{bad:?}");
}

/// A `"header"` that is not found is clang's error at its line (it is not the standard
/// library: dropping it would pass a file whose code was never read); a foreign `<header>`
/// is the section 1.5 rule's, reported once.
#[test]
fn a_missing_quoted_header_is_reported_at_its_line() {
    let c = common::checker();
    let quoted = KERNEL.replace("using namespace metal;\n", "using namespace metal;\n#include \"no/such/header.h\"\n");
    let problems = c.check(&quoted, "q.metal", &[]).unwrap_err();
    assert!(
        problems.iter().any(|p| p.line == 3 && p.message.contains("no/such/header.h") && p.message.contains("not found")),
        "{problems:?}"
    );
    let angle = KERNEL.replace("using namespace metal;\n", "using namespace metal;\n#include <cmath>\n");
    let problems = c.check(&angle, "a.metal", &[]).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].line == 3 && problems[0].message.contains("standard library"), "{problems:?}");
}

/// A clang that hangs is stopped after `Options::timeout`: the check fails with one problem
/// saying so, soon, and the failure is not kept as the source's result.
#[test]
fn a_hanging_clang_is_stopped_at_the_timeout() {
    // the real clang for --version and the prelude; the check itself hangs while `hang` exists
    let (dir, wrapper) = wrapped_clang("timeout", |dir| {
        format!("for a in \"$@\"; do [ \"$a\" = -ast-dump=json ] && [ -e '{}' ] && exec sleep 60; done", dir.join("hang").display())
    });
    let hang = dir.join("hang");
    std::fs::write(&hang, "").unwrap();
    let opts = Options {
        clang: Some(wrapper),
        cache_dir: Some(dir.join("cache")),
        cache_results: true,
        timeout: std::time::Duration::from_secs(1),
        ..Options::default()
    };
    let c = Checker::new(opts).unwrap_or_else(|e| panic!("{e}"));
    let start = std::time::Instant::now();
    let problems = c.check(KERNEL, "k.metal", &[]).unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "the check waited for the hanging clang");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].message.contains("did not finish checking k.metal within 1 s"), "{}", problems[0].message);
    // once clang answers, the source checks clean: the timeout was not cached
    std::fs::remove_file(&hang).unwrap();
    assert_eq!(c.check(KERNEL, "k.metal", &[]), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What Metal accepts where clang's OpenCL rules do not (tests/valid: scalar_vector_rank,
/// cstyle_vector_cast, half_picks_float_over_bfloat) stays an error just beside it: a C-style
/// cast between vectors of different lengths, and a call two non-bfloat overloads make
/// ambiguous (g++ rejects both too, so they are not in tests/invalid).
#[test]
fn metal_conversions_stop_where_metal_stops() {
    let c = common::checker();
    let body = |b: &str, decls: &str| {
        format!(
            "#include <metal_stdlib>\nusing namespace metal;\n{decls}\n[[kernel]] void k(device float4* y [[buffer(0)]], device half2* x [[buffer(1)]], uint i [[thread_position_in_grid]]) {{\n  {b}\n}}\n"
        )
    };
    let cases = [
        (body("y[i] = (float4)x[i];", ""), "of different size"),
        (
            body("y[i].x = float(twice(int(i)));", "inline float twice(float v) { return 2.0f * v; } inline half twice(half v) { return v; }"),
            "is ambiguous",
        ),
    ];
    for (src, want) in cases {
        let problems = c.check(&src, "k.metal", &[]).expect_err(&src);
        // (the statement is the fifth line)
        assert!(problems.iter().any(|p| p.line == 5 && p.message.contains(want)), "{src}\n{problems:?}");
    }
}
