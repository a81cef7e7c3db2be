//! RMS norm followed by a float32 SiLU gate (Qwen's RMSNormGated; seed
//! `gated-rms-norm.ts`).
//!
//! `x, gate [rows, D]: T`, `weight [D]: T`, `eps: f32` (the kernel receives
//! its bits as the template integer `EPS`). One threadgroup of
//! `THREADS = min(1024, ceil(D / 128) * 32)` threads per row ([`threads`]).
//! Thread `tid` accumulates `acc += v * v` (f32) over columns
//! `r + 4 tid + i`, `i` in 0..4, for `r` = 0, 4 THREADS, ... (0 past D).
//! `acc = simd_sum(acc)` in every simdgroup; with more than one simdgroup
//! their sums go to threadgroup memory `sums[sg]` (`sums[lane] = 0` first)
//! and simdgroup 0 takes `simd_sum(sums[lane])` (lanes past the simdgroup
//! count read 0). `inv = precise::rsqrt(acc / float(D) + eps)`. Then
//! ```text
//! normalized = weight[col] * T(float(x) * inv)     // product in T
//! y = 1 / (1 + exp(|g|)); sigmoid = g < 0 ? y : 1 - y   // f32, g = float(gate)
//! out = T((g * sigmoid) * float(normalized))
//! ```
//!
//! # Error bound (f64 model)
//! Against `silu(g) * weight * x / sqrt(mean(x^2) + eps)` in f64: the sum of
//! squares is a positive sum whose terms pass through at most
//! `1 + 4 ceil(D / (4 THREADS)) + 5 (+ 5 when THREADS > 32)` f32 roundings
//! (a relative `gamma` of that); the mean, `+ eps`, the square root and the
//! reciprocal add one f32 rounding each; `T(x * inv)` and the product with
//! the weight one rounding to `T` each; the f32 sigmoid `expf` (2 ulp, CUDA's bound) and 3
//! roundings; the two products one f32 rounding each; the output half an ulp
//! of `T`. All of it is relative to the output: at most about
//! `2.5 ulp of T + (D/256 + 20) f32 roundings` (so under 3 ulp for bf16 and
//! f16 at ordinary D); [`gated_rms_norm_f64`] evaluates it per element.

use super::{Element, Exact, SIMD_WIDTH, Tracked, f32_sum, recip_one_plus_exp, simd_sum};

/// Threads per row: `min(1024, ceil(D / 128) * 32)`.
pub fn threads(d: usize) -> usize {
    (d.div_ceil(128) * SIMD_WIDTH).min(1024)
}

fn check<T>(x: &[T], gate: &[T], weight: &[T], d: usize) {
    assert!(d > 0, "gated_rms_norm: D must be positive");
    assert_eq!(weight.len(), d, "gated_rms_norm: weight must be [D]");
    assert_eq!(x.len() % d, 0, "gated_rms_norm: x must be [rows, D]");
    assert_eq!(gate.len(), x.len(), "gated_rms_norm: gate must be shaped like x");
}

/// The seed's kernel, bit for bit.
pub fn gated_rms_norm_replay<T: Element>(
    x: &[T],
    gate: &[T],
    weight: &[T],
    eps: f32,
    d: usize,
) -> Vec<T> {
    check(x, gate, weight, d);
    let threads = threads(d);
    let simdgroups = threads / SIMD_WIDTH;
    let mut out = Vec::with_capacity(x.len());
    for (xr, gr) in x.chunks_exact(d).zip(gate.chunks_exact(d)) {
        let mut acc = vec![0.0f32; threads];
        for r in (0..d).step_by(threads * 4) {
            for (tid, a) in acc.iter_mut().enumerate() {
                for i in 0..4 {
                    let col = r + tid * 4 + i;
                    let value = if col < d { xr[col].to_f32() } else { 0.0 };
                    *a += value * value;
                }
            }
        }
        let sg_sums: Vec<f32> = acc.chunks_exact(SIMD_WIDTH).map(simd_sum).collect();
        let total = if threads > SIMD_WIDTH {
            let mut sums = [0.0f32; SIMD_WIDTH];
            sums[..simdgroups].copy_from_slice(&sg_sums);
            simd_sum(&sums)
        } else {
            sg_sums[0]
        };
        let inv = 1.0 / (total / d as f32 + eps).sqrt();
        for col in 0..d {
            let normalized = T::round(weight[col].to_f32() * T::round(xr[col].to_f32() * inv));
            let g = gr[col].to_f32();
            let y = 1.0 / (1.0 + g.abs().exp());
            let sigmoid = if g < 0.0 { y } else { 1.0 - y };
            out.push(T::from_f32((g * sigmoid) * normalized));
        }
    }
    out
}

/// Largest number of f32 roundings one square passes through on its way to
/// the row's sum.
pub fn sum_depth(d: usize) -> usize {
    let threads = threads(d);
    let iterations = d.div_ceil(threads * 4);
    1 + 4 * iterations + 5 + if threads > SIMD_WIDTH { 5 } else { 0 }
}

/// f64 reference (module documentation for the bound).
pub fn gated_rms_norm_f64<T: Element>(
    x: &[T],
    gate: &[T],
    weight: &[T],
    eps: f32,
    d: usize,
) -> Exact {
    check(x, gate, weight, d);
    let depth = sum_depth(d);
    let mut value = Vec::with_capacity(x.len());
    let mut tol = Vec::with_capacity(x.len());
    let ex = |v: T| Tracked::exact(f64::from(v.to_f32()));
    for (xr, gr) in x.chunks_exact(d).zip(gate.chunks_exact(d)) {
        let sum = f32_sum(xr.iter().map(|&v| ex(v).mul(ex(v))), depth);
        let inv = Tracked::exact(1.0).div(
            sum.div(Tracked::exact(d as f64))
                .round_f32()
                .add(Tracked::exact(f64::from(eps)))
                .round_f32()
                .monotone(0.0, f64::sqrt)
                .round_f32(),
        );
        let inv = inv.round_f32();
        for col in 0..d {
            let normalized = ex(weight[col])
                .mul(ex(xr[col]).mul(inv).round_op::<T>())
                .round_op::<T>();
            let g = f64::from(gr[col].to_f32());
            let y = recip_one_plus_exp::<f32>(g.abs());
            let sigmoid = if g < 0.0 {
                y
            } else {
                Tracked::exact(1.0).sub(y).round_f32()
            };
            let o = Tracked::exact(g)
                .mul(sigmoid)
                .round_f32()
                .mul(normalized)
                .round_f32()
                .round_to::<T>();
            value.push(o.v);
            tol.push(o.e);
        }
    }
    Exact { value, tol }
}
