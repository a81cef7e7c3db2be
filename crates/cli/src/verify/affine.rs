//! The affine one-row matmul: random packed weights (every bit pattern is a
//! valid 3- or 4-bit stream), random scales and biases, random x.

use super::{host, param, random, Case, Expected};
use kernelgen_emu::host::HostArray;
use kernelgen_reference::affine::{affine_row_f64, affine_row_replay, Bits, Quantized};
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_codegen::render::RenderedKernel;

pub fn case<T: Element>(r: &RenderedKernel, seed: u64) -> Case {
    let (k, n) = (param(r, "K"), param(r, "N"));
    let bits = if param(r, "bits") == 3 { Bits::Three } else { Bits::Four };
    let mut rng = SplitMix64::new(seed);
    let groups = k / 64;
    // Quantizing a large random matrix costs more than the kernel: draw the
    // packed stream directly, with scales and biases of a [-1, 1) matrix.
    let w: Vec<u32> = (0..n * bits.words_per_row(k)).map(|_| rng.next_u64() as u32).collect();
    let levels = f64::from(bits.max_q());
    let scales: Vec<T> = (0..n * groups).map(|_| T::from_f32(((0.5 + rng.unit()) * 2.0 / levels) as f32 * if rng.unit() < 0.1 { -1.0 } else { 1.0 })).collect();
    let biases: Vec<T> = (0..n * groups).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    let q = Quantized { n, k, bits, w, scales, biases };
    let x: Vec<T> = random(&mut rng, k);
    let replay = affine_row_replay(&x, &q);
    let exact = affine_row_f64(&x, &q);
    let words = bits.words_per_row(k) as u64;
    Case {
        sizes: "-".into(),
        inputs: vec![
            host(vec![1, k as u64], &x),
            HostArray::new(kernelgen::Dtype::U32, vec![n as u64, words], q.w.iter().flat_map(|w| w.to_le_bytes()).collect()),
            host(vec![n as u64, groups as u64], &q.scales),
            host(vec![n as u64, groups as u64], &q.biases),
        ],
        host: Vec::new(),
        expected: vec![Expected { name: "y", replay: host(vec![1, n as u64], &replay), exact }],
    }
}
