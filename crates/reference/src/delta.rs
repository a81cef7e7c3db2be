//! Gated DeltaNet recurrence: mlx-lm's `gated_delta_step` (seed
//! `delta/gated.ts`, unmasked and masked) and the state-only prefix replay
//! (seed `delta/state.ts`).
//!
//! Shapes: `q, k [B, T, Hk, Dk]: InT`, `v [B, T, Hv, Dv]: InT`,
//! `g [B, T, Hv]: f32`, `beta [B, T, Hv]: InT`, `state [B, Hv, Dv, Dk]: f32`,
//! optional `mask [B, T]`, `y [B, T, Hv, Dv]: InT`. Value head `hv` reads key
//! head `hv / (Hv / Hk)` (C++ integer division; `Hv % Hk == 0` is required).
//!
//! One simdgroup owns one state row `(b, hv, dv)`; lane `l` holds the `Dk/32`
//! consecutive values `s[n l + i]` (`n = Dk/32`). Per step, in f32:
//! ```text
//! kv = 0; for i: s_i = s_i * g;  kv += s_i * k_i      (f32 * InT -> f32)
//! kv = simd_sum(kv)
//! delta = (v[dv] - kv) * beta                            (InT - f32, f32 * InT)
//! out = 0; for i: s_i = s_i + k_i * delta;  out += s_i * q_i
//! y[dv] = InT(simd_sum(out))
//! ```
//! every product and sum rounded to f32 (no contraction). A masked step
//! (`mask[b, t]` false) writes `y = 0` and leaves the state untouched. The
//! prefix replay runs the first `lengths[b]` steps of batch `b` without `q`
//! and `y` and writes only the state.
//!
//! # Error bound (f64 model)
//! The f64 model runs the same recurrence exactly and carries, for every
//! state row, a bound `E` on the 2-norm of the kernel's state error
//! `r = s_kernel - s` (a norm-wise running error analysis; a per-element
//! one grows geometrically with T and is useless past a few dozen steps).
//! With `n = Dk`, `u = 2^-24`, `d = Dk/32 + 6` (the most f32 roundings a
//! term of `kv` or `out` passes through: its product, `Dk/32` lane
//! additions, 5 simd_sum levels), per step:
//! ```text
//! decay:  E1 = |g| E (1 + u) + u ||s'||
//! kv:     |kv^ - kv| <= ||k|| E1 + gamma(d) (sum|s'_i k_i| + ||k|| E1)   (= dkv, the second term eps_kv)
//! delta:  rho_d <= gamma(2) |beta| (|v - kv| + dkv)
//! update: r'' = (I - beta k kᵀ) r' + k (rho_d - beta eps_kv) + rho_3, so
//!         E2 = c E1 + ||k|| (|beta| eps_kv + rho_d) + u (||s'|| + E1)
//!              + 2u (1 + u) ||k|| (|delta| + |beta| dkv + rho_d)
//! ```
//! with `c = max(1, |1 - beta ||k||^2|)` the 2-norm of `I - beta k kᵀ` (1
//! whenever `0 <= beta ||k||^2 <= 2`, as for mlx-lm's normalised keys), and
//! `y` within `||q|| E2 + gamma(d) (sum|s_i q_i| + ||q|| E2)` before its
//! rounding to `InT` (half an ulp of `InT`). The state's per-element bound
//! is `E`. Every `u` and `gamma` is inflated by `2^-50` to cover the f64
//! model's own rounding (`gamma(d)` by `Dk 2^-52`), and each vector
//! rounding by an underflow term.
//! With `|g| < 1` and `c = 1` the bound stays of the order of the per-step
//! injections over `1 - |g|`, for any T.

use super::{Element, Exact, SIMD_WIDTH, Tracked, U32, gamma, simd_sum};

