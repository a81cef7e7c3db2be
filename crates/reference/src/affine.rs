//! MLX affine quantization (group 64, 3 and 4 bits) and the one-row matmul
//! `y[N] = x[K] · Wᵀ` of the seed `quantization/affine-row.ts`.
//!
//! # Format (MLX's, exactly)
//! `w: u32 [N, K * bits / 32]`, `scales, biases: T [N, K / 64]`; the weight
//! is `scale * q + bias` with `q` in `0 .. 2^bits`. Each row is one
//! least-significant-bit-first bit stream over little-endian words: value `i`
//! of a row sits at stream bits `[bits * i, bits * (i + 1))`. For 4 bits that
//! is value `j` of a word at bits `[4j, 4j + 4)`; for 3 bits some values
//! straddle two words (value 10 at bits 30..33), every 3 bytes hold 8 values
//! and a group of 64 values is exactly 6 words.
//!
//! # The kernel (MLX 0.32.2's `affine_qmv_fast` arithmetic)
//! Lane `l` of each row's simdgroup owns values `k + 16 l .. k + 16 l + 16`
//! of every 512-value step `k`. Per step MLX's `load_vector` forms the
//! pre-divided `x_thread` (3 bits: `x / {1, 8, 64, 2, 16, 128, 4, 32}`,
//! 4 bits: `x / {1, 16, 256, 4096}`, in f32) and the chunk's sum
//! `sum += x[i] + x[i+1] + ...` over runs of 8 (3 bits) or 4 (4 bits) values,
//! the run added up in `T` (every addition rounded to `T`), then added to the
//! f32 `sum`. `qdot` multiplies masked (unshifted) weight fields by
//! `x_thread` (the two straddling 3-bit values in two parts, the high part by
//! `x_thread * 256`), accumulates in f32 in MLX's order and returns
//! `scale * accum + sum * bias` (two rounded products, one rounded sum).
//! Each step's `qdot` is added to the lane's partial (from 0, in K order) and
//! the 32 partials meet in `simd_sum`; `y = T(v)`. Rows are independent, so
//! the seed's R = 4 rows per simdgroup and 16 simdgroups per threadgroup do
//! not change a bit.
//!
//! # Error bound (f64 model)
//! Against `y = sum_k x_k (scale q_k + bias)` in f64, per lane and step:
//! `accum` is within `gamma(d) sum|q x|` with `d` = 8 (4 bits: product, 3 run
//! additions, 4 accumulations) or 21 (3 bits: product, 20 sequential
//! accumulations); the chunk sum is modelled rounding by rounding (the `T`
//! run additions dominate: up to 3 or 7 roundings to `T` of partial sums);
//! the two products and the sum of `qdot` add one f32 rounding each; the
//! `K/512` step additions and 5 simd_sum levels add `gamma(K/512 + 5)` on the
//! magnitudes of the qdots; the final `T(v)` half an ulp of `T`. Roughly:
//! `tol <= gamma(d + 2 + K/512 + 5) sum_k |scale q_k x_k|
//!        + sum_groups |bias| (r_T * sum_k |x_k| + ...) + ulp_T(y) / 2`
//! with `r_T` = 3 or 7 units of `T`'s roundoff (0 for f32).

use super::{Element, Exact, SIMD_WIDTH, SplitMix64, Tracked, f32_sum_finish, f32_sum_with, gamma, simd_sum};

/// MLX's group size for these kernels.
pub const GROUP_SIZE: usize = 64;
/// Values of K per kernel step (32 lanes x 16 values).
pub const STEP: usize = 512;
/// Values per lane per step.
pub const VALUES_PER_LANE: usize = 16;

/// Bits per weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bits {
    /// 3-bit weights.
    Three,
    /// 4-bit weights.
    Four,
}

impl Bits {
    /// Bits per weight (3 or 4).
    pub fn bits(self) -> usize {
        match self {
            Bits::Three => 3,
            Bits::Four => 4,
        }
    }

    /// `2^bits - 1`, the largest quantized value.
    pub fn max_q(self) -> u8 {
        (1u8 << self.bits()) - 1
    }

    /// u32 words per row of `k` values.
    pub fn words_per_row(self, k: usize) -> usize {
        k * self.bits() / 32
    }
}

/// A quantized `[N, K]` matrix in MLX's format.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized<T> {
    /// N: rows (the kernel's outputs).
    pub n: usize,
    /// K: columns (a multiple of 64).
    pub k: usize,
    /// Bits per weight.
    pub bits: Bits,
    /// `[N, K * bits / 32]`.
    pub w: Vec<u32>,
    /// `[N, K / 64]`.
    pub scales: Vec<T>,
    /// `[N, K / 64]`.
    pub biases: Vec<T>,
}

