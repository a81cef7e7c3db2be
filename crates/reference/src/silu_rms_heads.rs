//! Fused SiLU + RMS normalisation splitting a convolved row into Q, K, V
//! heads (seed `delta/silu-rms-heads.ts`).
//!
//! `x [rows, C]: T` with `C = 2 Hk Dk + Hv Dv`; `qscale, kscale [Dk]: T`;
//! outputs `q, k [rows, Hk, Dk]` and `v [rows, Hv, Dv]`, all `T`; `Dk, Dv`
//! at most 128. One simdgroup per (row, head); heads `0..Hk` are Q,
//! `Hk..2Hk` K, the rest V. Lane `l` holds the 4 values `4l..4l+4` of its
//! head (`T(0)` past the head's width), each activated in `T`:
//! ```text
//! y = 1 / (1 + exp(|x|))            // exp in f32 rounded to T; 1 + e and 1 / d in T
//! sigmoid = x < 0 ? y : 1 - y      // 1 - y in T
//! a = T(x * sigmoid)               // in T
//! sum += float(a) * float(a)       // f32, the lane's 4 values in order
//! ```
//! Q and K heads then take `sum = simd_sum(sum)`,
//! `inv = precise::rsqrt(sum / float(Dk) + 1e-6f)`, and write
//! `scale[c] * T(float(a) * inv)` (a product in `T`); V heads write `a`.
//!
//! # Error bound (f64 model)
//! Against `silu(x) = x / (1 + exp(-x))` and
//! `q = qscale * silu / sqrt(mean(silu^2) + 1e-6f)` in f64: every rounding
//! point above is modelled (`expf` within 2 f32 ulps, CUDA's bound, each `T` operation
//! rounded to f32 and then to `T`); the sum of squares passes through at
//! most 10 f32 roundings per term (product, 4 lane additions, 5 simd_sum
//! levels), a relative `gamma(10)`. The result is relative to the output,
//! so it has an a-priori bound in ulps of `T` (`u_T` = `T`'s unit
//! roundoff; for f32 `u_T = u` and each of `expf`'s ulps counts as `2u`):
//! * `V`: `exp` rounding `u_T` (+ `4u`), `1 + e` and `1 / d` `u_T` each,
//!   `1 - y` `u_T`, so the product before its rounding is within `4 u_T`
//!   relative; with the final half ulp (one ulp across a binade) at most
//!   **5 ulp** (bf16, f16) and **6 ulp** (f32);
//! * `Q`, `K`: the activation's `5 u_T`, the same again through
//!   `inv` (its mean of squares sees `2 x 5 u_T`, the square root halves
//!   it) plus `gamma(10)/2` and 4 f32 roundings, then `T(a * inv)` and the
//!   scale product: at most **12.5 ulp** (bf16, f16) and **22 ulp** (f32).
//!
//! Subnormal outputs (f16) count their absolute half-spacing. Where
//! `exp(|x|)` overflows `T` (f16, `|x| > 11`) the kernel's `y` is 0 and the
//! a-priori bound does not apply; the per-element bound covers that.

use super::{Element, Exact, SIMD_WIDTH, Tracked, f32_sum, recip_one_plus_exp, simd_sum};

/// Values per lane.
const PER_LANE: usize = 4;
/// The kernel's epsilon, `1e-6f`.
pub const EPS: f32 = 1e-6;

/// The sizes of one call (`HK`, `HV`, `DK`, `DV` and `C` are the kernel's
/// template integers, `rows` = B * S the run-time size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeadsGeometry {
    /// B * S: rows of `x`.
    pub rows: usize,
    /// Hk: key heads.
    pub hk: usize,
    /// Hv: value heads.
    pub hv: usize,
    /// Dk: key head size.
    pub dk: usize,
    /// Dv: value head size.
    pub dv: usize,
}

impl HeadsGeometry {
    /// `C = 2 Hk Dk + Hv Dv`.
    pub fn channels(&self) -> usize {
        2 * self.hk * self.dk + self.hv * self.dv
    }

    /// `1 <= Dk, Dv <= 128`, positive head counts.
    pub fn validate(&self) -> Result<(), String> {
        if self.hk == 0 || self.hv == 0 {
            return Err("head counts must be positive".into());
        }
        for (name, d) in [("Dk", self.dk), ("Dv", self.dv)] {
            if d == 0 || d > SIMD_WIDTH * PER_LANE {
                return Err(format!("{name} = {d} must be in 1..=128"));
            }
        }
        Ok(())
    }
}

