//! The bit-replay models against the f64 models, within the stated bounds,
//! for several geometries and dtypes; and the DeltaNet mask and prefix
//! invariants.

use half::{bf16, f16};
use kernelgen_reference::affine::{self, Bits, Quantized};
use kernelgen_reference::delta::{self, DeltaGeometry, DeltaInputs, DeltaStateInputs};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use kernelgen_reference::gated_rms_norm as grn;
use kernelgen_reference::silu_rms_heads::{self as srh, HeadsGeometry};
use kernelgen_reference::{Agreement, Element, Exact, max_ulp_distance};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn uniform<T: Element>(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    (0..n)
        .map(|_| T::from_f32(lo + (hi - lo) * rng.random::<f32>()))
        .collect()
}

fn check<T: Element>(what: &str, exact: &Exact, got: &[T]) -> Agreement {
    match exact.check(got) {
        Ok(a) => {
            eprintln!(
                "{what} [{}]: max {:.3} ulp (bound up to {:.3}), used {:.3} of the bound",
                T::DTYPE,
                a.max_ulp,
                a.max_ulp_bound,
                a.max_bound_use
            );
            a
        }
        Err(v) => panic!("{what} [{}]: {v}", T::DTYPE),
    }
}

/// The median of the per-element ulp bounds: what the bound allows for a
/// typical element (the maximum is set by elements near a cancellation).
fn median_ulp_bound<T: Element>(exact: &Exact) -> f64 {
    let mut b: Vec<f64> = (0..exact.len()).map(|i| exact.ulp_bound::<T>(i)).collect();
    b.sort_by(f64::total_cmp);
    b[b.len() / 2]
}

// ------------------------------------------------------------------ expert

/// A slot layout of the test's own, in another order than the family's and
/// with gaps, so the models read every region at its own offset.
fn layout(quant: Quant, hidden: usize, intermediate: usize) -> ExpertGeometry {
    let w = quant.row_bytes(hidden) * intermediate;
    let mut at = 0;
    let mut place = |bytes: usize| {
        let offset = at;
        at = (at + bytes).div_ceil(256) * 256;
        offset
    };
    let (down_weights, gate_weights, up_weights) = (place(w), place(w), place(w));
    let (down_scales, gate_scales, up_scales) = (place(4 * hidden), place(4 * intermediate), place(4 * intermediate));
    ExpertGeometry { hidden, intermediate, gate_weights, up_weights, down_weights, gate_scales, up_scales, down_scales, slot_bytes: at }
}

fn expert_case<T: Element>(quant: Quant, h: usize, i: usize, m: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let geom = layout(quant, h, i);
    let slot = ExpertWeights::random(quant, h, i, seed).pack(quant, &geom);
    let x: Vec<T> = uniform(&mut rng, m * h, -2.0, 2.0);
    let what = format!("expert {quant:?} H={h} I={i} M={m}");

    let mid = expert::gate_up_replay(&x, &slot, &geom, quant, m, expert::Lanes::Strided);
    let exact = expert::gate_up_f64(&x, &slot, &geom, quant, m);
    check(&format!("{what} gate_up"), &exact, &mid);
    if T::DTYPE != kernelgen_contract::Dtype::F32 {
        // The epilogue's roundings to T dominate: a few ulps for a typical
        // element.
        assert!(median_ulp_bound::<T>(&exact) < 8.0);
    }

    let out = expert::down_replay(&mid, &slot, &geom, quant, m, expert::Lanes::Strided);
    let exact = expert::down_f64(&mid, &slot, &geom, quant, m);
    let a = check(&format!("{what} down"), &exact, &out);
    if T::DTYPE != kernelgen_contract::Dtype::F32 {
        // Only the final rounding: every element within half an ulp plus
        // f32 accumulation terms.
        assert!(a.max_ulp <= 0.5 + 0.1, "{}", a.max_ulp);
    }
    // The replay is a pure function of its inputs.
    assert_eq!(max_ulp_distance(&out, &expert::down_replay(&mid, &slot, &geom, quant, m, expert::Lanes::Strided)), 0);
}

#[test]
fn expert_replay_within_f64_bound() {
    for quant in [Quant::Q4, Quant::Q8] {
        expert_case::<f32>(quant, 256, 128, 2, 1);
        expert_case::<bf16>(quant, 256, 128, 2, 2);
        // Uneven lanes: H/8 = 25 words (Q4) or 200 values (Q8) over 32 lanes.
        expert_case::<bf16>(quant, 200, 64, 1, 3);
        expert_case::<f32>(quant, 200, 64, 3, 4);
        // Several words per lane.
        expert_case::<bf16>(quant, 1024, 32, 1, 5);
    }
}

