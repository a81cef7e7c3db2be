// Generates the launchers of every spec in kernels/ into OUT_DIR/kernelgen,
// with the family files of families/, and reruns when any of them changes.
// An error prints as text: file, line, column and field.
fn main() {
    if let Err(e) = kernelgen_build::Config::new().specs("kernels").families("families").compile() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