/// The three outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Heads<T> {
    /// Queries, `[rows, Hk, Dk]`.
    pub q: Vec<T>,
    /// Keys, `[rows, Hk, Dk]`.
    pub k: Vec<T>,
    /// Values, `[rows, Hv, Dv]`.
    pub v: Vec<T>,
}

fn check<T>(x: &[T], qscale: &[T], kscale: &[T], geom: &HeadsGeometry) {
    if let Err(e) = geom.validate() {
        panic!("silu_rms_heads: {e}");
    }
    assert_eq!(x.len(), geom.rows * geom.channels(), "x must be [rows, C]");
    assert_eq!(qscale.len(), geom.dk, "qscale must be [Dk]");
    assert_eq!(kscale.len(), geom.dk, "kscale must be [Dk]");
}

/// `(normalize, width, channel)` of a head.
fn head_span(geom: &HeadsGeometry, head: usize) -> (bool, usize, usize) {
    if head < 2 * geom.hk {
        (true, geom.dk, head * geom.dk)
    } else {
        (false, geom.dv, 2 * geom.hk * geom.dk + (head - 2 * geom.hk) * geom.dv)
    }
}

/// The seed's activation of one value, in `T` (returned as its f32).
fn silu_t<T: Element>(value: f32) -> f32 {
    let e = T::round(value.abs().exp());
    let d = T::round(1.0 + e);
    let y = T::round(1.0 / d);
    let sigmoid = if value < 0.0 { y } else { T::round(1.0 - y) };
    T::round(value * sigmoid)
}

/// The seed's kernel, bit for bit.
pub fn silu_rms_heads_replay<T: Element>(
    x: &[T],
    qscale: &[T],
    kscale: &[T],
    geom: &HeadsGeometry,
) -> Heads<T> {
    check(x, qscale, kscale, geom);
    let (hk, hv, dk, dv, c) = (geom.hk, geom.hv, geom.dk, geom.dv, geom.channels());
    let mut out = Heads {
        q: vec![T::default(); geom.rows * hk * dk],
        k: vec![T::default(); geom.rows * hk * dk],
        v: vec![T::default(); geom.rows * hv * dv],
    };
    for row in 0..geom.rows {
        for head in 0..2 * hk + hv {
            let (normalize, width, channel) = head_span(geom, head);
            let mut values = [[0.0f32; PER_LANE]; SIMD_WIDTH];
            let mut sums = [0.0f32; SIMD_WIDTH];
            for (lane, (lane_values, sum)) in values.iter_mut().zip(&mut sums).enumerate() {
                for (i, slot) in lane_values.iter_mut().enumerate() {
                    let col = lane * PER_LANE + i;
                    let value = if col < width {
                        x[row * c + channel + col].to_f32()
                    } else {
                        0.0
                    };
                    let a = silu_t::<T>(value);
                    *slot = a;
                    *sum += a * a;
                }
            }
            if normalize {
                let sum = simd_sum(&sums);
                let inv = 1.0 / (sum / dk as f32 + EPS).sqrt();
                let (dst, scale) = if head < hk {
                    (&mut out.q, qscale)
                } else {
                    (&mut out.k, kscale)
                };
                let index = (row * hk + head % hk) * dk;
                for col in 0..dk {
                    let normalized = T::round(values[col / PER_LANE][col % PER_LANE] * inv);
                    dst[index + col] = T::from_f32(scale[col].to_f32() * normalized);
                }
            } else {
                let index = (row * hv + head - 2 * hk) * dv;
                for col in 0..dv {
                    out.v[index + col] = T::from_f32(values[col / PER_LANE][col % PER_LANE]);
                }
            }
        }
    }
    out
}

/// The f64 model's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadsExact {
    /// Queries' exact values and bounds.
    pub q: Exact,
    /// Keys' exact values and bounds.
    pub k: Exact,
    /// Values' exact values and bounds.
    pub v: Exact,
}