/// Pack quantized values (each `< 2^bits`) into one LSB-first bit stream of
/// u32 words. `q.len() * bits` must be a multiple of 32.
pub fn pack(q: &[u8], bits: Bits) -> Vec<u32> {
    let b = bits.bits();
    assert!(q.len() * b % 32 == 0, "pack: not a whole number of words");
    let mut w = vec![0u32; q.len() * b / 32];
    for (i, &v) in q.iter().enumerate() {
        assert!(v <= bits.max_q(), "pack: value {v} does not fit {b} bits");
        for j in 0..b {
            let bit = i * b + j;
            w[bit / 32] |= u32::from((v >> j) & 1) << (bit % 32);
        }
    }
    w
}

/// The `count` values of an LSB-first bit stream of u32 words.
pub fn unpack(w: &[u32], count: usize, bits: Bits) -> Vec<u8> {
    let b = bits.bits();
    assert!(count * b <= w.len() * 32, "unpack: stream too short");
    let mask = (1u64 << b) - 1;
    (0..count)
        .map(|i| {
            // A value straddles at most two words: read both as one u64.
            let bit = i * b;
            let lo = u64::from(w[bit / 32]);
            let hi = w.get(bit / 32 + 1).map_or(0, |&x| u64::from(x));
            (((lo | (hi << 32)) >> (bit % 32)) & mask) as u8
        })
        .collect()
}

/// [`unpack`] into `out` (cleared first), without an allocation per call.
fn unpack_into(w: &[u32], count: usize, bits: Bits, out: &mut Vec<u8>) {
    out.clear();
    match bits {
        Bits::Four => {
            assert!(count <= w.len() * 8, "unpack: stream too short");
            out.resize(count.div_ceil(8) * 8, 0);
            for (o, &word) in out.chunks_exact_mut(8).zip(w) {
                for (j, v) in o.iter_mut().enumerate() {
                    *v = ((word >> (4 * j)) & 0xf) as u8;
                }
            }
            out.truncate(count);
        }
        Bits::Three if count % 32 == 0 => {
            // every 3 words hold 32 values
            assert!(count * 3 <= w.len() * 32, "unpack: stream too short");
            out.resize(count, 0);
            for (o, ws) in out.chunks_exact_mut(32).zip(w.chunks_exact(3)) {
                let bits = u128::from(ws[0]) | (u128::from(ws[1]) << 32) | (u128::from(ws[2]) << 64);
                for (j, v) in o.iter_mut().enumerate() {
                    *v = ((bits >> (3 * j)) & 7) as u8;
                }
            }
        }
        Bits::Three => {
            assert!(count * 3 <= w.len() * 32, "unpack: stream too short");
            out.extend((0..count).map(|i| {
                let bit = i * 3;
                let lo = u64::from(w[bit / 32]);
                let hi = w.get(bit / 32 + 1).map_or(0, |&x| u64::from(x));
                (((lo | (hi << 32)) >> (bit % 32)) & 7) as u8
            }));
        }
    }
}

thread_local! {
    /// One row's quantized values and its groups' scales and biases (f64), per thread.
    static ROW: std::cell::RefCell<(Vec<u8>, Vec<f64>, Vec<f64>, Vec<Tracked>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new(), Vec::new())) };
}

/// `f(row)` for every row, on every core, in row order (each row is
/// independent, so the result does not depend on the split).
fn per_row<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n.max(1));
    let chunk = n.div_ceil(workers.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|start| {
                let f = &f;
                scope.spawn(move || (start..(start + chunk).min(n)).map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a reference worker panicked"))
            .collect()
    })
}

