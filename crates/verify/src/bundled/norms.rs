//! The fused norms: SiLU-RMS heads (B = 2, S = 3) and the gated RMS norm
//! (R = 3 rows), on random inputs and weights.

use super::{host, param, random, Case, Expected};
use kernelgen_reference::gated_rms_norm::{gated_rms_norm_f64, gated_rms_norm_replay};
use kernelgen_reference::silu_rms_heads::{silu_rms_heads_f64, silu_rms_heads_replay, HeadsGeometry};
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_codegen::render::RenderedKernel;

pub fn silu_rms_heads<T: Element>(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    const B: usize = 2;
    const S: usize = 3;
    let geom = HeadsGeometry { rows: B * S, hk: param(r, "Hk")?, hv: param(r, "Hv")?, dk: param(r, "Dk")?, dv: param(r, "Dv")? };
    let mut rng = SplitMix64::new(seed);
    // Convolution outputs of a few units, so the SiLU sees both signs and tails.
    let x: Vec<T> = random::<f32>(&mut rng, B * S * geom.channels()).iter().map(|v| T::from_f32(v * 4.0)).collect();
    let qscale: Vec<T> = random::<f32>(&mut rng, geom.dk).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let kscale: Vec<T> = random::<f32>(&mut rng, geom.dk).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let replay = silu_rms_heads_replay(&x, &qscale, &kscale, &geom);
    let exact = silu_rms_heads_f64(&x, &qscale, &kscale, &geom);
    let (b, s, hk, hv, dk, dv) = (B as u64, S as u64, geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
    Ok(Case {
        sizes: format!("B={B},S={S}"),
        inputs: vec![host(vec![b, s, geom.channels() as u64], &x), host(vec![dk], &qscale), host(vec![dk], &kscale)],
        host: Vec::new(),
        expected: vec![
            Expected { name: "q", replay: host(vec![b, s, hk, dk], &replay.q), exact: exact.q, exact_at: None },
            Expected { name: "k", replay: host(vec![b, s, hk, dk], &replay.k), exact: exact.k, exact_at: None },
            Expected { name: "v", replay: host(vec![b, s, hv, dv], &replay.v), exact: exact.v, exact_at: None },
        ],
    })
}

pub fn gated_rms_norm<T: Element>(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    const R: usize = 3;
    let d = param(r, "D")?;
    let eps = f32::from_bits(param(r, "EPS")? as u32);
    let mut rng = SplitMix64::new(seed);
    let x: Vec<T> = random(&mut rng, R * d);
    let gate: Vec<T> = random::<f32>(&mut rng, R * d).iter().map(|v| T::from_f32(v * 4.0)).collect();
    let weight: Vec<T> = random::<f32>(&mut rng, d).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let replay = gated_rms_norm_replay(&x, &gate, &weight, eps, d);
    let exact = gated_rms_norm_f64(&x, &gate, &weight, eps, d);
    let shape = vec![R as u64, d as u64];
    Ok(Case {
        sizes: format!("R={R}"),
        inputs: vec![host(shape.clone(), &x), host(shape.clone(), &gate), host(vec![d as u64], &weight)],
        host: Vec::new(),
        expected: vec![Expected { name: "out", replay: host(shape, &replay), exact, exact_at: None }],
    })
}
