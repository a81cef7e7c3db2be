//! Every generated launcher through the MLX backend (`make test-mlx`):
//! bad arguments are rejected with the same errors as on every backend and
//! never reach MLX; valid ones reach MLX, whose CPU build answers "No Metal
//! back-end", returned as a `LaunchError` (no panic). And affine weights
//! quantized by MLX itself run through kernelgen's affine kernels in the
//! emulator, matching MLX's own dequantize-then-matmul in f32.
#![cfg(feature = "mlx")]

use kernelgen::backend::mlx::{MlxBackend, MlxError, to_mlx_dtype};
use kernelgen::backend::{Backend, launch_vec};
use kernelgen::contract::KernelDef;
use kernelgen::kernels::{self, affine_dtypes};
use kernelgen::launch::{self, ArgInfo, ErrorKind, LaunchError};
use kernelgen::Dtype;
use kernelgen_emu::{EmuBackend, HostArray};
use mlx_rs::Array;

fn mlx_dtype(d: Dtype) -> mlx_rs::Dtype {
    to_mlx_dtype(d).expect("every contract dtype has an MLX dtype")
}

/// Lazy zeros of `def`'s input shapes with every run-time size `n`, and its
/// host integers (at most the size they are bounded by).
fn zeros(def: &KernelDef, n: u64) -> (Vec<Array>, Vec<Vec<i32>>) {
    let sizes = vec![n; def.sizes.len()];
    let arrays = def
        .data_inputs()
        .map(|b| {
            let shape: Vec<i32> = b.shape_at(&sizes).unwrap().iter().map(|&d| d as i32).collect();
            mlx_rs::ops::zeros::<f32>(&shape).unwrap().as_dtype(mlx_dtype(b.dtype)).unwrap()
        })
        .collect();
    let host = def.host_inputs().map(|b| vec![1; b.elements(&sizes).unwrap() as usize]).collect();
    (arrays, host)
}

fn input_bytes(def: &KernelDef) -> u64 {
    let sizes = vec![2; def.sizes.len()];
    def.data_inputs().map(|b| b.elements(&sizes).unwrap() * b.dtype.size() as u64).sum()
}

fn mlx_launch(def: &KernelDef, arrays: &[Array], host: &[Vec<i32>]) -> Result<Vec<Array>, LaunchError> {
    let refs: Vec<&Array> = arrays.iter().collect();
    let host: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
    launch_vec(&MlxBackend::new(), def, &refs, &host)
}

#[test]
fn bad_arguments_get_the_contract_errors_and_never_reach_mlx() {
    let mlx = MlxBackend::new();
    for def in kernels::CATALOG {
        // The first argument with the wrong dtype: the violations every backend reports.
        let (mut args, host) = zeros(def, 2);
        let first = def.data_inputs().next().unwrap();
        let wrong = if first.dtype == Dtype::F32 { Dtype::F16 } else { Dtype::F32 };
        args[0] = args[0].as_dtype(mlx_dtype(wrong)).unwrap();
        let err = mlx_launch(def, &args, &host).unwrap_err();
        let infos: Vec<ArgInfo> = args.iter().map(|a| mlx.describe(a)).collect();
        let host_refs: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
        let same = launch::check(def, &infos, &host_refs, &[]).unwrap_err();
        assert_eq!(err.violations(), same.violations(), "{}", def.name);
        let v = &err.violations()[0];
        assert_eq!((v.kind, v.argument.as_deref()), (ErrorKind::Dtype, Some(first.name.as_ref())));
        // One argument short.
        let (args, host) = zeros(def, 2);
        assert!(mlx_launch(def, &args[1..], &host).unwrap_err().has(ErrorKind::ArgumentCount));
        // A dtype MLX has and kernelgen does not.
        let (mut args, host) = zeros(def, 2);
        args[0] = args[0].as_dtype(mlx_rs::Dtype::Int64).unwrap();
        let err = mlx_launch(def, &args, &host).unwrap_err();
        assert!(err.has(ErrorKind::Dtype) && err.violations()[0].given.contains("Int64"), "{err}");
    }
}

#[test]
fn valid_launches_reach_mlx_and_come_back_as_errors() {
    let mut reached = 0;
    for def in kernels::CATALOG.iter().filter(|d| input_bytes(d) < (64 << 20)) {
        let (args, host) = zeros(def, 2);
        let err = mlx_launch(def, &args, &host).unwrap_err();
        let LaunchError::Backend { source, .. } = &err else { panic!("{}: {err}", def.name) };
        let mlx = source.downcast_ref::<MlxError>().unwrap_or_else(|| panic!("{}: {err}", def.name));
        assert!(mlx.is_no_metal(), "{}: {err}", def.name);
        reached += 1;
    }
    assert!(reached > 40, "only {reached} kernels were launched");
}

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
