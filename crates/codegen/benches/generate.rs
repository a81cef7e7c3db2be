//! Generating the whole bundled catalog in memory (target: under 50 ms once
//! built), and a synthetic catalog of growing size to show that the cost is
//! linear in the number of kernels (compare the per-kernel times of `scaling`).

use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{generate, read_specs};
use std::path::PathBuf;

fn main() {
    divan::main();
}

#[divan::bench]
fn bundled_catalog(bencher: divan::Bencher) {
    let specs = read_specs(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../specs")]).unwrap();
    bencher.with_inputs(|| specs.clone()).bench_values(|s| generate(s).unwrap().kernels.len());
}

/// One expert spec with `n` geometries: 4 kernels per geometry.
fn synthetic(n: usize) -> Vec<SpecSource> {
    let mut text = String::from("family = \"expert\"\n[axes]\nquant = [\"q4\", \"q8\"]\n");
    for i in 0..n {
        text.push_str(&format!("[geometry.g{i}]\nhidden = {}\nintermediate = {}\n", 256 + 64 * i, 128 + 32 * i));
    }
    vec![SpecSource { display: "synthetic.toml".into(), origin: "specs/synthetic.toml".into(), stem: "synthetic".into(), text }]
}

#[divan::bench(args = [4, 16, 64, 256])]
fn scaling(bencher: divan::Bencher, geometries: usize) {
    let specs = synthetic(geometries);
    bencher
        .counter(divan::counter::ItemsCount::new(geometries * 4))
        .with_inputs(|| specs.clone())
        .bench_values(|s| generate(s).unwrap().kernels.len());
}
