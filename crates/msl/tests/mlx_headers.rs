//! Real MSL from the field: MLX 0.32.2's Metal kernel headers, unmodified, from the
//! `mlx-metal` wheel (fetched by `crates/emu/tests/mlx-metal/fetch.sh` into target/, as
//! `make deps` does; never committed). Skips with a message when the headers are absent
//! (fails instead under `make test`, which sets KERNELGEN_MLX_METAL_REQUIRED once fetched).
mod common;

use std::path::PathBuf;

fn include_dir() -> Option<PathBuf> {
    common::mlx_include()
}

/// The Metal version MLX builds a header's kernels with: its NAX kernels (Metal 4 neural
/// accelerators, MetalPerformancePrimitives' matmul2d) only from `MLX_METAL_VERSION` 400 on
/// (MLX's kernels/CMakeLists.txt); the rest at the checker's default, Metal 3.1.
fn metal_version(rel: &str) -> Option<u32> {
    let nax = rel.ends_with("_nax.h") || rel.ends_with("/nax.h");
    nax.then_some(400)
}

fn defines(rel: &str) -> Vec<kernelgen_msl::Define> {
    metal_version(rel).map(|v| vec![("__METAL_VERSION__".to_string(), Some(v.to_string()))]).unwrap_or_default()
}

