//! Gated RMS norm (`gated-rms-norm.ts`, Qwen's RMSNormGated): per row of D
//! values, `out = T(silu(float(gate)) * float(weight * T(x * rsqrt(mean(x^2) + eps))))`:
//! MLX 0.32.2's four-value RMS reduction, the normalised value rounded to T
//! before the weight, then a float32 SiLU gate.
//!
//! Buffers: x [R, D], gate [R, D], weight [D] (all T); output out [R, D] (T).
//! R (rows) is the run-time size. One threadgroup per row of
//! `THREADS = min(1024, ceil(D / 128) * 32)` threads, the seed's derivation:
//! each thread reads 4 values per pass. Grid [R * THREADS, 1, 1], threadgroup
//! [THREADS, 1, 1], threadgroup memory (32 + 1) * 4 bytes (SIMD-group sums and
//! the inverse) when THREADS > 32, none at one SIMD-group (the seed's
//! compile-time `THREADS > 32` branches are resolved in the template).
//!
//! `eps` (a spec field) is rounded to f32 as the seed does
//! (`Float32Array([eps])`) and written into the MSL by its bit pattern,
//! `as_type<float>(0x...u)`, exactly the seed's `as_type<float>(uint(EPS))`.
//! Constraints: eps positive and finite as an f32.
//! Template: `templates/gated_rms_norm.metal.tera`.

use super::{Axis, AxisKind, AxisLit, Family, Field, FieldKind, FamilyInfo};
use crate::model::{array, Dim, Geometry, KernelPlan, Params, Variant, Violation};
use serde_json::json;

pub struct GatedRmsNorm;

/// The seed's thread count for a row of `d` values: 4 values a thread per
/// pass, whole SIMD-groups, at most 1024.
pub fn threads(d: i64) -> i64 {
    ((d + 127) / 128 * 32).min(1024)
}

/// The f32 the seed passes for `eps` (`new Float32Array([eps])`: round to nearest).
pub fn eps_f32(eps: f64) -> f32 {
    eps as f32
}

/// How the template writes an f32 whose bits are `bits`: `as_type<float>(0x358637bdu)`.
pub fn eps_literal(bits: u32) -> String {
    format!("as_type<float>(0x{bits:08x}u)")
}

const AXES: &[Axis] = &[Axis {
    name: "dtype",
    doc: "dtype T of x, gate, weight and out",
    kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
    default: &[AxisLit::Str("bf16")],
    name_prefix: "",
}];

const FIELDS: &[Field] = &[
    Field { name: "D", doc: "row width (values normalised together)", kind: FieldKind::Int { min: 1, max: 1 << 24 }, required: true },
    Field { name: "eps", doc: "epsilon added to the mean square, as an f32", kind: FieldKind::Float, required: true },
];

static INFO: FamilyInfo = FamilyInfo {
    name: "gated_rms_norm",
    summary: "RMS norm then a float32 SiLU gate (Qwen RMSNormGated), epsilon as exact f32 bits",
    axes: AXES,
    fields: FIELDS,
    has_header: false,
};

impl Family for GatedRmsNorm {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let dtype = v.dtype("dtype");
        let d = g.int("D");
        let eps = g.opt_float("eps").expect("eps is a required float field");
        let eps32 = eps_f32(eps);
        if !(eps32 > 0.0 && eps32.is_finite()) {
            return Err(vec![Violation::field(
                "eps",
                format!("eps = {eps:e} is {} as an f32: the kernel needs a positive finite epsilon", if eps32 == 0.0 { "zero" } else if eps32.is_finite() { "negative" } else { "infinite" }),
                "use a small positive value such as 1e-6",
            )]);
        }
        let threads = threads(d);
        let bits = eps32.to_bits();

        let mut params = Params::new();
        params.insert("T".into(), json!(dtype.metal_name()));
        params.insert("dtype".into(), json!(dtype.short_name()));
        params.insert("D".into(), json!(d));
        params.insert("THREADS".into(), json!(threads));
        // The seed's EPS template value: the f32 bits of eps, and that f32 as a number.
        params.insert("EPS".into(), json!(bits));
        params.insert("eps".into(), json!(eps32 as f64));
        // Derived values the template writes.
        params.insert("eps_literal".into(), json!(eps_literal(bits)));
        params.insert("eps_shown".into(), json!(format!("{eps32:e}")));
        params.insert("STEP".into(), json!(threads * 4));
        params.insert("multi_simdgroup".into(), json!(threads > 32));

        let rows_by_d = vec![Dim::size(0), Dim::Fixed(d as u64)];
        Ok(vec![KernelPlan {
            part: None,
            sizes: vec!["R".into()],
            inputs: vec![
                array("x", dtype, rows_by_d.clone()),
                array("gate", dtype, rows_by_d.clone()),
                array("weight", dtype, vec![Dim::Fixed(d as u64)]),
            ],
            outputs: vec![array("out", dtype, rows_by_d)],
            grid: [Dim::product(threads as u64, &[0]), Dim::Fixed(1), Dim::Fixed(1)],
            threadgroup: [threads as u64, 1, 1],
            // The SIMD-group sums and the inverse, needed only past one SIMD-group.
            threadgroup_memory_bytes: if threads > 32 { (32 + 1) * 4 } else { 0 },
            params,
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_follow_the_seed() {
        // Math.min(1024, Math.ceil(width / 128) * 32)
        assert_eq!(threads(1), 32);
        assert_eq!(threads(128), 32);
        assert_eq!(threads(129), 64);
        assert_eq!(threads(200), 64);
        assert_eq!(threads(4096), 1024);
        assert_eq!(threads(8192), 1024);
    }

    /// The literal written into the MSL parses back to exactly the f32 the
    /// seed passes (its bits, through `as_type<float>`).
    #[test]
    fn eps_literal_keeps_the_f32_bits() {
        for eps in [1e-6, 1e-5, 1e-12, 3.3e-7, 0.1, f64::from(f32::MIN_POSITIVE) / 4.0] {
            let e = eps_f32(eps);
            let lit = eps_literal(e.to_bits());
            let hex = lit.strip_prefix("as_type<float>(0x").and_then(|s| s.strip_suffix("u)")).unwrap();
            assert_eq!(hex.len(), 8);
            let back = f32::from_bits(u32::from_str_radix(hex, 16).unwrap());
            assert_eq!(back.to_bits(), e.to_bits(), "{eps}");
            // And the f32 is the nearest one to eps (Float32Array's rounding).
            assert_eq!(e, eps as f32);
        }
        assert_eq!(eps_literal(eps_f32(1e-6).to_bits()), "as_type<float>(0x358637bdu)");
    }

    /// The rendered kernel carries exactly those bits, and the plan exposes
    /// them as the seed's `EPS` template value.
    #[test]
    fn rendered_msl_holds_the_eps_bits() {
        let text = "family = \"gated_rms_norm\"\n[geometry.a]\nD = 200\neps = 1e-5\n[geometry.b]\nD = 64\neps = 3.3e-7\n";
        let source = crate::spec::SpecSource { display: "t.toml".into(), origin: "specs/t.toml".into(), stem: "t".into(), text: text.into() };
        let generated = crate::generate(vec![source]).unwrap_or_else(|e| panic!("{e}"));
        for (rk, eps) in generated.kernels.iter().zip([1e-5f64, 3.3e-7]) {
            let bits = (eps as f32).to_bits();
            assert!(rk.def.body().contains(&format!("as_type<float>(0x{bits:08x}u)")), "{}", rk.def.body());
            assert_eq!(rk.kernel.plan.params["EPS"].as_u64(), Some(u64::from(bits)));
        }
    }
}