/// The sizes of one call (`Dk`, `Dv`, `Hk`, `Hv` are the kernel's template
/// integers, `B` and `T` run-time sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeltaGeometry {
    /// B: batch size.
    pub b: usize,
    /// T: time steps.
    pub t: usize,
    /// Hk: key heads.
    pub hk: usize,
    /// Hv: value heads (a multiple of Hk).
    pub hv: usize,
    /// Dk: key head size (a multiple of 32).
    pub dk: usize,
    /// Dv: value head size.
    pub dv: usize,
}

impl DeltaGeometry {
    /// Positive sizes, `Dk % 32 == 0`, `Hv % Hk == 0`.
    pub fn validate(&self) -> Result<(), String> {
        let DeltaGeometry { b, t, hk, hv, dk, dv } = *self;
        if b == 0 || hk == 0 || hv == 0 || dk == 0 || dv == 0 {
            return Err("delta sizes must be positive (T may be 0)".into());
        }
        if dk % SIMD_WIDTH != 0 {
            return Err(format!("Dk = {dk} must be a multiple of 32"));
        }
        if hv % hk != 0 {
            return Err(format!("Hv = {hv} must be a multiple of Hk = {hk}"));
        }
        let _ = t;
        Ok(())
    }

    /// Elements of `q` and `k`.
    pub fn qk_len(&self) -> usize {
        self.b * self.t * self.hk * self.dk
    }
    /// Elements of `v` and `y`.
    pub fn v_len(&self) -> usize {
        self.b * self.t * self.hv * self.dv
    }
    /// Elements of `g` and `beta`.
    pub fn gate_len(&self) -> usize {
        self.b * self.t * self.hv
    }
    /// Elements of the state.
    pub fn state_len(&self) -> usize {
        self.b * self.hv * self.dv * self.dk
    }

    /// The key head that value head `hv` reads.
    pub fn key_head(&self, hv: usize) -> usize {
        hv / (self.hv / self.hk)
    }
}

/// Inputs of the recurrence step kernel.
#[derive(Clone, Copy, Debug)]
pub struct DeltaInputs<'a, T> {
    /// Queries, `[B, T, Hk, Dk]`.
    pub q: &'a [T],
    /// Keys, `[B, T, Hk, Dk]`.
    pub k: &'a [T],
    /// Values, `[B, T, Hv, Dv]`.
    pub v: &'a [T],
    /// Decay gates, `[B, T, Hv]`.
    pub g: &'a [f32],
    /// Update strengths, `[B, T, Hv]`.
    pub beta: &'a [T],
    /// Initial state, `[B, Hv, Dv, Dk]`.
    pub state: &'a [f32],
    /// `[B, T]`; `None` is the unmasked kernel.
    pub mask: Option<&'a [bool]>,
}

/// Inputs of the prefix-state kernel.
#[derive(Clone, Copy, Debug)]
pub struct DeltaStateInputs<'a, T> {
    /// Keys, `[B, T, Hk, Dk]`.
    pub k: &'a [T],
    /// Values, `[B, T, Hv, Dv]`.
    pub v: &'a [T],
    /// Decay gates, `[B, T, Hv]`.
    pub g: &'a [f32],
    /// Update strengths, `[B, T, Hv]`.
    pub beta: &'a [T],
    /// Initial state, `[B, Hv, Dv, Dk]`.
    pub state: &'a [f32],
    /// `[B]`: steps kept per batch (`<= T`; a negative count runs none).
    pub lengths: &'a [i32],
}

/// Outputs of the step kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaOutput<T> {
    /// Outputs, `[B, T, Hv, Dv]`.
    pub y: Vec<T>,
    /// Final state, `[B, Hv, Dv, Dk]`.
    pub state: Vec<f32>,
}

/// The f64 model's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaExact {
    /// Outputs, `[B, T, Hv, Dv]`.
    pub y: Exact,
    /// Final state, `[B, Hv, Dv, Dk]`.
    pub state: Exact,
}

