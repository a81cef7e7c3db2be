//! The gated DeltaNet step (unmasked and masked) and the prefix-state
//! kernel: B = 2, T = 3, keys and queries scaled like normalized heads,
//! decays g in (0, 1), betas in (0, 1), a random incoming state.

use super::{host, param, random, Case, Expected};
use kernelgen_emu::host::HostArray;
use kernelgen_reference::delta::{self, DeltaGeometry, DeltaInputs, DeltaStateInputs};
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_codegen::render::RenderedKernel;

const B: usize = 2;
const T: usize = 3;

struct Data<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    g: Vec<f32>,
    beta: Vec<T>,
    state: Vec<f32>,
}

fn data<T: Element>(geom: &DeltaGeometry, seed: u64) -> Data<T> {
    let mut rng = SplitMix64::new(seed);
    // Normalized-head scale keeps ||k||^2 near 1, as in the models.
    let scale = 1.0 / (geom.dk as f32).sqrt();
    let mut scaled = |n: usize| -> Vec<T> { random::<f32>(&mut rng, n).iter().map(|v| T::from_f32(v * scale * 1.7)).collect() };
    let q = scaled(geom.qk_len());
    let k = scaled(geom.qk_len());
    let v = random(&mut rng, geom.v_len());
    let g = (0..geom.gate_len()).map(|_| (-(rng.unit() * 0.5 + 0.01)).exp() as f32).collect();
    let beta = (0..geom.gate_len()).map(|_| T::from_f32((0.1 + 0.8 * rng.unit()) as f32)).collect();
    let state = random(&mut rng, geom.state_len());
    Data { q, k, v, g, beta, state }
}

pub fn case<T: Element>(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    if r.kernel.variant.str("state_dtype") != "f32" {
        return Err(format!("the DeltaNet references keep an f32 state; no verifier for state_dtype {}", r.kernel.variant.str("state_dtype")));
    }
    let geom = DeltaGeometry { b: B, t: T, hk: param(r, "Hk"), hv: param(r, "Hv"), dk: param(r, "Dk"), dv: param(r, "Dv") };
    let d = data::<T>(&geom, seed);
    let (b, t, hk, hv, dk, dv) = (B as u64, T as u64, geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
    let state_shape = vec![b, hv, dv, dk];
    let head_inputs = |with_q: bool| {
        let mut v = Vec::new();
        if with_q {
            v.push(host(vec![b, t, hk, dk], &d.q));
        }
        v.push(host(vec![b, t, hk, dk], &d.k));
        v.push(host(vec![b, t, hv, dv], &d.v));
        v.push(host(vec![b, t, hv], &d.g));
        v.push(host(vec![b, t, hv], &d.beta));
        v.push(host(state_shape.clone(), &d.state));
        v
    };
    if r.kernel.family.name == "delta_state" {
        // One batch keeps every step, the other one step.
        let lengths = [T as i32, 1];
        let inp = DeltaStateInputs { k: &d.k, v: &d.v, g: &d.g, beta: &d.beta, state: &d.state, lengths: &lengths };
        return Ok(Case {
            sizes: format!("B={B},T={T}"),
            inputs: head_inputs(false),
            host: vec![lengths.to_vec()],
            expected: vec![Expected {
                name: "state_out",
                replay: host(state_shape, &delta::delta_state_replay(&geom, &inp)),
                exact: delta::delta_state_f64(&geom, &inp),
            }],
        });
    }
    let masked = r.kernel.variant.bool("masked");
    // Batch 0 skips its middle step, batch 1 runs every step.
    let mask: Vec<bool> = (0..B * T).map(|i| !(i / T == 0 && i % T == 1)).collect();
    let inp = DeltaInputs { q: &d.q, k: &d.k, v: &d.v, g: &d.g, beta: &d.beta, state: &d.state, mask: masked.then_some(&mask[..]) };
    let mut inputs = head_inputs(true);
    if masked {
        inputs.push(HostArray::new(kernelgen::Dtype::Bool, vec![b, t], mask.iter().map(|&m| m as u8).collect()));
    }
    let replay = delta::delta_replay(&geom, &inp);
    let exact = delta::delta_f64(&geom, &inp);
    Ok(Case {
        sizes: format!("B={B},T={T}"),
        inputs,
        host: Vec::new(),
        expected: vec![
            Expected { name: "y", replay: host(vec![b, t, hv, dv], &replay.y), exact: exact.y },
            Expected { name: "state_out", replay: host(state_shape, &replay.state), exact: exact.state },
        ],
    })
}
