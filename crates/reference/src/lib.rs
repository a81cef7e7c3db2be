//! Independent Rust references for the seed kernels.
//!
//! Every family has two models:
//!
//! * a **bit-replay model** (`*_replay`) that computes exactly what the seed
//!   kernel computes under the emulator's arithmetic contract: per-lane
//!   partial sums over the lane's own indices in the kernel's order, the fixed
//!   [`simd_sum`] tree, every `T(...)` rounding point and every `precise::`
//!   function of the seed. A generated kernel run in the emulator must agree
//!   with it bit for bit ([`ulp_distance`] 0);
//! * an **f64 model** (`*_f64`) that dequantises and computes in f64 with no
//!   intermediate rounding, and returns an [`Exact`]: the value of every
//!   output element together with a rigorous bound on how far the kernel may
//!   be from it. The bound is derived from the kernel's arithmetic (how many
//!   f32 roundings each term of each accumulation passes through, which
//!   intermediates are rounded to `T`, libm's `expf` accuracy) and from the
//!   magnitudes of the data; every family's module documents its closed form
//!   as a function of the geometry. A verifier asserts
//!   `ulp_error(got[i], value[i]) <= ulp_bound(i)` for every element with
//!   [`Exact::check`].
//!
//! The emulator's arithmetic contract these models follow:
//! * `simd_sum` over 32 lanes: inactive lanes contribute `-0.0`, then for
//!   `off` = 16, 8, 4, 2, 1: `v[i] = v[i] + v[i + off]` for `i < off`; every
//!   lane gets `v[0]` ([`simd_sum`]);
//! * `half`/`bfloat16_t` compute in f32 and round to nearest even after every
//!   operation: `T op T -> T`, `T op float -> float`, `T op int -> T`
//!   ([`Element::round`]);
//! * `metal::exp` and `precise::exp` are glibc's `expf` (`f32::exp`),
//!   `precise::rsqrt(x)` is `1.0f32 / x.sqrt()`, `metal::fma` is
//!   `f32::mul_add`, and nothing else is contracted.

#![warn(missing_docs)]

use std::fmt;

use half::{bf16, f16};

use kernelgen_contract::Dtype;

pub mod affine;
pub mod delta;
pub mod expert;
pub mod gated_rms_norm;
pub mod silu_rms_heads;

/// Lanes in a SIMD-group.
pub const SIMD_WIDTH: usize = 32;

/// A floating-point element type a kernel reads or writes (`T`, `InT`).
///
/// Implemented for `f32`, `half::bf16` and `half::f16`.
pub trait Element: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The contract dtype.
    const DTYPE: Dtype;
    /// Significand precision in bits, counting the implicit bit
    /// (f32 24, bf16 8, f16 11).
    const PRECISION: i32;
    /// Binary exponent of the smallest positive normal number.
    const MIN_NORMAL_EXP: i32;
    /// The largest finite value.
    const MAX: f64;
    /// Storage width in bits.
    const BITS: u32;

    /// Round an f32 to this type, to nearest even (`T(x)` in the kernel).
    fn from_f32(x: f32) -> Self;
    /// Widen to f32 (exact).
    fn to_f32(self) -> f32;
    /// The storage bits, zero-extended.
    fn to_bits(self) -> u32;
    /// From storage bits (the low `BITS` bits are used).
    fn from_bits(bits: u32) -> Self;

    /// `float(T(x))`: the emulator's rounding after every operation on `T`.
    /// The identity for f32.
    #[inline]
    fn round(x: f32) -> f32 {
        Self::from_f32(x).to_f32()
    }
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const PRECISION: i32 = 24;
    const MIN_NORMAL_EXP: i32 = -126;
    const MAX: f64 = f32::MAX as f64;
    const BITS: u32 = 32;
    #[inline]
    fn from_f32(x: f32) -> Self {
        x
    }
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
    #[inline]
    fn from_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }
}

