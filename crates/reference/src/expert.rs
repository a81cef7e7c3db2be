//! GLM streamed expert (routed SwiGLU) read straight from a packed byte slot.
//!
//! Seed: `glm52/streamed-experts.ts`, the Q4 and Q8 families, each a gate/up
//! kernel and a down kernel.
//!
//! * `gate_up(x [M,H]: T, slot) -> mid [M,I]: T`:
//!   `gate = simd_sum(acc_g) * gate_scale[i]`, `up` likewise, then
//!   `gT = T(gate)`, `uT = T(up)`, `sT = T(1 / (1 + expf(-gT)))`,
//!   `siluT = T(gT * sT)`, `mid = T(siluT * uT)`.
//! * `down(mid [M,I]: T, slot) -> out [M,H]: T`:
//!   `out = T(simd_sum(acc) * down_scale[h])`.
//!
//! One simdgroup owns one output row; lane `l` accumulates with `metal::fma`
//! (`f32::mul_add`) from `0.0f`: Q4 over words `l, l+32, ...` of the row
//! (`H/8` or `I/8` words, 8 nibbles each, place 0 first, weight = nibble - 8),
//! Q8 over elements `l, l+32, ...` (signed int8): [`Lanes::Strided`]. The CUDA
//! bodies read Q8 rows as words of 4 consecutive bytes, lane `l` over words
//! `l, l+32, ...`, byte 0 first: [`Lanes::Words`] (Q4 the same either way).
//! Scales are f32 per output row. `rows_per_threadgroup` does not change the
//! arithmetic.
//!
//! Slot layout: gate and up weights are `[I, H]` (row = intermediate unit),
//! down weights `[H, I]`; Q4 rows are `len/8` little-endian u32 words,
//! Q8 rows `len` bytes; scales are little-endian f32.
//!
//! # Error bound (f64 model)
//! With `u = 2^-24` and `L` the largest number of fma's one lane performs
//! (Q4: `8 * ceil(len/256)`, Q8: `ceil(len/32)` strided, `4 * ceil(len/128)` as
//! words, the larger of the two taken; `len` = H for gate/up and I for down),
//! the f32 row value `scale * sum` is within
//! `gamma(L + 6) * |scale| * sum(|q * x|)` of exact (`L` fma roundings, 5
//! simd_sum levels, the scale product). `down` then adds the final rounding to
//! `T` (half an ulp of `T`). `gate_up` propagates the gate and up errors
//! through `T(gate)`, `T(up)` (half an ulp of `T` each), `expf` (2 ulp of f32: CUDA's bound; glibc's is 1),
//! `1 + e` and `1 / d` (half an f32 ulp each), `T(sigmoid)`, the two products
//! (rounded to f32 and then to `T`), so the per-element bound is roughly
//! `|up| * 1.1 * (e_gate + ulp_T(gate)/2) + |silu| * (e_up + ulp_T(up)/2)
//!  + 2.5 ulp_T(mid)` plus f32 terms; [`gate_up_f64`] evaluates it exactly.

use super::{Element, Exact, SIMD_WIDTH, SplitMix64, Tracked, f32_sum, simd_sum};

/// Weight format of an expert slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    /// Packed nibbles, 8 per little-endian u32 word, least significant
    /// first; weight = nibble - 8.
    Q4,
    /// Signed int8.
    Q8,
}

impl Quant {
    /// Bytes of one weight row of `len` weights.
    pub fn row_bytes(self, len: usize) -> usize {
        match self {
            Quant::Q4 => len / 2,
            Quant::Q8 => len,
        }
    }

    /// The smallest and largest weight.
    pub fn range(self) -> (i8, i8) {
        match self {
            Quant::Q4 => (-8, 7),
            Quant::Q8 => (-128, 127),
        }
    }
}

/// The seed's configuration: sizes and the byte offsets of the six regions
/// inside one slot (`GATE_W`, `UP_W`, `DOWN_W`, `GATE_S`, `UP_S`, `DOWN_S`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpertGeometry {
    /// H.
    pub hidden: usize,
    /// I.
    pub intermediate: usize,
    /// Byte offset of the gate weights.
    pub gate_weights: usize,
    /// Byte offset of the up weights.
    pub up_weights: usize,
    /// Byte offset of the down weights.
    pub down_weights: usize,
    /// Byte offset of the gate row scales.
    pub gate_scales: usize,
    /// Byte offset of the up row scales.
    pub up_scales: usize,
    /// Byte offset of the down row scales.
    pub down_scales: usize,
    /// Bytes in one slot.
    pub slot_bytes: usize,
}

