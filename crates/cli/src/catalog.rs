//! Kernels as the CLI sees them: generated in memory from the specs (so a
//! spec edit is verified without rebuilding), converted to the runtime's
//! `KernelDef` contract so every check and backend is the runtime's own.

use kernelgen::contract::{BufferDef, Dim, Dtype, KernelDef, Region, Source};
use kernelgen_codegen::model::{BufferPlan, BufferSource, DimExpr, Dtype as GenDtype};
use kernelgen_codegen::render::RenderedKernel;

fn leak<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

fn text(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

pub fn dtype(d: GenDtype) -> Dtype {
    match d {
        GenDtype::F32 => Dtype::F32,
        GenDtype::F16 => Dtype::F16,
        GenDtype::Bf16 => Dtype::Bf16,
        GenDtype::I8 => Dtype::I8,
        GenDtype::U8 => Dtype::U8,
        GenDtype::U16 => Dtype::U16,
        GenDtype::I32 => Dtype::I32,
        GenDtype::U32 => Dtype::U32,
        GenDtype::Bool => Dtype::Bool,
    }
}

fn dim(d: &DimExpr) -> Dim {
    Dim { coeff: d.coeff, sizes: leak(d.sizes.clone()) }
}

fn buffer(b: &BufferPlan) -> BufferDef {
    BufferDef {
        name: b.name,
        dtype: dtype(b.dtype),
        shape: leak(b.shape.iter().map(dim).collect()),
        source: match b.source {
            BufferSource::Data => Source::Data,
            BufferSource::SizeValue(i) => Source::SizeValue(i),
        },
        regions: leak(b.regions.iter().map(|r| Region { name: r.name, offset: r.offset, bytes: r.bytes, align: r.align }).collect()),
        align: b.align,
        at_most: b.at_most,
    }
}

/// The runtime contract of a kernel rendered in this process. Leaks a few
/// kilobytes per kernel: a command runs once.
pub fn def(r: &RenderedKernel) -> &'static KernelDef {
    let p = &r.kernel.plan;
    Box::leak(Box::new(KernelDef {
        name: text(&r.kernel.name),
        family: r.kernel.family.name(),
        spec: text(&r.kernel.source.origin),
        mlx_name: text(&r.mlx_name),
        header: text(&r.header),
        body: text(&r.body),
        metal: text(&r.metal),
        metal_path: text(&format!("generated/{}", r.metal_path)),
        inputs: leak(p.inputs.iter().map(buffer).collect()),
        outputs: leak(p.outputs.iter().map(buffer).collect()),
        sizes: leak(p.sizes.clone()),
        grid: [dim(&p.grid[0]), dim(&p.grid[1]), dim(&p.grid[2])],
        threadgroup: [p.threadgroup[0] as u32, p.threadgroup[1] as u32, p.threadgroup[2] as u32],
        threadgroup_memory_bytes: p.threadgroup_memory_bytes as u32,
    }))
}


#[cfg(test)]
mod tests {
    /// What the CLI derives in memory equals what the runtime crate compiled
    /// in from generated/, field for field.
    #[test]
    fn in_memory_contracts_equal_the_compiled_catalog() {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let sources = kernelgen_codegen::read_specs(&[root.join("specs")]).unwrap();
        let generated = kernelgen_codegen::generate(sources).unwrap();
        assert_eq!(generated.kernels.len(), kernelgen::kernels::CATALOG.len());
        for (r, compiled) in generated.kernels.iter().zip(kernelgen::kernels::CATALOG) {
            assert_eq!(format!("{:?}", super::def(r)), format!("{compiled:?}"), "{}", r.kernel.name);
        }
    }
}
