//! The MLX backend on a machine without Metal (Linux, the CPU build of MLX),
//! run by `make test-mlx`:
//! - a launch never evaluates or synchronizes: its inputs (lazy MLX
//!   expressions) are still unevaluated after a chain of launches;
//! - a launch that satisfies the kernel's contract reaches MLX, and MLX's own
//!   typed error ("No Metal back-end") comes back as the source of the
//!   `LaunchError`, never a panic; calls that break the contract never reach MLX;
//! - the kernel cache is per name and refuses a second source for a name.
#![cfg(feature = "mlx")]

use kernelgen::backend::mlx::{MlxBackend, MlxError};
use kernelgen::backend::{launch, launch_vec};
use kernelgen::contract::{BufferDef, Cost, Dim, Dtype, KernelDef, Op, Source, TextRange};
use kernelgen::kernels::experts::Glm52ExpertQ4Bf16R4;
use kernelgen::launch::LaunchError;
use mlx_rs::Array;
use std::borrow::Cow;
use std::ffi::{c_int, c_void};

/// mlx-c's handle of an array (`mlx_array`: one pointer), to ask MLX whether
/// an array has been evaluated without evaluating it.
#[repr(C)]
struct Handle {
    ctx: *mut c_void,
}

unsafe extern "C" {
    fn _mlx_array_is_available(res: *mut bool, arr: Handle) -> c_int;
}

/// Whether MLX has computed `a` (false for a lazy expression nobody evaluated).
fn evaluated(a: &Array) -> bool {
    let mut res = false;
    // SAFETY: `a` is a live array; mlx-c only reads its status.
    let status = unsafe { _mlx_array_is_available(&mut res, Handle { ctx: a.as_ptr().ctx }) };
    assert_eq!(status, 0, "mlx-c failed to report availability");
    res
}

/// A lazy bf16 array of `shape`: `zeros + 1`, not evaluated.
fn lazy(shape: &[i32], dtype: mlx_rs::Dtype) -> Array {
    let zeros = mlx_rs::ops::zeros::<f32>(shape).unwrap();
    let ones = mlx_rs::ops::add(&zeros, &Array::from_f32(1.0)).unwrap();
    ones.as_dtype(dtype).unwrap()
}

fn mlx_failure(e: &LaunchError) -> &MlxError {
    match e {
        LaunchError::Backend { source, .. } => source.downcast_ref::<MlxError>().unwrap_or_else(|| panic!("not MLX's error: {e}")),
        other => panic!("expected a backend error, got {other}"),
    }
}

/// The chain: gate_up, then down on its output, no evaluation in
/// between. With Metal, both launches return unevaluated arrays and one
/// evaluation at the end runs both. The CPU build of MLX refuses a custom
/// kernel inside `apply` ("No Metal back-end"), so there `gate_up` returns
/// that error and `down` is launched on a lazy stand-in for `mid` of the same
/// shape; either way, neither launch evaluated anything.
#[test]
fn a_chain_of_launches_evaluates_nothing() {
    let mlx = MlxBackend::new();
    let m = 3;
    let x = lazy(&[m, 6144], mlx_rs::Dtype::Bfloat16);
    let slot_bytes = kernelgen::kernels::experts::GLM52_EXPERT_Q4_BF16_R4_GATE_UP.inputs[1].shape[0].as_fixed().unwrap() as i32;
    let slot = lazy(&[slot_bytes], mlx_rs::Dtype::Uint8);
    let mid = match Glm52ExpertQ4Bf16R4::gate_up(&mlx, &x, &slot) {
        Ok(mid) => {
            assert!(!evaluated(&mid), "gate_up returned an evaluated output");
            mid
        }
        Err(e) => {
            assert!(mlx_failure(&e).is_no_metal(), "{e}");
            lazy(&[m, 2048], mlx_rs::Dtype::Bfloat16)
        }
    };
    match Glm52ExpertQ4Bf16R4::down(&mlx, &mid, &slot) {
        Ok(out) => {
            assert!(!evaluated(&out), "down returned an evaluated output");
            // Evaluating the chain's end is where MLX runs both kernels.
            mlx_rs::transforms::eval([&out]).unwrap();
        }
        Err(e) => assert!(mlx_failure(&e).is_no_metal(), "{e}"),
    }
    for (name, a) in [("x", &x), ("slot", &slot), ("mid", &mid)] {
        assert!(!evaluated(a), "a launch evaluated its input `{name}`");
    }
    // The probe itself sees evaluation.
    mlx_rs::transforms::eval([&x]).unwrap();
    assert!(evaluated(&x));
}