impl ExpertGeometry {
    /// The six regions as `(name, offset, bytes)`.
    pub fn regions(&self, quant: Quant) -> [(&'static str, usize, usize); 6] {
        let w = quant.row_bytes(self.hidden) * self.intermediate;
        [
            ("down_weights", self.down_weights, w),
            ("gate_weights", self.gate_weights, w),
            ("up_weights", self.up_weights, w),
            ("down_scales", self.down_scales, 4 * self.hidden),
            ("gate_scales", self.gate_scales, 4 * self.intermediate),
            ("up_scales", self.up_scales, 4 * self.intermediate),
        ]
    }

    /// The seed's checks (positive sizes, divisible by 8 for Q4, every
    /// region inside the slot) and the alignment the kernel's
    /// `uint32_t`/`float` loads need (4 bytes). How many rows a threadgroup
    /// computes does not change what a row computes, so it is not checked.
    pub fn validate(&self, quant: Quant) -> Result<(), String> {
        let (h, i) = (self.hidden, self.intermediate);
        if h == 0 || i == 0 {
            return Err("expert sizes must be positive".into());
        }
        if quant == Quant::Q4 && (h % 8 != 0 || i % 8 != 0) {
            return Err("Q4 expert dimensions must be divisible by 8".into());
        }
        for (name, offset, bytes) in self.regions(quant) {
            if offset + bytes > self.slot_bytes {
                return Err(format!("{name} exceeds the expert slot"));
            }
            let needs_word = name.ends_with("scales") || quant == Quant::Q4;
            if needs_word && offset % 4 != 0 {
                return Err(format!("{name} offset {offset} is not 4-byte aligned"));
            }
        }
        Ok(())
    }
}

/// Unpacked expert weights: gate and up `[I, H]` row-major, down `[H, I]`,
/// f32 row scales.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpertWeights {
    /// Gate weights, `[I, H]`.
    pub gate: Vec<i8>,
    /// Up weights, `[I, H]`.
    pub up: Vec<i8>,
    /// Down weights, `[H, I]`.
    pub down: Vec<i8>,
    /// Gate row scales, `[I]`.
    pub gate_scales: Vec<f32>,
    /// Up row scales, `[I]`.
    pub up_scales: Vec<f32>,
    /// Down row scales, `[H]`.
    pub down_scales: Vec<f32>,
}

/// The byte a slot holds outside its regions: reading it as a Q4 weight
/// gives 7 and as an f32 scale a NaN, so a kernel reading past a region
/// shows.
pub const SLOT_FILL: u8 = 0xFF;

impl ExpertWeights {
    /// Uniform random weights over the quant's whole range and scales in
    /// `[0.5, 1.5) / (max|q| * sqrt(len))` (so rows of unit-sized inputs
    /// give outputs of order 1), from a deterministic seed.
    pub fn random(quant: Quant, hidden: usize, intermediate: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let (lo, hi) = quant.range();
        let mut weights = |n: usize| -> Vec<i8> {
            (0..n)
                .map(|_| rng.int(i64::from(lo), i64::from(hi)) as i8)
                .collect()
        };
        let gate = weights(intermediate * hidden);
        let up = weights(intermediate * hidden);
        let down = weights(hidden * intermediate);
        let qmax = f64::from(hi);
        let mut scales = |rows: usize, len: usize| -> Vec<f32> {
            (0..rows)
                .map(|_| ((0.5 + rng.unit()) / (qmax * (len as f64).sqrt())) as f32)
                .collect()
        };
        let gate_scales = scales(intermediate, hidden);
        let up_scales = scales(intermediate, hidden);
        let down_scales = scales(hidden, intermediate);
        ExpertWeights {
            gate,
            up,
            down,
            gate_scales,
            up_scales,
            down_scales,
        }
    }

    /// Pack into a new slot of `geometry.slot_bytes` bytes ([`SLOT_FILL`]
    /// outside the regions). Panics on a weight outside the quant's range or
    /// an invalid geometry.
    pub fn pack(&self, quant: Quant, geometry: &ExpertGeometry) -> Vec<u8> {
        if let Err(e) = geometry.validate(quant) {
            panic!("pack: {e}");
        }
        let (h, i) = (geometry.hidden, geometry.intermediate);
        assert_eq!(self.gate.len(), i * h, "gate weights must be [I, H]");
        assert_eq!(self.up.len(), i * h, "up weights must be [I, H]");
        assert_eq!(self.down.len(), h * i, "down weights must be [H, I]");
        assert_eq!(self.gate_scales.len(), i);
        assert_eq!(self.up_scales.len(), i);
        assert_eq!(self.down_scales.len(), h);
        let mut slot = vec![SLOT_FILL; geometry.slot_bytes];
        let mut put_weights = |offset: usize, w: &[i8]| match quant {
            Quant::Q4 => {
                for (j, pair) in w.chunks_exact(2).enumerate() {
                    let nib = |q: i8| -> u8 {
                        assert!((-8..=7).contains(&q), "Q4 weight {q} out of range");
                        (q + 8) as u8
                    };
                    slot[offset + j] = nib(pair[0]) | (nib(pair[1]) << 4);
                }
            }
            Quant::Q8 => {
                for (j, &q) in w.iter().enumerate() {
                    slot[offset + j] = q as u8;
                }
            }
        };
        put_weights(geometry.gate_weights, &self.gate);
        put_weights(geometry.up_weights, &self.up);
        put_weights(geometry.down_weights, &self.down);
        let mut put_scales = |offset: usize, s: &[f32]| {
            for (j, &v) in s.iter().enumerate() {
                slot[offset + 4 * j..offset + 4 * j + 4].copy_from_slice(&v.to_le_bytes());
            }
        };
        put_scales(geometry.gate_scales, &self.gate_scales);
        put_scales(geometry.up_scales, &self.up_scales);
        put_scales(geometry.down_scales, &self.down_scales);
        slot
    }