impl Element for bf16 {
    const DTYPE: Dtype = Dtype::Bf16;
    const PRECISION: i32 = 8;
    const MIN_NORMAL_EXP: i32 = -126;
    const MAX: f64 = 3.3895313892515355e38;
    const BITS: u32 = 16;
    #[inline]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    #[inline]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline]
    fn to_bits(self) -> u32 {
        u32::from(bf16::to_bits(self))
    }
    #[inline]
    fn from_bits(bits: u32) -> Self {
        bf16::from_bits(bits as u16)
    }
}

impl Element for f16 {
    const DTYPE: Dtype = Dtype::F16;
    const PRECISION: i32 = 11;
    const MIN_NORMAL_EXP: i32 = -14;
    const MAX: f64 = 65504.0;
    const BITS: u32 = 16;
    #[inline]
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    #[inline]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline]
    fn to_bits(self) -> u32 {
        u32::from(f16::to_bits(self))
    }
    #[inline]
    fn from_bits(bits: u32) -> Self {
        f16::from_bits(bits as u16)
    }
}

/// Convert f32 values to `T`, rounding to nearest even.
pub fn from_f32_slice<T: Element>(xs: &[f32]) -> Vec<T> {
    xs.iter().map(|&x| T::from_f32(x)).collect()
}

/// The emulator's `simd_sum` over one SIMD-group.
///
/// `lanes[i]` is lane `i`'s value; lanes past `lanes.len()` are inactive and
/// contribute `-0.0`. Then for `off` = 16, 8, 4, 2, 1: `v[i] = v[i] + v[i + off]`
/// for `i < off` (f32 additions); the result (every lane's) is `v[0]`.
pub fn simd_sum(lanes: &[f32]) -> f32 {
    assert!(
        lanes.len() <= SIMD_WIDTH,
        "simd_sum over more than 32 lanes"
    );
    let mut v = [-0.0f32; SIMD_WIDTH];
    v[..lanes.len()].copy_from_slice(lanes);
    let mut off = SIMD_WIDTH / 2;
    while off > 0 {
        for i in 0..off {
            v[i] += v[i + off];
        }
        off /= 2;
    }
    v[0]
}

/// The binary exponent `floor(log2 |x|)` of a finite nonzero f64.
#[inline]
fn exponent(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let biased = (bits >> 52) as i32;
    if biased == 0 {
        // f64 subnormal: far below every Element's range.
        -1075
    } else {
        biased - 1023
    }
}

/// The spacing of `T`'s representable numbers at `|x|`: `2^(e - p + 1)` for
/// `2^e <= |x| < 2^(e+1)`, and the subnormal spacing below the smallest
/// normal (also for `x == 0`). For infinite or NaN `x` it is infinite.
#[inline]
pub fn ulp<T: Element>(x: f64) -> f64 {
    if !x.is_finite() {
        return f64::INFINITY;
    }
    let e = if x == 0.0 {
        T::MIN_NORMAL_EXP
    } else {
        exponent(x).max(T::MIN_NORMAL_EXP)
    };
    // 2^(e - p + 1) built from its bits (always a normal f64 here).
    f64::from_bits(((e - (T::PRECISION - 1) + 1023) as u64) << 52)
}

/// [`ulp`] for a dtype known at run time: the spacing of `dtype`'s floats at `|x|`, and 1 for
/// integer and bool dtypes (their values are compared exactly, a step of 1 being one unit).
pub fn ulp_of(dtype: Dtype, x: f64) -> f64 {
    match dtype {
        Dtype::F32 => ulp::<f32>(x),
        Dtype::F16 => ulp::<f16>(x),
        Dtype::Bf16 => ulp::<bf16>(x),
        _ => 1.0,
    }
}

/// The error of `got` against an exact value, in units of `T`'s ulp at the
/// exact value: `|got - exact| / ulp::<T>(exact)`. Infinite when `got` is NaN
/// or infinite (unless it equals `exact`).
pub fn ulp_error<T: Element>(got: T, exact: f64) -> f64 {
    let g = f64::from(got.to_f32());
    if g == exact {
        return 0.0;
    }
    if !g.is_finite() || !exact.is_finite() {
        return f64::INFINITY;
    }
    (g - exact).abs() / ulp::<T>(exact)
}

