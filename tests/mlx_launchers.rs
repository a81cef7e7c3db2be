//! Affine weights quantized by MLX itself run through kernelgen's affine kernels in the
//! emulator, matching MLX's own dequantize-then-matmul in f32 (`make test-mlx`; every
//! generated launcher through the MLX backend is the conformance suite's,
//! `tests/mlx_conformance.rs`).
#![cfg(feature = "mlx")]

use kernelgen::backend::launch_vec;
use kernelgen::contract::KernelDef;
use kernelgen::kernels::affine_dtypes;
use kernelgen::Dtype;
use kernelgen_emu::{EmuBackend, HostArray};
use mlx_rs::Array;

/// MLX quantizes; the emulator runs kernelgen's affine kernel; MLX computes
/// dequantize(w) @ x in f32. Bound: |kernel - MLX| <= K * 2^-22 * sum |w x|
/// (both are f32 sums of K products in different orders, each within
/// K * 2^-24 * sum |w x| of the exact value, plus the kernel's
/// pre-scaled x and bias split).
fn affine_matches_mlx(def: &'static KernelDef, bits: i32) {
    let (k, n) = (1024usize, 256usize);
    let key = mlx_rs::random::key(7 + bits as u64).unwrap();
    let w = mlx_rs::random::normal::<f32>(&[n as i32, k as i32], 0.0, 0.5, &key).unwrap();
    let x = mlx_rs::random::normal::<f32>(&[1, k as i32], 0.0, 1.0, &mlx_rs::random::key(3).unwrap()).unwrap();
    let (wq, scales, biases) = mlx_rs::ops::quantize(&w, 64, bits).unwrap();
    let deq = mlx_rs::ops::dequantize(&wq, &scales, &biases, 64, bits).unwrap();
    let theirs = mlx_rs::ops::matmul(&x, &deq.t()).unwrap();
    let abs = mlx_rs::ops::matmul(&x.abs().unwrap(), &deq.abs().unwrap().t()).unwrap();
    mlx_rs::transforms::eval([&wq, &scales, &biases, &theirs, &abs, &x]).unwrap();

    let host = |a: &Array, dtype: Dtype| -> HostArray {
        let shape = a.shape().iter().map(|&d| d as u64).collect();
        let bytes = match dtype {
            Dtype::U32 => a.as_slice::<u32>().iter().flat_map(|v| v.to_le_bytes()).collect(),
            _ => a.as_slice::<f32>().iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        HostArray::new(dtype, shape, bytes)
    };
    let emu = EmuBackend::with_defaults().unwrap();
    let args = [host(&x, Dtype::F32), host(&wq, Dtype::U32), host(&scales, Dtype::F32), host(&biases, Dtype::F32)];
    let refs: Vec<&HostArray> = args.iter().collect();
    let y = launch_vec(&emu, def, &refs, &[]).unwrap().remove(0);
    let ours = y.to_f32().unwrap();
    let (theirs, abs) = (theirs.as_slice::<f32>(), abs.as_slice::<f32>());
    assert_eq!(ours.len(), n);
    let mut worst = 0f64;
    for i in 0..n {
        let bound = k as f64 * 2f64.powi(-22) * f64::from(abs[i]);
        let err = (f64::from(ours[i]) - f64::from(theirs[i])).abs();
        assert!(err <= bound, "bits {bits}, y[{i}]: kernelgen {}, MLX {}, |diff| {err:e} > bound {bound:e}", ours[i], theirs[i]);
        worst = worst.max(err / bound);
    }
    eprintln!("bits {bits}: largest error {:.3} of the bound", worst);
}

#[test]
fn affine_q4_matches_mlx_dequantize_matmul() {
    affine_matches_mlx(&affine_dtypes::SMALL2_AFFINE_Q4_F32, 4);
}

#[test]
fn affine_q3_matches_mlx_dequantize_matmul() {
    affine_matches_mlx(&affine_dtypes::SMALL2_AFFINE_Q3_F32, 3);
}
