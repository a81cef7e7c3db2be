//! The streamed expert (`rust:expert`): random Q4/Q8 weights packed into a slot at the spec's
//! layout (gaps filled with the reference's fill byte), random activations, M = 2 samples. The
//! grouped parts get S = 3 such slots stacked, M = 2 tokens of K = 2 routes each ([`routes`]:
//! more for `down_grouped` at a small geometry), router weights in [0, 1), and slot indices in
//! [0, S) but for one pair whose index is past the slots (S, or u32::MAX, at a pair the seed
//! picks), so every run exercises the skip.

use super::{host, input, per_dtype, random, RustReference};
use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel};
use kernelgen_emu::{HostArray, Language};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use kernelgen_reference::{Element, SplitMix64};
use std::sync::{Arc, Mutex};

pub(super) const REFERENCE: RustReference = RustReference {
    name: "expert",
    declared: Declaration {
        params: &["dtype", "quant", "H", "I", "CUDA_ROWS", "gate_weights", "up_weights", "down_weights", "gate_scales", "up_scales", "down_scales", "slot_bytes"],
        inputs: &["x", "mid", "slot", "slots", "experts", "weights"],
        outputs: &["mid", "out"],
    },
    case: per_dtype!(case),
    expected: per_dtype!(expected),
};

const M: usize = 2;
/// Routes per token and slots of the grouped parts.
const K: usize = 2;
const S: usize = 3;

type SlotKey = (Quant, ExpertGeometry, u64);

/// The packed slot of random weights: drawing tens of millions of weights costs more than
/// the kernels, and a geometry's kernels of both dtypes (eight in a row in the catalog) share
/// slots (the grouped parts' first is the single parts' one), so the last four are kept.
fn packed_slot(quant: Quant, g: &ExpertGeometry, seed: u64) -> Arc<Vec<u8>> {
    static LAST: Mutex<Vec<(SlotKey, Arc<Vec<u8>>)>> = Mutex::new(Vec::new());
    let key = (quant, *g, seed);
    if let Some((_, slot)) = LAST.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == key) {
        return slot.clone();
    }
    let slot = Arc::new(ExpertWeights::random(quant, g.hidden, g.intermediate, seed).pack(quant, g));
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if last.len() == 4 {
        last.remove(0);
    }
    last.push((key, slot.clone()));
    slot
}

/// How the body run deals a row's weights to its lanes: the CUDA body's Q8 reads words of 4.
fn lanes(k: &Kernel<'_>) -> expert::Lanes {
    if k.body() == Language::Cuda { expert::Lanes::Words } else { expert::Lanes::Strided }
}

/// The kernel's quantization and slot geometry, from its plan.
fn geometry(k: &Kernel<'_>) -> Result<(Quant, ExpertGeometry), Error> {
    let quant = match k.string("quant")? {
        "q4" => Quant::Q4,
        "q8" => Quant::Q8,
        other => return Err(Error::Unmodelled { reference: REFERENCE.name, what: format!("for quant {other}") }),
    };
    let g = ExpertGeometry {
        hidden: k.int("H")?,
        intermediate: k.int("I")?,
        gate_weights: k.int("gate_weights")?,
        up_weights: k.int("up_weights")?,
        down_weights: k.int("down_weights")?,
        gate_scales: k.int("gate_scales")?,
        up_scales: k.int("up_scales")?,
        down_scales: k.int("down_scales")?,
        slot_bytes: k.int("slot_bytes")?,
    };
    Ok((quant, g))
}

/// Which kernel it is: gate/up reads `x`, down reads `mid`.
fn gate_up(k: &Kernel<'_>) -> Result<bool, Error> {
    k.has_input("x")
}

/// Whether it is a grouped part: it reads an array of slots.
fn grouped(k: &Kernel<'_>) -> Result<bool, Error> {
    k.has_input("slots")
}

/// Weights a geometry's `down` holds (H * I) up to which `down_grouped` is run with more routes.
const SMALL_DOWN: usize = 1 << 22;

/// Routes per token of a grouped part: K, but for `down_grouped` at a small geometry one more
/// than a CUDA block's rows: that body's warps take a token's routes in groups of as many as the
/// block has rows, so its second group, a partial one, runs too (at glm52 that many routes
/// would cost the emulator seconds a kernel; there K = 2 leaves warps without a route).
fn routes(k: &Kernel<'_>, g: &ExpertGeometry) -> Result<usize, Error> {
    Ok(if !gate_up(k)? && g.hidden * g.intermediate <= SMALL_DOWN { k.int("CUDA_ROWS")? + 1 } else { K })
}

