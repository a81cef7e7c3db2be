//! The user's kernels through the emulator, built from the user's own
//! tensors with kernelgen's helpers (the generated slot packer, the affine
//! quantizer), against independent reference models.

use kernelgen::half::bf16;
use kernelgen::kernels::affine_dtypes::Small2AffineQ4F32;
use kernelgen::kernels::experts::TinyExpertQ4Bf16R4;
use kernelgen_emu::{EmuBackend, HostArray};
use kernelgen_reference::SplitMix64;
use kernelgen_reference::expert::{self, ExpertGeometry, Quant};

fn random(rng: &mut SplitMix64, n: usize, lo: i64, hi: i64) -> Vec<i8> {
    (0..n).map(|_| rng.int(lo, hi) as i8).collect()
}

fn scales(rng: &mut SplitMix64, n: usize, len: usize) -> Vec<f32> {
    (0..n).map(|_| ((0.5 + rng.unit()) / (7.0 * (len as f64).sqrt())) as f32).collect()
}

/// The reference reads a slot by byte offsets; here they come from the
/// generated layout, which the packer also used.
fn geometry() -> ExpertGeometry {
    let l = TinyExpertQ4Bf16R4::SLOT;
    let at = |name: &str| l.regions.iter().find(|r| r.name == name).unwrap().offset as usize;
    ExpertGeometry {
        hidden: 256,
        intermediate: 128,
        gate_weights: at("gate_weights"),
        up_weights: at("up_weights"),
        down_weights: at("down_weights"),
        gate_scales: at("gate_scales"),
        up_scales: at("up_scales"),
        down_scales: at("down_scales"),
        slot_bytes: l.bytes as usize,
    }
}

#[test]
fn a_slot_packed_from_random_tensors_runs_and_matches_the_reference() {
    let (h, i) = (256, 128);
    let mut rng = SplitMix64::new(11);
    let (gate, up, down) = (random(&mut rng, i * h, -8, 7), random(&mut rng, i * h, -8, 7), random(&mut rng, h * i, -8, 7));
    let (gs, us, ds) = (scales(&mut rng, i, h), scales(&mut rng, i, h), scales(&mut rng, h, i));
    let slot = TinyExpertQ4Bf16R4::pack_slot(&gate, &up, &down, &gs, &us, &ds).unwrap();
    assert_eq!(slot.len() as u64, TinyExpertQ4Bf16R4::SLOT.bytes);

    let m = 2;
    let x: Vec<bf16> = (0..m * h).map(|_| bf16::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    let emu = EmuBackend::with_defaults().unwrap();
    let slot_array = HostArray::from_u8(vec![slot.len() as u64], slot.to_vec());
    let out = kernelgen_downstream_example::tiny_expert(&emu, &HostArray::from_bf16(vec![m as u64, h as u64], &x), &slot_array).unwrap();

    // The reference's own unpacking of the slot bytes, at the layout's offsets.
    let g = geometry();
    let mid = expert::gate_up_replay(&x, &slot, &g, Quant::Q4, m, expert::Lanes::Strided);
    let want = expert::down_replay(&mid, &slot, &g, Quant::Q4, m, expert::Lanes::Strided);
    assert_eq!(out, HostArray::from_bf16(vec![m as u64, h as u64], &want));
    // And the f64 model of the same unpacked tensors bounds the result.
    let exact = expert::down_f64(&mid, &slot, &g, Quant::Q4, m);
    exact.check::<bf16>(&want).unwrap();

    // A wrong tensor is refused by the packer, naming the region.
    let e = TinyExpertQ4Bf16R4::pack_slot(&gate[1..], &up, &down, &gs, &us, &ds).unwrap_err();
    assert!(e.to_string().contains("region `gate_weights`: expected 32768 values"), "{e}");
}

#[test]
fn weights_quantized_with_the_helper_run_through_the_affine_kernel() {
    let (k, n) = (1024, 256);
    let mut rng = SplitMix64::new(5);
    let w: Vec<f32> = (0..n * k).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    let q = kernelgen::quant::affine::quantize(&w, n, k, 4).unwrap();
    let x: Vec<f32> = (0..k).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    let emu = EmuBackend::with_defaults().unwrap();
    let words = HostArray::from_u32(vec![n as u64, (k / 8) as u64], &q.w);
    let y = Small2AffineQ4F32::launch(
        &emu,
        &HostArray::from_f32(vec![1, k as u64], &x),
        &words,
        &HostArray::from_f32(vec![n as u64, (k / 64) as u64], &q.scales),
        &HostArray::from_f32(vec![n as u64, (k / 64) as u64], &q.biases),
    )
    .unwrap();
    let reference = kernelgen_reference::affine::Quantized { n, k, bits: kernelgen_reference::affine::Bits::Four, w: q.w.clone(), scales: q.scales.clone(), biases: q.biases.clone() };
    let want = kernelgen_reference::affine::affine_row_replay(&x, &reference);
    assert_eq!(y, HostArray::from_f32(vec![1, n as u64], &want));
    // Within the f64 model's bound of dequantize(w) . x.
    kernelgen_reference::affine::affine_row_f64(&x, &reference).check::<f32>(&want).unwrap();
}