    /// Read the weights back from a slot (byte by byte: two nibbles per
    /// byte, low first, for Q4). The f64 models read slots through this.
    pub fn unpack(slot: &[u8], quant: Quant, geometry: &ExpertGeometry) -> Self {
        if let Err(e) = geometry.validate(quant) {
            panic!("unpack: {e}");
        }
        assert!(slot.len() >= geometry.slot_bytes, "slot shorter than its layout");
        let (h, i) = (geometry.hidden, geometry.intermediate);
        let weights = |offset: usize, n: usize| -> Vec<i8> {
            match quant {
                Quant::Q4 => (0..n)
                    .map(|j| {
                        let byte = slot[offset + j / 2];
                        let nib = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
                        nib as i8 - 8
                    })
                    .collect(),
                Quant::Q8 => slot[offset..offset + n].iter().map(|&b| b as i8).collect(),
            }
        };
        let scales = |offset: usize, n: usize| -> Vec<f32> {
            slot[offset..offset + 4 * n]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        ExpertWeights {
            gate: weights(geometry.gate_weights, i * h),
            up: weights(geometry.up_weights, i * h),
            down: weights(geometry.down_weights, h * i),
            gate_scales: scales(geometry.gate_scales, i),
            up_scales: scales(geometry.up_scales, i),
            down_scales: scales(geometry.down_scales, h),
        }
    }
}

// ---------------------------------------------------------------- replay

fn load_u32(slot: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([slot[at], slot[at + 1], slot[at + 2], slot[at + 3]])
}

fn load_f32(slot: &[u8], at: usize) -> f32 {
    f32::from_bits(load_u32(slot, at))
}

/// How a kernel body deals a row's weights to the 32 lanes of its SIMD-group (each lane then
/// accumulates its own in order, and `simd_sum` adds the lanes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// The seed's (every Metal body's): a Q4 row as 32-bit words of 8 weights, word `w` to lane
    /// `w % 32`; a Q8 row one weight at a time, weight `k` to lane `k % 32`.
    Strided,
    /// The CUDA bodies': a row as 32-bit words, word `w` to lane `w % 32`, Q4 words of 8
    /// weights as the seed's, Q8 words of 4 consecutive weights (4-byte loads).
    Words,
}

/// One row's 32 lane accumulators, as the kernel's loop leaves them:
/// `acc = fma(weight, float(x[k]), acc)` over the lane's indices, in the order `lanes` deals them.
fn lane_accumulators<T: Element>(
    x: &[T],
    slot: &[u8],
    weights: usize,
    row: usize,
    len: usize,
    quant: Quant,
    lanes: Lanes,
) -> [f32; SIMD_WIDTH] {
    // `mul_add` is a call to libm's software fmaf unless the function is compiled with FMA
    // (the same, exactly rounded, result either way).
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "fma")]
        unsafe fn with_fma<T: Element>(x: &[T], slot: &[u8], weights: usize, row: usize, len: usize, quant: Quant, lanes: Lanes) -> [f32; SIMD_WIDTH] {
            lane_accumulators_body(x, slot, weights, row, len, quant, lanes)
        }
        if std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has FMA.
            return unsafe { with_fma(x, slot, weights, row, len, quant, lanes) };
        }
    }
    lane_accumulators_body(x, slot, weights, row, len, quant, lanes)
}

#[inline(always)]
fn lane_accumulators_body<T: Element>(
    x: &[T],
    slot: &[u8],
    weights: usize,
    row: usize,
    len: usize,
    quant: Quant,
    lanes: Lanes,
) -> [f32; SIMD_WIDTH] {
    // weight k of the row: Q4 nibble k (byte k / 2, its low nibble first; zero point 8), Q8 byte k
    let (row_at, per_word) = match quant {
        Quant::Q4 => (weights + row * (len / 2), 8),
        Quant::Q8 => (weights + row * len, 4),
    };
    let weight = |k: usize| match quant {
        Quant::Q4 => ((slot[row_at + k / 2] >> (4 * (k % 2))) & 0xF) as f32 - 8.0,
        Quant::Q8 => f32::from(slot[row_at + k] as i8),
    };
    let mut acc = [0.0f32; SIMD_WIDTH];
    for (lane, a) in acc.iter_mut().enumerate() {
        let mut fma = |k: usize| *a = weight(k).mul_add(x[k].to_f32(), *a);
        if quant == Quant::Q8 && lanes == Lanes::Strided {
            // the seed's Q8: weight k to lane k % 32
            (lane..len).step_by(SIMD_WIDTH).for_each(&mut fma);
        } else {
            // words of `per_word` consecutive weights, word w to lane w % 32 (Q4 either way)
            assert!(len % per_word == 0, "a row dealt as words must be whole words of {per_word} weights");
            for word in (lane..len / per_word).step_by(SIMD_WIDTH) {
                (per_word * word..per_word * (word + 1)).for_each(&mut fma);
            }
        }
    }
    acc
}

