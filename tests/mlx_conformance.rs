//! The conformance suite (`tests/conformance/`) on the MLX backend (`make test-mlx`). On
//! Linux, MLX's CPU build has no Metal: the launch checks and the laziness are tested, and
//! every valid launch must come back with MLX's "No Metal back-end" error; where MLX runs
//! kernels (see `conformance/mlx.rs`), the same tests compare values.
#![cfg(feature = "mlx")]

#[macro_use]
mod conformance;
#[path = "conformance/mlx.rs"]
mod mlx;

conformance_tests!(mlx::Mlx::new());

/// The harness itself, which needs no kernel: the bytes of every case input come back as
/// they went in, from the array and from its strided view, so the value tests compare
/// what the kernels computed wherever MLX runs them.
#[test]
fn the_harness_reads_back_what_it_made() {
    use conformance::Harness;
    let h = mlx::Mlx::new();
    let mut strided = 0;
    for case in conformance::cases::all() {
        for d in &case.inputs {
            let a = h.array(d.dtype, &d.shape, &d.bytes);
            assert_eq!(h.read(&a).unwrap(), d.bytes, "{}: `{}`", case.def.name, d.name);
            if let Some(view) = h.strided(d.dtype, &d.shape, &d.bytes) {
                assert!(!h.evaluated(&view).unwrap());
                assert_eq!(h.read(&view).unwrap(), d.bytes, "{}: `{}` strided", case.def.name, d.name);
                strided += 1;
            }
        }
    }
    assert!(strided > 10, "{strided} strided views");
}