/// MLX's affine quantiser (the Metal `affine_quantize` kernel's arithmetic,
/// in f32) for `w: [N, K]`, K a multiple of 64. Per group of 64:
/// `w_min = min(T::MAX, values)`, `w_max = max(0, values)`,
/// `scale = max((w_max - w_min) / (2^bits - 1), 1e-7)`; if
/// `|w_min| > |w_max|` the edge is `w_min` and the scale positive, else the
/// edge is `w_max` and the scale negated; `q0 = round(edge / scale)`; unless
/// `q0 == 0`, `scale = edge / q0` and `bias = edge` (so 0 is exactly
/// representable), else `bias = 0`; `q = min(round((w - bias) / scale),
/// 2^bits - 1)` with the unrounded f32 scale and bias (rounding half away
/// from zero; never below 0); `T(scale)` and `T(bias)` are stored. When
/// `q0` rounds away from zero the step shrinks below the range's and values
/// at the far end of the group clamp to the top level, as in MLX.
pub fn quantize<T: Element>(w: &[T], n: usize, k: usize, bits: Bits) -> Quantized<T> {
    assert_eq!(w.len(), n * k, "quantize: w must be [N, K]");
    assert!(k % GROUP_SIZE == 0, "quantize: K must be a multiple of 64");
    let n_bins = f32::from(bits.max_q());
    let eps = 1e-7f32;
    let mut q = Vec::with_capacity(n * k);
    let mut scales = Vec::with_capacity(n * k / GROUP_SIZE);
    let mut biases = Vec::with_capacity(n * k / GROUP_SIZE);
    for group in w.chunks_exact(GROUP_SIZE) {
        let mut w_min = T::MAX as f32;
        let mut w_max = 0.0f32;
        for &v in group {
            w_min = w_min.min(v.to_f32());
            w_max = w_max.max(v.to_f32());
        }
        let mut scale = ((w_max - w_min) / n_bins).max(eps);
        let side = w_min.abs() > w_max.abs();
        if !side {
            scale = -scale;
        }
        let edge = if side { w_min } else { w_max };
        let q0 = (edge / scale).round();
        let at_zero = q0 == 0.0;
        if !at_zero {
            scale = edge / q0;
        }
        let bias = if at_zero { 0.0 } else { edge };
        scales.push(T::from_f32(scale));
        biases.push(T::from_f32(bias));
        for &v in group {
            let r = ((v.to_f32() - bias) / scale).round().min(n_bins).max(0.0);
            q.push(r as u8);
        }
    }
    Quantized {
        n,
        k,
        bits,
        w: pack(&q, bits),
        scales,
        biases,
    }
}

impl<T: Element> Quantized<T> {
    /// Random weights in `[-1, 1)` quantized with [`quantize`], from a
    /// deterministic seed.
    pub fn random(n: usize, k: usize, bits: Bits, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let w: Vec<T> = (0..n * k)
            .map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32))
            .collect();
        quantize(&w, n, k, bits)
    }

    /// The quantized values `[N, K]`.
    pub fn values(&self) -> Vec<u8> {
        unpack(&self.w, self.n * self.k, self.bits)
    }

    /// The dequantized matrix `scale * q + bias` in f64 `[N, K]`.
    pub fn dequantize(&self) -> Vec<f64> {
        let groups = self.k / GROUP_SIZE;
        self.values()
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let (row, col) = (i / self.k, i % self.k);
                let g = row * groups + col / GROUP_SIZE;
                f64::from(self.scales[g].to_f32()) * f64::from(q)
                    + f64::from(self.biases[g].to_f32())
            })
            .collect()
    }

    /// The same matrix, borrowed.
    pub fn view(&self) -> QuantizedView<'_, T> {
        QuantizedView { n: self.n, k: self.k, bits: self.bits, w: &self.w, scales: &self.scales, biases: &self.biases }
    }
}

/// A [`Quantized`] matrix over borrowed slices: the references read weights where they
/// already are (a launch's input array), so a large matrix is never copied.
#[derive(Clone, Copy, Debug)]
pub struct QuantizedView<'a, T> {
    /// N: rows (the kernel's outputs).
    pub n: usize,
    /// K: columns (the kernel's inputs, a multiple of 512).
    pub k: usize,
    /// Bits per weight.
    pub bits: Bits,
    /// `[N, K * bits / 32]`.
    pub w: &'a [u32],
    /// `[N, K / 64]`.
    pub scales: &'a [T],
    /// `[N, K / 64]`.
    pub biases: &'a [T],
}

impl<T> QuantizedView<'_, T> {
    fn check(&self) {
        assert!(
            self.k % STEP == 0,
            "affine row: K must be a multiple of 512"
        );
        assert_eq!(self.w.len(), self.n * self.bits.words_per_row(self.k));
        assert_eq!(self.scales.len(), self.n * self.k / GROUP_SIZE);
        assert_eq!(self.biases.len(), self.n * self.k / GROUP_SIZE);
    }
}

// ---------------------------------------------------------------- replay

/// MLX's `load_vector` at 16 values per lane: `x_thread` and the sum.
fn load_vector<T: Element>(x: &[T], bits: Bits) -> ([f32; 16], f32) {
    let mut xt = [0.0f32; 16];
    let mut sum = 0.0f32;
    let (run, divisors): (usize, &[f32]) = match bits {
        Bits::Three => (8, &[1.0, 8.0, 64.0, 2.0, 16.0, 128.0, 4.0, 32.0]),
        Bits::Four => (4, &[1.0, 16.0, 256.0, 4096.0]),
    };
    for i in (0..VALUES_PER_LANE).step_by(run) {
        // x[i] + x[i + 1] + ... : left to right, every addition in T.
        let mut t = x[i].to_f32();
        for j in 1..run {
            t = T::round(t + x[i + j].to_f32());
        }
        sum += t;
        xt[i] = x[i].to_f32();
        for j in 1..run {
            xt[i + j] = x[i + j].to_f32() / divisors[j];
        }
    }
    (xt, sum)
}