fn check_call(x_len: usize, m: usize, len: usize, slot: &[u8], g: &ExpertGeometry, quant: Quant) {
    if let Err(e) = g.validate(quant) {
        panic!("expert: {e}");
    }
    assert!(slot.len() >= g.slot_bytes, "expert slot shorter than its layout");
    assert_eq!(x_len, m * len, "expert input must be [M, {len}]");
}

/// The seed's gate/up kernel, bit for bit: `mid [M, I]` from `x [M, H]`, its lanes' sums
/// in the order `lanes` says (the body's).
pub fn gate_up_replay<T: Element>(
    x: &[T],
    slot: &[u8],
    g: &ExpertGeometry,
    quant: Quant,
    m: usize,
    lanes: Lanes,
) -> Vec<T> {
    let (h, i) = (g.hidden, g.intermediate);
    check_call(x.len(), m, h, slot, g, quant);
    let mut mid = Vec::with_capacity(m * i);
    for sample in 0..m {
        let xs = &x[sample * h..(sample + 1) * h];
        for row in 0..i {
            let gate_acc = lane_accumulators(xs, slot, g.gate_weights, row, h, quant, lanes);
            let up_acc = lane_accumulators(xs, slot, g.up_weights, row, h, quant, lanes);
            let gate = simd_sum(&gate_acc) * load_f32(slot, g.gate_scales + 4 * row);
            let up = simd_sum(&up_acc) * load_f32(slot, g.up_scales + 4 * row);
            let gate_t = T::round(gate);
            let up_t = T::round(up);
            let sigmoid_t = T::round(1.0 / (1.0 + (-gate_t).exp()));
            let silu_t = T::round(gate_t * sigmoid_t);
            mid.push(T::from_f32(silu_t * up_t));
        }
    }
    mid
}

/// The seed's down kernel, bit for bit: `out [M, H]` from `mid [M, I]`, its lanes' sums in
/// the order `lanes` says (the body's).
pub fn down_replay<T: Element>(
    mid: &[T],
    slot: &[u8],
    g: &ExpertGeometry,
    quant: Quant,
    m: usize,
    lanes: Lanes,
) -> Vec<T> {
    let i = g.intermediate;
    check_call(mid.len(), m, i, slot, g, quant);
    (0..m).flat_map(|sample| down_row_values(&mid[sample * i..(sample + 1) * i], slot, g, quant, lanes)).map(T::from_f32).collect()
}

/// The f32 value of each of down's `H` rows for one sample, before the rounding to `T`:
/// `simd_sum(acc) * down_scale[h]`.
fn down_row_values<T: Element>(mid: &[T], slot: &[u8], g: &ExpertGeometry, quant: Quant, lanes: Lanes) -> Vec<f32> {
    (0..g.hidden)
        .map(|row| {
            let acc = lane_accumulators(mid, slot, g.down_weights, row, g.intermediate, quant, lanes);
            simd_sum(&acc) * load_f32(slot, g.down_scales + 4 * row)
        })
        .collect()
}

// ------------------------------------------------------------------- f64

/// The most fma's one lane performs over a row of `len` weights, whichever [`Lanes`] the
/// body deals them by.
pub fn lane_fmas(quant: Quant, len: usize) -> usize {
    match quant {
        Quant::Q4 => 8 * (len / 8).div_ceil(SIMD_WIDTH),
        Quant::Q8 => len.div_ceil(SIMD_WIDTH).max(4 * (len / 4).div_ceil(SIMD_WIDTH)),
    }
}

/// `scale * sum_k(q[k] * x[k])` exactly, with the bound of the kernel's f32
/// value `simd_sum(fma chains) * scale`.
fn row_value<T: Element>(q: &[i8], x: &[T], scale: f32, quant: Quant) -> Tracked {
    let depth = lane_fmas(quant, x.len()) + 5;
    let sum = f32_sum(
        q.iter()
            .zip(x)
            .map(|(&q, &x)| Tracked::exact(f64::from(q) * f64::from(x.to_f32()))),
        depth,
    );
    sum.mul(Tracked::exact(f64::from(scale))).round_f32()
}