// ------------------------------------------------------------------ affine

fn affine_case<T: Element>(bits: Bits, n: usize, k: usize, seed: u64) -> Agreement {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = Quantized::<T>::random(n, k, bits, seed);
    let x: Vec<T> = uniform(&mut rng, k, -1.0, 1.0);
    let y = affine::affine_row_replay(&x, &w);
    let exact = affine::affine_row_f64(&x, &w);
    check(&format!("affine {bits:?} N={n} K={k}"), &exact, &y)
}

#[test]
fn affine_replay_within_f64_bound() {
    for bits in [Bits::Three, Bits::Four] {
        affine_case::<f32>(bits, 64, 512, 1);
        affine_case::<bf16>(bits, 64, 512, 2);
        affine_case::<f16>(bits, 32, 1024, 3);
        affine_case::<bf16>(bits, 16, 2560, 4);
        affine_case::<f32>(bits, 16, 2560, 5);
    }
}

#[test]
fn affine_replay_and_a_plain_dot_differ() {
    // The kernel's arithmetic (x pre-divided, bf16 run sums, bias folded in
    // per chunk, simd_sum) is not a sequential f32 dot of x and the
    // dequantised weights: for bf16 input some row must differ.
    let mut rng = StdRng::seed_from_u64(77);
    let (n, k) = (64, 1024);
    let w = Quantized::<bf16>::random(n, k, Bits::Four, 77);
    let x: Vec<bf16> = uniform(&mut rng, k, -1.0, 1.0);
    let y = affine::affine_row_replay(&x, &w);
    let deq = w.dequantize();
    let plain: Vec<bf16> = (0..n)
        .map(|r| {
            bf16::from_f32((0..k).fold(0.0f32, |a, c| a + x[c].to_f32() * deq[r * k + c] as f32))
        })
        .collect();
    assert!(max_ulp_distance(&y, &plain) > 0);
}

// ------------------------------------------------------------------- delta

struct DeltaData<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    g: Vec<f32>,
    beta: Vec<T>,
    state: Vec<f32>,
}

/// q and k of unit L2 norm per head (as mlx-lm feeds the kernel after its
/// RMS norms and scales), g in (0.6, 1), beta in (0, 1).
fn delta_data<T: Element>(geom: &DeltaGeometry, seed: u64) -> DeltaData<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut unit_heads = |len: usize| -> Vec<T> {
        let raw: Vec<f32> = (0..len).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
        raw.chunks(geom.dk)
            .flat_map(|h| {
                let norm = h.iter().map(|v| v * v).sum::<f32>().sqrt();
                h.iter().map(move |v| T::from_f32(v / norm)).collect::<Vec<_>>()
            })
            .collect()
    };
    let q = unit_heads(geom.qk_len());
    let k = unit_heads(geom.qk_len());
    let v = uniform(&mut rng, geom.v_len(), -1.0, 1.0);
    let g = (0..geom.gate_len())
        .map(|_| 0.6 + 0.4 * rng.random::<f32>())
        .collect();
    let beta = uniform(&mut rng, geom.gate_len(), 0.0, 1.0);
    let state = (0..geom.state_len())
        .map(|_| rng.random::<f32>() * 0.2 - 0.1)
        .collect();
    DeltaData {
        q,
        k,
        v,
        g,
        beta,
        state,
    }
}

impl<T: Element> DeltaData<T> {
    fn inputs<'a>(&'a self, mask: Option<&'a [bool]>) -> DeltaInputs<'a, T> {
        DeltaInputs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            g: &self.g,
            beta: &self.beta,
            state: &self.state,
            mask,
        }
    }

    fn state_inputs<'a>(&'a self, lengths: &'a [i32]) -> DeltaStateInputs<'a, T> {
        DeltaStateInputs {
            k: &self.k,
            v: &self.v,
            g: &self.g,
            beta: &self.beta,
            state: &self.state,
            lengths,
        }
    }
}

