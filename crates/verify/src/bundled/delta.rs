//! The gated DeltaNet step, unmasked and masked (`rust:delta`), and the prefix-state kernel
//! (`rust:delta_state`): B = 2, T = 3, keys and queries scaled like normalized heads, decays g
//! in (0, 1), betas in (0, 1), a random incoming state.

use super::{host, input, per_dtype, random, RustReference};
use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel};
use kernelgen_emu::HostArray;
use kernelgen_reference::delta::{self, DeltaGeometry, DeltaInputs, DeltaStateInputs};
use kernelgen_reference::{Element, Exact, SplitMix64};

pub(super) const REFERENCE: RustReference = RustReference {
    name: "delta",
    declared: Declaration {
        params: &["dtype", "state_dtype", "Hk", "Hv", "Dk", "Dv"],
        inputs: &["q", "k", "v", "g", "beta", "state_in", "mask"],
        outputs: &["y", "state_out"],
    },
    case: per_dtype!(case),
    expected: per_dtype!(expected),
};

pub(super) const STATE_REFERENCE: RustReference = RustReference {
    name: "delta_state",
    declared: Declaration {
        params: &["dtype", "state_dtype", "Hk", "Hv", "Dk", "Dv"],
        inputs: &["k", "v", "g", "beta", "state_in", "lengths"],
        outputs: &["state_out"],
    },
    case: per_dtype!(state_case),
    expected: per_dtype!(state_expected),
};

const B: usize = 2;
const T: usize = 3;
/// The steps the prefix-state kernel keeps: one batch row every step, the other one step.
const LENGTHS: [i32; B] = [T as i32, 1];

fn geometry(k: &Kernel<'_>) -> Result<DeltaGeometry, Error> {
    Ok(DeltaGeometry { b: B, t: T, hk: k.int("Hk")?, hv: k.int("Hv")?, dk: k.int("Dk")?, dv: k.int("Dv")? })
}

/// Whether the state is bf16: read into float and written back rounded. The references run
/// on its exact values in f32, and their final state is rounded the same way.
fn bf16_state(k: &Kernel<'_>, reference: &'static str) -> Result<bool, Error> {
    match k.string("state_dtype")? {
        "f32" => Ok(false),
        "bf16" => Ok(true),
        other => Err(Error::Unmodelled { reference, what: format!("for state_dtype {other}") }),
    }
}

/// The inputs every kernel of both families reads (`q` where `with_q`).
fn heads<T: Element>(geom: &DeltaGeometry, bf16_state: bool, with_q: bool, seed: u64) -> Case {
    let mut rng = SplitMix64::new(seed);
    // Normalized-head scale keeps ||k||^2 near 1, as in the models.
    let scale = 1.0 / (geom.dk as f32).sqrt();
    let mut scaled = |n: usize| -> Vec<T> { random::<f32>(&mut rng, n).iter().map(|v| T::from_f32(v * scale * 1.7)).collect() };
    let q: Vec<T> = scaled(geom.qk_len());
    let k: Vec<T> = scaled(geom.qk_len());
    let v: Vec<T> = random(&mut rng, geom.v_len());
    let g: Vec<f32> = (0..geom.gate_len()).map(|_| (-(rng.unit() * 0.5 + 0.01)).exp() as f32).collect();
    let beta: Vec<T> = (0..geom.gate_len()).map(|_| T::from_f32((0.1 + 0.8 * rng.unit()) as f32)).collect();
    let state: Vec<f32> = random(&mut rng, geom.state_len());
    let (b, t, hk, hv, dk, dv) = (B as u64, T as u64, geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
    let mut case = Case::new().size("B", b).size("T", t);
    if with_q {
        case = case.array("q", host(vec![b, t, hk, dk], &q));
    }
    case.array("k", host(vec![b, t, hk, dk], &k))
        .array("v", host(vec![b, t, hv, dv], &v))
        .array("g", host(vec![b, t, hv], &g))
        .array("beta", host(vec![b, t, hv], &beta))
        .array("state_in", state_host(vec![b, hv, dv, dk], &state, bf16_state))
}

/// A state in its dtype.
fn state_host(shape: Vec<u64>, values: &[f32], bf16_state: bool) -> HostArray {
    if bf16_state { host(shape, &values.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>()) } else { host(shape, values) }
}

/// The case's incoming state as f32 values (a bf16 state exactly).
fn state_in(case: &Case, bf16_state: bool) -> Result<Vec<f32>, Error> {
    Ok(if bf16_state { input::<half::bf16>(case, "state_in")?.iter().map(|v| v.to_f32()).collect() } else { input(case, "state_in")? })
}

/// The f64 model's bound on a state, with the rounding of a bf16 state added: at most half a
/// bf16 ulp (a whole one, to be safe).
fn state_exact(mut e: Exact, bf16_state: bool) -> Exact {
    if bf16_state {
        for (t, v) in e.tol.iter_mut().zip(&e.value) {
            *t += kernelgen_reference::ulp::<half::bf16>(v.abs() + *t);
        }
    }
    e
}

fn state_shape(geom: &DeltaGeometry) -> Vec<u64> {
    vec![B as u64, geom.hv as u64, geom.dv as u64, geom.dk as u64]
}

/// Which steps run: batch 0 skips its middle step, batch 1 runs every step.
fn mask() -> Vec<bool> {
    (0..B * T).map(|i| !(i / T == 0 && i % T == 1)).collect()
}

fn case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let (geom, bf16) = (geometry(k)?, bf16_state(k, REFERENCE.name)?);
    let case = heads::<T>(&geom, bf16, true, seed);
    Ok(if k.has_input("mask")? { case.array("mask", HostArray::new(kernelgen::Dtype::Bool, vec![B as u64, T as u64], mask().iter().map(|&m| m as u8).collect())) } else { case })
}