/// SwiGLU of exact gate and up in f64 (`silu(gate) * up`), with the bound of
/// the seed's epilogue (its `T` rounding points) applied to the kernel's
/// gate and up values.
fn swiglu<T: Element>(gate: Tracked, up: Tracked) -> Tracked {
    let gate_t = gate.round_to::<T>();
    let up_t = up.round_to::<T>();
    let e = Tracked::exact(0.0)
        .sub(gate_t)
        .monotone(f64::NEG_INFINITY, f64::exp)
        .libm_f32();
    let d = Tracked::exact(1.0).add(e).round_f32();
    let sigmoid_t = Tracked::exact(1.0).div(d).round_f32().round_to::<T>();
    let silu_t = gate_t.mul(sigmoid_t).round_op::<T>();
    silu_t.mul(up_t).round_op::<T>()
}

/// f64 reference for gate/up: `mid = silu(gate) * up` exactly, with the
/// per-element bound described in the module documentation.
pub fn gate_up_f64<T: Element>(
    x: &[T],
    slot: &[u8],
    g: &ExpertGeometry,
    quant: Quant,
    m: usize,
) -> Exact {
    check_call(x.len(), m, g.hidden, slot, g, quant);
    gate_up_f64_of(x, &ExpertWeights::unpack(slot, quant, g), g, quant, m)
}

fn gate_up_f64_of<T: Element>(x: &[T], w: &ExpertWeights, g: &ExpertGeometry, quant: Quant, m: usize) -> Exact {
    let (h, i) = (g.hidden, g.intermediate);
    let mut value = Vec::with_capacity(m * i);
    let mut tol = Vec::with_capacity(m * i);
    for sample in 0..m {
        let xs = &x[sample * h..(sample + 1) * h];
        for row in 0..i {
            let gate = row_value(&w.gate[row * h..(row + 1) * h], xs, w.gate_scales[row], quant);
            let up = row_value(&w.up[row * h..(row + 1) * h], xs, w.up_scales[row], quant);
            let mid = swiglu::<T>(gate, up);
            value.push(mid.v);
            tol.push(mid.e);
        }
    }
    Exact { value, tol }
}

/// f64 reference for down: `out = scale * sum(q * mid)` exactly, bound
/// `gamma(L + 6) * |scale| * sum|q * mid| + ulp_T(out) / 2`.
pub fn down_f64<T: Element>(
    mid: &[T],
    slot: &[u8],
    g: &ExpertGeometry,
    quant: Quant,
    m: usize,
) -> Exact {
    let (h, i) = (g.hidden, g.intermediate);
    check_call(mid.len(), m, i, slot, g, quant);
    let w = ExpertWeights::unpack(slot, quant, g);
    let mut value = Vec::with_capacity(m * h);
    let mut tol = Vec::with_capacity(m * h);
    for sample in 0..m {
        for out in down_rows_f64(&mid[sample * i..(sample + 1) * i], &w, g, quant) {
            let out = out.round_to::<T>();
            value.push(out.v);
            tol.push(out.e);
        }
    }
    Exact { value, tol }
}

/// Down's `H` row values of one sample, exactly, with the bound of the kernel's f32 value
/// before its rounding to `T`.
fn down_rows_f64<T: Element>(mid: &[T], w: &ExpertWeights, g: &ExpertGeometry, quant: Quant) -> Vec<Tracked> {
    let i = g.intermediate;
    (0..g.hidden).map(|row| row_value(&w.down[row * i..(row + 1) * i], mid, w.down_scales[row], quant)).collect()
}

// --------------------------------------------------------------- grouped
//
// The grouped kernels run every (token m, route k) pair of a decode step in one launch, from
// an array of S slots (`slots`, S * slot_bytes bytes, each laid out as one slot):
//
// * `gate_up_grouped(x [M,H], slots, experts [M,K]) -> mid [M,K,I]`: `mid[m,k]` is gate_up's
//   row of `x[m]` with slot `experts[m,k]`, bit for bit; zeros where `experts[m,k] >= S`.
// * `down_grouped(mid [M,K,I], slots, experts, weights [M,K]) -> out [M,H]`:
//   `total = fma(float(weights[m,k]), value_k, total)` from `0.0f` over k = 0..K-1 in order,
//   `value_k` down's f32 row value (`simd_sum(acc) * scale`, before down rounds it to `T`);
//   a route with `experts[m,k] >= S` is skipped; `out[m,h] = T(total)`.
//
// The f64 models bound each route's value as the single models do, then each fma (one f32
// rounding) and the final rounding to `T`.

/// A decode step's routes: `experts[m * k + j]` is the slot index of token `m`'s `j`-th routed
/// expert among the `slots.len() / slot_bytes` slots of the array the kernels read.
#[derive(Clone, Copy, Debug)]
pub struct Routes<'a> {
    /// The slots array, `S * slot_bytes` bytes.
    pub slots: &'a [u8],
    /// `[M, K]` slot indices (any value; those `>= S` are skipped).
    pub experts: &'a [u32],
    /// Tokens, M.
    pub m: usize,
    /// Routes per token, K.
    pub k: usize,
}