/// The eager mode for debugging launches the same way (MLX fails in `apply`
/// here, before there is anything to evaluate).
#[test]
fn eager_launches_report_mlx_errors_at_the_launch() {
    let x = lazy(&[1, 6144], mlx_rs::Dtype::Bfloat16);
    let slot = lazy(&[18923520], mlx_rs::Dtype::Uint8);
    let e = Glm52ExpertQ4Bf16R4::gate_up(&MlxBackend::eager(), &x, &slot).unwrap_err();
    let failure = mlx_failure(&e);
    assert!(failure.is_no_metal() && matches!(failure, MlxError::Apply(_)), "{failure}");
    // MLX's typed error is the source chain of the LaunchError.
    let source = std::error::Error::source(&e).unwrap();
    assert!(source.to_string().contains("No Metal back-end"), "{source}");
    assert!(std::error::Error::source(source).is_some(), "MlxError keeps MLX's Exception as its source");
}

fn text(s: &'static str) -> Cow<'static, str> {
    Cow::Borrowed(s)
}

/// y = 2 * x over M elements: a kernel defined here, as a user could. The
/// header is the first line of `metal`, the body the rest.
fn scale2(name: &'static str, metal: &'static str) -> KernelDef {
    let header_end = metal.find('\n').unwrap() as u32 + 1;
    let buffer = |name: &'static str| BufferDef {
        name: text(name),
        dtype: Dtype::F32,
        shape: vec![Dim::expr(&[Op::Size(0)])].into(),
        source: Source::Data,
        regions: Cow::Borrowed(&[]),
        align: 4,
        at_most: None,
    };
    KernelDef {
        name: text(name),
        family: text("test_elementwise"),
        spec: text("tests/mlx_backend.rs"),
        mlx_name: text("custom_kernel_scale2_float_float"),
        metal: text(metal),
        header: TextRange { start: 0, end: header_end },
        body: TextRange { start: header_end, end: metal.len() as u32 },
        metal_path: text(""),
        inputs: vec![buffer("x")].into(),
        outputs: vec![buffer("y")].into(),
        sizes: vec![text("M")].into(),
        grid: [Dim::expr(&[Op::Size(0)]), Dim::Fixed(1), Dim::Fixed(1)],
        threadgroup: [32, 1, 1],
        threadgroup_memory_bytes: 0,
        cost: Cost { bytes_read: Dim::expr(&[Op::Const(4), Op::Size(0), Op::Mul]), bytes_written: Dim::expr(&[Op::Const(4), Op::Size(0), Op::Mul]), flops: None },
        cuda: None,
    }
}

const SOURCE: &str = "inline float twice(float v) { return 2.0f * v; }\nuint i = thread_position_in_grid.x;\ny[i] = twice(x[i]);\n";

#[test]
fn valid_launches_reach_mlx_from_many_threads_without_a_panic() {
    let def = scale2("mlx_test_scale2", SOURCE);
    assert_eq!(def.header(), "inline float twice(float v) { return 2.0f * v; }\n");
    std::thread::scope(|s| {
        for t in 0..8 {
            let def = &def;
            s.spawn(move || {
                for n in [64, 5 + t, 256] {
                    let x = lazy(&[n], mlx_rs::Dtype::Float32);
                    let e = launch::<_, 1>(&MlxBackend::new(), def, &[&x], &[]).unwrap_err();
                    assert!(mlx_failure(&e).is_no_metal(), "{e}");
                    assert!(!evaluated(&x));
                }
            });
        }
    });
}

#[test]
fn contract_violations_never_reach_mlx() {
    let def = scale2("mlx_test_scale2_contract", SOURCE);
    let mlx = MlxBackend::new();
    let f16 = lazy(&[8], mlx_rs::Dtype::Float16);
    let e = launch_vec(&mlx, &def, &[&f16], &[]).unwrap_err();
    assert!(matches!(e, LaunchError::Contract { .. }), "{e}");
    let i64s = lazy(&[8], mlx_rs::Dtype::Int64);
    let e = launch_vec(&mlx, &def, &[&i64s], &[]).unwrap_err();
    assert!(e.to_string().contains("Int64"), "{e}");
    let e = launch_vec(&mlx, &def, &[], &[]).unwrap_err();
    assert!(matches!(e, LaunchError::Contract { .. }), "{e}");
}

