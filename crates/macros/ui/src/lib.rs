//! Nothing: this crate holds the compile-fail tests of `kernelgen::kernels!` and
//! `include_specs!`, and of the launch API's proofs (a plan or checked launch cannot be
//! forged) (`tests/compile_fail.rs`), apart from kernelgen-macros so that trybuild builds
//! only what they need.
