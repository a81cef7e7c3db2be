//! The affine one-row matmul: random packed weights (every bit pattern is a
//! valid 3- or 4-bit stream), random scales and biases, random x.

use super::{host, param, random, Case, Expected};
use kernelgen_emu::host::HostArray;
use kernelgen_reference::affine::{affine_row_f64_view, affine_row_replay_view, Bits, QuantizedView};
use std::borrow::Cow;
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_codegen::render::RenderedKernel;

pub fn case<T: Element>(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    let (k, n) = (param(r, "K")?, param(r, "N")?);
    let bits = if param(r, "bits")? == 3 { Bits::Three } else { Bits::Four };
    let mut rng = SplitMix64::new(seed);
    let groups = k / 64;
    let words = bits.words_per_row(k);
    // Quantizing a large random matrix costs more than the kernel: draw the
    // packed stream directly, with scales and biases of a [-1, 1) matrix. The
    // stream is drawn into the input array itself (in guarded memory when
    // large: the launch binds it in place) and the references read it there,
    // so the head's 635 MB of weights exist once.
    let mut w = HostArray::zeros(kernelgen::Dtype::U32, vec![n as u64, words as u64]);
    for c in w.data.chunks_exact_mut(4) {
        c.copy_from_slice(&(rng.next_u64() as u32).to_le_bytes());
    }
    let levels = f64::from(bits.max_q());
    let scales: Vec<T> = (0..n * groups).map(|_| T::from_f32(((0.5 + rng.unit()) * 2.0 / levels) as f32 * if rng.unit() < 0.1 { -1.0 } else { 1.0 })).collect();
    let biases: Vec<T> = (0..n * groups).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    let x: Vec<T> = random(&mut rng, k);
    let (replay, exact) = {
        let words = as_words(&w.data);
        let q = QuantizedView { n, k, bits, w: &words, scales: &scales, biases: &biases };
        (affine_row_replay_view(&x, &q), affine_row_f64_view(&x, &q))
    };
    Ok(Case {
        sizes: "-".into(),
        inputs: vec![host(vec![1, k as u64], &x), w, host(vec![n as u64, groups as u64], &scales), host(vec![n as u64, groups as u64], &biases)],
        host: Vec::new(),
        expected: vec![Expected { name: "y", replay: host(vec![1, n as u64], &replay), exact }],
    })
}

/// Little-endian bytes as u32 words: in place when they are aligned (guarded arrays are),
/// else a copy.
fn as_words(bytes: &[u8]) -> Cow<'_, [u32]> {
    // SAFETY: every bit pattern is a valid u32.
    let (head, words, tail) = unsafe { bytes.align_to::<u32>() };
    if cfg!(target_endian = "little") && head.is_empty() && tail.is_empty() {
        Cow::Borrowed(words)
    } else {
        Cow::Owned(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}
