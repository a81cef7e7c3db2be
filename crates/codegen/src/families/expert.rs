//! The streamed routed SwiGLU expert (GLM-5.2's decode experts): Q4 (packed
//! nibbles, zero point 8) or Q8 (signed int8) weights with f32 row scales,
//! read straight from one packed residency slot. Two kernels: `gate_up`
//! (x -> mid = silu(gate) * up) and `down` (mid -> out).
//! Template: `templates/expert.metal.tera`.

use super::{Axis, AxisKind, AxisLit, Family, Field, FieldKind, FamilyInfo};
use crate::model::{
    array, multiples_near, BufferDef, Dim, Dtype, Geometry, KernelPlan, Params, Region, Source, Variant, Violation,
};
use serde_json::json;

pub struct Expert;

/// Threads in a SIMD-group; one SIMD-group computes one output row.
const SIMD_WIDTH: i64 = 32;
/// Slots are page-aligned for zero-copy Metal access; a derived layout
/// rounds the slot size up to this.
const SLOT_ALIGNMENT: i64 = 16 * 1024;
/// Region alignment of the derived (canonical packed) layout.
const REGION_ALIGNMENT: i64 = 256;

/// The six regions of a slot, in the canonical packed order.
const REGIONS: [&str; 6] = ["gate_weights", "up_weights", "down_weights", "gate_scales", "up_scales", "down_scales"];

