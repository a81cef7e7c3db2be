//! Fused SiLU + RMS heads (`delta/silu-rms-heads.ts`): splits each convolved
//! row `x` [B, S, C] with `C = 2*Hk*Dk + Hv*Dv` into Q and K heads (SiLU, then
//! MLX's four-reads RMS normalisation with eps 1e-6, scaled by `qscale` /
//! `kscale` [Dk]) and V heads (SiLU only). Sigmoid, SiLU, normalisation and
//! scaling each round to T as the seed does.
//!
//! Buffers: x [B, S, C], qscale [Dk], kscale [Dk] (all T); outputs q, k
//! [B, S, Hk, Dk] and v [B, S, Hv, Dv] (T). B and S are run-time sizes.
//! Launch: grid [32 * (2*Hk + Hv), B*S, 1] threads, threadgroup [32, 1, 1]:
//! one SIMD-group per head of one row, each lane holding 4 values.
//!
//! Constraints (checked in [`Family::plan`]):
//! - Dk and Dv from 1 to 128: a head is 32 lanes x 4 values at most;
//! - `channels`, if a spec gives it, equals 2*Hk*Dk + Hv*Dv.
//!
//! The seed passes no `ensureRowContiguous` (its inputs must already be
//! row-contiguous) and writes eps as the literal `1e-6f`.
//! Template: `templates/silu_rms_heads.metal.tera`.

use super::{Axis, AxisKind, AxisLit, Family, Field, FieldKind, FamilyInfo};
use crate::model::{array, Dim, Geometry, KernelPlan, Params, Variant, Violation};
use serde_json::json;

pub struct SiluRmsHeads;

/// Values per head at most: 32 lanes x 4 values.
pub const MAX_WIDTH: i64 = 128;

const AXES: &[Axis] = &[Axis {
    name: "dtype",
    doc: "dtype T of x, the scales and the outputs",
    kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
    default: &[AxisLit::Str("bf16")],
    name_prefix: "",
}];

const FIELDS: &[Field] = &[
    Field { name: "Hk", doc: "key heads (q and k)", kind: FieldKind::Int { min: 1, max: 1 << 12 }, required: true },
    Field { name: "Hv", doc: "value heads (v)", kind: FieldKind::Int { min: 1, max: 1 << 12 }, required: true },
    Field { name: "Dk", doc: "key head width (q, k and the scales), 1 to 128", kind: FieldKind::Int { min: 1, max: 1 << 16 }, required: true },
    Field { name: "Dv", doc: "value head width (v), 1 to 128", kind: FieldKind::Int { min: 1, max: 1 << 16 }, required: true },
    Field {
        name: "channels",
        doc: "channels C of a convolved row; derived as 2*Hk*Dk + Hv*Dv, checked if given",
        kind: FieldKind::Int { min: 1, max: 1 << 30 },
        required: false,
    },
];

static INFO: FamilyInfo = FamilyInfo {
    name: "silu_rms_heads",
    summary: "SiLU then RMS norm that splits a convolved row into scaled Q, K heads and V heads",
    axes: AXES,
    fields: FIELDS,
    has_header: false,
};

impl Family for SiluRmsHeads {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let dtype = v.dtype("dtype");
        let (hk, hv, dk, dv) = (g.int("Hk"), g.int("Hv"), g.int("Dk"), g.int("Dv"));
        let channels = 2 * hk * dk + hv * dv;
        let mut bad = Vec::new();
        for (name, width) in [("Dk", dk), ("Dv", dv)] {
            if width > MAX_WIDTH {
                bad.push(Violation::field(
                    name,
                    format!("{name} = {width} is above 128: one SIMD-group holds a head, 32 lanes x 4 values"),
                    "use a head width from 1 to 128",
                ));
            }
        }
        if let Some(c) = g.opt_int("channels") {
            if c != channels {
                bad.push(Violation::field(
                    "channels",
                    format!("channels = {c} is not 2*Hk*Dk + Hv*Dv = 2*{hk}*{dk} + {hv}*{dv} = {channels}"),
                    format!("use channels = {channels} (or leave it out: it is derived)"),
                ));
            }
        }
        if !bad.is_empty() {
            return Err(bad);
        }

        let mut params = Params::new();
        params.insert("T".into(), json!(dtype.metal_name()));
        params.insert("dtype".into(), json!(dtype.short_name()));
        params.insert("Hk".into(), json!(hk));
        params.insert("Hv".into(), json!(hv));
        params.insert("Dk".into(), json!(dk));
        params.insert("Dv".into(), json!(dv));
        params.insert("C".into(), json!(channels));
        // The seed's literal epsilon, 1e-6f: as a number, and its f32 bits.
        params.insert("eps".into(), json!(1e-6f32 as f64));
        params.insert("eps_bits".into(), json!(1e-6f32.to_bits()));
        // Derived values the template writes as numbers.
        params.insert("TWO_HK".into(), json!(2 * hk));
        params.insert("KEY_CHANNELS".into(), json!(2 * hk * dk));

        let rows = || vec![Dim::size(0), Dim::size(1)];
        let heads = |h: i64, d: i64| {
            let mut s = rows();
            s.extend([Dim::Fixed(h as u64), Dim::Fixed(d as u64)]);
            s
        };
        let mut x_shape = rows();
        x_shape.push(Dim::Fixed(channels as u64));
        Ok(vec![KernelPlan {
            part: None,
            sizes: vec!["B".into(), "S".into()],
            inputs: vec![
                array("x", dtype, x_shape),
                array("qscale", dtype, vec![Dim::Fixed(dk as u64)]),
                array("kscale", dtype, vec![Dim::Fixed(dk as u64)]),
            ],
            outputs: vec![
                array("q", dtype, heads(hk, dk)),
                array("k", dtype, heads(hk, dk)),
                array("v", dtype, heads(hv, dv)),
            ],
            grid: [Dim::Fixed((32 * (2 * hk + hv)) as u64), Dim::product(1, &[0, 1]), Dim::Fixed(1)],
            threadgroup: [32, 1, 1],
            threadgroup_memory_bytes: 0,
            params,
        }])
    }
}
