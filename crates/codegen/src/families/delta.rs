//! Gated DeltaNet recurrence step (`delta/gated.ts`: mlx-lm's
//! `gated_delta_step`, the non-vectorized variant), unmasked and masked.
//!
//! Per batch b, value head hv, state row dv (key head `hv / (Hv/Hk)`), over
//! every time step t, in float: `state *= g; kv = sum_k(state * k);
//! delta = (v[dv] - kv) * beta; state += k * delta; y[dv] = sum_k(state * q)`.
//! The masked variant (`masked = true`) runs a step only where `mask[b, t]`
//! and writes `y = 0` elsewhere, leaving the state untouched.
//!
//! Buffers, in the seed's order: q, k [B,T,Hk,Dk] (InT), v [B,T,Hv,Dv] (InT),
//! g [B,T,Hv] (f32), beta [B,T,Hv] (InT), state_in [B,Hv,Dv,Dk] (StT), Tin [1]
//! (int32, holds T), then mask [B,T] (bool) when masked; outputs y [B,T,Hv,Dv]
//! (InT) and state_out [B,Hv,Dv,Dk] (StT). B and T are run-time sizes; T
//! arrives as the one-element input `Tin`, read once, exactly as in the seed,
//! so a new sequence length never recompiles.
//!
//! Launch: grid [32, Dv, B*Hv] threads, threadgroup [32, 4, 1] (128 threads):
//! one SIMD-group per state row, each lane holding Dk/32 state values.
//!
//! Constraints (checked in [`Family::plan`]):
//! - Dk a multiple of 32: the 32 lanes split a state row evenly;
//! - Hv a multiple of Hk: each key head serves Hv/Hk value heads (GQA);
//! - Dv a multiple of 4: a threadgroup covers 4 state rows along the grid's
//!   y, so with Dv % 4 != 0 the last threadgroup of every (b, hv) would be
//!   partial, a launch shape the seed never uses.
//!
//! Template: `templates/delta.metal.tera`.

use super::{Axis, AxisKind, AxisLit, Family, Field, FieldKind, FamilyInfo};
use crate::model::{array, multiples_near, BufferDef, Source, Dim, Dtype, Geometry, KernelPlan, Params, Variant, Violation};
use serde_json::json;

pub struct Delta;

/// Lanes in a SIMD-group; they split Dk.
pub const SIMD_WIDTH: i64 = 32;
/// State rows (SIMD-groups) per threadgroup: the threadgroup is [32, 4, 1].
pub const ROWS_PER_THREADGROUP: i64 = 4;

const AXES: &[Axis] = &[
    Axis {
        name: "masked",
        doc: "whether a [B, T] bool mask selects the steps that run (false: every step runs)",
        kind: AxisKind::Bool,
        default: &[AxisLit::Bool(false), AxisLit::Bool(true)],
        name_prefix: "masked",
    },
    Axis {
        name: "dtype",
        doc: "dtype InT of q, k, v, beta and y",
        kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
        default: &[AxisLit::Str("bf16")],
        name_prefix: "",
    },
    Axis {
        name: "state_dtype",
        doc: "dtype StT of state_in and state_out (the recurrence itself runs in float)",
        kind: AxisKind::Choice(&["f32", "bf16"]),
        default: &[AxisLit::Str("f32")],
        name_prefix: "",
    },
];

/// The geometry fields of both DeltaNet families.
pub const FIELDS: &[Field] = &[
    Field { name: "Dk", doc: "key head width (q, k and state rows)", kind: FieldKind::Int { min: 1, max: 4096 }, required: true },
    Field { name: "Dv", doc: "value head width (v, y; state rows per head)", kind: FieldKind::Int { min: 1, max: 1 << 16 }, required: true },
    Field { name: "Hk", doc: "key heads (q and k)", kind: FieldKind::Int { min: 1, max: 1 << 12 }, required: true },
    Field { name: "Hv", doc: "value heads (v, y, g, beta and the state)", kind: FieldKind::Int { min: 1, max: 1 << 16 }, required: true },
];

/// Head sizes of a DeltaNet geometry.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub dk: i64,
    pub dv: i64,
    pub hk: i64,
    pub hv: i64,
}

