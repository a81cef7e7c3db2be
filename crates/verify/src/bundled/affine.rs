//! The affine one-row matmul (`rust:affine`): random packed weights (every bit pattern is a
//! valid 3- or 4-bit stream), random scales and biases, random x.

use super::{host, input, per_dtype, random, RustReference};
use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel};
use kernelgen_emu::HostArray;
use kernelgen_reference::affine::{affine_row_replay_view, affine_rows_f64_view, Bits, QuantizedView};
use kernelgen_reference::{Element, SplitMix64};
use std::borrow::Cow;

pub(super) const REFERENCE: RustReference = RustReference {
    name: "affine",
    declared: Declaration { params: &["dtype", "K", "N", "bits"], inputs: &["x", "w", "scales", "biases"], outputs: &["y"] },
    case: per_dtype!(case),
    expected: per_dtype!(expected),
};

fn geometry(k: &Kernel<'_>) -> Result<(usize, usize, Bits), Error> {
    let bits = match k.int("bits")? {
        3 => Bits::Three,
        4 => Bits::Four,
        other => return Err(Error::Unmodelled { reference: REFERENCE.name, what: format!("for {other}-bit weights") }),
    };
    Ok((k.int("K")?, k.int("N")?, bits))
}

fn case<T: Element>(kernel: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let (k, n, bits) = geometry(kernel)?;
    // One seed per input, drawn from `seed`: no two inputs share a stream.
    let mut seeds = SplitMix64::new(seed);
    let (w_seed, scales_seed, biases_seed) = (seeds.next_u64(), seeds.next_u64(), seeds.next_u64());
    let mut rng = SplitMix64::new(seeds.next_u64());
    let groups = k / 64;
    let words = bits.words_per_row(k);
    // Quantizing a large random matrix costs more than the kernel: draw the
    // packed stream directly, with scales and biases of a [-1, 1) matrix. The
    // stream is drawn into the input array itself (in guarded memory when
    // large: the launch binds it in place) and the references read it there,
    // so the head's 635 MB of weights exist once.
    let mut w = HostArray::zeros(kernelgen::Dtype::U32, vec![n as u64, words as u64]);
    random_words(&mut w.data, w_seed);
    let levels = f64::from(bits.max_q());
    let scales: Vec<T> = par_draw(n * groups, scales_seed, |rng| T::from_f32(((0.5 + rng.unit()) * 2.0 / levels) as f32 * if rng.unit() < 0.1 { -1.0 } else { 1.0 }));
    let biases: Vec<T> = par_draw(n * groups, biases_seed, |rng| T::from_f32((rng.unit() * 2.0 - 1.0) as f32));
    let x: Vec<T> = random(&mut rng, k);
    Ok(Case::new()
        .array("x", host(vec![1, k as u64], &x))
        .array("w", w)
        .array("scales", host(vec![n as u64, groups as u64], &scales))
        .array("biases", host(vec![n as u64, groups as u64], &biases)))
}

fn expected<T: Element>(kernel: &Kernel<'_>, case: &Case, seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    let (k, n, bits) = geometry(kernel)?;
    let (x, scales, biases): (Vec<T>, Vec<T>, Vec<T>) = (input(case, "x")?, input(case, "scales")?, input(case, "biases")?);
    let rows = f64_rows(n, seed);
    let words = as_words(&case.get("w")?.data);
    let q = QuantizedView { n, k, bits, w: &words, scales: &scales, biases: &biases };
    let (replay, exact) = (affine_row_replay_view(&x, &q), affine_rows_f64_view(&x, &q, &rows));
    let exact_at = (rows.len() < n).then_some(rows);
    Ok(vec![("y".to_string(), Expected::Model { replay: host(vec![1, n as u64], &replay), exact, exact_at })])
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

/// Fills `bytes` with random bits, on every core (the head's 635 MB of weights take a
/// second on one core): see [`par_blocks`].
fn random_words(bytes: &mut [u8], seed: u64) {
    par_blocks(bytes, 1 << 20, seed, |rng, block| {
        let mut words = block.chunks_exact_mut(8);
        for c in &mut words {
            c.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let tail = words.into_remainder();
        let last = rng.next_u64().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    });
}

/// `n` values drawn by `draw`, on every core: see [`par_blocks`].
fn par_draw<T: Element + Send>(n: usize, seed: u64, draw: impl Fn(&mut SplitMix64) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::from_f32(0.0); n];
    par_blocks(&mut out, 1 << 16, seed, |rng, block| block.iter_mut().for_each(|v| *v = draw(rng)));
    out
}

/// `fill(rng, block)` for each block of `block` elements of `out`, on every core, block `i`
/// from its own generator seeded by `seed` and `i`: the values do not depend on the number
/// of cores.
fn par_blocks<E: Send>(out: &mut [E], block: usize, seed: u64, fill: impl Fn(&mut SplitMix64, &mut [E]) + Sync) {
    let blocks: Vec<(usize, &mut [E])> = out.chunks_mut(block).enumerate().collect();
    let workers = std::thread::available_parallelism().map_or(1, |p| p.get()).min(blocks.len()).max(1);
    let per_worker = blocks.len().div_ceil(workers);
    let mut blocks = blocks.into_iter();
    let fill = &fill;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let mine: Vec<(usize, &mut [E])> = blocks.by_ref().take(per_worker).collect();
            scope.spawn(move || {
                for (i, block) in mine {
                    let mut rng = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17));
                    fill(&mut rng, block);
                }
            });
        }
    });
}