/// The largest [`ulp_error`] over paired elements.
pub fn max_ulp<T: Element>(got: &[T], exact: &[f64]) -> f64 {
    assert_eq!(got.len(), exact.len(), "max_ulp: length mismatch");
    got.iter()
        .zip(exact)
        .map(|(&g, &e)| ulp_error(g, e))
        .fold(0.0, f64::max)
}

/// Position of a value on the line of representable `T` values (negative
/// values below zero, `-0.0` and `+0.0` both at 0).
fn ordinal<T: Element>(x: T) -> i64 {
    let bits = u64::from(x.to_bits());
    let sign = 1u64 << (T::BITS - 1);
    let magnitude = (bits & (sign - 1)) as i64;
    if bits & sign != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// How many representable `T` values lie between `a` and `b` (0 when equal,
/// `-0.0` and `+0.0` equal, 1 between neighbours). `u64::MAX` when either is
/// NaN. This is the bit-exactness measure between a kernel and its replay.
pub fn ulp_distance<T: Element>(a: T, b: T) -> u64 {
    if a.to_f32().is_nan() || b.to_f32().is_nan() {
        return if a.to_bits() == b.to_bits() {
            0
        } else {
            u64::MAX
        };
    }
    ordinal(a).abs_diff(ordinal(b))
}

/// The largest [`ulp_distance`] over paired elements.
pub fn max_ulp_distance<T: Element>(a: &[T], b: &[T]) -> u64 {
    assert_eq!(a.len(), b.len(), "max_ulp_distance: length mismatch");
    a.iter()
        .zip(b)
        .map(|(&x, &y)| ulp_distance(x, y))
        .max()
        .unwrap_or(0)
}

/// What an f64 model returns: every output element's exact value and the
/// largest distance a correct kernel may be from it.
///
/// `tol[i]` bounds `|kernel[i] - value[i]|` (absolute, rigorous to the
/// assumptions documented by the family: round-to-nearest-even everywhere,
/// `expf` within 1 ulp, no overflow). In units of the output dtype's ulp it is
/// [`Exact::ulp_bound`].
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    /// Each element's exact value.
    pub value: Vec<f64>,
    /// Each element's bound on the absolute error.
    pub tol: Vec<f64>,
}

/// How well a kernel's output agrees with what it should be: an [`Exact`], or a reference's
/// values within a tolerance (`kernelgen-verify`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agreement {
    /// How many elements were compared.
    pub elements: usize,
    /// The largest [`ulp_error`] over all elements.
    pub max_ulp: f64,
    /// The largest allowed [`Exact::ulp_bound`] over all elements.
    pub max_ulp_bound: f64,
    /// The largest absolute error.
    pub max_abs: f64,
    /// The largest `|error| / tol` (0 where both are 0): how much of the
    /// bound was used, at most 1.
    pub max_bound_use: f64,
}

/// The first element whose error exceeds its bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Violation {
    /// The element's index.
    pub index: usize,
    /// The kernel's value.
    pub got: f64,
    /// The exact value.
    pub exact: f64,
    /// The element's bound on the absolute error.
    pub tol: f64,
    /// The error in ulps of the output dtype.
    pub ulp_error: f64,
    /// The bound in ulps of the output dtype.
    pub ulp_bound: f64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "element {}: got {:e}, exact {:e}, error {:e} ({:.3} ulp) exceeds the bound {:e} ({:.3} ulp)",
            self.index,
            self.got,
            self.exact,
            (self.got - self.exact).abs(),
            self.ulp_error,
            self.tol,
            self.ulp_bound
        )
    }
}

impl std::error::Error for Violation {}