/// Reads and checks the geometry shared by `delta` and `delta_state`.
pub fn heads(g: &Geometry) -> Result<Heads, Vec<Violation>> {
    let h = Heads { dk: g.int("Dk"), dv: g.int("Dv"), hk: g.int("Hk"), hv: g.int("Hv") };
    let mut bad = Vec::new();
    if h.dk % SIMD_WIDTH != 0 {
        bad.push(Violation::field(
            "Dk",
            format!("Dk = {} is not a multiple of 32: each of the 32 lanes keeps Dk/32 values of a state row", h.dk),
            format!("use a multiple of 32, such as {}", multiples_near(h.dk, SIMD_WIDTH)),
        ));
    }
    if h.hv % h.hk != 0 {
        bad.push(Violation::field(
            "Hv",
            format!("Hv = {} is not a multiple of Hk = {}: each key head must serve a whole number of value heads", h.hv, h.hk),
            format!("use a multiple of {}, such as {}", h.hk, multiples_near(h.hv, h.hk)),
        ));
    }
    if h.dv % ROWS_PER_THREADGROUP != 0 {
        bad.push(Violation::field(
            "Dv",
            format!(
                "Dv = {} is not a multiple of 4: a threadgroup [32, 4, 1] covers 4 state rows along the grid's y (extent Dv), so the last threadgroup of each head would be partial",
                h.dv
            ),
            format!("use a multiple of 4, such as {}", multiples_near(h.dv, ROWS_PER_THREADGROUP)),
        ));
    }
    if bad.is_empty() { Ok(h) } else { Err(bad) }
}

/// Parameters both DeltaNet templates read.
pub fn params(h: Heads, dtype: Dtype, state: Dtype) -> Params {
    let mut p = Params::new();
    p.insert("InT".into(), json!(dtype.metal_name()));
    p.insert("StT".into(), json!(state.metal_name()));
    p.insert("dtype".into(), json!(dtype.short_name()));
    p.insert("state_dtype".into(), json!(state.short_name()));
    p.insert("Dk".into(), json!(h.dk));
    p.insert("Dv".into(), json!(h.dv));
    p.insert("Hk".into(), json!(h.hk));
    p.insert("Hv".into(), json!(h.hv));
    p.insert("threads".into(), json!(SIMD_WIDTH * ROWS_PER_THREADGROUP));
    // Derived values the template writes as numbers.
    p.insert("GQA".into(), json!(h.hv / h.hk));
    p.insert("N_PER_T".into(), json!(h.dk / SIMD_WIDTH));
    p.insert("HK_DK".into(), json!(h.hk * h.dk));
    p.insert("HV_DV".into(), json!(h.hv * h.dv));
    p
}

/// Sizes of both DeltaNet kernels: B (batch) and T (time steps).
pub const SIZES: [&str; 2] = ["B", "T"];

/// `[B, T, heads, width]`.
pub fn bthd(heads: i64, width: i64) -> Vec<Dim> {
    vec![Dim::size(0), Dim::size(1), Dim::Fixed(heads as u64), Dim::Fixed(width as u64)]
}

/// `[B, Hv, Dv, Dk]`.
pub fn state_shape(h: Heads) -> Vec<Dim> {
    vec![Dim::size(0), Dim::Fixed(h.hv as u64), Dim::Fixed(h.dv as u64), Dim::Fixed(h.dk as u64)]
}

/// Tin: one int32 the launcher fills with T.
pub fn tin() -> BufferDef {
    BufferDef { source: Source::SizeValue(1), ..array("Tin", Dtype::I32, vec![Dim::Fixed(1)]) }
}

/// Grid [32, Dv, B*Hv] threads, threadgroup [32, 4, 1].
pub fn launch(h: Heads) -> ([Dim; 3], [u64; 3]) {
    (
        [Dim::Fixed(SIMD_WIDTH as u64), Dim::Fixed(h.dv as u64), Dim::product(h.hv as u64, &[0])],
        [SIMD_WIDTH as u64, ROWS_PER_THREADGROUP as u64, 1],
    )
}

static INFO: FamilyInfo = FamilyInfo {
    name: "delta",
    summary: "gated DeltaNet recurrence step (mlx-lm gated_delta_step), unmasked or masked, T at run time",
    axes: AXES,
    fields: FIELDS,
    has_header: false,
};

impl Family for Delta {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let masked = v.bool("masked");
        let dtype = v.dtype("dtype");
        let state = v.dtype("state_dtype");
        let h = heads(g)?;
        let mut params = params(h, dtype, state);
        params.insert("masked".into(), json!(masked));

        let mut inputs = vec![
            array("q", dtype, bthd(h.hk, h.dk)),
            array("k", dtype, bthd(h.hk, h.dk)),
            array("v", dtype, bthd(h.hv, h.dv)),
            array("g", Dtype::F32, vec![Dim::size(0), Dim::size(1), Dim::Fixed(h.hv as u64)]),
            array("beta", dtype, vec![Dim::size(0), Dim::size(1), Dim::Fixed(h.hv as u64)]),
            array("state_in", state, state_shape(h)),
            tin(),
        ];
        if masked {
            inputs.push(array("mask", Dtype::Bool, vec![Dim::size(0), Dim::size(1)]));
        }
        let (grid, threadgroup) = launch(h);
        Ok(vec![KernelPlan {
            part: None,
            sizes: SIZES.iter().map(|s| s.to_string()).collect(),
            inputs,
            outputs: vec![array("y", dtype, bthd(h.hv, h.dv)), array("state_out", state, state_shape(h))],
            grid,
            threadgroup,
            threadgroup_memory_bytes: 0,
            params,
        }])
    }
}
