//! `generated/manifest.json`: every kernel with its origin, content hash,
//! buffers and launch geometry, for tools and reviewers.

use super::RenderedKernel;
use crate::model::{BufferPlan, BufferSource};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
struct Manifest<'a> {
    generator: &'static str,
    kernels: Vec<Entry<'a>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    family: &'static str,
    spec: &'a str,
    geometry: &'a str,
    variant: BTreeMap<&'static str, String>,
    part: Option<&'static str>,
    metal: String,
    mlx_name: &'a str,
    sha256: &'a str,
    sizes: &'a [&'static str],
    inputs: Vec<Buffer>,
    outputs: Vec<Buffer>,
    grid: Vec<String>,
    threadgroup: [u64; 3],
    threads_per_threadgroup: u64,
    threadgroup_memory_bytes: u64,
}

#[derive(Serialize)]
struct Buffer {
    name: &'static str,
    dtype: &'static str,
    shape: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holds_size: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    regions: Vec<Region>,
    #[serde(skip_serializing_if = "Option::is_none")]
    values_at_most: Option<&'static str>,
}

#[derive(Serialize)]
struct Region {
    name: &'static str,
    offset: u64,
    bytes: u64,
}

fn buffer(b: &BufferPlan, sizes: &[&'static str]) -> Buffer {
    Buffer {
        name: b.name,
        dtype: b.dtype.short_name(),
        shape: b.shape.iter().map(|d| d.describe(sizes)).collect(),
        holds_size: match b.source {
            BufferSource::SizeValue(i) => Some(sizes[i]),
            BufferSource::Data => None,
        },
        regions: b.regions.iter().map(|r| Region { name: r.name, offset: r.offset, bytes: r.bytes }).collect(),
        values_at_most: b.at_most.map(|i| sizes[i]),
    }
}

pub fn manifest(kernels: &[RenderedKernel]) -> String {
    let m = Manifest {
        generator: "kernelgen",
        kernels: kernels
            .iter()
            .map(|rk| {
                let k = &rk.kernel;
                let p = &k.plan;
                Entry {
                    name: &k.name,
                    family: k.family.name(),
                    spec: &k.source.origin,
                    geometry: &k.geometry,
                    variant: k.variant.values.iter().map(|(a, v)| (*a, v.to_string())).collect(),
                    part: p.part,
                    metal: format!("generated/{}", rk.metal_path),
                    mlx_name: &rk.mlx_name,
                    sha256: &rk.sha256,
                    sizes: &p.sizes,
                    inputs: p.inputs.iter().map(|b| buffer(b, &p.sizes)).collect(),
                    outputs: p.outputs.iter().map(|b| buffer(b, &p.sizes)).collect(),
                    grid: p.grid.iter().map(|d| d.describe(&p.sizes)).collect(),
                    threadgroup: p.threadgroup,
                    threads_per_threadgroup: p.threadgroup.iter().product(),
                    threadgroup_memory_bytes: p.threadgroup_memory_bytes,
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&m).expect("manifest is plain data");
    text.push('\n');
    text
}
