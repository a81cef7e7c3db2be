//! The MLX backend on a machine without Metal (Linux, the CPU build of MLX),
//! run by `make test-mlx`, beyond the conformance suite every backend runs
//! (`tests/mlx_conformance.rs`: the checks, the catalog, laziness):
//! - the eager mode reports MLX's error at the launch, as the source of the `LaunchError`;
//! - a kernel defined by hand reaches MLX from many threads at once, never a panic, and
//!   evaluates nothing;
//! - the kernel cache is per name and refuses a second source for a name;
//! - a packed slot becomes an MLX array without a copy where MLX has Metal.
#![cfg(feature = "mlx")]

// For the availability probe only.
#[allow(dead_code, unused_macros)]
mod conformance;
#[allow(dead_code)]
#[path = "conformance/mlx.rs"]
mod mlx;

use kernelgen::backend::mlx::{MlxBackend, MlxError};
use kernelgen::backend::{launch, launch_vec};
use kernelgen::contract::{BufferDef, Cost, Dim, Dtype, KernelDef, Op, Source, TextRange};
use kernelgen::kernels::experts::Glm52ExpertQ4Bf16R4;
use kernelgen::launch::LaunchError;
use mlx::evaluated;
use mlx_rs::Array;
use std::borrow::Cow;

/// A lazy array of `shape`: `zeros + 1`, not evaluated.
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
