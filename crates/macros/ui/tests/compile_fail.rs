//! Every class of spec error is a compile error at the offending token,
//! worded as the CLI words it. Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p kernelgen-macros-ui --test compile_fail`
//! and review them.

#[test]
#[ignore = "slow (trybuild builds the macros' dependencies again): `make test-slow`, in .ci/run"]
fn spec_errors_are_compile_errors_at_the_token() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
