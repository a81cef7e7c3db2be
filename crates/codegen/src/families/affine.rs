//! One-row matmul over MLX affine-quantized weights (`quantization/affine-row.ts`):
//! `y = x . W^T` for a single activation row `x` [1, K] against `bits`-bit,
//! group-64 weights `w` [N, K*bits/32] (uint32) with `scales` and `biases`
//! [N, K/64] in T, giving `y` [1, N]. Bit for bit MLX 0.32.2's
//! `affine_qmv_fast`: each lane owns 16 values of every 512-value step of K,
//! computes MLX's `load_vector` (the pre-divided `x_thread` and the step's sum
//! of x, summed partly in T) and `qdot` over them, adds each step's `qdot`
//! into its partial from 0 in K order, and the 32 partials meet in `simd_sum`.
//!
//! Layout of the work (the seed's, fixed here): R = 4 output rows per
//! SIMD-group and S = 16 SIMD-groups per threadgroup, so one threadgroup
//! computes 64 rows and stages x once: every 16-value chunk's `x_thread` and
//! sum go to threadgroup memory, `(K + K/16) * 4` bytes.
//!
//! Constraints (checked in [`Family::plan`]):
//! - group size 64 only (the only one the seed's qdot and scale stepping read);
//! - K a multiple of 512: one step is 32 lanes x 16 values;
//! - K <= 7680: the staged x must fit Apple's 32 KiB of threadgroup memory
//!   (K = 8192 would need 34816 bytes);
//! - N a multiple of R * S = 64: every threadgroup writes 64 whole rows and
//!   the kernel has no bounds check;
//! - N * K * bits / 8 < 2^31: the seed forms weight byte offsets in `int`.
//!
//! No run-time sizes: the grid is [32, N/4, 1] threads, the threadgroup
//! [32, 16, 1]. Template: `templates/affine.metal.tera` (a header with the
//! `load_vector` and `qdot` helpers, then the body).

use super::{Axis, AxisKind, AxisLit, Family, Field, FieldKind, FamilyInfo};
use crate::model::{array, multiples_near, Dim, Dtype, Geometry, KernelPlan, Params, Variant, Violation};
use serde_json::json;

pub struct Affine;

/// MLX's group size: 64 values share one scale and one bias.
pub const GROUP_SIZE: i64 = 64;
/// Output rows per SIMD-group.
pub const ROWS_PER_SIMDGROUP: i64 = 4;
/// SIMD-groups per threadgroup.
pub const SIMDGROUPS: i64 = 16;
/// Values of K one step covers: 32 lanes x 16 values.
pub const K_STEP: i64 = 512;
/// Apple's threadgroup memory limit.
const THREADGROUP_MEMORY: i64 = 32 * 1024;

const AXES: &[Axis] = &[
    Axis {
        name: "bits",
        doc: "bits per quantized weight: 3 (a continuous bit stream, 8 values per 3 bytes) or 4 (nibbles)",
        kind: AxisKind::Int { min: 3, max: 4 },
        default: &[AxisLit::Int(3), AxisLit::Int(4)],
        name_prefix: "q",
    },
    Axis {
        name: "dtype",
        doc: "dtype T of x, scales, biases and y",
        kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
        default: &[AxisLit::Str("bf16")],
        name_prefix: "",
    },
];

const FIELDS: &[Field] = &[
    Field { name: "K", doc: "input width (x's length, the weights' unpacked row length)", kind: FieldKind::Int { min: 1, max: 1 << 24 }, required: true },
    Field { name: "N", doc: "outputs (weight rows)", kind: FieldKind::Int { min: 1, max: 1 << 30 }, required: true },
    Field {
        name: "group_size",
        doc: "values sharing one scale and bias (MLX's group_size); only 64 is supported",
        kind: FieldKind::Int { min: 1, max: 1 << 20 },
        required: false,
    },
];

/// Threadgroup memory the staged x needs: `x_thread` (K floats) and one sum
/// per 16-value chunk (K/16 floats).
pub fn staged_bytes(k: i64) -> i64 {
    (k + k / 16) * 4
}

static INFO: FamilyInfo = FamilyInfo {
    name: "affine",
    summary: "one-row matmul over MLX affine 3/4-bit group-64 weights, bit for bit affine_qmv_fast",
    axes: AXES,
    fields: FIELDS,
    has_header: true,
};

impl Family for Affine {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let bits = v.int("bits");
        let dtype = v.dtype("dtype");
        let (k, n) = (g.int("K"), g.int("N"));
        let mut bad = Vec::new();

