//! What the generator builds in memory is, value for value, the contract the
//! runtime crate compiled in from generated/: one contract type, no conversion.

#[test]
fn in_memory_contracts_equal_the_compiled_catalog() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sources = kernelgen_codegen::read_specs(&[root.join("specs")]).unwrap();
    let generated = kernelgen_codegen::generate(sources).unwrap();
    assert_eq!(generated.kernels.len(), kernelgen::kernels::CATALOG.len());
    for (r, compiled) in generated.kernels.iter().zip(kernelgen::kernels::CATALOG) {
        assert_eq!(&r.def, *compiled, "{}", r.kernel.name);
    }
}
