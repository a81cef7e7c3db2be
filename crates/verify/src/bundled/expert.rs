//! The streamed expert (`rust:expert`): random Q4/Q8 weights packed into a slot at the spec's
//! layout (gaps filled with the reference's fill byte), random activations, M = 2 samples.

use super::{host, input, per_dtype, random, RustReference};
use crate::case::Case;
use crate::compare::Expected;
use crate::error::Error;
use crate::reference::{Declaration, Kernel};
use kernelgen_emu::HostArray;
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use kernelgen_reference::{Element, SplitMix64};
use std::sync::{Arc, Mutex};

pub(super) const REFERENCE: RustReference = RustReference {
    name: "expert",
    declared: Declaration {
        params: &["dtype", "quant", "H", "I", "gate_weights", "up_weights", "down_weights", "gate_scales", "up_scales", "down_scales", "slot_bytes"],
        inputs: &["x", "mid", "slot"],
        outputs: &["mid", "out"],
    },
    case: per_dtype!(case),
    expected: per_dtype!(expected),
};

const M: usize = 2;

type SlotKey = (Quant, ExpertGeometry, u64);

/// The packed slot of random weights: drawing tens of millions of weights costs more than
/// the kernels, and a geometry's gate/up and down kernels of both dtypes (four in a row in
/// the catalog) share one slot, so the last two are kept.
fn packed_slot(quant: Quant, g: &ExpertGeometry, seed: u64) -> Arc<Vec<u8>> {
    static LAST: Mutex<Vec<(SlotKey, Arc<Vec<u8>>)>> = Mutex::new(Vec::new());
    let key = (quant, *g, seed);
    if let Some((_, slot)) = LAST.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == key) {
        return slot.clone();
    }
    let slot = Arc::new(ExpertWeights::random(quant, g.hidden, g.intermediate, seed).pack(quant, g));
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if last.len() == 2 {
        last.remove(0);
    }
    last.push((key, slot.clone()));
    slot
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

fn case<T: Element>(k: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
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
    let (quant, g) = geometry(k)?;
    let slot = &case.get("slot")?.data;
    let (replay, exact, output, width) = if gate_up(k)? {
        let x: Vec<T> = input(case, "x")?;
        (expert::gate_up_replay(&x, slot, &g, quant, M), expert::gate_up_f64(&x, slot, &g, quant, M), "mid", g.intermediate)
    } else {
        let mid: Vec<T> = input(case, "mid")?;
        (expert::down_replay(&mid, slot, &g, quant, M), expert::down_f64(&mid, slot, &g, quant, M), "out", g.hidden)
    };
    Ok(vec![(output.to_string(), Expected::Model { replay: host(vec![M as u64, width as u64], &replay), exact, exact_at: None })])
}
