//! The emulator's CUDA mode: sources as MLX's cuda_kernel assembles them, run against Rust
//! references (elementwise, a warp-shuffle reduction bit for bit in its order, a shared-memory
//! reduction across warps, half and bfloat conversions against the `half` crate), CUDA's
//! launch model (whole blocks), warp operations with masks and widths as CUDA documents them,
//! and the planted bugs the emulator must catch.

use crate::common;

use common::*;
use half::bf16;
use kernelgen_emu::*;

const ELEMENTWISE: &str = include_str!("emu/cuda/elementwise.cu");

fn load_cuda(src: &str, name: &str) -> Program {
    let opts = LoadOptions { language: Language::Cuda, ..LoadOptions::default() };
    emulator().load_with(src, name, &opts).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_elementwise_kernel_matches_its_reference_in_whole_blocks() {
    let p = load_cuda(ELEMENTWISE, "elementwise.cu");
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..1000).map(|_| rng.f32()).collect();
    let y: Vec<u16> = (0..1000).map(|_| bf16::from_f32(rng.f32()).to_bits()).collect();
    let mut xb = f32_buf(&x);
    let mut yb = u16_buf(&y);
    let mut out = f32_buf(&vec![0.0; 1000]);
    let stats = p.run(&Dispatch::new("custom_kernel_axpy", [1000, 1, 1], [256, 1, 1]), &mut [&mut xb, &mut yb, &mut out]).unwrap();
    // CUDA launches whole blocks: 4 of 256 threads, 24 past the grid
    assert_eq!(stats.threadgroups, 4);
    let got = f32s(&out);
    for i in 0..1000 {
        let want = 2.0 * x[i] + bf16::from_bits(y[i]).to_f32();
        assert_eq!(got[i].to_bits(), want.to_bits(), "element {i}");
    }
}
