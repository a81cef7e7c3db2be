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

/// 6,000 terms: clang would print 12 GB of JSON. A limit of the check (not a problem of the
/// source, nor an abort), at the file.
#[test]
fn an_absurdly_long_expression_is_a_limit_of_the_check_not_an_abort() {
    let c = common::checker();
    let p = c.check(&long_sum(6000), "absurd.metal", &[]).unwrap_err();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!((p[0].file.as_str(), p[0].line, p[0].kind), ("absurd.metal", 1, kernelgen_msl::ProblemKind::NotChecked));
    assert!(p[0].to_string().contains("the Metal check cannot check this file: clang's AST dump of it passed"), "{}", p[0]);
}