const DELTA_GEOMETRIES: [DeltaGeometry; 4] = [
    DeltaGeometry { b: 2, t: 5, hk: 2, hv: 4, dk: 64, dv: 8 },
    DeltaGeometry { b: 1, t: 24, hk: 1, hv: 2, dk: 32, dv: 4 },
    DeltaGeometry { b: 1, t: 3, hk: 2, hv: 2, dk: 128, dv: 6 },
    // A long window: the norm-wise bound must not grow with T.
    DeltaGeometry { b: 1, t: 256, hk: 1, hv: 1, dk: 128, dv: 2 },
];

fn delta_case<T: Element>(geom: &DeltaGeometry, seed: u64) {
    let data = delta_data::<T>(geom, seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xa5);
    let mask: Vec<bool> = (0..geom.b * geom.t).map(|_| rng.random::<f32>() < 0.7).collect();
    for mask in [None, Some(&mask[..])] {
        let what = format!("delta {geom:?} masked={}", mask.is_some());
        let got = delta::delta_replay(geom, &data.inputs(mask));
        let exact = delta::delta_f64(geom, &data.inputs(mask));
        check(&format!("{what} y"), &exact.y, &got.y);
        check(&format!("{what} state"), &exact.state, &got.state);
        if T::DTYPE != kernelgen_contract::Dtype::F32 {
            // The final rounding to InT dominates for a typical y.
            let median = median_ulp_bound::<T>(&exact.y);
            assert!(median < 4.0, "{what}: median y bound {median} ulp");
        }
    }
    let lengths: Vec<i32> = (0..geom.b).map(|b| ((b * 7 + 3) % (geom.t + 1)) as i32).collect();
    let got = delta::delta_state_replay(geom, &data.state_inputs(&lengths));
    let exact = delta::delta_state_f64(geom, &data.state_inputs(&lengths));
    check(&format!("delta state {geom:?} lengths={lengths:?}"), &exact, &got);
}

#[test]
fn delta_replay_within_f64_bound() {
    for (n, geom) in DELTA_GEOMETRIES.iter().enumerate() {
        let seed = 100 + n as u64;
        delta_case::<f32>(geom, seed);
        delta_case::<bf16>(geom, seed);
        delta_case::<f16>(geom, seed);
    }
}