impl Exact {
    /// Elements in the output.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// Whether the output has no elements.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// The allowed error of element `i` in ulps of `T` at the exact value.
    pub fn ulp_bound<T: Element>(&self, i: usize) -> f64 {
        self.tol[i] / ulp::<T>(self.value[i])
    }

    /// Check every element: `|got[i] - value[i]| <= tol[i]`, i.e.
    /// `ulp_error(got[i], value[i]) <= ulp_bound(i)`. An element whose bound
    /// is not finite fails.
    pub fn check<T: Element>(&self, got: &[T]) -> Result<Agreement, Violation> {
        assert_eq!(got.len(), self.len(), "Exact::check: length mismatch");
        let mut a = Agreement {
            elements: got.len(),
            max_ulp: 0.0,
            max_ulp_bound: 0.0,
            max_abs: 0.0,
            max_bound_use: 0.0,
        };
        for (i, &g) in got.iter().enumerate() {
            let gv = f64::from(g.to_f32());
            let exact = self.value[i];
            let tol = self.tol[i];
            let err = if gv == exact { 0.0 } else { (gv - exact).abs() };
            let ue = ulp_error(g, exact);
            let ub = self.ulp_bound::<T>(i);
            // A non-finite bound means the f64 model could not bound this
            // element (an overflow on the way): never a pass.
            if err.is_nan() || err > tol || !tol.is_finite() {
                return Err(Violation {
                    index: i,
                    got: gv,
                    exact,
                    tol,
                    ulp_error: ue,
                    ulp_bound: ub,
                });
            }
            a.max_ulp = a.max_ulp.max(ue);
            a.max_ulp_bound = a.max_ulp_bound.max(ub);
            a.max_abs = a.max_abs.max(err);
            if err > 0.0 {
                a.max_bound_use = a.max_bound_use.max(err / tol);
            }
        }
        Ok(a)
    }
}

/// f32's unit roundoff, `2^-24`.
pub const U32: f64 = 1.0 / 16_777_216.0;

/// `gamma(n) = n u / (1 - n u)` with `u = 2^-24`: the classic bound on the
/// relative error accumulated by a value that passes through `n` f32
/// roundings (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U32;
    assert!(nu < 0.5, "gamma: too many roundings");
    nu / (1.0 - nu)
}

/// Relative slack for the f64 model's own rounding (one f64 ulp per
/// operation, twice what round-to-nearest needs).
const F64_SLACK: f64 = f64::EPSILON;
/// Absolute slack for one f32 operation that may underflow (half the f32
/// subnormal spacing is 2^-150; this is 2^-148).
const UNDERFLOW: f64 = 1.0 / (1u128 << 127) as f64 / (1u64 << 21) as f64;

/// A real quantity tracked by the f64 models: the f64 model's value `v` and a
/// rigorous bound `e` on `|kernel - v|`, where "kernel" is the value the seed
/// kernel holds at the same point. Each method applies the exact operation to
/// `v` and propagates the bound (first-order terms and the cross term, so the
/// propagation is rigorous); the `round_*` methods add the kernel's rounding
/// at that point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tracked {
    pub v: f64,
    pub e: f64,
}

impl Tracked {
    #[inline]
    pub fn exact(v: f64) -> Self {
        Tracked { v, e: 0.0 }
    }

    #[inline]
    fn with_slack(v: f64, e: f64) -> Self {
        Tracked {
            v,
            e: e + F64_SLACK * v.abs(),
        }
    }

    /// An upper bound on the magnitude of the kernel's value.
    #[inline]
    pub fn hi(self) -> f64 {
        self.v.abs() + self.e
    }

    #[inline]
    pub fn add(self, o: Tracked) -> Self {
        Self::with_slack(self.v + o.v, self.e + o.e)
    }

    #[inline]
    pub fn sub(self, o: Tracked) -> Self {
        Self::with_slack(self.v - o.v, self.e + o.e)
    }

    #[inline]
    pub fn mul(self, o: Tracked) -> Self {
        Self::with_slack(
            self.v * o.v,
            self.e * o.v.abs() + self.v.abs() * o.e + self.e * o.e,
        )
    }

