//! Real MSL from the field: MLX 0.32.2's Metal kernel headers, unmodified, from the
//! `mlx-metal` wheel (fetched by `crates/emu/tests/mlx-metal/fetch.sh` into target/, as
//! `make deps` does; never committed). Skips with a message when the headers are absent
//! (fails instead under `make test`, which sets KERNELGEN_MLX_METAL_REQUIRED once fetched).
mod common;

use std::path::PathBuf;

fn include_dir() -> Option<PathBuf> {
    common::mlx_include()
}

/// Headers that cannot pass, and why (each must still fail, so the list stays honest).
const NAX: &str = "Metal 4 neural-accelerator code: needs <MetalPerformancePrimitives/...> tensor ops and lambdas (MSL 4), which the prelude (Metal 3.1) does not model";
const KNOWN_FAILURES: [(&str, &str); 10] = [
    ("fp_quantized_nax.h", NAX),
    ("quantized_nax.h", NAX),
    ("steel/attn/nax.h", NAX),
    ("steel/attn/kernels/steel_attention_nax.h", NAX),
    ("steel/gemm/nax.h", NAX),
    ("steel/gemm/gemm_nax.h", NAX),
    ("steel/gemm/kernels/steel_gemm_fused_nax.h", NAX),
    ("steel/gemm/kernels/steel_gemm_gather_nax.h", NAX),
    ("steel/gemm/kernels/steel_gemm_segmented_nax.h", NAX),
    ("steel/gemm/kernels/steel_gemm_splitk_nax.h", NAX),
];

/// What MLX's own .metal files include before a header that is not self-contained (the
/// .metal files are not in the wheel; these follow MLX's sources).
fn context(rel: &str) -> &'static [&'static str] {
    const U: &str = "utils.h";
    if rel.starts_with("steel/conv/") {
        &[U, "steel/gemm/mma.h", "steel/conv/conv.h", "steel/conv/params.h"]
    } else if rel.starts_with("steel/gemm/kernels/") {
        &[U, "steel/gemm/gemm.h"]
    } else if rel == "quantized.h" || rel == "fp_quantized.h" {
        &[U, "steel/gemm/gemm.h", "quantized_utils.h"]
    } else if rel == "reduce.h" || rel.starts_with("reduction/") || rel == "reduce_utils.h" {
        &[U, "atomic.h", "reduction/ops.h"]
    } else if rel.starts_with("indexing/scatter") {
        &[U, "atomic.h", "indexing/indexing.h"]
    } else if rel == "searchsorted.h" {
        &[U, "sort.h"]
    } else {
        &[U]
    }
}

#[test]
fn every_mlx_header_parses() {
    let Some(inc) = include_dir() else { return };
    let kernels = inc.join("mlx/backend/metal/kernels");
    let c = common::declaring_checker();
    let headers = common::files(&kernels, "h");
    let run = |part: &[PathBuf]| -> Vec<(String, Result<&'static str, Vec<kernelgen_msl::Problem>>)> {
        part.iter()
            .map(|h| {
                let rel = h.strip_prefix(&kernels).unwrap().display().to_string();
                let r = check_header(c, &inc, &rel);
                (rel, r)
            })
            .collect()
    };
    // Two at a time: the machine has two cores and each check is one clang process.
    let (a, b) = headers.split_at(headers.len() / 2);
    let results = std::thread::scope(|s| {
        let ha = s.spawn(|| run(a));
        let mut rb = run(b);
        let mut ra = ha.join().unwrap();
        ra.append(&mut rb);
        ra
    });
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (rel, result) in results {
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
    report.sort_by(|x, y| x[6..].cmp(&y[6..]));
    println!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A header alone after `<metal_stdlib>`, else after what MLX includes before it.
fn check_header(
    c: &kernelgen_msl::Checker,
    inc: &std::path::Path,
    rel: &str,
) -> Result<&'static str, Vec<kernelgen_msl::Problem>> {
    let name = format!("tu_{}.metal", rel.replace('/', "_"));
    let dirs = [inc.to_path_buf()];
    let alone = format!("#include <metal_stdlib>\n#include \"mlx/backend/metal/kernels/{rel}\"\n");
    if c.check(&alone, &name, &dirs).is_ok() {
        return Ok("passes alone");
    }
    let mut tu = String::from("#include <metal_stdlib>\n");
    for h in context(rel) {
        tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{h}\"\n"));
    }
    tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{rel}\"\n"));
    c.check(&tu, &name, &dirs).map(|()| "passes after what MLX includes first")
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
