//! The fused norms: SiLU-RMS heads (`rust:silu_rms_heads`, B = 2, S = 3) and the gated RMS
//! norm (`rust:gated_rms_norm`, R = 3 rows), on random inputs and weights.

use super::{host, input, per_dtype, random, RustReference};
use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel};
use kernelgen_reference::gated_rms_norm::{gated_rms_norm_f64, gated_rms_norm_replay};
use kernelgen_reference::silu_rms_heads::{HeadsGeometry, silu_rms_heads_f64, silu_rms_heads_replay};
use kernelgen_reference::{Element, SplitMix64};

pub(super) const SILU_RMS_HEADS: RustReference = RustReference {
    name: "silu_rms_heads",
    declared: Declaration { params: &["dtype", "Hk", "Hv", "Dk", "Dv"], inputs: &["x", "qscale", "kscale"], outputs: &["q", "k", "v"] },
    case: per_dtype!(heads_case),
    expected: per_dtype!(heads_expected),
};

pub(super) const GATED_RMS_NORM: RustReference = RustReference {
    name: "gated_rms_norm",
    declared: Declaration { params: &["dtype", "D", "EPS"], inputs: &["x", "gate", "weight"], outputs: &["out"] },
    case: per_dtype!(norm_case),
    expected: per_dtype!(norm_expected),
};

const B: usize = 2;
const S: usize = 3;
const R: usize = 3;

fn heads_geometry(k: &Kernel<'_>) -> Result<HeadsGeometry, Error> {
    Ok(HeadsGeometry { rows: B * S, hk: k.int("Hk")?, hv: k.int("Hv")?, dk: k.int("Dk")?, dv: k.int("Dv")? })
}

fn heads_case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let geom = heads_geometry(k)?;
    let mut rng = SplitMix64::new(seed);
    // Convolution outputs of a few units, so the SiLU sees both signs and tails.
    let x: Vec<T> = random::<f32>(&mut rng, B * S * geom.channels()).iter().map(|v| T::from_f32(v * 4.0)).collect();
    let qscale: Vec<T> = random::<f32>(&mut rng, geom.dk).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let kscale: Vec<T> = random::<f32>(&mut rng, geom.dk).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let dk = geom.dk as u64;
    Ok(Case::new()
        .size("B", B as u64)
        .size("S", S as u64)
        .array("x", host(vec![B as u64, S as u64, geom.channels() as u64], &x))
        .array("qscale", host(vec![dk], &qscale))
        .array("kscale", host(vec![dk], &kscale)))
}

fn heads_expected<T: Element>(k: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    let geom = heads_geometry(k)?;
    let (x, qscale, kscale): (Vec<T>, Vec<T>, Vec<T>) = (input(case, "x")?, input(case, "qscale")?, input(case, "kscale")?);
    let replay = silu_rms_heads_replay(&x, &qscale, &kscale, &geom);
    let exact = silu_rms_heads_f64(&x, &qscale, &kscale, &geom);
    let (b, s, hk, hv, dk, dv) = (B as u64, S as u64, geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
    Ok(vec![
        ("q".to_string(), Expected::Model { replay: host(vec![b, s, hk, dk], &replay.q), exact: exact.q, exact_at: None }),
        ("k".to_string(), Expected::Model { replay: host(vec![b, s, hk, dk], &replay.k), exact: exact.k, exact_at: None }),
        ("v".to_string(), Expected::Model { replay: host(vec![b, s, hv, dv], &replay.v), exact: exact.v, exact_at: None }),
    ])
}

/// The row width and epsilon (an f32, by its bits).
fn norm_geometry(k: &Kernel<'_>) -> Result<(usize, f32), Error> {
    Ok((k.int("D")?, f32::from_bits(k.int("EPS")? as u32)))
}

fn norm_case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let (d, _) = norm_geometry(k)?;
    let mut rng = SplitMix64::new(seed);
    let x: Vec<T> = random(&mut rng, R * d);
    let gate: Vec<T> = random::<f32>(&mut rng, R * d).iter().map(|v| T::from_f32(v * 4.0)).collect();
    let weight: Vec<T> = random::<f32>(&mut rng, d).iter().map(|v| T::from_f32(1.0 + v * 0.5)).collect();
    let shape = vec![R as u64, d as u64];
    Ok(Case::new().size("R", R as u64).array("x", host(shape.clone(), &x)).array("gate", host(shape, &gate)).array("weight", host(vec![d as u64], &weight)))
}

fn norm_expected<T: Element>(k: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    let (d, eps) = norm_geometry(k)?;
    let (x, gate, weight): (Vec<T>, Vec<T>, Vec<T>) = (input(case, "x")?, input(case, "gate")?, input(case, "weight")?);
    let replay = gated_rms_norm_replay(&x, &gate, &weight, eps, d);
    let exact = gated_rms_norm_f64(&x, &gate, &weight, eps, d);
    Ok(vec![("out".to_string(), Expected::Model { replay: host(vec![R as u64, d as u64], &replay), exact, exact_at: None })])
}
