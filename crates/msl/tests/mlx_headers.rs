//! Real MSL from the field: MLX 0.32.2's Metal kernel headers, unmodified, from the
//! `mlx-metal` wheel (fetched by `crates/emu/tests/mlx-metal/fetch.sh` into target/, as
//! `make deps` does; never committed). Skips with a message when the headers are absent
//! (fails instead under `make test`, which sets KERNELGEN_MLX_METAL_REQUIRED once fetched).
use crate::common;

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

/// Kernels instantiated in their header's check, as MLX's .metal files instantiate them (with
/// instantiate_kernel): MLX's affine_qmv_fast (bits 3 and 4, group 64, bfloat16_t, batched and
/// not), affine_qmv and affine_qmm_t in quantized.h's; one kernel of each NAX family, so the
/// whole MetalPerformancePrimitives path (matmul2d descriptors, cooperative tensors in
/// registers, run) is instantiated, not only parsed (each costs a second or more); attention's
/// float and bool masks (the bool tile's fragment is a bool vector that `load` deduces through:
/// rewrite 10). Left out: gather_mm_rhs_nax, whose `auto do_gemm = gemm_loop<...>` is a function
/// pointer variable, which the section 1.5 rule reports.
fn instantiations(rel: &str) -> &'static str {
    match rel {
        "quantized.h" => concat!(
            "instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_4_batch_0\", affine_qmv_fast, bfloat16_t, 64, 4, false)\n",
            "instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_3_batch_0\", affine_qmv_fast, bfloat16_t, 64, 3, false)\n",
            "instantiate_kernel(\"affine_qmv_fast_bfloat16_t_gs_64_b_4_batch_1\", affine_qmv_fast, bfloat16_t, 64, 4, true)\n",
            "instantiate_kernel(\"affine_qmv_float_gs_64_b_4_batch_0\", affine_qmv, float, 64, 4, false)\n",
            "instantiate_kernel(\"affine_qmm_t_half_gs_64_b_4\", affine_qmm_t, half, 64, 4, true, false)\n",
        ),
        "steel/gemm/kernels/steel_gemm_fused_nax.h" => {
            "instantiate_kernel(\"steel_gemm_fused_nax_nt_bfloat16_bfloat16_bm64_bn128_bk64_wm2_wn4\", gemm, bfloat, 64, 128, 64, 2, 4, false, true, float)\n"
        }
        "steel/gemm/kernels/steel_gemm_segmented_nax.h" => {
            "instantiate_kernel(\"steel_segmented_mm_nax_tn_float32_float32_bm64_bn64_bk64_wm2_wn2\", segmented_mm_nax, float, 64, 64, 64, 2, 2, true, false, float)\n"
        }
        "steel/gemm/kernels/steel_gemm_splitk_nax.h" => {
            "instantiate_kernel(\"steel_gemm_splitk_nax_tt_float16_float32_bm64_bn64_bk256_wm2_wn2\", gemm_splitk_nax, half, 64, 64, 256, 2, 2, true, true, float)\n"
        }
        "quantized_nax.h" => {
            "instantiate_kernel(\"affine_qmm_t_nax_bfloat16_t_gs_64_b_4_bm64_bn64_bk64_wm2_wn2_alN_true_batch_1\", affine_qmm_t_nax, bfloat16_t, 64, 4, true, 1, 64, 64, 64, 2, 2)\n"
        }
        "fp_quantized_nax.h" => {
            "instantiate_kernel(\"mxfp8_gather_qmm_rhs_nax_nt_float16_t_gs_32_b_8_bm_64_bn_64_bk_64_wm_2_wn_2\", fp_gather_qmm_rhs_nax, float16_t, 32, 8, 64, 64, 64, 2, 2, true)\n"
        }
        "steel/attn/kernels/steel_attention_nax.h" => concat!(
            "instantiate_kernel(\"steel_attention_float16_bq64_bk32_bd64_wm4_wn1_maskfloat16\", attention_nax, half, 64, 32, 64, 4, 1, half, float)\n",
            "instantiate_kernel(\"steel_attention_float16_bq64_bk32_bd64_wm4_wn1_maskbool_\", attention_nax, half, 64, 32, 64, 4, 1, bool, float)\n",
        ),
        _ => "",
    }
}

