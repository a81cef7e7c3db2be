//! The MLX backend on a machine without Metal (Linux, the CPU build of MLX):
//! a launch that satisfies the kernel's contract reaches MLX and comes back as
//! MLX's clean "no Metal back-end" error, never a panic; calls that break the
//! contract are refused before MLX. Run by `make test-mlx`.
#![cfg(feature = "mlx")]

use kernelgen::mlx_backend::{self, MlxLaunchError, MlxStage};
use kernelgen::{BufferDef, Dim, Dtype, KernelDef, Source};
use mlx_rs::Array;

const M: Dim = Dim {
    coeff: 1,
    sizes: &[0],
};

const X: BufferDef = BufferDef {
    name: "x",
    dtype: Dtype::F32,
    shape: &[M],
    source: Source::Data,
    regions: &[],
    align: 4,
    at_most: None,
};

const Y: BufferDef = BufferDef { name: "y", ..X };

/// y = 2 * x over M elements, one thread per element.
const fn scale2(name: &'static str, body: &'static str) -> KernelDef {
    KernelDef {
        name,
        family: "test_elementwise",
        spec: "tests/mlx_backend.rs",
        mlx_name: "custom_kernel_scale2_float_float",
        header: "inline float twice(float v) { return 2.0f * v; }\n",
        body,
        metal: "",
        metal_path: "",
        inputs: &[X],
        outputs: &[Y],
        sizes: &["M"],
        grid: [M, Dim::fixed(1), Dim::fixed(1)],
        threadgroup: [32, 1, 1],
        threadgroup_memory_bytes: 0,
    }
}

const BODY: &str = "uint i = thread_position_in_grid.x;\ny[i] = twice(x[i]);\n";
const SCALE2: KernelDef = scale2("mlx_test_scale2", BODY);

fn x(n: usize) -> Array {
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Array::from_slice(&data, &[n as i32])
}

#[test]
fn a_valid_launch_reaches_mlx_and_returns_no_metal_as_an_error() {
    for n in [64usize, 5, 256] {
        let input = x(n);
        let err = mlx_backend::apply(&SCALE2, &[&input], &[n as u64])
            .expect_err("the CPU build of MLX has no Metal back-end");
        eprintln!("MLX said: {err}");
        assert_eq!(err.kernel(), "mlx_test_scale2");
        assert!(matches!(err, MlxLaunchError::Mlx { .. }), "{err:?}");
        assert!(err.is_no_metal(), "not MLX's no-Metal error: {err}");
    }
}

#[test]
fn a_launch_inside_a_cpu_stream_scope_is_an_error_too() {
    let input = x(64);
    let err = mlx_rs::with_device(mlx_rs::Device::cpu(), || {
        mlx_backend::apply(&scale2("mlx_test_scale2_cpu", BODY), &[&input], &[64])
    })
    .expect_err("custom Metal kernels never run on the CPU");
    eprintln!("MLX said: {err}");
    assert!(
        matches!(
            err,
            MlxLaunchError::Mlx {
                stage: MlxStage::Apply,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn calls_that_break_the_contract_never_reach_mlx() {
    let def = scale2("mlx_test_scale2_contract", BODY);
    let good = x(64);
    let cases: Vec<(&str, Vec<&Array>, Vec<u64>, &str)> = vec![
        ("too few sizes", vec![&good], vec![], "run-time sizes"),
        ("too many inputs", vec![&good, &good], vec![64], "inputs"),
        ("no inputs", vec![], vec![64], "inputs"),
        ("shape off by one", vec![&good], vec![65], "x"),
        ("grid beyond i32", vec![&good], vec![1 << 31], "x shape"),
        ("overflow", vec![&good], vec![u64::MAX], "x shape"),
    ];
    for (what, inputs, sizes, argument) in cases {
        match mlx_backend::apply(&def, &inputs, &sizes) {
            Err(MlxLaunchError::Contract { argument: a, .. }) => assert_eq!(a, argument, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let as_i32 = Array::from_slice(&[0i32; 64], &[64]);
    let err = mlx_backend::apply(&def, &[&as_i32], &[64]).unwrap_err();
    assert!(
        matches!(&err, MlxLaunchError::Contract { argument, .. } if argument == "x"),
        "{err:?}"
    );
    assert!(err.to_string().contains("expected f32"), "{err}");
    let rank2 = Array::from_slice(&[0f32; 64], &[8, 8]);
    let err = mlx_backend::apply(&def, &[&rank2], &[64]).unwrap_err();
    assert!(
        err.to_string().contains("expected [64], got [8, 8]"),
        "{err}"
    );
}

/// y[i] = x[i] for i < n, where n is the run-time size M, handed to the
/// kernel in a one-element i32 buffer the backend fills.
const N_VALUE: BufferDef = BufferDef {
    name: "n",
    dtype: Dtype::I32,
    shape: &[Dim::fixed(1)],
    source: Source::SizeValue(0),
    regions: &[],
    align: 4,
    at_most: None,
};

const COPY_N: KernelDef = KernelDef {
    name: "mlx_test_copy_n",
    header: "",
    body: "uint i = thread_position_in_grid.x;\nif (i < uint(n[0])) y[i] = x[i];\n",
    inputs: &[X, N_VALUE],
    ..scale2("", "")
};

#[test]
fn size_values_are_made_by_the_backend() {
    let input = x(64);
    let err = mlx_backend::apply(&COPY_N, &[&input], &[64]).unwrap_err();
    assert!(err.is_no_metal(), "{err}");
    // Only data inputs are passed: the size value is not the caller's.
    let n = Array::from_slice(&[64i32], &[1]);
    let err = mlx_backend::apply(&COPY_N, &[&input, &n], &[64]).unwrap_err();
    assert!(
        matches!(&err, MlxLaunchError::Contract { argument, .. } if argument == "inputs"),
        "{err:?}"
    );
}

#[test]
fn one_definition_per_kernel_name() {
    let input = x(64);
    let first = scale2("mlx_test_scale2_twice", BODY);
    let again = mlx_backend::apply(&first, &[&input], &[64]).unwrap_err();
    assert!(again.is_no_metal(), "{again}");
    // The cached kernel is reused for the same definition ...
    let again = mlx_backend::apply(&first, &[&input], &[64]).unwrap_err();
    assert!(again.is_no_metal(), "{again}");
    // ... and another body under the same name is refused.
    let other = scale2(
        "mlx_test_scale2_twice",
        "uint i = thread_position_in_grid.x; y[i] = x[i];",
    );
    let err = mlx_backend::apply(&other, &[&input], &[64]).unwrap_err();
    assert!(
        matches!(&err, MlxLaunchError::Contract { argument, .. } if argument == "kernel name"),
        "{err:?}"
    );
}

#[test]
fn launches_from_many_threads_share_the_cache() {
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let input = x(64);
                let err =
                    mlx_backend::apply(&scale2("mlx_test_scale2_threads", BODY), &[&input], &[64])
                        .unwrap_err();
                assert!(err.is_no_metal(), "{err}");
            });
        }
    });
}

#[test]
fn dtypes_map_both_ways() {
    for d in Dtype::ALL {
        let m = mlx_backend::to_mlx_dtype(d);
        assert_eq!(mlx_backend::from_mlx_dtype(m), Some(d));
    }
    assert_eq!(mlx_backend::from_mlx_dtype(mlx_rs::Dtype::Float64), None);
}