impl Routes<'_> {
    /// The slot of pair `(token, route)`, `None` for an index past the slots.
    fn slot(&self, g: &ExpertGeometry, pair: usize) -> Option<&[u8]> {
        let e = self.experts[pair] as usize;
        (e < self.slots.len() / g.slot_bytes).then(|| &self.slots[e * g.slot_bytes..(e + 1) * g.slot_bytes])
    }

    fn check(&self, g: &ExpertGeometry, quant: Quant) {
        if let Err(e) = g.validate(quant) {
            panic!("expert: {e}");
        }
        assert_eq!(self.slots.len() % g.slot_bytes, 0, "the slots array must be whole slots");
        assert_eq!(self.experts.len(), self.m * self.k, "experts must be [M, K]");
    }
}

/// gate_up_grouped, bit for bit: `mid [M, K, I]` from `x [M, H]`.
pub fn gate_up_grouped_replay<T: Element>(x: &[T], routes: &Routes<'_>, g: &ExpertGeometry, quant: Quant, lanes: Lanes) -> Vec<T> {
    let (h, i) = (g.hidden, g.intermediate);
    routes.check(g, quant);
    assert_eq!(x.len(), routes.m * h, "expert input must be [M, {h}]");
    let mut mid = Vec::with_capacity(routes.m * routes.k * i);
    for pair in 0..routes.m * routes.k {
        let xs = &x[pair / routes.k * h..(pair / routes.k + 1) * h];
        match routes.slot(g, pair) {
            Some(slot) => mid.extend(gate_up_replay(xs, slot, g, quant, 1, lanes)),
            None => mid.extend(std::iter::repeat_n(T::from_f32(0.0), i)),
        }
    }
    mid
}

/// f64 model of gate_up_grouped: each pair's gate_up bound, exact zeros where skipped.
pub fn gate_up_grouped_f64<T: Element>(x: &[T], routes: &Routes<'_>, g: &ExpertGeometry, quant: Quant) -> Exact {
    let (h, i) = (g.hidden, g.intermediate);
    routes.check(g, quant);
    assert_eq!(x.len(), routes.m * h, "expert input must be [M, {h}]");
    let mut unpacked = std::collections::HashMap::new();
    let (mut value, mut tol) = (Vec::new(), Vec::new());
    for pair in 0..routes.m * routes.k {
        let xs = &x[pair / routes.k * h..(pair / routes.k + 1) * h];
        match routes.slot(g, pair) {
            Some(slot) => {
                let w = unpacked.entry(routes.experts[pair]).or_insert_with(|| ExpertWeights::unpack(slot, quant, g));
                let one = gate_up_f64_of(xs, w, g, quant, 1);
                value.extend(one.value);
                tol.extend(one.tol);
            }
            None => {
                value.extend(std::iter::repeat_n(0.0, i));
                tol.extend(std::iter::repeat_n(0.0, i));
            }
        }
    }
    Exact { value, tol }
}

/// down_grouped, bit for bit: `out [M, H]` from `mid [M, K, I]` and `weights [M, K]`.
pub fn down_grouped_replay<T: Element>(mid: &[T], weights: &[T], routes: &Routes<'_>, g: &ExpertGeometry, quant: Quant, lanes: Lanes) -> Vec<T> {
    let (h, i, k) = (g.hidden, g.intermediate, routes.k);
    routes.check(g, quant);
    assert_eq!(mid.len(), routes.m * k * i, "mid must be [M, K, {i}]");
    assert_eq!(weights.len(), routes.m * k, "weights must be [M, K]");
    let mut out = Vec::with_capacity(routes.m * h);
    for sample in 0..routes.m {
        let mut total = vec![0.0f32; h];
        for pair in sample * k..(sample + 1) * k {
            let Some(slot) = routes.slot(g, pair) else { continue };
            let w = weights[pair].to_f32();
            for (t, v) in total.iter_mut().zip(down_row_values(&mid[pair * i..(pair + 1) * i], slot, g, quant, lanes)) {
                *t = w.mul_add(v, *t);
            }
        }
        out.extend(total.into_iter().map(T::from_f32));
    }
    out
}