    /// `self / o`; needs `|o.v| > o.e` (the kernel's divisor cannot be 0).
    pub fn div(self, o: Tracked) -> Self {
        let d = o.v.abs();
        let e = if d > o.e {
            (self.e * d + self.v.abs() * o.e) / (d * (d - o.e))
        } else {
            f64::INFINITY
        };
        Self::with_slack(self.v / o.v, e)
    }

    /// `f(self)` for a function `f` monotone on `[v - e, v + e]` (clamped to
    /// `lo..`): the bound is the largest move of `f` over that interval.
    pub fn monotone(self, lo: f64, f: impl Fn(f64) -> f64) -> Self {
        let y = f(self.v);
        let a = f((self.v - self.e).max(lo));
        let b = f(self.v + self.e);
        Self::with_slack(y, (a - y).abs().max((b - y).abs()))
    }

    /// The kernel rounds to f32 here.
    #[inline]
    pub fn round_f32(self) -> Self {
        Tracked {
            v: self.v,
            e: self.e + 0.5 * ulp::<f32>(self.hi()) + UNDERFLOW,
        }
    }

    /// The kernel rounds (an f32 value) to `T` here; nothing for f32.
    #[inline]
    pub fn round_to<T: Element>(self) -> Self {
        if T::PRECISION == 24 {
            return self;
        }
        if self.hi() > T::MAX {
            return Tracked {
                v: self.v,
                e: f64::INFINITY,
            };
        }
        Tracked {
            v: self.v,
            e: self.e + 0.5 * ulp::<T>(self.hi()),
        }
    }

    /// The result of an operation on `T` operands: computed in f32, rounded
    /// to f32 and then to `T` (once for f32).
    #[inline]
    pub fn round_op<T: Element>(self) -> Self {
        self.round_f32().round_to::<T>()
    }

    /// A libm f32 function here (glibc's `expf`): within 1 ulp of f32.
    pub fn libm_f32(self) -> Self {
        Tracked {
            v: self.v,
            e: self.e + ulp::<f32>(self.hi()) + UNDERFLOW,
        }
    }
}

/// The bound on an f32 accumulation of `terms` in any order in which no term
/// passes through more than `depth` f32 roundings (its product's rounding,
/// if the kernel rounds it, plus every addition on its way to the result):
/// `|kernel - sum| <= sum(e_i) + gamma(depth) * sum(|v_i| + e_i)`
/// (Higham 3.1 on the kernel's own, already perturbed, terms).
pub(crate) fn f32_sum(terms: impl IntoIterator<Item = Tracked>, depth: usize) -> Tracked {
    f32_sum_with(terms, depth, gamma(depth))
}

/// [`f32_sum`] with `gamma(depth)` computed once by the caller (the same result).
#[inline]
pub(crate) fn f32_sum_with(terms: impl IntoIterator<Item = Tracked>, depth: usize, gamma_depth: f64) -> Tracked {
    let mut v = 0.0f64;
    let mut e = 0.0f64;
    let mut mag = 0.0f64;
    let mut n = 0usize;
    for t in terms {
        v += t.v;
        e += t.e;
        mag += t.hi();
        n += 1;
    }
    f32_sum_finish(v, e, mag, n, depth, gamma_depth)
}

/// The end of [`f32_sum`]: from the sums of the terms' values, bounds and magnitudes
/// (`|v_i| + e_i`), each added left to right from 0.
#[inline(always)]
pub(crate) fn f32_sum_finish(v: f64, e: f64, mag: f64, n: usize, depth: usize, gamma_depth: f64) -> Tracked {
    let e = e + gamma_depth * mag + (n + depth) as f64 * UNDERFLOW + (n as f64) * F64_SLACK * mag;
    Tracked { v, e }
}

