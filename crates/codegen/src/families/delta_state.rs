//! Gated DeltaNet prefix state (`delta/state.ts`): the recurrence of
//! [`super::delta`] with no query or output, replaying only the first
//! `lengths[b]` time steps of each batch row, writing the state only.
//!
//! Buffers, in the seed's order: k [B,T,Hk,Dk] (InT), v [B,T,Hv,Dv] (InT),
//! g [B,T,Hv] (f32), beta [B,T,Hv] (InT), state_in [B,Hv,Dv,Dk] (f32), Tin [1]
//! (int32, holds T), lengths [B] (int32, each at most T: a caller's
//! precondition, the kernel reads `lengths[b]` steps); output state_out
//! [B,Hv,Dv,Dk] (f32). B and T are run-time sizes; T arrives in `Tin`.
//!
//! The state dtype is f32 only: the seed stores the float state with an
//! implicit conversion (`o_state[...] = state[i]`) and passes no state dtype.
//!
//! Launch and constraints are those of `delta`: grid [32, Dv, B*Hv] threads,
//! threadgroup [32, 4, 1]; Dk a multiple of 32, Hv a multiple of Hk, Dv a
//! multiple of 4. Template: `templates/delta_state.metal.tera`.

use super::delta::{bthd, heads, launch, params, state_shape, tin, FIELDS, SIZES};
use super::{Axis, AxisKind, AxisLit, Family, FamilyInfo};
use crate::model::{array, BufferDef, Dim, Dtype, Source, Geometry, KernelPlan, Variant, Violation};

pub struct DeltaState;

const AXES: &[Axis] = &[
    Axis {
        name: "dtype",
        doc: "dtype of k, v and beta",
        kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
        default: &[AxisLit::Str("bf16")],
        name_prefix: "",
    },
    Axis {
        name: "state_dtype",
        doc: "dtype of state_in and state_out: f32 (the seed stores the float state without a cast)",
        kind: AxisKind::Choice(&["f32"]),
        default: &[AxisLit::Str("f32")],
        name_prefix: "",
    },
];

static INFO: FamilyInfo = FamilyInfo {
    name: "delta_state",
    summary: "gated DeltaNet prefix state: replays the first lengths[b] steps, writes the state only",
    axes: AXES,
    fields: FIELDS,
    has_header: false,
};

impl Family for DeltaState {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let dtype = v.dtype("dtype");
        let state = v.dtype("state_dtype");
        let h = heads(g)?;
        let params = params(h, dtype, state);
        let (grid, threadgroup) = launch(h);
        let per_step = |width: i64| vec![Dim::size(0), Dim::size(1), Dim::Fixed(width as u64)];
        Ok(vec![KernelPlan {
            part: None,
            sizes: SIZES.iter().map(|s| s.to_string()).collect(),
            inputs: vec![
                array("k", dtype, bthd(h.hk, h.dk)),
                array("v", dtype, bthd(h.hv, h.dv)),
                array("g", Dtype::F32, per_step(h.hv)),
                array("beta", dtype, per_step(h.hv)),
                array("state_in", state, state_shape(h)),
                tin(),
                // Kept lengths are loop counts over T: a larger one reads past the
                // inputs. They come from the host, as in the seed, so the launch
                // checks them without reading device memory.
                BufferDef { at_most: Some(1), source: Source::HostInts, ..array("lengths", Dtype::I32, vec![Dim::size(0)]) },
            ],
            outputs: vec![array("state_out", state, state_shape(h))],
            grid,
            threadgroup,
            threadgroup_memory_bytes: 0,
            params,
        }])
    }
}
