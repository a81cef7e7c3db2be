// Generates the launchers of every spec in kernels/ into OUT_DIR/kernelgen,
// with the family files of families/, and reruns when any of them changes.
fn main() -> std::io::Result<()> {
    kernelgen_build::Config::new().specs("kernels").families("families").compile()
}
