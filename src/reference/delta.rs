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
//! state value, a running bound on the kernel's distance from it: the decay
//! product adds half an f32 ulp; each of `kv` and `out` is a dot product of
//! `n` terms per lane whose terms pass through at most `n + 6` f32 roundings
//! (`e <= sum|k_i| e_i + gamma(n + 6) sum(|s_i| + e_i)|k_i|`); `v - kv`,
//! `* beta`, `k_i * delta` and `s_i + ...` add half an f32 ulp each (and
//! propagate the incoming bounds); `y` adds half an ulp of `InT`. The bound
//! grows with T as the recurrence amplifies it (`|g| <= 1` and
//! `beta |k|^2 <= 2` keep it from growing geometrically).

use super::{Element, Exact, SIMD_WIDTH, Tracked, f32_sum, simd_sum};

/// The sizes of one call (`Dk`, `Dv`, `Hk`, `Hv` are the kernel's template
/// integers, `B` and `T` run-time sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeltaGeometry {
    pub b: usize,
    pub t: usize,
    pub hk: usize,
    pub hv: usize,
    pub dk: usize,
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
    pub q: &'a [T],
    pub k: &'a [T],
    pub v: &'a [T],
    pub g: &'a [f32],
    pub beta: &'a [T],
    pub state: &'a [f32],
    /// `[B, T]`; `None` is the unmasked kernel.
    pub mask: Option<&'a [bool]>,
}

/// Inputs of the prefix-state kernel.
#[derive(Clone, Copy, Debug)]
pub struct DeltaStateInputs<'a, T> {
    pub k: &'a [T],
    pub v: &'a [T],
    pub g: &'a [f32],
    pub beta: &'a [T],
    pub state: &'a [f32],
    /// `[B]`: steps kept per batch (`<= T`; a negative count runs none).
    pub lengths: &'a [i32],
}

/// Outputs of the step kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaOutput<T> {
    pub y: Vec<T>,
    pub state: Vec<f32>,
}

/// The f64 model's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaExact {
    pub y: Exact,
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

fn exact<T: Element>(x: T) -> Tracked {
    Tracked::exact(f64::from(x.to_f32()))
}

/// One step of the recurrence on a tracked row; returns the tracked `y`
/// (before its rounding to `InT`) when `q` is given.
fn step_f64<T: Element>(
    s: &mut [Tracked],
    k: &[T],
    g: f32,
    v: T,
    beta: T,
    q: Option<&[T]>,
) -> Option<Tracked> {
    let depth = s.len() / SIMD_WIDTH + 6;
    let g = Tracked::exact(f64::from(g));
    for si in s.iter_mut() {
        *si = si.mul(g).round_f32();
    }
    let kv = f32_sum(s.iter().zip(k).map(|(si, &ki)| si.mul(exact(ki))), depth);
    let delta = exact(v).sub(kv).round_f32().mul(exact(beta)).round_f32();
    for (si, &ki) in s.iter_mut().zip(k) {
        *si = si.add(exact(ki).mul(delta).round_f32()).round_f32();
    }
    q.map(|q| f32_sum(s.iter().zip(q).map(|(si, &qi)| si.mul(exact(qi))), depth))
}

/// f64 reference for the step kernel: the recurrence in exact arithmetic,
/// with running bounds on `y` and the state (module documentation).
pub fn delta_f64<T: Element>(geom: &DeltaGeometry, inp: &DeltaInputs<'_, T>) -> DeltaExact {
    check_step(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let mut y = vec![Tracked::exact(0.0); geom.v_len()];
    let mut state = vec![Tracked::exact(0.0); geom.state_len()];
    for b in 0..geom.b {
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut s: Vec<Tracked> = inp.state[at..at + dk]
                    .iter()
                    .map(|&x| Tracked::exact(f64::from(x)))
                    .collect();
                for t in 0..geom.t {
                    if inp.mask.is_some_and(|m| !m[b * geom.t + t]) {
                        continue; // y stays exactly 0
                    }
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    let out = step_f64(
                        &mut s,
                        &inp.k[qk..qk + dk],
                        inp.g[gb],
                        inp.v[vy + d],
                        inp.beta[gb],
                        Some(&inp.q[qk..qk + dk]),
                    );
                    y[vy + d] = out.expect("read-out").round_to::<T>();
                }
                state[at..at + dk].copy_from_slice(&s);
            }
        }
    }
    let split = |xs: Vec<Tracked>| Exact {
        value: xs.iter().map(|x| x.v).collect(),
        tol: xs.iter().map(|x| x.e).collect(),
    };
    DeltaExact {
        y: split(y),
        state: split(state),
    }
}

/// f64 reference for the prefix-state kernel.
pub fn delta_state_f64<T: Element>(geom: &DeltaGeometry, inp: &DeltaStateInputs<'_, T>) -> Exact {
    check_prefix(geom, inp);
    let (dk, dv) = (geom.dk, geom.dv);
    let mut value = vec![0.0; geom.state_len()];
    let mut tol = vec![0.0; geom.state_len()];
    for b in 0..geom.b {
        let keep = inp.lengths[b].max(0) as usize;
        for hv in 0..geom.hv {
            let n = b * geom.hv + hv;
            for d in 0..dv {
                let at = (n * dv + d) * dk;
                let mut s: Vec<Tracked> = inp.state[at..at + dk]
                    .iter()
                    .map(|&x| Tracked::exact(f64::from(x)))
                    .collect();
                for t in 0..keep {
                    let (qk, vy, gb) = offsets(geom, b, hv, t);
                    step_f64(
                        &mut s,
                        &inp.k[qk..qk + dk],
                        inp.g[gb],
                        inp.v[vy + d],
                        inp.beta[gb],
                        None,
                    );
                }
                for (j, si) in s.iter().enumerate() {
                    value[at + j] = si.v;
                    tol[at + j] = si.e;
                }
            }
        }
    }
    Exact { value, tol }
}
