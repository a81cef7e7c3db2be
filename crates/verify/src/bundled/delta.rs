//! The gated DeltaNet step (unmasked and masked) and the prefix-state
//! kernel: B = 2, T = 3, keys and queries scaled like normalized heads,
//! decays g in (0, 1), betas in (0, 1), a random incoming state.

use super::{host, param, random, Case, Expected};
use kernelgen_emu::host::HostArray;
use kernelgen_reference::delta::{self, DeltaGeometry, DeltaInputs, DeltaStateInputs};
use kernelgen_reference::{Element, Exact, SplitMix64};
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
    // A bf16 state is read into float and written back rounded: the references run on its
    // exact values in f32, and their final state is rounded the same way.
    let bf16_state = match r.kernel.variant.str("state_dtype") {
        "f32" => false,
        "bf16" => true,
        other => return Err(format!("no DeltaNet reference for state_dtype {other}")),
    };
    let geom = DeltaGeometry { b: B, t: T, hk: param(r, "Hk")?, hv: param(r, "Hv")?, dk: param(r, "Dk")?, dv: param(r, "Dv")? };
    let mut d = data::<T>(&geom, seed);
    if bf16_state {
        d.state.iter_mut().for_each(|v| *v = half::bf16::from_f32(*v).to_f32());
    }
    let state_host = |shape: Vec<u64>, values: &[f32]| {
        if bf16_state { host(shape, &values.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>()) } else { host(shape, values) }
    };
    // The rounding adds at most half a bf16 ulp to the f32 state's error (a whole one, to be safe).
    let state_exact = |mut e: Exact| {
        if bf16_state {
            for (t, v) in e.tol.iter_mut().zip(&e.value) {
                *t += kernelgen_reference::ulp::<half::bf16>(v.abs() + *t);
            }
        }
        e
    };
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
        v.push(state_host(state_shape.clone(), &d.state));
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
                replay: state_host(state_shape, &delta::delta_state_replay(&geom, &inp)),
                exact: state_exact(delta::delta_state_f64(&geom, &inp)),
                exact_at: None,
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
            Expected { name: "y", replay: host(vec![b, t, hv, dv], &replay.y), exact: exact.y, exact_at: None },
            Expected { name: "state_out", replay: state_host(state_shape, &replay.state), exact: state_exact(exact.state), exact_at: None },
        ],
    })
}
