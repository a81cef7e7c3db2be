//! Typed launchers through the emulator backend, beyond the conformance suite every
//! backend runs (the root crate's `tests/conformance_emu.rs`: every launch error class,
//! outputs, a kernel of every family against its reference, a chain of launches): over
//! random shapes, every launch the checks accept runs clean with the guard pages armed and
//! every one they reject names the argument; and a new run-time size never recompiles.

use half::bf16;
use kernelgen_emu::backend::EmuBackend;
use kernelgen_emu::host::HostArray;
use kernelgen::kernels::experts::{TINY_EXPERT_Q4_BF16_R4_GATE_UP, TinyExpertQ4Bf16R4};
use kernelgen::launch::ErrorKind;
use kernelgen_reference::expert::{ExpertGeometry, ExpertWeights, Quant};
use proptest::prelude::*;
use std::sync::OnceLock;

const H: usize = 256;
const I: usize = 128;
const SLOT: usize = 73728;

fn backend() -> &'static EmuBackend {
    static B: OnceLock<EmuBackend> = OnceLock::new();
    B.get_or_init(|| EmuBackend::with_defaults().expect("emulator"))
}

/// The layout `specs/experts.toml` gives the `tiny` geometry for Q4.
fn geometry() -> ExpertGeometry {
    ExpertGeometry {
        hidden: H,
        intermediate: I,
        gate_weights: 0,
        up_weights: 20480,
        down_weights: 40960,
        gate_scales: 61440,
        up_scales: 65536,
        down_scales: 69632,
        slot_bytes: SLOT,
    }
}

fn slot() -> Vec<u8> {
    ExpertWeights::random(Quant::Q4, H, I, 11).pack(Quant::Q4, &geometry())
}

fn activations(n: usize, seed: u32) -> Vec<bf16> {
    (0..n)
        .map(|i| {
            bf16::from_f32(
                (((i as u32).wrapping_mul(2654435761).wrapping_add(seed)) % 2001) as f32 / 1000.0
                    - 1.0,
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn accepted_launches_run_clean_and_rejected_ones_name_the_argument(m in 1usize..4, dcols in -2i64..=2, dslot in prop::sample::select(vec![-64i64, -4, 0, 4])) {
        let emu = backend();
        let cols = (H as i64 + dcols) as usize;
        let slot_len = (SLOT as i64 + dslot) as usize;
        let mut slot_bytes = slot();
        slot_bytes.resize(slot_len, 0xFF);
        let x = HostArray::from_bf16(vec![m as u64, cols as u64], &activations(m * cols, 9));
        let slot = HostArray::from_u8(vec![slot_len as u64], slot_bytes);
        let result = TinyExpertQ4Bf16R4::gate_up(emu, &x, &slot);
        if cols == H && slot_len == SLOT {
            let mid = result.expect("a launch within the contract must run clean");
            prop_assert_eq!(mid.shape, vec![m as u64, I as u64]);
        } else {
            let e = result.expect_err("a launch outside the contract was accepted");
            let v = &e.violations()[0];
            prop_assert!(matches!(v.kind, ErrorKind::Dim));
            prop_assert_eq!(v.argument.as_deref(), Some(if cols != H { "x" } else { "slot" }));
        }
    }
}

/// MLX compiles a new library for any change of template value or source;
/// the sample count M is neither (it is the grid's z extent), so every M runs
/// the one compiled kernel.
#[test]
fn a_new_sample_count_does_not_recompile() {
    let def = &TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    // No template arguments: MLX would append them to the kernel name.
    assert!(def.mlx_name.ends_with("_bfloat16_t_uint8_t_bfloat16_t") && !def.mlx_name.contains("__"));
    assert!(!def.body().contains("template") && !def.metal.contains("host_name"));
    let emu = EmuBackend::with_defaults().unwrap();
    let slot = HostArray::from_u8(vec![SLOT as u64], slot());
    let mut objects = Vec::new();
    for m in [1usize, 2, 7] {
        let x = HostArray::from_bf16(vec![m as u64, H as u64], &activations(m * H, m as u32));
        let mid = TinyExpertQ4Bf16R4::gate_up(&emu, &x, &slot).unwrap();
        assert_eq!(mid.shape, vec![m as u64, I as u64]);
        objects.push(emu.program(def).unwrap().object_path().to_path_buf());
    }
    assert!(objects.windows(2).all(|w| w[0] == w[1]), "{objects:?}");
}