/// `1 / (1 + exp(a))` for an exact `a >= 0` as the seeds evaluate it:
/// `expf` (libm, f32), then the exp's result, the addition and the division
/// each rounded to `R` (`R` = f32 where the seed computes in float, `T` where
/// it computes in `T`). Where `exp(a)` may overflow `R` the kernel's quotient
/// may be 0 instead: the bound then covers `[0, 1 / R::MAX]`.
pub(crate) fn recip_one_plus_exp<R: Element>(a: f64) -> Tracked {
    debug_assert!(a >= 0.0);
    let ea = a.exp();
    if ea * (1.0 + 1e-6) >= R::MAX {
        let v = 1.0 / (1.0 + ea);
        return Tracked {
            v,
            e: v + 2.0 / R::MAX + ulp::<R>(0.0),
        };
    }
    let e = Tracked::exact(a)
        .monotone(0.0, f64::exp)
        .libm_f32()
        .round_to::<R>();
    let d = Tracked::exact(1.0).add(e).round_op::<R>();
    Tracked::exact(1.0).div(d).round_op::<R>()
}

/// A small deterministic generator (SplitMix64), the one of kernelgen's verification: the
/// data helpers, `kernelgen-verify`'s random inputs and the tests draw from it (inlined into
/// their loops: the heads draw 40 M values); the library has no dependency on `rand`.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `lo..=hi`.
    #[inline]
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo + 1) as u64;
        // the same value without a division when the span is a power of two (weights)
        let r = if span.is_power_of_two() { self.next_u64() & (span - 1) } else { self.next_u64() % span };
        lo + r as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_sum_order_is_not_sequential() {
        // Lane 0 holds 1, lanes 1..32 hold 2^-24 each. Sequentially every
        // 2^-24 is lost to rounding (1 + 2^-24 ties to 1); the tree adds the
        // small values among themselves first (to 31 * 2^-24), so they survive.
        let mut lanes = [U32 as f32; 32];
        lanes[0] = 1.0;
        let sequential = lanes.iter().fold(0.0f32, |acc, &x| acc + x);
        assert_eq!(sequential, 1.0);
        let tree = simd_sum(&lanes);
        assert!(tree > 1.0, "tree sum {tree}");
        // The tree's exact order: first 16 pairs (0,16) .. (15,31).
        let mut v = lanes;
        for off in [16, 8, 4, 2, 1] {
            for i in 0..off {
                v[i] += v[i + off];
            }
        }
        assert_eq!(tree.to_bits(), v[0].to_bits());
        // 1 + 2^-24 ties to even (1); 2^-24 * 2 first then 1 + 2^-23 is exact.
        assert_eq!(tree, 1.0 + 30.0 * U32 as f32);
    }

    #[test]
    fn simd_sum_inactive_lanes_are_negative_zero() {
        // All active lanes -0.0: the result stays -0.0 only if the inactive
        // lanes contribute -0.0 (a +0.0 would make it +0.0).
        let s = simd_sum(&[-0.0f32; 3]);
        assert_eq!(s.to_bits(), (-0.0f32).to_bits());
        let s = simd_sum(&[-0.0f32, 0.0]);
        assert_eq!(s.to_bits(), 0.0f32.to_bits());
        assert_eq!(simd_sum(&[]).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn ulp_of_each_dtype() {
        assert_eq!(ulp::<f32>(1.0), 2f64.powi(-23));
        assert_eq!(ulp::<f32>(1.5), 2f64.powi(-23));
        assert_eq!(ulp::<f32>(2.0), 2f64.powi(-22));
        assert_eq!(ulp::<bf16>(1.0), 2f64.powi(-7));
        assert_eq!(ulp::<bf16>(-3.0), 2f64.powi(-6));
        assert_eq!(ulp::<f16>(1.0), 2f64.powi(-10));
        assert_eq!(ulp::<f16>(0.0), 2f64.powi(-24));
        assert_eq!(ulp::<f16>(1e-6), 2f64.powi(-24));
        assert_eq!(ulp::<f32>(0.0), 2f64.powi(-149));
        assert_eq!(ulp::<bf16>(1e-40), 2f64.powi(-133));
    }

    #[test]
    fn ulp_of_a_dtype_at_run_time_is_the_typed_ulp() {
        for x in [0.0, 1e-40, 1e-6, 0.75, 1.0, 3.0, 65504.0, 1e30] {
            assert_eq!(ulp_of(Dtype::F32, x), ulp::<f32>(x));
            assert_eq!(ulp_of(Dtype::F16, x), ulp::<f16>(x));
            assert_eq!(ulp_of(Dtype::Bf16, x), ulp::<bf16>(x));
            assert_eq!(ulp_of(Dtype::I32, x), 1.0);
        }
        // exact at a power of two, where a logarithm rounds up
        let below = f64::from_bits(2f64.to_bits() - 1);
        assert_eq!(ulp_of(Dtype::F32, below), 2f64.powi(-23));
    }

    #[test]
    fn ulp_error_and_distance() {
        let one = bf16::from_f32(1.0);
        let next = bf16::from_bits(one.to_bits() + 1);
        assert_eq!(ulp_error(next, 1.0), 1.0);
        assert_eq!(ulp_error(one, 1.0 + 2f64.powi(-9)), 0.25);
        assert_eq!(ulp_distance(one, next), 1);
        assert_eq!(ulp_distance(bf16::from_f32(-0.0), bf16::from_f32(0.0)), 0);
        // Across zero: the smallest subnormals of opposite sign are 2 apart.
        assert_eq!(ulp_distance(f32::from_bits(1), -f32::from_bits(1)), 2);
        assert_eq!(ulp_distance(f32::NAN, 1.0), u64::MAX);
        assert_eq!(max_ulp_distance(&[1.0f32, 2.0], &[1.0, 2.0]), 0);
        assert_eq!(ulp_error(f32::NAN, 1.0), f64::INFINITY);
        assert_eq!(max_ulp(&[1.0f32, 3.0], &[1.0, 3.0 + 2f64.powi(-22)]), 1.0);
    }

    #[test]
    fn element_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1).
        assert_eq!(bf16::round(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(
            bf16::round(1.0 + 3.0 * 2f32.powi(-8)),
            1.0 + 2.0 * 2f32.powi(-7)
        );
        assert_eq!(f16::round(1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(<f32 as Element>::round(0.1), 0.1);
        assert_eq!(<bf16 as Element>::from_bits(0x3f80).to_f32(), 1.0);
        assert_eq!(<f16 as Element>::to_bits(f16::from_f32(1.0)), 0x3c00);
    }

    #[test]
    fn exact_check_reports_violations() {
        let exact = Exact {
            value: vec![1.0, 2.0],
            tol: vec![2f64.powi(-7), 0.0],
        };
        let ok = exact
            .check(&[bf16::from_bits(0x3f81), bf16::from_f32(2.0)])
            .unwrap();
        assert_eq!(ok.max_ulp, 1.0);
        assert_eq!(ok.max_bound_use, 1.0);
        let bad = exact
            .check(&[bf16::from_f32(1.0), bf16::from_bits(0x4001)])
            .unwrap_err();
        assert_eq!(bad.index, 1);
        assert_eq!(bad.ulp_error, 1.0);
        assert_eq!(bad.ulp_bound, 0.0);
    }

    #[test]
    fn gamma_bound_holds_for_a_bad_sum() {
        // 1 + many tiny values: sequential f32 loses them all.
        let mut terms = vec![1.0f32];
        terms.extend(std::iter::repeat_n(U32 as f32 * 0.75, 100));
        let got = terms.iter().fold(0.0f32, |a, &x| a + x);
        let t = f32_sum(
            terms.iter().map(|&x| Tracked::exact(f64::from(x))),
            terms.len(),
        );
        assert!((f64::from(got) - t.v).abs() <= t.e);
        assert!((f64::from(got) - t.v).abs() > 0.0);
    }
}