/// The grouped parts' slot indices for M tokens of `routes` each: in [0, S), but for one pair
/// past the slots.
fn experts(seed: u64, routes: usize) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed ^ 0xe4e7);
    let mut e: Vec<u32> = (0..M * routes).map(|_| rng.int(0, S as i64 - 1) as u32).collect();
    e[(seed % (M * routes) as u64) as usize] = if seed % 2 == 0 { S as u32 } else { u32::MAX };
    e
}

fn grouped_case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let (quant, g) = geometry(k)?;
    let routes = routes(k, &g)?;
    let slots: Vec<u8> = (0..S as u64).flat_map(|s| packed_slot(quant, &g, seed + s).to_vec()).collect();
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let (input, shape) = if gate_up(k)? { ("x", vec![M as u64, g.hidden as u64]) } else { ("mid", vec![M as u64, routes as u64, g.intermediate as u64]) };
    let x: Vec<T> = random(&mut rng, shape.iter().product::<u64>() as usize);
    let experts = experts(seed, routes);
    let mut case = Case::new()
        .size("M", M as u64)
        .size("K", routes as u64)
        .size("S", S as u64)
        .array(input, host(shape, &x))
        .array("slots", HostArray::from_u8(vec![S as u64, g.slot_bytes as u64], slots))
        .array("experts", HostArray::new(kernelgen::contract::Dtype::U32, vec![M as u64, routes as u64], experts.iter().flat_map(|e| e.to_le_bytes()).collect()));
    if !gate_up(k)? {
        let weights: Vec<T> = (0..M * routes).map(|_| T::from_f32(rng.unit() as f32)).collect();
        case = case.array("weights", host(vec![M as u64, routes as u64], &weights));
    }
    Ok(case)
}

fn grouped_expected<T: Element>(k: &Kernel<'_>, case: &Case) -> Result<Vec<(String, Expected)>, Error> {
    let (quant, g) = geometry(k)?;
    let experts: Vec<u32> = case.get("experts")?.data.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    // the routes per token the case was drawn with ([`routes`])
    let per_token = experts.len() / M;
    let routes = expert::Routes { slots: &case.get("slots")?.data, experts: &experts, m: M, k: per_token };
    Ok(vec![if gate_up(k)? {
        let x: Vec<T> = input(case, "x")?;
        let replay = expert::gate_up_grouped_replay(&x, &routes, &g, quant, lanes(k));
        ("mid".to_string(), Expected::Model { replay: host(vec![M as u64, routes.k as u64, g.intermediate as u64], &replay), exact: expert::gate_up_grouped_f64(&x, &routes, &g, quant), exact_at: None })
    } else {
        let (mid, weights): (Vec<T>, Vec<T>) = (input(case, "mid")?, input(case, "weights")?);
        let replay = expert::down_grouped_replay(&mid, &weights, &routes, &g, quant, lanes(k));
        ("out".to_string(), Expected::Model { replay: host(vec![M as u64, g.hidden as u64], &replay), exact: expert::down_grouped_f64(&mid, &weights, &routes, &g, quant), exact_at: None })
    }])
}

fn case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    if grouped(k)? {
        return grouped_case::<T>(k, seed);
    }
    let (quant, g) = geometry(k)?;
    let slot = packed_slot(quant, &g, seed);
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let (input, width) = if gate_up(k)? { ("x", g.hidden) } else { ("mid", g.intermediate) };
    let x: Vec<T> = random(&mut rng, M * width);
    Ok(Case::new()
        .size("M", M as u64)
        .array(input, host(vec![M as u64, width as u64], &x))
        .array("slot", HostArray::from_u8(vec![g.slot_bytes as u64], slot.to_vec())))
}

fn expected<T: Element>(k: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
    if grouped(k)? {
        return grouped_expected::<T>(k, case);
    }
    let (quant, g) = geometry(k)?;
    let slot = &case.get("slot")?.data;
    let (replay, exact, output, width) = if gate_up(k)? {
        let x: Vec<T> = input(case, "x")?;
        (expert::gate_up_replay(&x, slot, &g, quant, M, lanes(k)), expert::gate_up_f64(&x, slot, &g, quant, M), "mid", g.intermediate)
    } else {
        let mid: Vec<T> = input(case, "mid")?;
        (expert::down_replay(&mid, slot, &g, quant, M, lanes(k)), expert::down_f64(&mid, slot, &g, quant, M), "out", g.hidden)
    };
    Ok(vec![(output.to_string(), Expected::Model { replay: host(vec![M as u64, width as u64], &replay), exact, exact_at: None })])
}
