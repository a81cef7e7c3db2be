//! Deeply nested sources: clang's AST of a long expression nests about twice as deep as it has
//! terms, and its JSON dump grows with the square of that. The check reads and walks the AST on
//! a thread of its own with a large stack, whatever thread calls it, and reports what it cannot
//! read as a problem: it never overflows a stack (an abort) or exhausts memory.
use crate::common;

/// A kernel storing the sum of `terms` loads, in one expression.
fn long_sum(terms: usize) -> String {
    format!(
        "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void k(device const float* x [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {{\n  y[i] = {};\n}}\n",
        vec!["x[i]"; terms].join(" + ")
    )
}

/// 500 terms (JSON nested about 1,000 deep, 90 MB) from a thread with a 128 KiB stack.
#[test]
fn a_long_expression_checks_from_a_small_stack() {
    let c = common::checker();
    let src = long_sum(500);
    let r = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || c.check(&src, "long.metal", &[]))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(r, Ok(()));
}

/// 6,000 terms: clang prints 12 GB of JSON (its indentation grows with the depth), which the
/// check reads compacted as it comes: its memory follows the AST, not the printing. Slow (minutes
/// of clang printing): `make test-slow`.
#[test]
#[ignore]
fn an_absurdly_long_expression_checks_in_memory_that_follows_the_ast() {
    let c = common::checker();
    assert_eq!(c.check(&long_sum(6000), "absurd.metal", &[]), Ok(()));
}

/// When clang takes longer than the check allows, that is a limit of the check (not a problem of
/// the source, nor an abort), at the file.
#[test]
fn an_absurdly_long_expression_is_a_limit_of_the_check_not_an_abort() {
    let opts = kernelgen_msl::Options { timeout: std::time::Duration::from_secs(2), cache_dir: Some(common::cache_dir()), ..Default::default() };
    let c = kernelgen_msl::Checker::new(opts).unwrap();
    let p = c.check(&long_sum(6000), "absurd.metal", &[]).unwrap_err();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!((p[0].file.as_str(), p[0].line, p[0].kind), ("absurd.metal", 1, kernelgen_msl::ProblemKind::NotChecked));
    assert!(p[0].to_string().contains("the Metal check cannot check this file: clang did not finish"), "{}", p[0]);
}

/// A template kernel instantiated 700 times, as MLX's reduce.metal instantiates its kernels:
/// clang prints 1.2 GB of JSON (1.7 MB an instantiation), more than the check kept before it
/// compacted the dump as it reads it and walked it one declaration at a time (it was then
/// refused as a limit of the check); now it checks in about 250 MB. Slow (30 s of clang):
/// `make test-slow`.
#[test]
#[ignore]
fn hundreds_of_instantiations_check_in_memory_that_follows_the_ast() {
    let body: String = (0..40).map(|j| format!("    acc += x[(i + {j}) % n] * T({j}) - metal::exp(float(x[i]) * {j}.0f);\n")).collect();
    let instances: String = (0..700)
        .map(|j| format!("template [[host_name(\"k{j}\")]] [[kernel]] void k<float, {j}>(device const float*, device float*, constant uint&, uint);\n"))
        .collect();
    let src = format!(
        "#include <metal_stdlib>\nusing namespace metal;\ntemplate <typename T, int N>\n[[kernel]] void k(device const T* x [[buffer(0)]], device T* y [[buffer(1)]], constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]]) {{\n    T acc = T(N);\n{body}    y[i] = acc;\n}}\n{instances}"
    );
    assert_eq!(common::checker().check(&src, "instances.metal", &[]), Ok(()));
    // a control: one bad instantiation among them is found at its line
    let bad = src.replace("void k<float, 699>(device const float*, device float*", "void k<half, 699>(device const half*, device half*");
    let bad = bad.replace("    y[i] = acc;", "    y[i] = acc;\n    thread T* p = (thread T*)x;");
    let p = common::checker().check(&bad, "instances.metal", &[]).unwrap_err();
    assert!(p.iter().all(|p| p.line == 47), "{p:?}");
}
