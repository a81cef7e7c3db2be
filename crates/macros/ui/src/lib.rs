//! Nothing: this crate holds the compile-fail tests of `kernelgen::kernels!` and
//! `include_specs!` (`tests/compile_fail.rs`), apart from kernelgen-macros so that
//! trybuild builds only what they need.