fn check_common<T>(
    geom: &DeltaGeometry,
    k: &[T],
    v: &[T],
    g: &[f32],
    beta: &[T],
    state: &[f32],
) {
    if let Err(e) = geom.validate() {
        panic!("delta: {e}");
    }
    assert_eq!(k.len(), geom.qk_len(), "delta: k must be [B, T, Hk, Dk]");
    assert_eq!(v.len(), geom.v_len(), "delta: v must be [B, T, Hv, Dv]");
    assert_eq!(g.len(), geom.gate_len(), "delta: g must be [B, T, Hv]");
    assert_eq!(beta.len(), geom.gate_len(), "delta: beta must be [B, T, Hv]");
    assert_eq!(state.len(), geom.state_len(), "delta: state must be [B, Hv, Dv, Dk]");
}

fn check_step<T>(geom: &DeltaGeometry, inp: &DeltaInputs<'_, T>) {
    check_common(geom, inp.k, inp.v, inp.g, inp.beta, inp.state);
    assert_eq!(inp.q.len(), geom.qk_len(), "delta: q must be [B, T, Hk, Dk]");
    if let Some(mask) = inp.mask {
        assert_eq!(mask.len(), geom.b * geom.t, "delta: mask must be [B, T]");
    }
}

fn check_prefix<T>(geom: &DeltaGeometry, inp: &DeltaStateInputs<'_, T>) {
    check_common(geom, inp.k, inp.v, inp.g, inp.beta, inp.state);
    assert_eq!(inp.lengths.len(), geom.b, "delta state: lengths must be [B]");
    for &l in inp.lengths {
        assert!(l <= geom.t as i32, "delta state: a length exceeds T");
    }
}

/// Offsets of step `t` of row `(b, hv)`: into q/k (start of the key head's
/// Dk values), v/y (start of the value head's Dv values), g/beta.
fn offsets(geom: &DeltaGeometry, b: usize, hv: usize, t: usize) -> (usize, usize, usize) {
    let bt = b * geom.t + t;
    (
        (bt * geom.hk + geom.key_head(hv)) * geom.dk,
        (bt * geom.hv + hv) * geom.dv,
        bt * geom.hv + hv,
    )
}

// ---------------------------------------------------------------- replay

/// One state row in the kernel's registers: `[lane][i]`, flattened.
struct Row {
    s: Vec<f32>,
    per_lane: usize,
}

impl Row {
    fn load(state: &[f32], at: usize, dk: usize) -> Self {
        Row {
            s: state[at..at + dk].to_vec(),
            per_lane: dk / SIMD_WIDTH,
        }
    }

    /// Decay and `kv` read-out, returning `delta`.
    fn decay_and_delta<T: Element>(&mut self, k: &[T], g: f32, v: T, beta: T) -> f32 {
        let mut kv = [0.0f32; SIMD_WIDTH];
        for (lane, acc) in kv.iter_mut().enumerate() {
            for i in 0..self.per_lane {
                let s_idx = self.per_lane * lane + i;
                self.s[s_idx] *= g;
                *acc += self.s[s_idx] * k[s_idx].to_f32();
            }
        }
        let kv = simd_sum(&kv);
        (v.to_f32() - kv) * beta.to_f32()
    }

    /// The rank-one update; with `q`, also the read-out `sum(s * q)`.
    fn update<T: Element>(&mut self, k: &[T], delta: f32, q: Option<&[T]>) -> f32 {
        let mut out = [0.0f32; SIMD_WIDTH];
        for (lane, acc) in out.iter_mut().enumerate() {
            for i in 0..self.per_lane {
                let s_idx = self.per_lane * lane + i;
                self.s[s_idx] += k[s_idx].to_f32() * delta;
                if let Some(q) = q {
                    *acc += self.s[s_idx] * q[s_idx].to_f32();
                }
            }
        }
        simd_sum(&out)
    }
}

