//! The pass case: a crate defines kernels with `kernels!` and
//! `include_specs!` and launches them through the emulator backend, equal to
//! the bit-exact reference.

use half::bf16;
use kernelgen_emu::{EmuBackend, HostArray};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use std::sync::OnceLock;

kernelgen::kernels! {
    /// A small expert geometry, defined next to the code that launches it.
    pub mod small_inline;
    family = expert;
    description = "one small expert geometry";
    axes {
        quant = [q4],
        dtype = [bf16],
        rows_per_threadgroup = [4],
    }
    geometry small {
        hidden = 64,
        intermediate = 32,
        slot.q4 {
            bytes = 3584,
            gate_weights = 0,
            up_weights = 1024,
            down_weights = 2048,
            gate_scales = 3072,
            up_scales = 3200,
            down_scales = 3328,
        }
    }
}

// The same spec as TOML (module `small`), and a second one.
kernelgen::include_specs!("tests/specs/small.toml", "tests/specs/small_q8.toml");

const H: usize = 64;
const I: usize = 32;
const SLOT: usize = 3584;

fn backend() -> &'static EmuBackend {
    static B: OnceLock<EmuBackend> = OnceLock::new();
    B.get_or_init(|| EmuBackend::with_defaults().expect("emulator"))
}

/// The layout both specs give `small` for Q4.
fn geometry() -> ExpertGeometry {
    ExpertGeometry {
        hidden: H,
        intermediate: I,
        gate_weights: 0,
        up_weights: 1024,
        down_weights: 2048,
        gate_scales: 3072,
        up_scales: 3200,
        down_scales: 3328,
        slot_bytes: SLOT,
    }
}

fn activations(n: usize) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32(((i as u32).wrapping_mul(2654435761) % 2001) as f32 / 1000.0 - 1.0)).collect()
}

#[test]
fn kernels_macro_launches_gate_up_and_down_through_the_emulator() {
    let m = 3;
    let x = activations(m * H);
    let slot = ExpertWeights::random(Quant::Q4, H, I, 7).pack(Quant::Q4, &geometry());
    let slot_array = HostArray::from_u8(vec![SLOT as u64], slot.clone());
    let emu = backend();

    let mid = small_inline::SmallExpertQ4Bf16R4::gate_up(
        emu,
        &HostArray::from_bf16(vec![m as u64, H as u64], &x),
        &slot_array,
    )
    .unwrap();
    assert_eq!((mid.dtype, mid.shape.clone()), (kernelgen::Dtype::Bf16, vec![m as u64, I as u64]));
    let want = expert::gate_up_replay(&x, &slot, &geometry(), Quant::Q4, m, expert::Lanes::Strided);
    assert_eq!(mid, HostArray::from_bf16(vec![m as u64, I as u64], &want));

    let out = small_inline::SmallExpertQ4Bf16R4::down(emu, &mid, &slot_array).unwrap();
    assert_eq!(
        out,
        HostArray::from_bf16(vec![m as u64, H as u64], &expert::down_replay(&want, &slot, &geometry(), Quant::Q4, m, expert::Lanes::Strided))
    );
}

#[test]
fn kernels_macro_launchers_check_their_arguments() {
    let x = HostArray::from_f32(vec![1, H as u64], &[0.0; H]);
    let slot = HostArray::from_u8(vec![SLOT as u64], vec![0; SLOT]);
    let e = small_inline::SmallExpertQ4Bf16R4::gate_up(backend(), &x, &slot).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel `small_expert_q4_bf16_r4_gate_up`, argument `x`: expected dtype bf16, given dtype f32; nothing was launched"
    );
}

#[test]
fn inline_and_included_specs_give_the_same_kernels() {
    // gate_up, down and their grouped forms
    assert_eq!(small_inline::KERNELS.len(), 4);
    for (a, b) in small_inline::KERNELS.iter().zip(small::KERNELS) {
        assert_eq!(
            (&a.name, a.metal.as_ref(), a.header(), a.body(), &a.mlx_name, &a.grid, a.threadgroup),
            (&b.name, b.metal.replace("specs/small.toml", "kernels!(small_inline)").as_str(), b.header(), b.body(), &b.mlx_name, &b.grid, b.threadgroup)
        );
        assert_eq!((&a.inputs, &a.outputs, &a.sizes), (&b.inputs, &b.outputs, &b.sizes));
    }
    assert_eq!(small_inline::KERNELS[0].spec, "kernels!(small_inline)");
    assert_eq!(small::KERNELS[0].spec, "specs/small.toml");
    assert_eq!(
        small_q8::KERNELS.iter().map(|k| k.name.as_ref()).collect::<Vec<_>>(),
        ["small8_expert_q8_f32_r4_gate_up", "small8_expert_q8_f32_r4_down", "small8_expert_q8_f32_r4_gate_up_grouped", "small8_expert_q8_f32_r4_down_grouped"]
    );
}

#[test]
fn included_spec_launches_through_the_emulator() {
    let m = 2;
    let x = activations(m * H);
    let slot = ExpertWeights::random(Quant::Q4, H, I, 3).pack(Quant::Q4, &geometry());
    let mid = small::SmallExpertQ4Bf16R4::gate_up(
        backend(),
        &HostArray::from_bf16(vec![m as u64, H as u64], &x),
        &HostArray::from_u8(vec![SLOT as u64], slot.clone()),
    )
    .unwrap();
    assert_eq!(
        mid,
        HostArray::from_bf16(vec![m as u64, I as u64], &expert::gate_up_replay(&x, &slot, &geometry(), Quant::Q4, m, expert::Lanes::Strided))
    );
}
