//! The MLX backend, run by `make test-mlx` (Linux, the CPU build of MLX: no GPU) and by
//! `make test-gpu` (MLX's CUDA build on an NVIDIA GPU), beyond the conformance suite every
//! backend runs (`tests/mlx_conformance.rs`: the checks, the catalog, laziness):
//! - the eager mode reports MLX's error at the launch, as the source of the `LaunchError`
//!   (on a GPU it evaluates the outputs at the launch);
//! - a kernel defined by hand reaches MLX from many threads at once, never a panic, and
//!   evaluates nothing; with a CUDA body it runs on CUDA, without one it is refused there,
//!   naming the kernel and its family, before anything is built;
//! - the kernel cache is per name and refuses a second source for a name;
//! - a packed slot becomes an MLX array without a copy where MLX has Metal.
#![cfg(feature = "mlx")]

// For the availability probe only.
#[allow(dead_code, unused_macros)]
mod conformance;
#[allow(dead_code)]
#[path = "conformance/mlx.rs"]
mod mlx;

use kernelgen::backend::mlx::{gpu, source_for, Gpu, MlxBackend, MlxError};
use kernelgen::backend::{launch, launch_vec};
use kernelgen::contract::{BufferDef, Cost, CudaSource, Dim, Dtype, KernelDef, Op, Source, TextRange};
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

/// Asserts that a launch of a kernel defined here (a Metal body only) came back as it must
/// where it cannot run: MLX's "No Metal back-end" without a GPU, the missing CUDA body on
/// CUDA.
fn refused_here(e: &LaunchError, def: &KernelDef) {
    match gpu() {
        Gpu::Cuda if def.cuda.is_none() => assert!(matches!(mlx_failure(e), MlxError::NoCudaBody { kernel, .. } if kernel == def.name.as_ref()), "{e}"),
        Gpu::Cuda => panic!("{}: refused on CUDA with a CUDA body: {e}", def.name),
        Gpu::None => assert!(mlx_failure(e).is_no_metal(), "{e}"),
        Gpu::Metal => panic!("{}: refused on Metal: {e}", def.name),
    }
}

/// The eager mode for debugging launches the same way: without a GPU, MLX fails in
/// `apply`, before there is anything to evaluate; on a GPU the outputs come back evaluated.
#[test]
fn eager_launches_report_mlx_errors_at_the_launch() {
    let x = lazy(&[1, 6144], mlx_rs::Dtype::Bfloat16);
    let slot = lazy(&[18923520], mlx_rs::Dtype::Uint8);
    if gpu() != Gpu::None {
        let mid = Glm52ExpertQ4Bf16R4::gate_up(&MlxBackend::eager(), &x, &slot).unwrap_or_else(|e| panic!("{e}"));
        assert!(evaluated(&mid), "an eager launch evaluates its outputs");
        return;
    }
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

/// The same kernel with a CUDA body (header: the first line), as MLX's CUDA build runs it:
/// blocks of 32 threads over M rounded up, so the last block guards its extra threads.
fn scale2_with_cuda(name: &'static str, factor: &'static str) -> KernelDef {
    let cuda: &'static str = Box::leak(
        format!("__device__ inline float twice(float v) {{ return {factor} * v; }}\nconst int i = blockIdx.x * blockDim.x + threadIdx.x;\nif (i < x_shape[0]) {{\n  y[i] = twice(x[i]);\n}}\n").into_boxed_str(),
    );
    let header_end = cuda.find('\n').unwrap() as u32 + 1;
    KernelDef {
        cuda: Some(CudaSource {
            mlx_name: text("custom_kernel_mlx_test_scale2_cuda"),
            source: text(cuda),
            header: TextRange { start: 0, end: header_end },
            body: TextRange { start: header_end, end: cuda.len() as u32 },
            path: text(""),
            threadgroup: [32, 1, 1],
            shared_memory_bytes: 0,
            static_shared_memory_bytes: 0,
        }),
        ..scale2(name, SOURCE)
    }
}