/// MLX's `qdot` at 16 values per lane over the lane's `2 * bits` weight bytes.
fn qdot(w: &[u8], xt: &[f32; 16], scale: f32, bias: f32, sum: f32, bits: Bits) -> f32 {
    let f = |q: u32| q as f32;
    let mut accum = 0.0f32;
    match bits {
        Bits::Three => {
            for i in 0..2 {
                let x = &xt[8 * i..8 * i + 8];
                let w = &w[3 * i..3 * i + 3];
                let (w0, w1, w2) = (u32::from(w[0]), u32::from(w[1]), u32::from(w[2]));
                accum += f(w0 & 0x07) * x[0];
                accum += f(w0 & 0x38) * x[1];
                accum += f(w0 & 0xc0) * x[2];
                accum += f(w1 & 0x01) * (x[2] * 256.0);
                accum += f(w1 & 0x0e) * x[3];
                accum += f(w1 & 0x70) * x[4];
                accum += f(w1 & 0x80) * x[5];
                accum += f(w2 & 0x03) * (x[5] * 256.0);
                accum += f(w2 & 0x1c) * x[6];
                accum += f(w2 & 0xe0) * x[7];
            }
        }
        Bits::Four => {
            for i in 0..4 {
                let ws = u32::from(w[2 * i]) | (u32::from(w[2 * i + 1]) << 8);
                accum += xt[4 * i] * f(ws & 0x000f)
                    + xt[4 * i + 1] * f(ws & 0x00f0)
                    + xt[4 * i + 2] * f(ws & 0x0f00)
                    + xt[4 * i + 3] * f(ws & 0xf000);
            }
        }
    }
    scale * accum + sum * bias
}

/// The bytes of the packed words (little-endian).
fn bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The seed's one-row matmul, bit for bit: `y [N] = x [K] · Wᵀ`.
/// K must be a multiple of 512 (the seed also needs N % 64 == 0 and
/// K <= 7680 for its launch; rows are computed alike for any N).
pub fn affine_row_replay<T: Element>(x: &[T], w: &Quantized<T>) -> Vec<T> {
    affine_row_replay_view(x, &w.view())
}

/// [`affine_row_replay`] over a borrowed matrix.
pub fn affine_row_replay_view<T: Element>(x: &[T], w: &QuantizedView<'_, T>) -> Vec<T> {
    w.check();
    assert_eq!(x.len(), w.k, "affine row: x must be [K]");
    let (k, bits) = (w.k, w.bits);
    let groups = k / GROUP_SIZE;
    let lane_bytes = 2 * bits.bits();
    let words = bits.words_per_row(k);
    // load_vector of every lane chunk (the same for every row).
    let chunks: Vec<([f32; 16], f32)> = x
        .chunks_exact(VALUES_PER_LANE)
        .map(|c| load_vector(c, bits))
        .collect();
    let all_bytes = le_bytes(w.w);
    per_row(w.n, |row| {
        let wb = &all_bytes[row * words * 4..(row + 1) * words * 4];
        // The row's scales and biases in f32 once, not once per lane and step.
        let sb: Vec<(f32, f32)> = (row * groups..(row + 1) * groups).map(|g| (w.scales[g].to_f32(), w.biases[g].to_f32())).collect();
        let mut partial = [0.0f32; SIMD_WIDTH];
        for (lane, result) in partial.iter_mut().enumerate() {
            for step in 0..k / STEP {
                let kk = step * STEP + lane * VALUES_PER_LANE;
                let (xt, sum) = &chunks[kk / VALUES_PER_LANE];
                let (s, b) = sb[kk / GROUP_SIZE];
                let at = kk * bits.bits() / 8;
                *result += qdot(&wb[at..at + lane_bytes], xt, s, b, *sum, bits);
            }
        }
        T::from_f32(simd_sum(&partial))
    })
}

/// The packed words' bytes, little-endian: borrowed on a little-endian machine (the
/// head's 635 MB are not copied), else converted.
fn le_bytes(w: &[u32]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: the bytes of `w` itself, of its length, and u8 has no alignment.
        std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), std::mem::size_of_val(w)) })
    } else {
        std::borrow::Cow::Owned(bytes(w))
    }
}

// ------------------------------------------------------------------- f64