/// The seed's step kernel (masked when `inp.mask` is given), bit for bit.
pub fn delta_replay<T: Element>(geom: &DeltaGeometry, inp: &DeltaInputs<'_, T>) -> DeltaOutput<T> {
    check_step(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let mut y = vec![T::default(); geom.v_len()];
    let mut state_out = vec![0.0f32; geom.state_len()];
    for b in 0..geom.b {
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut row = Row::load(inp.state, at, dk);
                for t in 0..geom.t {
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    if inp.mask.is_none_or(|m| m[b * geom.t + t]) {
                        let k = &inp.k[qk..qk + dk];
                        let delta =
                            row.decay_and_delta(k, inp.g[gb], inp.v[vy + d], inp.beta[gb]);
                        let out = row.update(k, delta, Some(&inp.q[qk..qk + dk]));
                        y[vy + d] = T::from_f32(out);
                    } else {
                        y[vy + d] = T::from_f32(0.0);
                    }
                }
                state_out[at..at + dk].copy_from_slice(&row.s);
            }
        }
    }
    DeltaOutput {
        y,
        state: state_out,
    }
}

/// The seed's prefix-state kernel, bit for bit: the state after the first
/// `lengths[b]` steps of every batch.
pub fn delta_state_replay<T: Element>(
    geom: &DeltaGeometry,
    inp: &DeltaStateInputs<'_, T>,
) -> Vec<f32> {
    check_prefix(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let mut state_out = vec![0.0f32; geom.state_len()];
    for b in 0..geom.b {
        let keep = inp.lengths[b].max(0) as usize;
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut row = Row::load(inp.state, at, dk);
                for t in 0..keep {
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    let k = &inp.k[qk..qk + dk];
                    let delta = row.decay_and_delta(k, inp.g[gb], inp.v[vy + d], inp.beta[gb]);
                    row.update::<T>(k, delta, None);
                }
                state_out[at..at + dk].copy_from_slice(&row.s);
            }
        }
    }
    state_out
}

// ------------------------------------------------------------------- f64

fn norm(xs: impl Iterator<Item = f64>) -> f64 {
    xs.map(|x| x * x).sum::<f64>().sqrt()
}

/// One state row of the f64 model: the exact values and `E`, a bound on
/// the 2-norm of the kernel's error (module documentation).
struct RowBound {
    s: Vec<f64>,
    e: f64,
}

impl RowBound {
    fn load(state: &[f32]) -> Self {
        RowBound {
            s: state.iter().map(|&x| f64::from(x)).collect(),
            e: 0.0,
        }
    }

    /// One step; returns `out = sum(s * q)` and its bound when `q` is given.
    fn step(&mut self, k: &[f64], g: f64, v: f64, beta: f64, q: Option<&[f64]>) -> Option<Tracked> {
        // f32 unit roundoff, inflated to cover the f64 model's own rounding.
        let u = U32 + 2f64.powi(-50);
        let n = self.s.len();
        let depth = n / SIMD_WIDTH + 6;
        let gam = gamma(depth) + n as f64 * 2f64.powi(-52);
        let gam2 = gamma(2) + 2.0 * 2f64.powi(-50);
        let root_n = (n as f64).sqrt();
        // Underflow of one f32 product: at most half the subnormal spacing.
        let tiny = 2f64.powi(-149);

        // Decay.
        for si in &mut self.s {
            *si *= g;
        }
        let ns = norm(self.s.iter().copied());
        let e1 = g.abs() * self.e * (1.0 + u) + u * ns + root_n * tiny;

        // kv = sum(s * k), simd_sum.
        let nk = norm(k.iter().copied());
        let kv: f64 = self.s.iter().zip(k).map(|(s, k)| s * k).sum();
        let abs_sk: f64 = self.s.iter().zip(k).map(|(s, k)| (s * k).abs()).sum();
        let eps_kv = gam * (abs_sk + nk * e1) + n as f64 * tiny;
        let dkv = nk * e1 + eps_kv;

        // delta = (v - kv) * beta.
        let r = v - kv;
        let delta = r * beta;
        let rho_d = gam2 * (r.abs() + dkv) * beta.abs() + 2.0 * tiny;
        let delta_hi = delta.abs() + beta.abs() * dkv + rho_d;

        // s += k * delta.
        for (si, ki) in self.s.iter_mut().zip(k) {
            *si += ki * delta;
        }
        let c = (1.0 - beta * nk * nk).abs().max(1.0);
        let rho_3 = u * (ns + e1) + 2.0 * u * (1.0 + u) * nk * delta_hi + 2.0 * root_n * tiny;
        self.e = c * e1 + nk * (beta.abs() * eps_kv + rho_d) + rho_3;

        // out = sum(s * q), simd_sum.
        q.map(|q| {
            let nq = norm(q.iter().copied());
            let out: f64 = self.s.iter().zip(q).map(|(s, q)| s * q).sum();
            let abs_sq: f64 = self.s.iter().zip(q).map(|(s, q)| (s * q).abs()).sum();
            Tracked {
                v: out,
                e: nq * self.e + gam * (abs_sq + nq * self.e) + n as f64 * tiny,
            }
        })
    }
}

