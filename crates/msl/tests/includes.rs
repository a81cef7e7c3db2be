//! What a check reads: a source includes from its own folder and the include folders (-I)
//! only, never from the checker's scratch tree or cache, and no file outside them is read (so
//! no problem can echo one). And what a check cannot do (its limits) is not the source's fault.
use std::path::Path;

use crate::common;

use kernelgen_msl::{Checker, Options, ProblemKind};

const KERNEL: &str = "[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  y[i] = 1.0f;\n}\n";

/// A file whose every word, if clang parsed it, would be quoted back in an error.
fn secret_header(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "kgsecret_one kgsecret_two;\n").unwrap();
}

/// Absolute paths, `..` out of the source's folder and a symbolic link out of it are refused
/// at their lines, and the file is never parsed (no problem quotes it).
#[test]
fn an_include_outside_the_source_and_include_folders_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside/secret.h");
    secret_header(&outside);
    let src_dir = dir.path().join("project/src");
    std::fs::create_dir_all(&src_dir).unwrap();
    std::os::unix::fs::symlink(&outside, src_dir.join("linked.h")).unwrap();
    // also in a branch clang skips (the emulator's g++ may take it), spelled with a comment
    // or a line splice, named by a macro, or as a digraph
    let src = format!(
        "#include <metal_stdlib>\n#include \"{}\"\n#include \"../../outside/secret.h\"\n#include \"linked.h\"\n#include <../outside/secret.h>\n\
         #ifndef __clang__\n#/**/include \"../../outside/secret.h\"\n#inc\\\nlude \"../../outside/secret.h\"\n#endif\n\
         #define SECRET \"../../outside/secret.h\"\n#include SECRET\n%:include \"../../outside/secret.h\"\n{KERNEL}",
        outside.display()
    );
    let file = src_dir.join("k.metal");
    let inc = [dir.path().join("project")];
    let problems = common::checker().check(&src, &file.display().to_string(), &inc).unwrap_err();
    for line in [2, 3, 4, 5, 7, 8] {
        assert!(problems.iter().any(|p| p.line == line && p.message.contains("outside the source's folder")), "line {line}: {problems:#?}");
    }
    assert!(problems.iter().any(|p| p.line == 12 && p.message.contains("computed #include")), "{problems:#?}");
    assert!(problems.iter().any(|p| p.line == 13), "the digraph include: {problems:#?}");
    assert!(problems.iter().all(|p| !p.message.contains("kgsecret")), "a refused file was read: {problems:#?}");
    // a link inside the folders, to a file inside them, is refused too: a compiler reads the
    // file's own includes from the link's folder, the check from the file's
    std::fs::write(dir.path().join("project/real.h"), "inline float one() { return 1.0f; }\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("project/real.h"), src_dir.join("alias.h")).unwrap();
    let aliased = format!("#include <metal_stdlib>\n#include \"alias.h\"\n{KERNEL}");
    let problems = common::checker().check(&aliased, &file.display().to_string(), &inc).unwrap_err();
    assert!(problems.iter().any(|p| p.line == 2 && p.message.contains("symbolic link")), "{problems:#?}");
    // the same header inside an include folder is read
    let ok = "#include <metal_stdlib>\n#include \"inside.h\"\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  y[i] = twice(1.0f);\n}\n";
    std::fs::write(dir.path().join("project/inside.h"), "inline float twice(float x) { return 2.0f * x; }\n").unwrap();
    assert_eq!(common::checker().check(ok, &file.display().to_string(), &inc), Ok(()));
}