#[test]
fn masked_steps_write_zero_and_keep_the_state() {
    let geom = DELTA_GEOMETRIES[0];
    let data = delta_data::<bf16>(&geom, 7);
    // Nothing active: y is +0 everywhere and the state comes back bit for bit.
    let none = vec![false; geom.b * geom.t];
    let out = delta::delta_replay(&geom, &data.inputs(Some(&none)));
    assert!(out.y.iter().all(|y| y.to_bits() == 0));
    assert!(out.state.iter().zip(&data.state).all(|(a, b)| a.to_bits() == b.to_bits()));
    let exact = delta::delta_f64(&geom, &data.inputs(Some(&none)));
    assert!(exact.y.tol.iter().all(|&t| t == 0.0));
    assert_eq!(exact.state.value, data.state.iter().map(|&s| f64::from(s)).collect::<Vec<_>>());

    // Masking step 2 of every batch equals running without step 2.
    let skip = 2;
    let mut mask = vec![true; geom.b * geom.t];
    for b in 0..geom.b {
        mask[b * geom.t + skip] = false;
    }
    let masked = delta::delta_replay(&geom, &data.inputs(Some(&mask)));
    let short = DeltaGeometry { t: geom.t - 1, ..geom };
    let drop_step = |xs: &[bf16], per_step: usize| -> Vec<bf16> {
        xs.chunks(geom.t * per_step)
            .flat_map(|batch| {
                batch
                    .chunks(per_step)
                    .enumerate()
                    .filter(|&(t, _)| t != skip)
                    .flat_map(|(_, s)| s.to_vec())
            })
            .collect()
    };
    let per_qk = geom.hk * geom.dk;
    let per_v = geom.hv * geom.dv;
    let g_short: Vec<f32> = data
        .g
        .chunks(geom.t * geom.hv)
        .flat_map(|batch| {
            batch
                .chunks(geom.hv)
                .enumerate()
                .filter(|&(t, _)| t != skip)
                .flat_map(|(_, s)| s.to_vec())
        })
        .collect();
    let short_data = DeltaData {
        q: drop_step(&data.q, per_qk),
        k: drop_step(&data.k, per_qk),
        v: drop_step(&data.v, per_v),
        g: g_short,
        beta: drop_step(&data.beta, geom.hv),
        state: data.state.clone(),
    };
    let unmasked = delta::delta_replay(&short, &short_data.inputs(None));
    assert!(masked.state.iter().zip(&unmasked.state).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(drop_step(&masked.y, per_v), unmasked.y);
    // The masked step's y is exactly zero.
    for b in 0..geom.b {
        let at = (b * geom.t + skip) * per_v;
        assert!(masked.y[at..at + per_v].iter().all(|y| y.to_bits() == 0));
    }
}

#[test]
fn prefix_state_equals_the_step_model() {
    let mut geoms = DELTA_GEOMETRIES.to_vec();
    geoms.push(DeltaGeometry { b: 5, t: 6, hk: 1, hv: 2, dk: 32, dv: 4 });
    for geom in geoms {
        let data = delta_data::<bf16>(&geom, 31);
        let t = geom.t as i32;
        // Whole window, nothing, one step, all but two, and a negative count
        // (the kernel's loop runs no step).
        let lengths: Vec<i32> = (0..geom.b).map(|b| [t, 0, 1, t - 2, -1][b % 5]).collect();
        let prefix = delta::delta_state_replay(&geom, &data.state_inputs(&lengths));
        // The step kernel with steps t >= lengths[b] masked.
        let mask: Vec<bool> = (0..geom.b * geom.t)
            .map(|i| ((i % geom.t) as i32) < lengths[i / geom.t])
            .collect();
        let stepped = delta::delta_replay(&geom, &data.inputs(Some(&mask)));
        assert!(prefix.iter().zip(&stepped.state).all(|(a, b)| a.to_bits() == b.to_bits()));
        // And the unmasked step kernel run for exactly lengths[b] steps on
        // each batch alone.
        for b in 0..geom.b {
            let t = lengths[b].max(0) as usize;
            let one = DeltaGeometry { b: 1, t, ..geom };
            let slice = |xs: &[bf16], per_step: usize| -> Vec<bf16> {
                xs[b * geom.t * per_step..][..t * per_step].to_vec()
            };
            let per_qk = geom.hk * geom.dk;
            let per_v = geom.hv * geom.dv;
            let per_state = geom.hv * geom.dv * geom.dk;
            let d = DeltaData {
                q: slice(&data.q, per_qk),
                k: slice(&data.k, per_qk),
                v: slice(&data.v, per_v),
                g: data.g[b * geom.t * geom.hv..][..t * geom.hv].to_vec(),
                beta: slice(&data.beta, geom.hv),
                state: data.state[b * per_state..][..per_state].to_vec(),
            };
            let run = delta::delta_replay(&one, &d.inputs(None));
            let want = &prefix[b * per_state..][..per_state];
            assert!(run.state.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}

// --------------------------------------------------------- silu_rms_heads

fn heads_case<T: Element>(geom: &HeadsGeometry, range: f32, seed: u64) -> [f64; 3] {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<T> = uniform(&mut rng, geom.rows * geom.channels(), -range, range);
    let qscale: Vec<T> = uniform(&mut rng, geom.dk, 0.5, 1.5);
    let kscale: Vec<T> = uniform(&mut rng, geom.dk, 0.5, 1.5);
    let got = srh::silu_rms_heads_replay(&x, &qscale, &kscale, geom);
    let exact = srh::silu_rms_heads_f64(&x, &qscale, &kscale, geom);
    let what = format!("silu_rms_heads {geom:?} |x|<{range}");
    let q = check(&format!("{what} q"), &exact.q, &got.q);
    let k = check(&format!("{what} k"), &exact.k, &got.k);
    let v = check(&format!("{what} v"), &exact.v, &got.v);
    [q.max_ulp_bound, k.max_ulp_bound, v.max_ulp_bound]
}

#[test]
fn silu_rms_heads_replay_within_f64_bound() {
    let geoms = [
        HeadsGeometry { rows: 3, hk: 2, hv: 3, dk: 128, dv: 128 },
        HeadsGeometry { rows: 2, hk: 1, hv: 2, dk: 64, dv: 48 },
        HeadsGeometry { rows: 2, hk: 3, hv: 1, dk: 100, dv: 7 },
    ];
    for (n, geom) in geoms.iter().enumerate() {
        let seed = 200 + n as u64;
        // The documented a-priori ulp bounds (V, then Q and K): bf16 and f16
        // 5 and 12.5, f32 6 and 22.
        for (bounds, (v_max, qk_max)) in [
            (heads_case::<f32>(geom, 6.0, seed), (6.0, 22.0)),
            (heads_case::<bf16>(geom, 6.0, seed), (5.0, 12.5)),
            (heads_case::<f16>(geom, 6.0, seed), (5.0, 12.5)),
        ] {
            assert!(bounds[2] <= v_max, "{bounds:?}");
            assert!(bounds[0] <= qk_max && bounds[1] <= qk_max, "{bounds:?}");
        }
    }
    // f16 with exp(|x|) overflowing: the kernel's sigmoid is 0 there, the
    // bound covers it.
    heads_case::<f16>(&geoms[1], 14.0, 9);
    heads_case::<bf16>(&geoms[1], 100.0, 9);
}

// --------------------------------------------------------- gated_rms_norm

fn grn_case<T: Element>(d: usize, rows: usize, seed: u64) -> Agreement {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<T> = uniform(&mut rng, rows * d, -3.0, 3.0);
    let gate: Vec<T> = uniform(&mut rng, rows * d, -8.0, 8.0);
    let weight: Vec<T> = uniform(&mut rng, d, 0.5, 1.5);
    let eps = 1e-6f32;
    let got = grn::gated_rms_norm_replay(&x, &gate, &weight, eps, d);
    let exact = grn::gated_rms_norm_f64(&x, &gate, &weight, eps, d);
    let a = check(
        &format!("gated_rms_norm D={d} threads={}", grn::threads(d)),
        &exact,
        &got,
    );
    // Relative throughout: 2.5 ulp of T + f32 terms, 3 with a binade crossing.
    if T::DTYPE != kernelgen_contract::Dtype::F32 {
        assert!(a.max_ulp_bound <= 3.0, "{}", a.max_ulp_bound);
    }
    a
}

#[test]
fn gated_rms_norm_replay_within_f64_bound() {
    for (n, d) in [64, 128, 200, 1000, 4096, 5000].into_iter().enumerate() {
        let seed = 300 + n as u64;
        grn_case::<f32>(d, 3, seed);
        grn_case::<bf16>(d, 3, seed);
        grn_case::<f16>(d, 2, seed);
    }
    assert_eq!(grn::threads(64), 32);
    assert_eq!(grn::threads(200), 64);
    assert_eq!(grn::threads(4096), 1024);
    assert_eq!(grn::threads(5000), 1024);
}

#[test]
fn gated_rms_norm_two_level_reduction_matters() {
    // One square of 2^24 and 999 squares of 1: a sequential f32 sum loses
    // every 1 (2^24 + 1 ties back to 2^24); the kernel's per-thread runs,
    // simd_sum trees and second-level tree add the ones among themselves
    // first, so they survive. The two sums give different `inv`.
    let d = 1000;
    assert_eq!(grn::threads(d), 256);
    let mut x = vec![1.0f32; d];
    x[0] = 4096.0;
    let gate = vec![3.0f32; d];
    let weight = vec![1.0f32; d];
    let got = grn::gated_rms_norm_replay(&x, &gate, &weight, 1e-6, d);
    let seq = x.iter().fold(0.0f32, |a, v| a + v * v);
    assert_eq!(seq, 16_777_216.0);
    let inv = 1.0 / (seq / d as f32 + 1e-6).sqrt();
    let y = 1.0 / (1.0 + 3.0f32.exp());
    let s = 3.0 * (1.0 - y);
    let plain: Vec<f32> = x.iter().map(|v| s * (v * inv)).collect();
    assert!(max_ulp_distance(&got, &plain) > 0);
    // And the replay is within the bound of the exact result.
    let exact = grn::gated_rms_norm_f64(&x, &gate, &weight, 1e-6, d);
    check("gated_rms_norm 2^24 + ones", &exact, &got);
}

/// kernelgen's user-facing quantizer and the reference's, written apart,
/// agree bit for bit (and both follow MLX's, which `make test-mlx` checks).
#[test]
fn the_user_facing_quantizer_agrees_with_the_reference() {
    for (bits, b) in [(3u32, Bits::Three), (4, Bits::Four)] {
        let mut rng = kernelgen_reference::SplitMix64::new(u64::from(bits));
        let w: Vec<f32> = (0..8 * 256).map(|_| (rng.unit() * 4.0 - 2.0) as f32).collect();
        let ours = kernelgen::quant::affine::quantize(&w, 8, 256, bits).unwrap();
        let theirs = affine::quantize(&w, 8, 256, b);
        assert_eq!((ours.w, ours.scales, ours.biases), (theirs.w, theirs.scales, theirs.biases), "bits {bits}");
    }
}