#[test]
#[ignore = "slow (90 headers, 45 s of clang on two cores; the emulator's tests check MLX's quantized kernels): `make test-slow`, in .ci/run"]
fn every_mlx_header_parses() {
    let Some(inc) = include_dir() else { return };
    let kernels = inc.join("mlx/backend/metal/kernels");
    let c = common::declaring_checker();
    let mut headers = common::files(&kernels, "h");
    // The costliest checks first (kernels instantiated, Metal 4, larger contexts), so that no
    // core idles at the end waiting for one of them.
    let rel = |h: &PathBuf| h.strip_prefix(&kernels).unwrap().display().to_string();
    headers.sort_by_cached_key(|h| {
        let r = rel(h);
        let cost = (instantiations(&r).lines().count(), metal_version(&r).is_some(), context(&r).len());
        std::cmp::Reverse(cost)
    });
    let results = common::par_map(&headers, |h| {
        let rel = h.strip_prefix(&kernels).unwrap().display().to_string();
        let t = std::time::Instant::now();
        let r = check_header(c, &inc, &rel);
        (rel, r, t.elapsed())
    });
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (rel, result, took) in results {
        match &result {
            Ok(how) => report.push(format!("pass  {rel}: {how} ({} ms)", took.as_millis())),
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

/// The headers that pass alone (self-contained), as of MLX 0.32.2: they are tried alone first
/// (a smaller TU than with MLX's context), the others in MLX's context first. Only the order
/// of the two attempts depends on this list, not the verdict: a header passes when either
/// attempt does.
const SELF_CONTAINED: [&str; 31] = [
    "arange.h",
    "atomic.h",
    "bf16.h",
    "complex.h",
    "defines.h",
    "dot.h",
    "fft.h",
    "fft/radix.h",
    "fft/readwrite.h",
    "gemv.h",
    "hadamard.h",
    "logging.h",
    "reduction/reduce_init.h",
    "steel/attn/attn.h",
    "steel/attn/loader.h",
    "steel/attn/mma.h",
    "steel/attn/nax.h",
    "steel/attn/params.h",
    "steel/attn/transforms.h",
    "steel/conv/params.h",
    "steel/defines.h",
    "steel/gemm/gemm_nax.h",
    "steel/gemm/loader.h",
    "steel/gemm/nax.h",
    "steel/gemm/params.h",
    "steel/gemm/transforms.h",
    "steel/utils.h",
    "steel/utils/integral_constant.h",
    "steel/utils/type_traits.h",
    "ternary_ops.h",
    "utils.h",
];

/// A header alone after `<metal_stdlib>`, or after what MLX's .metal files include before it
/// (which first: see [`SELF_CONTAINED`]). A header whose kernels [`instantiations`] lists is
/// checked once, in MLX's context with them instantiated, and must pass so.
fn check_header(
    c: &kernelgen_msl::Checker,
    inc: &std::path::Path,
    rel: &str,
) -> Result<String, Vec<kernelgen_msl::Problem>> {
    let name = format!("tu_{}.metal", rel.replace('/', "_"));
    let dirs = [inc.to_path_buf()];
    let defs = defines(rel);
    let at = if defs.is_empty() { "" } else { " (Metal 4)" };
    let alone = format!("#include <metal_stdlib>\n#include \"mlx/backend/metal/kernels/{rel}\"\n");
    let inst = instantiations(rel);
    if inst.is_empty() && SELF_CONTAINED.contains(&rel) && c.check_with(&alone, &name, &dirs, &defs).is_ok() {
        return Ok(format!("passes alone{at}"));
    }
    let mut tu = String::from("#include <metal_stdlib>\n");
    for h in context(rel) {
        tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{h}\"\n"));
    }
    tu.push_str(&format!("#include \"mlx/backend/metal/kernels/{rel}\"\n"));
    tu.push_str(inst);
    let in_context = c.check_with(&tu, &name, &dirs, &defs);
    if in_context.is_ok() {
        let kernels = inst.lines().count();
        let with = match kernels {
            0 => String::new(),
            1 => ", its kernel instantiated".to_string(),
            n => format!(", {n} kernels instantiated"),
        };
        let note = if SELF_CONTAINED.contains(&rel) && inst.is_empty() { " (no longer alone)" } else { "" };
        return Ok(format!("passes after what MLX includes first{with}{at}{note}"));
    }
    if !inst.is_empty() || SELF_CONTAINED.contains(&rel) {
        return in_context.map(|()| String::new());
    }
    // Report what MLX's context gives when both fail (alone, it is mostly missing includes).
    c.check_with(&alone, &name, &dirs, &defs).map(|()| format!("passes alone{at}")).map_err(|_| in_context.unwrap_err())
}