/// A relative include never reaches the checker's scratch tree or the cache around it (a file
/// planted there is not found), and no problem names the scratch tree.
#[test]
fn a_relative_include_never_resolves_in_the_scratch_tree() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let c = Checker::new(Options { cache_dir: Some(cache.clone()), ..Options::default() }).unwrap_or_else(|e| panic!("{e}"));
    // a source without a folder is checked at <cache>/check-*/main/k.metal: two levels up is the cache
    secret_header(&cache.join("planted.h"));
    let src = format!("#include <metal_stdlib>\n#include \"../../planted.h\"\n#include \"../../key\"\n{KERNEL}");
    let problems = c.check(&src, "k.metal", &[]).unwrap_err();
    for line in [2, 3] {
        assert!(problems.iter().any(|p| p.line == line && p.message.contains("not found")), "line {line}: {problems:#?}");
    }
    let cache_path = cache.display().to_string();
    assert!(problems.iter().all(|p| !p.message.contains("kgsecret") && !p.message.contains(&cache_path)), "{problems:#?}");
}

/// A source past the size the check reads is not checked, and says so: one problem of the
/// check's own kind, at once, not counted as Metal's.
#[test]
fn a_source_past_the_checks_limit_is_not_checked_rather_than_wrong() {
    let body = "  y[i] = y[i] + 1.0f;\n".repeat((9 << 20) / 22);
    let src = format!("#include <metal_stdlib>\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {{\n{body}}}\n");
    let start = std::time::Instant::now();
    let problems = common::checker().check(&src, "big.metal", &[]).unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::NotChecked);
    assert!(problems[0].to_string().starts_with("big.metal: the Metal check cannot check this file: it is 9.0 MiB"), "{}", problems[0]);
    assert!(!problems[0].to_string().contains("nested"), "{}", problems[0]);
}

/// The emulator preprocesses a source with g++, whose own macros differ from clang's: a
/// conditional on such a macro (directly, through the source's macros, or built by `##`)
/// would let it compile a branch this check never saw, so each is a problem at its line. What
/// both define alike (`__METAL_VERSION__`, `__METAL__`, `__cplusplus`, MLX's
/// `__cpp_variable_templates`) and the source's own or -D macros are fine.
#[test]
fn a_conditional_on_a_macro_the_emulator_defines_otherwise_is_refused() {
    let c = common::checker();
    let refused = [
        "#ifndef __clang__",
        "#ifdef __x86_64__",
        "#if defined(__GNUC__) && !defined(__aarch64__)",
        "#if CL_VERSION_2_0",
        "#ifdef INFINITY",
        "#if __has_include(<metal_tensor>)",
        "#define COMPILER __clang__\n#if COMPILER",
        "#define PASTE(a, b) a##b\n#if PASTE(__cl, ang__)",
    ];
    for cond in refused {
        let src = format!("#include <metal_stdlib>\n{cond}\n#define V 2.0f\n#else\n#define V 1.0f\n#endif\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {{\n  y[i] = V;\n}}\n");
        let line = cond.lines().count() as u32 + 1;
        let problems = c.check(&src, "c.metal", &[]).expect_err(cond);
        assert!(problems.iter().any(|p| p.line == line && p.message.contains("a branch the Metal check did not see")), "{cond}: {problems:#?}");
    }
    let accepted = [
        "#if defined(__METAL_VERSION__) && (__METAL_VERSION__ >= 310)",
        "#if defined __METAL__ || defined MLX_METAL_JIT",
        "#ifdef __cpp_variable_templates",
        "#define WIDE 1\n#if WIDE && __cplusplus >= 201703L",
        "#ifndef FROM_THE_COMMAND_LINE",
        // Metal's own macro, which the emulator defines as Metal does (candle, mistral.rs)
        "#if defined(__HAVE_BFLOAT__)",
        // neither compiler defines these (ggml-common.h's CUDA and HIP branches)
        "#if defined(__CUDACC__) || defined(__HIPCC__)",
    ];
    for cond in accepted {
        let src = format!("#include <metal_stdlib>\n{cond}\n#define V 2.0f\n#else\n#define V 1.0f\n#endif\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {{\n  y[i] = V;\n}}\n");
        assert_eq!(c.check(&src, "c.metal", &[]), Ok(()), "{cond}");
        let defined = [("FROM_THE_COMMAND_LINE".to_string(), Some("1".to_string()))];
        assert_eq!(c.check_with(&src, "c.metal", &[], &defined), Ok(()), "{cond} with -D");
    }
}