        if let Some(group) = g.opt_int("group_size") {
            if group != GROUP_SIZE {
                bad.push(Violation::field(
                    "group_size",
                    format!("group_size = {group} is not supported: the kernel reads MLX affine weights with group size 64 only"),
                    "use group_size = 64 (or leave it out)",
                ));
            }
        }
        if k % K_STEP != 0 {
            bad.push(Violation::field(
                "K",
                format!("K = {k} is not a multiple of 512: each step of K covers 32 lanes x 16 values"),
                format!("use a multiple of 512, such as {}", multiples_near(k, K_STEP)),
            ));
        }
        let max_k = THREADGROUP_MEMORY / 4 * 16 / 17 / K_STEP * K_STEP;
        if staged_bytes(k) > THREADGROUP_MEMORY {
            bad.push(Violation::field(
                "K",
                format!(
                    "K = {k} is too large: the staged x (x_thread and chunk sums, (K + K/16) * 4 = {} bytes) must fit 32 KiB of threadgroup memory",
                    staged_bytes(k)
                ),
                format!("use K <= {max_k}"),
            ));
        }
        let rows_per_threadgroup = ROWS_PER_SIMDGROUP * SIMDGROUPS;
        if n % rows_per_threadgroup != 0 {
            bad.push(Violation::field(
                "N",
                format!(
                    "N = {n} is not a multiple of the rows per threadgroup, R * S = {ROWS_PER_SIMDGROUP} * {SIMDGROUPS} = {rows_per_threadgroup}: the kernel writes whole threadgroups of rows without a bounds check"
                ),
                format!("use a multiple of {rows_per_threadgroup}, such as {}", multiples_near(n, rows_per_threadgroup)),
            ));
        }
        let weight_bytes = n as i128 * k as i128 * bits as i128 / 8;
        if weight_bytes >= 1i128 << 31 {
            bad.push(Violation::field(
                "N",
                format!("N * K * bits / 8 = {weight_bytes} bytes of weights, but the kernel forms byte offsets into w as int, which needs fewer than 2^31 = 2147483648"),
                "split the matrix into several kernels of fewer rows",
            ));
        }
        if !bad.is_empty() {
            return Err(bad);
        }

        let t = dtype.metal_name();
        let groups = k / GROUP_SIZE;
        let mut params = Params::new();
        params.insert("T".into(), json!(t));
        params.insert("dtype".into(), json!(dtype.short_name()));
        params.insert("K".into(), json!(k));
        params.insert("N".into(), json!(n));
        params.insert("bits".into(), json!(bits));
        params.insert("group_size".into(), json!(GROUP_SIZE));
        params.insert("R".into(), json!(ROWS_PER_SIMDGROUP));
        params.insert("S".into(), json!(SIMDGROUPS));
        // Derived values the template writes as numbers.
        params.insert("BPL".into(), json!(2 * bits));
        params.insert("ROWB".into(), json!(k * bits / 8));
        params.insert("GROUPS".into(), json!(groups));
        params.insert("CHUNKS".into(), json!(k / 16));
        params.insert("CHUNK_STRIDE".into(), json!(SIMDGROUPS * 32));
        params.insert("W_WORDS".into(), json!(k * bits / 32));

        let fixed = |x: i64| Dim::Fixed(x as u64);
        Ok(vec![KernelPlan {
            part: None,
            sizes: Vec::new(),
            inputs: vec![
                array("x", dtype, vec![fixed(1), fixed(k)]),
                array("w", Dtype::U32, vec![fixed(n), fixed(k * bits / 32)]),
                array("scales", dtype, vec![fixed(n), fixed(groups)]),
                array("biases", dtype, vec![fixed(n), fixed(groups)]),
            ],
            outputs: vec![array("y", dtype, vec![fixed(1), fixed(n)])],
            grid: [fixed(32), fixed(n / ROWS_PER_SIMDGROUP), fixed(1)],
            threadgroup: [32, SIMDGROUPS as u64, 1],
            threadgroup_memory_bytes: staged_bytes(k) as u64,
            params,
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_k_fits_threadgroup_memory() {
        assert!(staged_bytes(7680) <= THREADGROUP_MEMORY);
        assert!(staged_bytes(7680 + 512) > THREADGROUP_MEMORY);
        assert_eq!(THREADGROUP_MEMORY / 4 * 16 / 17 / K_STEP * K_STEP, 7680);
    }
}
