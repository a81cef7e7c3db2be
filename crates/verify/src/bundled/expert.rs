//! The streamed expert: random Q4/Q8 weights packed into a slot at the
//! spec's layout (gaps filled with the reference's fill byte), random
//! activations, M = 2 samples.

use super::{host, param, random, Case, Expected};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_codegen::render::RenderedKernel;
use std::sync::{Arc, Mutex};

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

pub fn case<T: Element>(r: &RenderedKernel, seed: u64) -> Result<Case, String> {
    let quant = if r.kernel.variant.str("quant") == "q4" { Quant::Q4 } else { Quant::Q8 };
    let slot_bytes = r.kernel.plan.inputs.get(1).and_then(|b| b.shape.first()).and_then(|d| d.as_fixed()).ok_or("the expert family plans no fixed-size slot")? as usize;
    let g = ExpertGeometry {
        hidden: param(r, "H")?,
        intermediate: param(r, "I")?,
        gate_weights: param(r, "gate_weights")?,
        up_weights: param(r, "up_weights")?,
        down_weights: param(r, "down_weights")?,
        gate_scales: param(r, "gate_scales")?,
        up_scales: param(r, "up_scales")?,
        down_scales: param(r, "down_scales")?,
        slot_bytes,
    };
    let slot = packed_slot(quant, &g, seed);
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let (input, width, out_width) = if r.kernel.plan.part.as_deref() == Some("gate_up") { ("x", g.hidden, g.intermediate) } else { ("mid", g.intermediate, g.hidden) };
    let x: Vec<T> = random(&mut rng, M * width);
    let (replay, exact, name) = if input == "x" {
        (expert::gate_up_replay(&x, &slot, &g, quant, M), expert::gate_up_f64(&x, &slot, &g, quant, M), "mid")
    } else {
        (expert::down_replay(&x, &slot, &g, quant, M), expert::down_f64(&x, &slot, &g, quant, M), "out")
    };
    Ok(Case {
        sizes: format!("M={M}"),
        inputs: vec![host(vec![M as u64, width as u64], &x), kernelgen_emu::host::HostArray::from_u8(vec![slot_bytes as u64], slot.to_vec())],
        host: Vec::new(),
        expected: vec![Expected { name, replay: host(vec![M as u64, out_width as u64], &replay), exact, exact_at: None }],
    })
}
