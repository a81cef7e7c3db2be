//! The affine one-row matmul: random packed weights (every bit pattern is a
//! valid 3- or 4-bit stream), random scales and biases, random x.

use super::{host, param, random, Case, Expected};
use kernelgen_emu::host::HostArray;
use kernelgen_reference::affine::{affine_row_replay_view, affine_rows_f64_view, Bits, QuantizedView};
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
    random_words(&mut w.data, seed);
    let levels = f64::from(bits.max_q());
    let scales: Vec<T> = (0..n * groups).map(|_| T::from_f32(((0.5 + rng.unit()) * 2.0 / levels) as f32 * if rng.unit() < 0.1 { -1.0 } else { 1.0 })).collect();
    let biases: Vec<T> = (0..n * groups).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    let x: Vec<T> = random(&mut rng, k);
    let rows = f64_rows(n, seed);
    let (replay, exact) = {
        let words = as_words(&w.data);
        let q = QuantizedView { n, k, bits, w: &words, scales: &scales, biases: &biases };
        (affine_row_replay_view(&x, &q), affine_rows_f64_view(&x, &q, &rows))
    };
    let exact_at = (rows.len() < n).then_some(rows);
    Ok(Case {
        sizes: "-".into(),
        inputs: vec![host(vec![1, k as u64], &x), w, host(vec![n as u64, groups as u64], &scales), host(vec![n as u64, groups as u64], &biases)],
        host: Vec::new(),
        expected: vec![Expected { name: "y", replay: host(vec![1, n as u64], &replay), exact, exact_at }],
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

/// Rows up to this many get the f64 model on every row.
const F64_ALL_ROWS: usize = 16384;

/// The rows the f64 model checks: every row of a matrix of up to [`F64_ALL_ROWS`] rows; of a
/// larger one (a vocabulary head: 248,320 rows, where the f64 model would be half of the
/// whole catalog's verify time), the first and last 1024 rows and one row in 16 between, at
/// an offset from the seed. The replay model still checks every row, bit for bit.
fn f64_rows(n: usize, seed: u64) -> Vec<usize> {
    if n <= F64_ALL_ROWS {
        return (0..n).collect();
    }
    let offset = (seed % 16) as usize;
    (0..n).filter(|&r| r < 1024 || r >= n - 1024 || r % 16 == offset).collect()
}

/// Fills `bytes` with random u32 words, on every core: each 1 MiB block from its own
/// generator, seeded by `seed` and the block's index (the head's 635 MB of weights take a
/// second on one core).
fn random_words(bytes: &mut [u8], seed: u64) {
    const BLOCK: usize = 1 << 20;
    let blocks: Vec<(usize, &mut [u8])> = bytes.chunks_mut(BLOCK).enumerate().collect();
    let workers = std::thread::available_parallelism().map_or(1, |p| p.get()).min(blocks.len()).max(1);
    let per_worker = blocks.len().div_ceil(workers);
    let mut blocks = blocks.into_iter();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let mine: Vec<(usize, &mut [u8])> = blocks.by_ref().take(per_worker).collect();
            scope.spawn(move || {
                for (i, block) in mine {
                    let mut rng = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17));
                    for c in block.chunks_exact_mut(4) {
                        c.copy_from_slice(&(rng.next_u64() as u32).to_le_bytes());
                    }
                }
            });
        }
    });
}