/// f64 model of down_grouped: `sum_k weights[m,k] * value_k` exactly, with each route's bound,
/// each fma's f32 rounding and the final rounding to `T`.
pub fn down_grouped_f64<T: Element>(mid: &[T], weights: &[T], routes: &Routes<'_>, g: &ExpertGeometry, quant: Quant) -> Exact {
    let (h, i, k) = (g.hidden, g.intermediate, routes.k);
    routes.check(g, quant);
    assert_eq!(mid.len(), routes.m * k * i, "mid must be [M, K, {i}]");
    assert_eq!(weights.len(), routes.m * k, "weights must be [M, K]");
    let mut unpacked = std::collections::HashMap::new();
    let (mut value, mut tol) = (Vec::with_capacity(routes.m * h), Vec::with_capacity(routes.m * h));
    for sample in 0..routes.m {
        let mut total = vec![Tracked::exact(0.0); h];
        for pair in sample * k..(sample + 1) * k {
            let Some(slot) = routes.slot(g, pair) else { continue };
            let w = Tracked::exact(f64::from(weights[pair].to_f32()));
            let unpacked = unpacked.entry(routes.experts[pair]).or_insert_with(|| ExpertWeights::unpack(slot, quant, g));
            for (t, v) in total.iter_mut().zip(down_rows_f64(&mid[pair * i..(pair + 1) * i], unpacked, g, quant)) {
                *t = w.mul(v).add(*t).round_f32();
            }
        }
        for t in total {
            let out = t.round_to::<T>();
            value.push(out.v);
            tol.push(out.e);
        }
    }
    Exact { value, tol }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test layout: the regions in another order than the family's (down,
    /// gate, up weights, then the scales), each at a multiple of `align`.
    fn packed(quant: Quant, hidden: usize, intermediate: usize, align: usize) -> ExpertGeometry {
        let align = align.max(4);
        let w = quant.row_bytes(hidden) * intermediate;
        let mut at = 0;
        let mut place = |bytes: usize| {
            let offset = at;
            at = (at + bytes).div_ceil(align) * align;
            offset
        };
        let (down_weights, gate_weights, up_weights) = (place(w), place(w), place(w));
        let (down_scales, gate_scales, up_scales) = (place(4 * hidden), place(4 * intermediate), place(4 * intermediate));
        ExpertGeometry { hidden, intermediate, gate_weights, up_weights, down_weights, gate_scales, up_scales, down_scales, slot_bytes: at }
    }

    #[test]
    fn q4_packing_is_nibbles_lsb_first() {
        let g = packed(Quant::Q4, 8, 8, 4);
        let mut w = ExpertWeights::random(Quant::Q4, 8, 8, 1);
        w.gate[..8].copy_from_slice(&[-8, -7, 0, 1, 2, 3, 6, 7]);
        let slot = w.pack(Quant::Q4, &g);
        // nibble = weight + 8, place p at bits 4p of the word.
        let word = load_u32(&slot, g.gate_weights);
        assert_eq!(word, 0xFEBA_9810);
        assert_eq!(ExpertWeights::unpack(&slot, Quant::Q4, &g), w);
    }

    #[test]
    fn pack_unpack_round_trip_and_fill() {
        for quant in [Quant::Q4, Quant::Q8] {
            let g = packed(quant, 24, 40, 64);
            g.validate(quant).unwrap();
            let w = ExpertWeights::random(quant, 24, 40, 7);
            let slot = w.pack(quant, &g);
            assert_eq!(ExpertWeights::unpack(&slot, quant, &g), w);
            // Bytes outside every region keep the fill.
            let mut inside = vec![false; slot.len()];
            for (_, off, bytes) in g.regions(quant) {
                inside[off..off + bytes].iter_mut().for_each(|b| *b = true);
            }
            let gaps = (0..slot.len()).filter(|&b| !inside[b]).count();
            assert!(gaps > 0, "the 64-byte alignment leaves gaps");
            assert!((0..slot.len()).all(|b| inside[b] || slot[b] == SLOT_FILL));
        }
    }

    #[test]
    fn validate_rejects_bad_layouts() {
        let mut g = packed(Quant::Q4, 16, 16, 4);
        assert!(g.validate(Quant::Q4).is_ok());
        g.up_scales += 2;
        assert!(g.validate(Quant::Q4).is_err());
        let g = packed(Quant::Q8, 12, 20, 4);
        assert!(g.validate(Quant::Q8).is_ok());
        assert!(packed(Quant::Q4, 12, 20, 4).validate(Quant::Q4).is_err());
        // Any row count per threadgroup is the family's business, not the model's.
        assert!(packed(Quant::Q8, 6, 20, 4).validate(Quant::Q8).is_ok());
        let mut g = packed(Quant::Q8, 16, 16, 4);
        g.slot_bytes -= 1;
        assert!(g.validate(Quant::Q8).is_err());
    }

    #[test]
    fn integer_inputs_are_exact_in_f32() {
        // Small integer inputs and power-of-two scales: every fma is exact,
        // so the f32 replay equals the f64 model exactly.
        let (h, i) = (64, 8);
        for quant in [Quant::Q4, Quant::Q8] {
            let g = packed(quant, h, i, 16);
            let mut w = ExpertWeights::random(quant, h, i, 3);
            w.down_scales.iter_mut().for_each(|s| *s = 0.25);
            let slot = w.pack(quant, &g);
            let mid: Vec<f32> = (0..2 * i).map(|j| (j % 7) as f32 - 3.0).collect();
            let got = down_replay(&mid, &slot, &g, quant, 2, Lanes::Strided);
            let exact = down_f64(&mid, &slot, &g, quant, 2);
            for (a, b) in got.iter().zip(&exact.value) {
                assert_eq!(f64::from(*a), *b);
            }
        }
    }

    /// The grouped models are the single ones per (token, route) pair: gate_up's rows where
    /// the index names a slot, zeros past the slots; down's weighted f32 sum in route order,
    /// which for one route of weight 1 is down's own output.
    #[test]
    fn grouped_models_are_the_single_ones_per_pair() {
        let (h, i) = (64, 16);
        for quant in [Quant::Q4, Quant::Q8] {
            let g = packed(quant, h, i, 16);
            let slots: Vec<u8> = (0..3).flat_map(|s| ExpertWeights::random(quant, h, i, 20 + s).pack(quant, &g)).collect();
            let slot = |e: usize| &slots[e * g.slot_bytes..(e + 1) * g.slot_bytes];
            let mut rng = SplitMix64::new(9);
            let x: Vec<f32> = (0..2 * h).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
            let experts = [2, 0, 3, 1]; // M = 2, K = 2; 3 is past the 3 slots
            let routes = Routes { slots: &slots, experts: &experts, m: 2, k: 2 };
            let mid = gate_up_grouped_replay(&x, &routes, &g, quant, Lanes::Strided);
            assert_eq!(&mid[..i], gate_up_replay(&x[..h], slot(2), &g, quant, 1, Lanes::Strided));
            assert_eq!(&mid[i..2 * i], gate_up_replay(&x[..h], slot(0), &g, quant, 1, Lanes::Strided));
            assert!(mid[2 * i..3 * i].iter().all(|v| *v == 0.0));
            assert_eq!(&mid[3 * i..], gate_up_replay(&x[h..], slot(1), &g, quant, 1, Lanes::Strided));
            let exact = gate_up_grouped_f64(&x, &routes, &g, quant);
            exact.check(&mid).unwrap_or_else(|v| panic!("{v:?}"));
            // one route of weight 1 (and one skipped) is down's output
            let weights = [1.0f32, 0.75, 0.5, 1.0];
            let skip_second = [2, 7, 1, 1];
            let routes = Routes { experts: &skip_second, ..routes };
            let out = down_grouped_replay(&mid, &weights, &routes, &g, quant, Lanes::Strided);
            assert_eq!(&out[..h], down_replay(&mid[..i], slot(2), &g, quant, 1, Lanes::Strided));
            let rows = |pair: usize, e: usize| down_row_values(&mid[pair * i..(pair + 1) * i], slot(e), &g, quant, Lanes::Strided);
            let want: Vec<f32> = rows(2, 1).iter().zip(rows(3, 1)).map(|(a, b)| 1.0f32.mul_add(b, 0.5f32.mul_add(*a, 0.0))).collect();
            assert_eq!(&out[h..], want);
            down_grouped_f64(&mid, &weights, &routes, &g, quant).check(&out).unwrap_or_else(|v| panic!("{v:?}"));
        }
    }

    #[test]
    fn q8_words_deal_four_consecutive_weights_to_a_lane() {
        // I = 256 Q8 as words: lane 0 sums k = 0..4 and 128..132, in that order; as the seed
        // strides, k = 0, 32, 64, ... The two orders give other f32 sums for some row, and
        // the words' lane 0 is exactly its four-then-four fma chain.
        let (h, i) = (64, 256);
        let quant = Quant::Q8;
        let g = packed(quant, h, i, 16);
        let w = ExpertWeights::random(quant, h, i, 3);
        let slot = w.pack(quant, &g);
        let mut rng = SplitMix64::new(9);
        let mid: Vec<f32> = (0..i).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
        let words = down_replay(&mid, &slot, &g, quant, 1, Lanes::Words);
        let strided = down_replay(&mid, &slot, &g, quant, 1, Lanes::Strided);
        assert!(words.iter().zip(&strided).any(|(a, b)| a.to_bits() != b.to_bits()));
        for row in 0..h {
            let acc = lane_accumulators(&mid, &slot, g.down_weights, row, i, quant, Lanes::Words);
            let lane0 = [0, 1, 2, 3, 128, 129, 130, 131].iter().fold(0.0f32, |a, &k| f32::from(w.down[row * i + k]).mul_add(mid[k], a));
            assert_eq!(acc[0].to_bits(), lane0.to_bits(), "row {row}");
        }
    }

    #[test]
    fn replay_uses_lane_order_not_sequential() {
        // H = 512 Q8: each lane sums 16 products; find a row where the lane
        // order gives another f32 than a plain sequential dot.
        let (h, i) = (512, 16);
        let quant = Quant::Q8;
        let g = packed(quant, h, i, 16);
        let w = ExpertWeights::random(quant, h, i, 11);
        let slot = w.pack(quant, &g);
        let mut rng = SplitMix64::new(5);
        let mid: Vec<f32> = (0..i).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
        let got = down_replay(&mid, &slot, &g, quant, 1, Lanes::Strided);
        let differs = (0..h).any(|row| {
            let seq = (0..i).fold(0.0f32, |a, k| {
                f32::from(w.down[row * i + k]).mul_add(mid[k], a)
            }) * w.down_scales[row];
            seq.to_bits() != got[row].to_bits()
        });
        // I = 16 < 32: each lane holds one product, so only the tree order
        // differs from sequential; it must matter for some row.
        assert!(differs);
    }
}
