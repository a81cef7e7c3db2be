//! Every class of spec error is a compile error at the offending token,
//! worded as the CLI words it; and a launch cannot be forged: the plan and
//! the checked launch `Backend::run` takes come only from the checks.
//! Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p kernelgen-macros-ui --test compile_fail -- --ignored`
//! and review them.

#[test]
#[ignore = "slow (trybuild builds the macros' dependencies again): `make test-slow`, in .ci/run"]
fn spec_errors_are_compile_errors_at_the_token() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

#[test]
#[ignore = "slow (trybuild builds kernelgen again): `make test-slow`, in .ci/run"]
fn launch_plans_cannot_be_forged() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/launch/*.rs");
}