/// A Metal-only kernel on CUDA: refused before anything is built, the kernel, its family
/// and the missing template named (decided without a GPU: the rule is `source_for`'s).
#[test]
fn a_metal_only_kernel_is_refused_on_cuda_naming_it() {
    let def = scale2("mlx_test_metal_only", SOURCE);
    let e = source_for(&def, Gpu::Cuda).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel `mlx_test_metal_only` has no CUDA body, and MLX here runs CUDA: family `test_elementwise` has only a Metal template (a CUDA one is `test_elementwise.cuda.tera` beside its family file)"
    );
    assert_eq!(source_for(&def, Gpu::Metal).unwrap(), (def.header(), def.body()));
    let with = scale2_with_cuda("mlx_test_with_cuda", "2.0f");
    let cuda = with.cuda.as_ref().unwrap();
    assert_eq!(source_for(&with, Gpu::Cuda).unwrap(), (cuda.header(), cuda.body()));
    assert_eq!(source_for(&with, Gpu::None).unwrap(), (with.header(), with.body()));
    // On CUDA the launch itself says so, and comes back without building anything.
    if gpu() == Gpu::Cuda {
        let x = lazy(&[64], mlx_rs::Dtype::Float32);
        let e = launch_vec(&MlxBackend::new(), &def, &[&x], &[]).unwrap_err();
        assert!(e.to_string().contains("kernel `mlx_test_metal_only`"), "{e}");
        refused_here(&e, &def);
    }
}

/// A kernel with a CUDA body runs where MLX runs CUDA: y = 2x over a size that leaves the
/// last block partly outside the grid; lazily, evaluated by the read. Inputs of 8 bytes or
/// less (which MLX keeps in managed memory the GPU reads across the bus, and the launch copies
/// out of it first) reach the kernel with their values, made from host data or by a lazy op.
#[test]
fn a_cuda_body_runs_on_cuda() {
    if gpu() != Gpu::Cuda {
        return eprintln!("skipped: MLX here does not run CUDA ({:?})", gpu());
    }
    let def = scale2_with_cuda("mlx_test_scale2_cuda", "2.0f");
    for n in [1000, 2, 1] {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 100.0).collect();
        let host = Array::from_slice(&values, &[n]);
        let made = mlx_rs::ops::add(&host, &Array::from_f32(0.0)).unwrap();
        for (x, what) in [(&host, "from host data"), (&made, "a lazy op's")] {
            let y = launch_vec(&MlxBackend::new(), &def, &[x], &[]).unwrap_or_else(|e| panic!("{e}")).remove(0);
            assert!(!evaluated(&y), "a launch is lazy");
            y.eval().unwrap();
            let want: Vec<f32> = values.iter().map(|v| 2.0 * v).collect();
            assert_eq!(y.as_slice::<f32>(), want.as_slice(), "{n} values, {what}");
        }
    }
}

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
                    match launch::<_, 1>(&MlxBackend::new(), def, &[&x], &[]) {
                        Ok([y]) => assert!(gpu() == Gpu::Metal && !evaluated(&y), "ran without Metal"),
                        Err(e) => refused_here(&e, def),
                    }
                    assert!(!evaluated(&x));
                }
            });
        }
    });
}

/// The cache is per name: a second source under a name already built is refused, and the
/// first still launches (on CUDA with a CUDA body, which the kernel must have there).
#[test]
fn a_second_source_under_one_name_is_refused() {
    let name = "mlx_test_scale2_conflict";
    let cuda = gpu() == Gpu::Cuda;
    let (first, second) = if cuda {
        (scale2_with_cuda(name, "2.0f"), scale2_with_cuda(name, "3.0f"))
    } else {
        (scale2(name, SOURCE), scale2(name, "inline float twice(float v) { return 3.0f * v; }\nuint i = thread_position_in_grid.x;\ny[i] = twice(x[i]);\n"))
    };
    let x = lazy(&[64], mlx_rs::Dtype::Float32);
    let launches = |def: &KernelDef| match launch_vec(&MlxBackend::new(), def, &[&x], &[]) {
        Ok(_) => assert!(gpu() != Gpu::None, "ran without a GPU"),
        Err(e) => refused_here(&e, def),
    };
    launches(&first);
    let e = launch_vec(&MlxBackend::new(), &second, &[&x], &[]).unwrap_err();
    assert!(matches!(mlx_failure(&e), MlxError::NameConflict(n) if n == name), "{e}");
    launches(&first);
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