const SLOT_FIELDS: &[Field] = &[
    Field { name: "bytes", doc: "size of one slot in bytes", kind: FieldKind::Int { min: 1, max: 1 << 40 }, required: true },
    Field { name: "gate_weights", doc: "byte offset of the gate weights", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
    Field { name: "up_weights", doc: "byte offset of the up weights", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
    Field { name: "down_weights", doc: "byte offset of the down weights", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
    Field { name: "gate_scales", doc: "byte offset of the f32 gate row scales", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
    Field { name: "up_scales", doc: "byte offset of the f32 up row scales", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
    Field { name: "down_scales", doc: "byte offset of the f32 down row scales", kind: FieldKind::Int { min: 0, max: 1 << 40 }, required: true },
];

const AXES: &[Axis] = &[
    Axis {
        name: "quant",
        doc: "weight format: q4 (two nibbles a byte, zero point 8) or q8 (signed int8)",
        kind: AxisKind::Choice(&["q4", "q8"]),
        default: &[AxisLit::Str("q4"), AxisLit::Str("q8")],
        name_prefix: "",
    },
    Axis {
        name: "dtype",
        doc: "activation dtype T of x, mid and out",
        kind: AxisKind::Choice(&["bf16", "f16", "f32"]),
        default: &[AxisLit::Str("bf16")],
        name_prefix: "",
    },
    Axis {
        name: "rows_per_threadgroup",
        doc: "output rows per threadgroup, one SIMD-group each (threads = 32 * rows)",
        kind: AxisKind::Int { min: 1, max: 1024 },
        default: &[AxisLit::Int(4)],
        name_prefix: "r",
    },
];

const FIELDS: &[Field] = &[
    Field { name: "hidden", doc: "model hidden size H (x and out width)", kind: FieldKind::Int { min: 1, max: 1 << 24 }, required: true },
    Field {
        name: "intermediate",
        doc: "expert intermediate size I (mid width)",
        kind: FieldKind::Int { min: 1, max: 1 << 24 },
        required: true,
    },
    Field {
        name: "slot",
        doc: "explicit slot layout per quantization; without it the canonical packed layout is derived",
        kind: FieldKind::PerAxisValue { axis: "quant", fields: SLOT_FIELDS },
        required: false,
    },
];

/// A slot layout: the slot's size and each region's offset and length.
struct Layout {
    bytes: i64,
    /// (name, offset, length, alignment) in `REGIONS` order.
    regions: Vec<(&'static str, i64, i64, i64)>,
    explicit: bool,
}

fn region_lengths(quant: &str, hidden: i64, intermediate: i64) -> [i64; 6] {
    let weights = if quant == "q4" { hidden * intermediate / 2 } else { hidden * intermediate };
    [weights, weights, weights, intermediate * 4, intermediate * 4, hidden * 4]
}

fn layout(quant: &str, g: &Geometry, hidden: i64, intermediate: i64) -> Layout {
    let lengths = region_lengths(quant, hidden, intermediate);
    // Q4 rows are read as uint32 words; scales are f32.
    let weight_align = if quant == "q4" { 4 } else { 1 };
    let aligns = [weight_align, weight_align, weight_align, 4, 4, 4];
    let prefix = format!("slot.{quant}");
    if g.has(&format!("{prefix}.bytes")) {
        let regions = (0..6)
            .map(|i| (REGIONS[i], g.int(&format!("{prefix}.{}", REGIONS[i])), lengths[i], aligns[i]))
            .collect();
        return Layout { bytes: g.int(&format!("{prefix}.bytes")), regions, explicit: true };
    }
    let mut offset = 0;
    let mut regions = Vec::new();
    for i in 0..6 {
        regions.push((REGIONS[i], offset, lengths[i], aligns[i]));
        offset = round_up(offset + lengths[i], REGION_ALIGNMENT);
    }
    Layout { bytes: round_up(offset, SLOT_ALIGNMENT), regions, explicit: false }
}

fn round_up(n: i64, to: i64) -> i64 {
    (n + to - 1) / to * to
}

fn check_layout(quant: &str, l: &Layout, out: &mut Vec<Violation>) {
    let field = |name: &str| format!("slot.{quant}.{name}");
    for &(name, offset, len, align) in &l.regions {
        if offset + len > l.bytes {
            out.push(Violation::field(
                field(name),
                format!("{name} occupy bytes {offset}..{} but the slot has only {} bytes", offset + len, l.bytes),
                if len <= l.bytes {
                    format!("move {name} to an offset of at most {} or make the slot at least {} bytes", l.bytes - len, offset + len)
                } else {
                    format!("make the slot at least {} bytes: {name} alone take {len}", offset + len)
                },
            ));
        }
        if offset % align != 0 {
            out.push(Violation::field(
                field(name),
                format!("offset {offset} of {name} is not a multiple of {align}, which the kernel's loads need"),
                format!("use a multiple of {align}, such as {}", multiples_near(offset, align)),
            ));
        }
    }
    for (i, a) in l.regions.iter().enumerate() {
        for b in &l.regions[i + 1..] {
            let (a_end, b_end) = (a.1 + a.2, b.1 + b.2);
            if a.1 < b_end && b.1 < a_end {
                out.push(Violation::field(
                    field(b.0),
                    format!("{} (bytes {}..{b_end}) overlap {} (bytes {}..{a_end})", b.0, b.1, a.0, a.1),
                    if b.2 <= a.1 {
                        format!("regions must be disjoint: start {} at {a_end} or later, or at {} or earlier", b.0, a.1 - b.2)
                    } else {
                        format!("regions must be disjoint: start {} at {a_end} or later", b.0)
                    },
                ));
            }
        }
    }
}

static INFO: FamilyInfo = FamilyInfo {
    name: "expert",
    summary: "routed SwiGLU expert over a packed Q4/Q8 residency slot (gate_up, down)",
    axes: AXES,
    fields: FIELDS,
    has_header: false,
};

impl Family for Expert {
    fn info(&self) -> &'static FamilyInfo {
        &INFO
    }

    fn plan(&self, v: &Variant, g: &Geometry) -> Result<Vec<KernelPlan>, Vec<Violation>> {
        let quant = v.str("quant");
        let dtype = v.dtype("dtype");
        let rows = v.int("rows_per_threadgroup");
        let (hidden, intermediate) = (g.int("hidden"), g.int("intermediate"));
        let mut bad = Vec::new();

        for (name, n) in [("hidden", hidden), ("intermediate", intermediate)] {
            if quant == "q4" && n % 8 != 0 {
                bad.push(Violation::field(
                    name,
                    format!("{name} = {n} is not a multiple of 8, but a Q4 row is whole 32-bit words of 8 weights"),
                    format!("use a multiple of 8, such as {}", multiples_near(n, 8)),
                ));
            }
            if n % rows != 0 {
                bad.push(Violation::field(
                    name,
                    format!("{name} = {n} is not a multiple of rows_per_threadgroup = {rows}, so the last threadgroup would be partial"),
                    format!("use a multiple of {rows}, such as {}, or another rows_per_threadgroup", multiples_near(n, rows)),
                ));
            }
        }
        if SIMD_WIDTH * rows > 1024 {
            bad.push(Violation::axis(
                "rows_per_threadgroup",
                format!("{rows} rows per threadgroup need {} threads, above the limit of 1024", SIMD_WIDTH * rows),
                "use at most 32 rows per threadgroup",
            ));
        }
        let l = layout(quant, g, hidden, intermediate);
        check_layout(quant, &l, &mut bad);
        if !bad.is_empty() {
            return Err(bad);
        }

        let t = dtype.metal_name();
        let threads = (SIMD_WIDTH * rows) as u64;
        let offset = |name: &str| l.regions.iter().find(|r| r.0 == name).map_or(0, |r| r.1);
        let mut params = Params::new();
        params.insert("T".into(), json!(t));
        params.insert("quant".into(), json!(quant));
        params.insert("H".into(), json!(hidden));
        params.insert("I".into(), json!(intermediate));
        params.insert("ROWS".into(), json!(rows));
        // Q4 rows in uint32 words of 8 weights.
        params.insert("H_WORDS".into(), json!(hidden / 8));
        params.insert("I_WORDS".into(), json!(intermediate / 8));
        params.insert("slot_layout".into(), json!(if l.explicit { "from the spec" } else { "canonical packed, derived" }));
        for name in REGIONS {
            params.insert(name.into(), json!(offset(name)));
        }

        let slot = |reads: &[&'static str]| BufferDef {
            name: "slot".into(),
            dtype: Dtype::U8,
            shape: vec![Dim::Fixed(l.bytes as u64)].into(),
            source: Source::Data,
            regions: l
                .regions
                .iter()
                .filter(|r| reads.contains(&r.0))
                .map(|&(name, offset, bytes, align)| Region { name: name.into(), offset: offset as u64, bytes: bytes as u64, align: align as u64 })
                .collect::<Vec<_>>()
                .into(),
            align: 4,
            at_most: None,
        };
        // M, the sample count, is the only run-time size: the grid's z extent.
        let m = Dim::size(0);
        let plan = |part: &'static str, input: &'static str, in_width: i64, output: &'static str, out_width: i64, reads: &[&'static str]| {
            let mut params = params.clone();
            params.insert("part".into(), json!(part));
            KernelPlan {
                part: Some(part.to_string()),
                sizes: vec!["M".into()],
                inputs: vec![array(input, dtype, vec![m.clone(), Dim::Fixed(in_width as u64)]), slot(reads)],
                outputs: vec![array(output, dtype, vec![m.clone(), Dim::Fixed(out_width as u64)])],
                grid: [Dim::Fixed(threads), Dim::Fixed((out_width / rows) as u64), m.clone()],
                threadgroup: [threads, 1, 1],
                threadgroup_memory_bytes: 0,
                params,
            }
        };
        Ok(vec![
            plan("gate_up", "x", hidden, "mid", intermediate, &["gate_weights", "up_weights", "gate_scales", "up_scales"]),
            plan("down", "mid", intermediate, "out", hidden, &["down_weights", "down_scales"]),
        ])
    }
}