/// `silu(x)` exactly, with the bound of the seed's `T` evaluation.
fn silu_f64<T: Element>(x: f64) -> Tracked {
    let y = recip_one_plus_exp::<T>(x.abs());
    let sigmoid = if x < 0.0 {
        y
    } else {
        Tracked::exact(1.0).sub(y).round_op::<T>()
    };
    Tracked::exact(x).mul(sigmoid).round_op::<T>()
}

/// f64 reference (module documentation for the bound).
pub fn silu_rms_heads_f64<T: Element>(
    x: &[T],
    qscale: &[T],
    kscale: &[T],
    geom: &HeadsGeometry,
) -> HeadsExact {
    check(x, qscale, kscale, geom);
    let (hk, hv, dk, dv, c) = (geom.hk, geom.hv, geom.dk, geom.dv, geom.channels());
    let mut q = vec![Tracked::exact(0.0); geom.rows * hk * dk];
    let mut k = q.clone();
    let mut v = vec![Tracked::exact(0.0); geom.rows * hv * dv];
    let depth = 1 + PER_LANE + 5;
    for row in 0..geom.rows {
        for head in 0..2 * hk + hv {
            let (normalize, width, channel) = head_span(geom, head);
            let a: Vec<Tracked> = (0..width)
                .map(|col| silu_f64::<T>(f64::from(x[row * c + channel + col].to_f32())))
                .collect();
            if normalize {
                let sum = f32_sum(a.iter().map(|ai| ai.mul(*ai)), depth);
                let mean = sum.div(Tracked::exact(dk as f64)).round_f32();
                let r = mean
                    .add(Tracked::exact(f64::from(EPS)))
                    .round_f32()
                    .monotone(0.0, f64::sqrt)
                    .round_f32();
                let inv = Tracked::exact(1.0).div(r).round_f32();
                let (dst, scale) = if head < hk {
                    (&mut q, qscale)
                } else {
                    (&mut k, kscale)
                };
                let index = (row * hk + head % hk) * dk;
                for col in 0..dk {
                    let normalized = a[col].mul(inv).round_op::<T>();
                    let s = Tracked::exact(f64::from(scale[col].to_f32()));
                    dst[index + col] = s.mul(normalized).round_op::<T>();
                }
            } else {
                let index = (row * hv + head - 2 * hk) * dv;
                v[index..index + dv].copy_from_slice(&a);
            }
        }
    }
    let split = |xs: Vec<Tracked>| Exact {
        value: xs.iter().map(|x| x.v).collect(),
        tol: xs.iter().map(|x| x.e).collect(),
    };
    HeadsExact {
        q: split(q),
        k: split(k),
        v: split(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// The seed's activation written with `half`'s own operators (each
    /// computes in f32 and rounds to the type: the `T op T -> T` rule),
    /// the literal ints converted to `T` first.
    macro_rules! seed_silu {
        ($t:ty, $value:expr) => {{
            let value: $t = $value;
            let one = <$t>::from_f32(1.0);
            let zero = <$t>::from_f32(0.0);
            let abs = if value < zero { -value } else { value };
            let e = <$t>::from_f32(abs.to_f32().exp());
            let y = one / (one + e);
            let sigmoid = if value < zero { y } else { one - y };
            value * sigmoid
        }};
    }

    #[test]
    fn activation_matches_t_arithmetic_exhaustively() {
        let mut rounded_differently = 0;
        for bits in 0..=u16::MAX {
            let b = bf16::from_bits(bits);
            if b.is_nan() {
                continue;
            }
            let want = seed_silu!(bf16, b);
            let got = silu_t::<bf16>(b.to_f32());
            assert_eq!(got.to_bits(), want.to_f32().to_bits(), "bf16 {bits:#06x}");
            let exact = f64::from(b.to_f32()) / (1.0 + (-f64::from(b.to_f32())).exp());
            if b.is_finite() && bf16::from_f64(exact) != want && exact.abs() > 1e-30 {
                rounded_differently += 1;
            }
            let h = f16::from_bits(bits);
            if h.is_nan() {
                continue;
            }
            let want = seed_silu!(f16, h);
            let got = silu_t::<f16>(h.to_f32());
            assert_eq!(got.to_bits(), want.to_f32().to_bits(), "f16 {bits:#06x}");
        }
        // The intermediate roundings to T are visible: many bf16 inputs do
        // not give the correctly rounded SiLU.
        assert!(rounded_differently > 1000, "{rounded_differently}");
    }
}