fn widen<T: Element>(xs: &[T]) -> Vec<f64> {
    xs.iter().map(|x| f64::from(x.to_f32())).collect()
}

fn widen1<T: Element>(x: T) -> f64 {
    f64::from(x.to_f32())
}

/// f64 reference for the step kernel: the recurrence in exact arithmetic,
/// with the norm-wise running bounds on `y` and the state (module
/// documentation).
pub fn delta_f64<T: Element>(geom: &DeltaGeometry, inp: &DeltaInputs<'_, T>) -> DeltaExact {
    check_step(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let q = widen(inp.q);
    let k = widen(inp.k);
    let mut y = Exact {
        value: vec![0.0; geom.v_len()],
        tol: vec![0.0; geom.v_len()],
    };
    let mut state = Exact {
        value: vec![0.0; geom.state_len()],
        tol: vec![0.0; geom.state_len()],
    };
    for b in 0..geom.b {
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut row = RowBound::load(&inp.state[at..at + dk]);
                for t in 0..geom.t {
                    if inp.mask.is_some_and(|m| !m[b * geom.t + t]) {
                        continue; // y stays exactly 0, the state untouched
                    }
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    let out = row
                        .step(
                            &k[qk..qk + dk],
                            f64::from(inp.g[gb]),
                            widen1(inp.v[vy + d]),
                            widen1(inp.beta[gb]),
                            Some(&q[qk..qk + dk]),
                        )
                        .expect("read-out")
                        .round_to::<T>();
                    y.value[vy + d] = out.v;
                    y.tol[vy + d] = out.e;
                }
                state.value[at..at + dk].copy_from_slice(&row.s);
                state.tol[at..at + dk].iter_mut().for_each(|t| *t = row.e);
            }
        }
    }
    DeltaExact { y, state }
}

/// f64 reference for the prefix-state kernel.
pub fn delta_state_f64<T: Element>(geom: &DeltaGeometry, inp: &DeltaStateInputs<'_, T>) -> Exact {
    check_prefix(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let k = widen(inp.k);
    let mut state = Exact {
        value: vec![0.0; geom.state_len()],
        tol: vec![0.0; geom.state_len()],
    };
    for b in 0..geom.b {
        let keep = inp.lengths[b].max(0) as usize;
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut row = RowBound::load(&inp.state[at..at + dk]);
                for t in 0..keep {
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    row.step(
                        &k[qk..qk + dk],
                        f64::from(inp.g[gb]),
                        widen1(inp.v[vy + d]),
                        widen1(inp.beta[gb]),
                        None,
                    );
                }
                state.value[at..at + dk].copy_from_slice(&row.s);
                state.tol[at..at + dk].iter_mut().for_each(|t| *t = row.e);
            }
        }
    }
    state
}
