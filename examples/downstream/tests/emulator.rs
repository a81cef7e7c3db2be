//! The user's expert through the emulator, against the reference model.

use kernelgen::half::bf16;
use kernelgen_emu::{EmuBackend, HostArray};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};

#[test]
fn the_tiny_expert_runs_and_matches_the_reference() {
    let def = &kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    let slot_bytes = def.inputs[1].shape[0].as_fixed().unwrap() as usize;
    let offset = |name: &str| def.inputs[1].regions.iter().find(|r| r.name == name).map(|r| r.offset as usize);
    let down = &kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_DOWN;
    let down_offset = |name: &str| down.inputs[1].regions.iter().find(|r| r.name == name).map(|r| r.offset as usize);
    let g = ExpertGeometry {
        hidden: 256,
        intermediate: 128,
        gate_weights: offset("gate_weights").unwrap(),
        up_weights: offset("up_weights").unwrap(),
        down_weights: down_offset("down_weights").unwrap(),
        gate_scales: offset("gate_scales").unwrap(),
        up_scales: offset("up_scales").unwrap(),
        down_scales: down_offset("down_scales").unwrap(),
        slot_bytes,
    };
    let slot = ExpertWeights::random(Quant::Q4, 256, 128, 11).pack(Quant::Q4, &g);
    let m = 2;
    let x: Vec<bf16> = (0..m * 256).map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.0) / 50.0)).collect();
    let emu = EmuBackend::with_defaults().unwrap();
    let out = kernelgen_downstream_example::tiny_expert(&emu, &HostArray::from_bf16(vec![m as u64, 256], &x), &HostArray::from_u8(vec![slot_bytes as u64], slot.clone())).unwrap();
    let mid = expert::gate_up_replay(&x, &slot, &g, Quant::Q4, m);
    let want = expert::down_replay(&mid, &slot, &g, Quant::Q4, m);
    assert_eq!(out, HostArray::from_bf16(vec![m as u64, 256], &want));
}