/// What MLX's own .metal files include before a header that is not self-contained (the
/// .metal files are not in the wheel; these follow MLX's sources).
fn context(rel: &str) -> &'static [&'static str] {
    const U: &str = "utils.h";
    if rel == "quantized_nax.h" {
        &[U, "steel/gemm/gemm.h", "steel/gemm/nax.h", "steel/gemm/loader.h"]
    } else if rel == "fp_quantized_nax.h" {
        &[U, "steel/gemm/gemm.h", "quantized_utils.h", "steel/gemm/nax.h"]
    } else if rel.starts_with("steel/gemm/kernels/") && rel.ends_with("_nax.h") {
        &[U, "steel/gemm/gemm_nax.h"]
    } else if rel.starts_with("steel/conv/") {
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
    let results = common::par_map(&headers, |h| {
        let rel = h.strip_prefix(&kernels).unwrap().display().to_string();
        let r = check_header(c, &inc, &rel);
        (rel, r)
    });
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (rel, result) in results {
        match &result {
            Ok(how) => report.push(format!("pass  {rel}: {how}")),
            Err(p) => {
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
    let defs = defines(rel);
    let alone = format!("#include <metal_stdlib>\n#include \"mlx/backend/metal/kernels/{rel}\"\n");
    if c.check_with(&alone, &name, &dirs, &defs).is_ok() {
        return Ok(if defs.is_empty() { "passes alone" } else { "passes alone (Metal 4)" });
    }
    let mut tu = String::from("#include <metal_stdlib>\n");
    for h in context(rel) {
        tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{h}\"\n"));
    }
    tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{rel}\"\n"));
    c.check_with(&tu, &name, &dirs, &defs).map(|()| {
        if defs.is_empty() { "passes after what MLX includes first" } else { "passes after what MLX includes first (Metal 4)" }
    })
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

/// MLX's NAX kernels instantiated at Metal 4 as its .metal files do (one of each family, each
/// file's includes and instantiate_kernel): the whole MetalPerformancePrimitives path
/// (matmul2d descriptors, cooperative tensors in registers, run) is instantiated, not just
/// parsed. The attention kernels' bool-mask variant is left out (bool vectors are not
/// modelled) and so is gather_mm_rhs_nax, whose `auto do_gemm = gemm_loop<...>` is a function
/// pointer variable, which the section 1.5 rule reports.
#[test]
fn nax_kernels_instantiate_at_metal_4() {
    let Some(inc) = include_dir() else { return };
    let c = common::declaring_checker();
    let k = |h: &str| format!("#include \"mlx/backend/metal/kernels/{h}\"\n");
    let gemm = |h: &str, inst: &str| format!("#include <metal_stdlib>\n{}{}{}{inst}\n", k("utils.h"), k("steel/gemm/gemm_nax.h"), k(h));
    let units: Vec<(&str, String)> = vec![
        (
            "steel_gemm_fused_nax",
            gemm(
                "steel/gemm/kernels/steel_gemm_fused_nax.h",
                "instantiate_kernel(\"steel_gemm_fused_nax_nt_float16_float16_bm64_bn64_bk256_wm2_wn2\", gemm, half, 64, 64, 256, 2, 2, false, true, float)\n\
                 instantiate_kernel(\"steel_gemm_fused_nax_tn_bfloat16_bfloat16_bm128_bn128_bk64_wm4_wn4\", gemm, bfloat, 128, 128, 64, 4, 4, true, false, float)",
            ),
        ),
        (
            "steel_gemm_segmented_nax",
            gemm(
                "steel/gemm/kernels/steel_gemm_segmented_nax.h",
                "instantiate_kernel(\"steel_segmented_mm_nax_tn_float32_float32_bm64_bn64_bk64_wm2_wn2\", segmented_mm_nax, float, 64, 64, 64, 2, 2, true, false, float)",
            ),
        ),
        (
            "steel_gemm_splitk_nax",
            gemm(
                "steel/gemm/kernels/steel_gemm_splitk_nax.h",
                "instantiate_kernel(\"steel_gemm_splitk_nax_tt_float16_float32_bm64_bn64_bk256_wm2_wn2\", gemm_splitk_nax, half, 64, 64, 256, 2, 2, true, true, float)",
            ),
        ),
        (
            "quantized_nax",
            format!(
                "{}{}{}{}{}instantiate_kernel(\"affine_qmm_t_nax_bfloat16_t_gs_64_b_4_bm64_bn64_bk64_wm2_wn2_alN_true_batch_1\", affine_qmm_t_nax, bfloat16_t, 64, 4, true, 1, 64, 64, 64, 2, 2)\n\
                 instantiate_kernel(\"affine_gather_qmm_rhs_nax_nn_float16_t_gs_32_b_8_bm_64_bn_64_bk_64_wm_2_wn_2\", affine_gather_qmm_rhs_nax, float16_t, 32, 8, 64, 64, 64, 2, 2, false)\n",
                k("utils.h"),
                k("steel/gemm/gemm.h"),
                k("steel/gemm/nax.h"),
                k("steel/gemm/loader.h"),
                k("quantized_nax.h")
            ),
        ),
        (
            "fp_quantized_nax",
            format!(
                "{}{}{}{}{}instantiate_kernel(\"nvfp4_qmm_t_nax_bfloat16_t_gs_16_b_4_bm64_bn64_bk64_wm2_wn2_alN_true_batch_1\", fp_qmm_t_nax, bfloat16_t, 16, 4, true, 1)\n\
                 instantiate_kernel(\"mxfp8_gather_qmm_rhs_nax_nt_float16_t_gs_32_b_8_bm_64_bn_64_bk_64_wm_2_wn_2\", fp_gather_qmm_rhs_nax, float16_t, 32, 8, 64, 64, 64, 2, 2, true)\n",
                k("utils.h"),
                k("steel/gemm/gemm.h"),
                k("quantized_utils.h"),
                k("steel/gemm/nax.h"),
                k("fp_quantized_nax.h")
            ),
        ),
        (
            "steel_attention_nax",
            format!(
                "{}{}instantiate_kernel(\"steel_attention_float16_bq64_bk32_bd128_wm4_wn1_maskfloat16\", attention_nax, half, 64, 32, 128, 4, 1, half, float)\n\
                 instantiate_kernel(\"steel_attention_float32_bq64_bk64_bd64_wm4_wn1_maskfloat32\", attention_nax, float, 64, 64, 64, 4, 1, float, float)\n",
                k("utils.h"),
                k("steel/attn/kernels/steel_attention_nax.h")
            ),
        ),
    ];
    let defs = [("__METAL_VERSION__".to_string(), Some("400".to_string()))];
    let results = common::par_map(&units, |(name, src)| (*name, c.check_with(src, &format!("{name}.metal"), &[inc.clone()], &defs)));
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| {
            r.as_ref().err().map(|p| format!("{name}:\n  {}", p.iter().take(8).map(|p| p.to_string()).collect::<Vec<_>>().join("\n  ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