/// f64 reference: dequantise (`scale * q + bias`) and dot with `x` in f64,
/// with the per-row bound of the module documentation.
pub fn affine_row_f64<T: Element>(x: &[T], w: &Quantized<T>) -> Exact {
    affine_row_f64_view(x, &w.view())
}

/// [`affine_row_f64`] over a borrowed matrix.
pub fn affine_row_f64_view<T: Element>(x: &[T], w: &QuantizedView<'_, T>) -> Exact {
    let all: Vec<usize> = (0..w.n).collect();
    affine_rows_f64_view(x, w, &all)
}

/// [`affine_row_f64_view`] of the given rows only (the outputs at those indices, in
/// that order): a vocabulary head has 248,320 rows, and the f64 model is the slow part
/// of checking one.
pub fn affine_rows_f64_view<T: Element>(x: &[T], w: &QuantizedView<'_, T>, rows: &[usize]) -> Exact {
    w.check();
    assert!(rows.iter().all(|&r| r < w.n), "affine rows: a row index is out of range");
    assert_eq!(x.len(), w.k, "affine row: x must be [K]");
    let (k, bits) = (w.k, w.bits);
    let groups = k / GROUP_SIZE;
    let xf: Vec<f64> = x.iter().map(|v| f64::from(v.to_f32())).collect();
    let words = bits.words_per_row(k);
    let accum_depth = match bits {
        Bits::Three => 21,
        Bits::Four => 8,
    };
    let run = match bits {
        Bits::Three => 8,
        Bits::Four => 4,
    };
    // Error of x / 2^j when it falls below f32's normal range, times the
    // largest field (2^bits - 1) * 2^8: far below anything a normal input
    // can show, kept for rigour.
    let tiny = 2f64.powi(-149) * 4096.0;
    // Each lane chunk's sum as the kernel forms it.
    let sums: Vec<Tracked> = xf
        .chunks_exact(VALUES_PER_LANE)
        .map(|c| {
            let mut sum = Tracked::exact(0.0);
            for r in c.chunks_exact(run) {
                let mut t = Tracked::exact(r[0]);
                for &v in &r[1..] {
                    t = t.add(Tracked::exact(v)).round_op::<T>();
                }
                sum = sum.add(t).round_f32();
            }
            sum
        })
        .collect();
    let steps_gamma = gamma(k / STEP + 5);
    // the bound part of each chunk's sum: `tiny` added 16 times from 0
    let tiny16 = (0..VALUES_PER_LANE).fold(0.0f64, |e, _| e + tiny);
    let accum_gamma = gamma(accum_depth);
    let rows = per_row(rows.len(), |i| {
        let row = rows[i];
        // One row dequantized at a time (the head matrix has 1.3e9 values),
        // into this thread's buffer; each group's scale and bias widened once.
        ROW.with(|buf| {
            let mut buf = buf.borrow_mut();
            let (q, sf, bf, qd) = &mut *buf;
            unpack_into(&w.w[row * words..(row + 1) * words], k, bits, q);
            sf.clear();
            bf.clear();
            sf.extend(w.scales[row * groups..(row + 1) * groups].iter().map(|s| f64::from(s.to_f32())));
            bf.extend(w.biases[row * groups..(row + 1) * groups].iter().map(|b| f64::from(b.to_f32())));
            // Four interleaved partial sums (a sequential sum of 5120 terms is one long
            // chain of dependent additions): the same real number, another f64 rounding.
            let mut part = [0.0f64; 4];
            for (c4, (qs, xs)) in q.chunks_exact(4).zip(xf.chunks_exact(4)).enumerate() {
                let g = c4 * 4 / GROUP_SIZE;
                for j in 0..4 {
                    part[j] += xs[j] * (sf[g] * f64::from(qs[j]) + bf[g]);
                }
            }
            let exact = (part[0] + part[1]) + (part[2] + part[3]);
            // Each chunk's accumulation (f32_sum over its 16 products, in order), four
            // chunks at a time so that their chains of additions overlap.
            qd.clear();
            const SPAN: usize = 4 * VALUES_PER_LANE;
            for (c4, (qs, xs)) in q.chunks_exact(SPAN).zip(xf.chunks_exact(SPAN)).enumerate() {
                let c4 = c4 * 4;
                let (qs, xs): (&[u8; SPAN], &[f64; SPAN]) = (qs.try_into().unwrap(), xs.try_into().unwrap());
                let mut v = [0.0f64; 4];
                let mut mag = [0.0f64; 4];
                for i in 0..VALUES_PER_LANE {
                    for j in 0..4 {
                        let c = j * VALUES_PER_LANE + i;
                        let t = f64::from(qs[c]) * xs[c];
                        v[j] += t;
                        mag[j] += t.abs() + tiny;
                    }
                }
                for j in 0..4 {
                    let chunk = c4 + j;
                    let g = chunk * VALUES_PER_LANE / GROUP_SIZE;
                    let s = Tracked::exact(sf[g]);
                    let b = Tracked::exact(bf[g]);
                    let accum = f32_sum_finish(v[j], tiny16, mag[j], VALUES_PER_LANE, accum_depth, accum_gamma);
                    let scaled = s.mul(accum).round_f32();
                    let biased = sums[chunk].mul(b).round_f32();
                    qd.push(scaled.add(biased).round_f32());
                }
            }
            let qdots = qd.iter().copied();
            let y = f32_sum_with(qdots, k / STEP + 5, steps_gamma).round_to::<T>();
            // y.v is the same real number summed in another order.
            (exact, y.e + (y.v - exact).abs())
        })
    });
    let (value, tol) = rows.into_iter().unzip();
    Exact { value, tol }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// The f64 model as first written (one row at a time, one f32_sum per chunk): the
    /// optimized model must give exactly its bits.
    fn f64_plain<T: Element>(x: &[T], w: &Quantized<T>) -> Exact {
        let (k, bits) = (w.k, w.bits);
        let groups = k / GROUP_SIZE;
        let xf: Vec<f64> = x.iter().map(|v| f64::from(v.to_f32())).collect();
        let words = bits.words_per_row(k);
        let (accum_depth, run) = match bits {
            Bits::Three => (21, 8),
            Bits::Four => (8, 4),
        };
        let tiny = 2f64.powi(-149) * 4096.0;
        let sums: Vec<Tracked> = xf
            .chunks_exact(VALUES_PER_LANE)
            .map(|c| {
                let mut sum = Tracked::exact(0.0);
                for r in c.chunks_exact(run) {
                    let mut t = Tracked::exact(r[0]);
                    for &v in &r[1..] {
                        t = t.add(Tracked::exact(v)).round_op::<T>();
                    }
                    sum = sum.add(t).round_f32();
                }
                sum
            })
            .collect();
        let (value, tol) = (0..w.n)
            .map(|row| {
                let q = unpack(&w.w[row * words..(row + 1) * words], k, bits);
                let mut part = [0.0f64; 4];
                for c in 0..k {
                    let g = row * groups + c / GROUP_SIZE;
                    let deq = f64::from(w.scales[g].to_f32()) * f64::from(q[c]) + f64::from(w.biases[g].to_f32());
                    part[c % 4] += xf[c] * deq;
                }
                let exact = (part[0] + part[1]) + (part[2] + part[3]);
                let qdots = (0..k / VALUES_PER_LANE).map(|chunk| {
                    let c0 = chunk * VALUES_PER_LANE;
                    let g = row * groups + c0 / GROUP_SIZE;
                    let s = Tracked::exact(f64::from(w.scales[g].to_f32()));
                    let b = Tracked::exact(f64::from(w.biases[g].to_f32()));
                    let accum = super::super::f32_sum((c0..c0 + VALUES_PER_LANE).map(|c| Tracked { v: f64::from(q[c]) * xf[c], e: tiny }), accum_depth);
                    let scaled = s.mul(accum).round_f32();
                    let biased = sums[chunk].mul(b).round_f32();
                    scaled.add(biased).round_f32()
                });
                let y = super::super::f32_sum(qdots, k / STEP + 5).round_to::<T>();
                (exact, y.e + (y.v - exact).abs())
            })
            .unzip();
        Exact { value, tol }
    }

    #[test]
    fn f64_model_is_the_plain_form_bit_for_bit() {
        fn same<T: Element>(bits: Bits, n: usize, k: usize, seed: u64) {
            let w = Quantized::<T>::random(n, k, bits, seed);
            let mut rng = SplitMix64::new(seed);
            let x: Vec<T> = (0..k).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
            let (a, b) = (affine_row_f64(&x, &w), f64_plain(&x, &w));
            let bits_of = |e: &Exact| e.value.iter().chain(&e.tol).map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits_of(&a), bits_of(&b), "{bits:?} N={n} K={k}");
        }
        for bits in [Bits::Three, Bits::Four] {
            same::<bf16>(bits, 37, 1024, 1);
            same::<f16>(bits, 8, 2560, 2);
            same::<f32>(bits, 5, 512, 3);
        }
    }

    #[test]
    fn f64_model_of_some_rows_is_those_rows_of_the_whole() {
        let w = Quantized::<bf16>::random(41, 512, Bits::Four, 5);
        let mut rng = SplitMix64::new(6);
        let x: Vec<bf16> = (0..512).map(|_| bf16::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
        let whole = affine_row_f64(&x, &w);
        let rows = [40, 0, 17, 17, 3];
        let some = affine_rows_f64_view(&x, &w.view(), &rows);
        for (i, &r) in rows.iter().enumerate() {
            assert_eq!(some.value[i].to_bits(), whole.value[r].to_bits(), "row {r}");
            assert_eq!(some.tol[i].to_bits(), whole.tol[r].to_bits(), "row {r}");
        }
    }

    #[test]
    fn unpack_into_matches_unpack() {
        let mut rng = SplitMix64::new(9);
        let mut out = Vec::new();
        for bits in [Bits::Three, Bits::Four] {
            for count in [32, 64, 96, 512, 5120, 40] {
                let words = (count * bits.bits()).div_ceil(32) + 1;
                let w: Vec<u32> = (0..words).map(|_| rng.next_u64() as u32).collect();
                unpack_into(&w, count, bits, &mut out);
                assert_eq!(out, unpack(&w, count, bits), "{bits:?} {count}");
            }
        }
    }

    #[test]
    fn four_bit_words_hold_values_lsb_first() {
        let q = [1, 2, 3, 4, 5, 6, 7, 8, 0xf, 0, 0, 0, 0, 0, 0, 0xa];
        let w = pack(&q, Bits::Four);
        assert_eq!(w, vec![0x8765_4321, 0xa000_000f]);
        assert_eq!(unpack(&w, 16, Bits::Four), q);
    }

    #[test]
    fn three_bit_values_straddle_words() {
        // Value 10 sits at bits 30..33: its low two bits end word 0, its high
        // bit starts word 1.
        let mut q = [0u8; 32];
        q[10] = 0b101;
        assert_eq!(pack(&q, Bits::Three), vec![0x4000_0000, 0x0000_0001, 0]);
        q[10] = 0b110;
        assert_eq!(pack(&q, Bits::Three), vec![0x8000_0000, 0x0000_0001, 0]);
        // Value 21 at bits 63..66: bit 31 of word 1, bits 0..2 of word 2.
        let mut q = [0u8; 32];
        q[21] = 0b011;
        assert_eq!(pack(&q, Bits::Three), vec![0, 0x8000_0000, 0x0000_0001]);
        // Value 0 at bits 0..3 and value 1 at 3..6.
        let mut q = [0u8; 32];
        q[0] = 0b111;
        q[1] = 0b001;
        assert_eq!(pack(&q, Bits::Three), vec![0b1111, 0, 0]);
        // In bytes: every 3 bytes hold 8 values.
        let q: Vec<u8> = (0..32).map(|i| i % 8).collect();
        let b = bytes(&pack(&q, Bits::Three));
        // 0,1,2,3,4,5,6,7 in 3-bit fields: 0o76543210 = 0xFAC688.
        assert_eq!(b, [0x88, 0xC6, 0xFA].repeat(4));
    }

    #[test]
    fn pack_unpack_round_trip() {
        let mut rng = SplitMix64::new(9);
        for bits in [Bits::Three, Bits::Four] {
            let q: Vec<u8> = (0..64 * 12)
                .map(|_| rng.int(0, i64::from(bits.max_q())) as u8)
                .collect();
            let w = pack(&q, bits);
            assert_eq!(w.len(), q.len() * bits.bits() / 32);
            assert_eq!(unpack(&w, q.len(), bits), q);
        }
    }

    #[test]
    fn quantiser_matches_mlx_on_a_hand_computed_group() {
        // 0, 1, ..., 63: w_min 0, w_max 63; |0| > |63| is false, so the edge
        // is w_max and the scale -63/15 = -4.2; q0 = round(63 / -4.2) = -15,
        // scale = 63 / -15, bias = 63; q = round((w - 63) / scale).
        let w: Vec<f32> = (0..64).map(|v| v as f32).collect();
        let qz = quantize(&w, 1, 64, Bits::Four);
        assert_eq!(qz.scales, vec![63.0f32 / -15.0]);
        assert_eq!(qz.biases, vec![63.0f32]);
        let q = qz.values();
        assert_eq!(q[0], 15);
        assert_eq!(q[63], 0);
        assert_eq!(q[21], 10); // (21 - 63) / -4.2 = 10
        assert_eq!(q[2], 15); // (2 - 63) / -4.2 = 14.52 rounds to 15
    }

    #[test]
    fn quantiser_negative_side_and_zero_group() {
        // All negative: w_max stays 0, |w_min| > 0, positive scale, edge w_min.
        let w: Vec<f32> = (0..64).map(|v| -1.0 - v as f32 / 63.0).collect();
        let qz = quantize(&w, 1, 64, Bits::Three);
        let s = qz.scales[0];
        assert!(s > 0.0);
        assert_eq!(qz.biases[0], -2.0);
        // Zero group: scale -1e-7, bias 0, all q = 0, dequantises to 0.
        let qz = quantize(&[0.0f32; 64], 1, 64, Bits::Four);
        assert_eq!(qz.scales[0], -1e-7f32);
        assert_eq!(qz.biases[0], 0.0);
        assert!(qz.dequantize().iter().all(|&v| v == 0.0));
    }

    fn quantiser_error<T: Element>(bits: Bits) -> usize {
        let (n, k) = (8, 256);
        let mut rng = SplitMix64::new(21);
        let w: Vec<T> = (0..n * k)
            .map(|_| T::from_f32((rng.unit() * 4.0 - 1.5) as f32))
            .collect();
        let qz = quantize(&w, n, k, bits);
        let deq = qz.dequantize();
        let q = qz.values();
        let u_t = 2f64.powi(-T::PRECISION);
        let mut clamped = 0;
        for (i, (&a, &b)) in w.iter().zip(&deq).enumerate() {
            let g = i / GROUP_SIZE;
            let s = f64::from(qz.scales[g].to_f32());
            let bias = f64::from(qz.biases[g].to_f32()).abs();
            // Half a step, plus the scale and bias rounded to T after q was
            // chosen with the f32 ones, plus the f32 rounding of
            // (w - bias) / scale.
            let bound = 0.5 * s.abs() * (1.0 + 2.0 * u_t)
                + f64::from(bits.max_q()) * s.abs() * u_t * 1.01
                + bias * u_t * 1.01
                + 1e-5 * s.abs();
            let a = f64::from(a.to_f32());
            let err = (a - b).abs();
            if err > bound {
                // MLX clamps at 2^bits - 1: when q0 rounds away from zero
                // the step shrinks and the far end of the group can lie
                // beyond the top level. Then the value lies beyond it.
                assert_eq!(q[i], bits.max_q(), "element {i}: error {err} > {bound}");
                assert!((a - b) / s > 0.0, "element {i} is not beyond the top level");
                clamped += 1;
            }
        }
        clamped
    }

    #[test]
    fn quantiser_dequantises_within_half_a_step() {
        let mut clamped = 0;
        for bits in [Bits::Three, Bits::Four] {
            clamped += quantiser_error::<f32>(bits);
            clamped += quantiser_error::<bf16>(bits);
            clamped += quantiser_error::<f16>(bits);
        }
        // The data does reach MLX's clamp (groups whose q0 rounds up).
        assert!(clamped > 0);
    }

    #[test]
    fn qdot_three_bit_reads_the_straddling_values() {
        // One lane chunk with x = 1..16 and known q values: accum must be
        // sum(q * x) exactly (all small integers).
        let q: Vec<u8> = (0..32).map(|i| ((i * 5 + 3) % 8) as u8).collect();
        let w = pack(&q, Bits::Three);
        let b = bytes(&w);
        let x: Vec<f32> = (1..=16).map(|v| v as f32).collect();
        let (xt, sum) = load_vector(&x, Bits::Three);
        assert_eq!(sum, 136.0);
        let got = qdot(&b[..6], &xt, 1.0, 0.0, sum, Bits::Three);
        let want: f32 = q[..16]
            .iter()
            .zip(&x)
            .map(|(&q, &x)| f32::from(q) * x)
            .sum();
        assert_eq!(got, want);
        let q4: Vec<u8> = (0..16).map(|i| ((i * 7 + 1) % 16) as u8).collect();
        let b4 = bytes(&pack(&q4, Bits::Four));
        let (xt, sum) = load_vector(&x, Bits::Four);
        let got = qdot(&b4[..8], &xt, 2.0, 0.5, sum, Bits::Four);
        let want: f32 = q4.iter().zip(&x).map(|(&q, &x)| f32::from(q) * x).sum();
        assert_eq!(got, 2.0 * want + 0.5 * 136.0);
    }

    #[test]
    fn load_vector_sums_runs_in_t() {
        // bf16: 256 + 1 rounds back to 256 in T, so the run of four
        // 256, 1, 1, 1 sums to 256 in T, not 259.
        let x: Vec<bf16> = [256.0f32, 1.0, 1.0, 1.0]
            .iter()
            .cycle()
            .take(16)
            .map(|&v| bf16::from_f32(v))
            .collect();
        let (_, sum) = load_vector(&x, Bits::Four);
        assert_eq!(sum, 4.0 * 256.0);
        let xf: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
        let (xt, sum) = load_vector(&xf, Bits::Four);
        assert_eq!(sum, 4.0 * 259.0);
        assert_eq!(xt[1], 1.0 / 16.0);
        assert_eq!(xt[3], 1.0 / 4096.0);
    }
}