#[test]
fn a_second_source_under_one_name_is_refused() {
    let first = scale2("mlx_test_scale2_conflict", SOURCE);
    let x = lazy(&[64], mlx_rs::Dtype::Float32);
    let e = launch_vec(&MlxBackend::new(), &first, &[&x], &[]).unwrap_err();
    assert!(mlx_failure(&e).is_no_metal(), "{e}");
    let other = "inline float twice(float v) { return 3.0f * v; }\nuint i = thread_position_in_grid.x;\ny[i] = twice(x[i]);\n";
    let second = scale2("mlx_test_scale2_conflict", other);
    let e = launch_vec(&MlxBackend::new(), &second, &[&x], &[]).unwrap_err();
    assert!(matches!(mlx_failure(&e), MlxError::NameConflict(n) if n == "mlx_test_scale2_conflict"), "{e}");
    // The first definition still launches (and reaches MLX).
    let e = launch_vec(&MlxBackend::new(), &first, &[&x], &[]).unwrap_err();
    assert!(mlx_failure(&e).is_no_metal(), "{e}");
}

/// A generated packer's bytes become an MLX array (without a copy where MLX
/// has Metal) holding the same bytes; packing from MLX arrays gives the same
/// buffer.
#[test]
fn packed_slots_wrap_without_a_copy() {
    use kernelgen::kernels::experts::TinyExpertQ4Bf16R4;
    let l = TinyExpertQ4Bf16R4::SLOT;
    let count = |name: &str| l.regions.iter().find(|r| r.name == name).unwrap().shape.iter().product::<u64>() as usize;
    let w = |name: &str| -> Vec<i8> { (0..count(name)).map(|i| (i % 16) as i8 - 8).collect() };
    let s = |name: &str| -> Vec<f32> { (0..count(name)).map(|i| i as f32 / 7.0).collect() };
    let names = ["gate_weights", "up_weights", "down_weights", "gate_scales", "up_scales", "down_scales"];
    let (g, u, d) = (w(names[0]), w(names[1]), w(names[2]));
    let (gs, us, ds) = (s(names[3]), s(names[4]), s(names[5]));
    let bytes = TinyExpertQ4Bf16R4::pack_slot(&g, &u, &d, &gs, &us, &ds).unwrap();
    let host = bytes.to_vec();
    let address = bytes.as_ptr() as usize;
    let array = kernelgen::backend::mlx::array_from_bytes(bytes).unwrap();
    assert_eq!(array.dtype(), mlx_rs::Dtype::Uint8);
    assert_eq!(array.as_slice::<u8>(), host.as_slice());
    // MLX's Metal allocator wraps page-aligned memory in place; its CPU
    // allocator (this Linux build) has no such path and copies, which
    // mlx-c's managed constructor then frees through our release callback.
    if cfg!(target_os = "macos") {
        assert_eq!(array.as_slice::<u8>().as_ptr() as usize, address, "MLX copied the packed bytes");
    } else {
        let _ = address;
    }

    // each array in its region's shape; a flat or transposed one is refused
    let shape = |name: &str| -> Vec<i32> { l.regions.iter().find(|r| r.name == name).unwrap().shape.iter().map(|&d| d as i32).collect() };
    let arrays: Vec<Array> = vec![
        Array::from_slice(&g, &shape(names[0])),
        Array::from_slice(&u, &shape(names[1])),
        Array::from_slice(&d, &shape(names[2])),
        Array::from_slice(&gs, &shape(names[3])),
        Array::from_slice(&us, &shape(names[4])),
        Array::from_slice(&ds, &shape(names[5])),
    ];
    let mut flat: Vec<&Array> = arrays.iter().collect();
    let flat_gate = Array::from_slice(&g, &[g.len() as i32]);
    flat[0] = &flat_gate;
    let e = kernelgen::backend::mlx::pack_arrays(l, &flat).unwrap_err();
    assert_eq!(e.problems[0].0, "gate_weights", "{e:?}");
    assert!(e.problems[0].1.contains("expected an array of shape"), "{e:?}");
    let refs: Vec<&Array> = arrays.iter().collect();
    let from_arrays = kernelgen::backend::mlx::pack_arrays(l, &refs).unwrap();
    assert_eq!(from_arrays.as_slice::<u8>(), host.as_slice());
}