fn expected<T: Element>(k: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    let (geom, bf16) = (geometry(k)?, bf16_state(k, REFERENCE.name)?);
    let mask: Option<Vec<bool>> = if k.has_input("mask")? { Some(case.get("mask")?.data.iter().map(|&m| m != 0).collect()) } else { None };
    let (q, kk, v, beta): (Vec<T>, Vec<T>, Vec<T>, Vec<T>) = (input(case, "q")?, input(case, "k")?, input(case, "v")?, input(case, "beta")?);
    let (g, state): (Vec<f32>, Vec<f32>) = (input(case, "g")?, state_in(case, bf16)?);
    let inp = DeltaInputs { q: &q, k: &kk, v: &v, g: &g, beta: &beta, state: &state, mask: mask.as_deref() };
    let replay = delta::delta_replay(&geom, &inp);
    let exact = delta::delta_f64(&geom, &inp);
    let y_shape = vec![B as u64, T as u64, geom.hv as u64, geom.dv as u64];
    Ok(vec![
        ("y".to_string(), Expected::Model { replay: host(y_shape, &replay.y), exact: exact.y, exact_at: None }),
        ("state_out".to_string(), Expected::Model { replay: state_host(state_shape(&geom), &replay.state, bf16), exact: state_exact(exact.state, bf16), exact_at: None }),
    ])
}

fn state_case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let (geom, bf16) = (geometry(k)?, bf16_state(k, STATE_REFERENCE.name)?);
    Ok(heads::<T>(&geom, bf16, false, seed).host_ints("lengths", LENGTHS.to_vec()))
}

fn state_expected<T: Element>(k: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    let (geom, bf16) = (geometry(k)?, bf16_state(k, STATE_REFERENCE.name)?);
    let (kk, v, beta): (Vec<T>, Vec<T>, Vec<T>) = (input(case, "k")?, input(case, "v")?, input(case, "beta")?);
    let (g, state): (Vec<f32>, Vec<f32>) = (input(case, "g")?, state_in(case, bf16)?);
    let inp = DeltaStateInputs { k: &kk, v: &v, g: &g, beta: &beta, state: &state, lengths: case.get_host("lengths")? };
    let replay = state_host(state_shape(&geom), &delta::delta_state_replay(&geom, &inp), bf16);
    Ok(vec![("state_out".to_string(), Expected::Model { replay, exact: state_exact(delta::delta_state_f64(&geom, &inp), bf16), exact_at: None })])
}
