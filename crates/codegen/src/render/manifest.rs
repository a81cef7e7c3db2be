//! `generated/manifest.json`: every kernel with its origin, content hash (and its CUDA
//! body's file, function name and hash, where it has one), buffers and launch geometry, for
//! tools and reviewers.

use super::RenderedKernel;
use kernelgen_contract::limits::PORTABLE_THREADS_PER_THREADGROUP;
use kernelgen_contract::{BufferDef, Source};
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
    family: &'a str,
    spec: &'a str,
    geometry: &'a str,
    variant: BTreeMap<&'a str, String>,
    part: Option<&'a str>,
    metal: &'a str,
    mlx_name: &'a str,
    sha256: &'a str,
    /// The CUDA body, where the family has one (left out for a Metal-only kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    cuda: Option<CudaJson<'a>>,
    sizes: Vec<&'a str>,
    inputs: Vec<Buffer<'a>>,
    outputs: Vec<Buffer<'a>>,
    grid: Vec<String>,
    threadgroup: [u32; 3],
    threads_per_threadgroup: u32,
    /// Set when the threads per threadgroup exceed the portable limit: the
    /// launch can fail where a pipeline allows fewer than 1024.
    #[serde(skip_serializing_if = "Option::is_none")]
    above_portable_threads: Option<u64>,
    threadgroup_memory_bytes: u32,
    cost: CostJson,
}

#[derive(Serialize)]
struct CudaJson<'a> {
    path: &'a str,
    mlx_name: &'a str,
    sha256: &'a str,
    /// Threads in a block: the Metal threadgroup unless the family gives the CUDA body its own.
    threadgroup: [u32; 3],
}

#[derive(Serialize)]
struct CostJson {
    bytes_read: String,
    bytes_written: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    flops: Option<String>,
}

#[derive(Serialize)]
struct Buffer<'a> {
    name: &'a str,
    dtype: &'static str,
    shape: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holds_size: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    from_host: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    regions: Vec<Region<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    values_at_most: Option<&'a str>,
}

#[derive(Serialize)]
struct Region<'a> {
    name: &'a str,
    offset: u64,
    bytes: u64,
}

fn buffer<'a>(b: &'a BufferDef, sizes: &[&'a str]) -> Buffer<'a> {
    Buffer {
        name: &b.name,
        dtype: b.dtype.short_name(),
        shape: b.shape.iter().map(|d| d.describe(sizes)).collect(),
        holds_size: match b.source {
            Source::SizeValue(i) => Some(sizes[i]),
            _ => None,
        },
        from_host: b.source == Source::HostInts,
        regions: b.regions.iter().map(|r| Region { name: &r.name, offset: r.offset, bytes: r.bytes }).collect(),
        values_at_most: b.at_most.map(|i| sizes[i]),
    }
}

/// The text of `manifest.json` for these kernels.
pub fn manifest(kernels: &[RenderedKernel]) -> String {
    let m = Manifest {
        generator: "kernelgen",
        kernels: kernels
            .iter()
            .map(|rk| {
                let k = &rk.kernel;
                let d = &rk.def;
                let sizes = d.size_names();
                Entry {
                    name: &k.name,
                    family: &k.family.name,
                    spec: &k.source.origin,
                    geometry: &k.geometry,
                    variant: k.variant.values.iter().map(|(a, v)| (a.as_str(), v.to_string())).collect(),
                    part: k.plan.part.as_deref(),
                    metal: &d.metal_path,
                    mlx_name: &d.mlx_name,
                    sha256: &rk.sha256,
                    cuda: d.cuda.as_ref().zip(rk.cuda.as_ref()).map(|(c, f)| CudaJson { path: &c.path, mlx_name: &c.mlx_name, sha256: &f.sha256, threadgroup: c.threadgroup }),
                    inputs: d.inputs.iter().map(|b| buffer(b, &sizes)).collect(),
                    outputs: d.outputs.iter().map(|b| buffer(b, &sizes)).collect(),
                    grid: d.grid.iter().map(|g| g.describe(&sizes)).collect(),
                    threadgroup: d.threadgroup,
                    threads_per_threadgroup: d.threads_per_threadgroup(),
                    above_portable_threads: (u64::from(d.threads_per_threadgroup()) > PORTABLE_THREADS_PER_THREADGROUP)
                        .then_some(PORTABLE_THREADS_PER_THREADGROUP),
                    threadgroup_memory_bytes: d.threadgroup_memory_bytes,
                    cost: CostJson {
                        bytes_read: d.cost.bytes_read.describe(&sizes),
                        bytes_written: d.cost.bytes_written.describe(&sizes),
                        flops: d.cost.flops.as_ref().map(|f| f.describe(&sizes)),
                    },
                    sizes,
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&m).expect("manifest is plain data");
    text.push('\n');
    text
}
