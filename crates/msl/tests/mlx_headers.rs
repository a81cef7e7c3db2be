//! Real MSL from the field: MLX 0.32.2's Metal kernel headers, unmodified, from the
//! `mlx-metal` wheel (fetched by `crates/msl/fetch-mlx-metal.sh` into target/, never
//! committed). Skips with a message when the headers are absent.
mod common;

use std::path::PathBuf;

fn include_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("KGMSL_MLX_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::crate_dir().join("../../target/mlx-metal/0.32.2/mlx/include"));
    if dir.join("mlx/backend/metal/kernels/utils.h").is_file() {
        Some(dir)
    } else {
        println!("skipping: MLX headers not found in {}; run crates/msl/fetch-mlx-metal.sh", dir.display());
        None
    }
}

/// Headers that cannot pass, and why (each must still fail, so the list stays honest).
const KNOWN_FAILURES: [(&str, &str); 0] = [];

#[test]
fn every_mlx_header_parses() {
    let Some(inc) = include_dir() else { return };
    let kernels = inc.join("mlx/backend/metal/kernels");
    let c = common::declaring_checker();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for h in common::files(&kernels, "h") {
        let rel = h.strip_prefix(&kernels).unwrap().display().to_string();
        let alone = format!("#include <metal_stdlib>\n#include \"mlx/backend/metal/kernels/{rel}\"\n");
        // Most of MLX's headers are written to follow utils.h, as MLX's .metal files include them.
        let after_utils = format!(
            "#include <metal_stdlib>\n#include \"mlx/backend/metal/kernels/utils.h\"\n#include \"mlx/backend/metal/kernels/{rel}\"\n"
        );
        let name = format!("tu_{}.metal", rel.replace('/', "_"));
        let result = match c.check(&alone, &name, &[inc.clone()]) {
            Ok(()) => Ok("passes alone"),
            Err(_) => match c.check(&after_utils, &name, &[inc.clone()]) {
                Ok(()) => Ok("passes after utils.h"),
                Err(p) => Err(p),
            },
        };
        let known = KNOWN_FAILURES.iter().find(|(k, _)| *k == rel);
        match (&result, known) {
            (Ok(how), None) => report.push(format!("pass  {rel}: {how}")),
            (Ok(_), Some(_)) => failures.push(format!("{rel} passes now: remove it from KNOWN_FAILURES")),
            (Err(p), Some((_, why))) => report.push(format!("FAIL  {rel} (known: {why}); first: {}", p[0])),
            (Err(p), None) => {
                report.push(format!("FAIL  {rel}: {} problems", p.len()));
                failures.push(format!(
                    "{rel}:\n  {}",
                    p.iter().take(8).map(|p| p.to_string()).collect::<Vec<_>>().join("\n  ")
                ));
            }
        }
    }
    println!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// MLX's affine_qmv_fast instantiated as MLX's quantized.metal does, via instantiate_kernel.
#[test]
fn affine_qmv_fast_instantiates() {
    let Some(inc) = include_dir() else { return };
    let c = common::declaring_checker();
    let src = "#include <metal_stdlib>\n\
        #include \"mlx/backend/metal/kernels/utils.h\"\n\
        #include \"mlx/backend/metal/kernels/steel/gemm/gemm.h\"\n\
        #include \"mlx/backend/metal/kernels/quantized_utils.h\"\n\
        #include \"mlx/backend/metal/kernels/quantized.h\"\n\
        instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_4_batch_0\", affine_qmv_fast, bfloat16_t, 64, 4, false)\n\
        instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_3_batch_0\", affine_qmv_fast, bfloat16_t, 64, 3, false)\n\
        instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_4_batch_1\", affine_qmv_fast, bfloat16_t, 64, 4, true)\n\
        instantiate_kernel(\"affine_qmv_float_gs_64_b_4_batch_0\", affine_qmv, float, 64, 4, false)\n\
        instantiate_kernel(\"affine_qmm_t_half_gs_64_b_4\", affine_qmm_t, half, 64, 4, true, false)\n";
    let t = std::time::Instant::now();
    let r = c.check(src, "qmv_fast.metal", &[inc]);
    println!("affine_qmv_fast (bits 3 and 4) and friends: {:?}", t.elapsed());
    if let Err(p) = r {
        panic!("{}", p.iter().take(20).map(|p| p.to_string()).collect::<Vec<_>>().join("\n"));
    }
}
