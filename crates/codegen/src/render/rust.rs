//! The Rust side of generated kernels: one module per spec holding a
//! `KernelDef` per kernel (the launch contract every backend reads), and
//! the `mod.rs` that gathers them. The text is formatted here, so it does
//! not depend on an installed rustfmt.

use super::{RenderError, RenderedKernel, Renderer};
use crate::model::{BufferPlan, BufferSource, DimExpr};
use serde::Serialize;
use tera::Context;

/// A Rust string literal holding `text` verbatim (raw, with enough `#`s).
pub fn raw_string(text: &str) -> String {
    let mut hashes = 1;
    while text.contains(&format!("\"{}", "#".repeat(hashes))) {
        hashes += 1;
    }
    let h = "#".repeat(hashes);
    format!("r{h}\"{text}\"{h}")
}

fn dim(d: &DimExpr) -> String {
    if d.sizes.is_empty() {
        format!("Dim::fixed({})", d.coeff)
    } else {
        let sizes: Vec<String> = d.sizes.iter().map(usize::to_string).collect();
        format!("Dim {{ coeff: {}, sizes: &[{}] }}", d.coeff, sizes.join(", "))
    }
}

fn buffer(b: &BufferPlan) -> String {
    let shape: Vec<String> = b.shape.iter().map(dim).collect();
    let source = match b.source {
        BufferSource::Data => "Source::Data".to_string(),
        BufferSource::SizeValue(i) => format!("Source::SizeValue({i})"),
    };
    let regions = if b.regions.is_empty() {
        "&[]".to_string()
    } else {
        let items: Vec<String> = b
            .regions
            .iter()
            .map(|r| format!("            Region {{ name: \"{}\", offset: {}, bytes: {}, align: {} }},\n", r.name, r.offset, r.bytes, r.align))
            .collect();
        format!("&[\n{}        ]", items.concat())
    };
    format!(
        "BufferDef {{\n        name: \"{}\",\n        dtype: Dtype::{},\n        shape: &[{}],\n        source: {source},\n        regions: {regions},\n        align: {},\n        at_most: {},\n    }}",
        b.name,
        b.dtype.rust_variant(),
        shape.join(", "),
        b.align,
        b.at_most.map_or("None".to_string(), |i| format!("Some({i})"))
    )
}

fn buffers(list: &[BufferPlan]) -> String {
    if list.is_empty() {
        return "&[]".into();
    }
    let items: Vec<String> = list.iter().map(|b| format!("    {},\n", buffer(b))).collect();
    format!("&[\n{}]", items.concat())
}

#[derive(Serialize)]
struct KernelView {
    static_name: String,
    name: String,
    family: String,
    spec: String,
    doc: String,
    mlx_name: String,
    header: String,
    body: String,
    metal: String,
    metal_path: String,
    inputs: String,
    outputs: String,
    sizes: String,
    grid: String,
    threadgroup: String,
    threadgroup_memory_bytes: u64,
}

/// `glm52_expert_q4` -> `Glm52ExpertQ4`.
pub fn camel(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// `bf16 [M, 6144]`
fn describe(b: &BufferPlan, sizes: &[&str]) -> String {
    format!("{} [{}]", b.dtype.short_name(), b.shape.iter().map(|d| d.describe(sizes)).collect::<Vec<_>>().join(", "))
}

#[derive(Serialize)]
struct Arg {
    name: String,
    doc: String,
}

#[derive(Serialize)]
struct MethodView {
    name: String,
    kernel: String,
    static_name: String,
    doc: String,
    args: Vec<Arg>,
    outputs: Vec<Arg>,
    /// Named-output struct, for kernels with more than one output.
    outputs_struct: Option<String>,
}

#[derive(Serialize)]
struct LauncherView {
    type_name: String,
    doc: String,
    methods: Vec<MethodView>,
}

/// Typed launchers: one type per variant and geometry, one method per part
/// (`launch` for single-kernel families), arguments named as in the contract.
fn launchers(kernels: &[&RenderedKernel]) -> Vec<LauncherView> {
    let mut out: Vec<LauncherView> = Vec::new();
    for rk in kernels {
        let k = &rk.kernel;
        let p = &k.plan;
        let base = match p.part {
            Some(part) => k.name.strip_suffix(&format!("_{part}")).unwrap_or(&k.name).to_string(),
            None => k.name.clone(),
        };
        let type_name = camel(&base);
        let sizes = &p.sizes;
        let args: Vec<Arg> = p
            .inputs
            .iter()
            .filter(|b| b.source == BufferSource::Data)
            .map(|b| Arg { name: b.name.to_string(), doc: describe(b, sizes) })
            .collect();
        let outputs: Vec<Arg> = p.outputs.iter().map(|b| Arg { name: b.name.to_string(), doc: describe(b, sizes) }).collect();
        let filled: Vec<String> = p
            .inputs
            .iter()
            .filter_map(|b| match b.source {
                BufferSource::SizeValue(i) => Some(format!("`{}` (holds {})", b.name, sizes[i])),
                BufferSource::Data => None,
            })
            .collect();
        let mut doc = format!(
            "`{}`: {} -> {}",
            k.name,
            args.iter().map(|a| format!("{} {}", a.name, a.doc)).collect::<Vec<_>>().join(", "),
            outputs.iter().map(|a| format!("{} {}", a.name, a.doc)).collect::<Vec<_>>().join(", ")
        );
        if !filled.is_empty() {
            doc.push_str(&format!("; the launcher fills {}", filled.join(", ")));
        }
        let method = MethodView {
            name: p.part.unwrap_or("launch").to_string(),
            kernel: k.name.clone(),
            static_name: k.name.to_uppercase(),
            doc,
            outputs_struct: (outputs.len() > 1).then(|| format!("{}Outputs", camel(&k.name))),
            args,
            outputs,
        };
        match out.iter_mut().find(|l| l.type_name == type_name) {
            Some(l) => l.methods.push(method),
            None => {
                let mut doc: Vec<String> = k.variant.values.iter().map(|(a, v)| format!("{a} {v}")).collect();
                doc.insert(0, format!("geometry {}", k.geometry));
                out.push(LauncherView { type_name, doc: format!("{} kernels for {}", k.family.name(), doc.join(", ")), methods: vec![method] });
            }
        }
    }
    out
}

/// The Rust module for one spec's kernels.
pub fn spec_module(r: &Renderer, origin: &str, kernels: &[&RenderedKernel]) -> Result<String, RenderError> {
    let views: Vec<KernelView> = kernels
        .iter()
        .map(|rk| {
            let k = &rk.kernel;
            let p = &k.plan;
            let mut axes: Vec<String> = k.variant.values.iter().map(|(a, v)| format!("{a} {v}")).collect();
            axes.push(format!("geometry {}", k.geometry));
            if let Some(part) = p.part {
                axes.push(format!("part {part}"));
            }
            KernelView {
                static_name: k.name.to_uppercase(),
                name: k.name.clone(),
                family: k.family.name().into(),
                spec: super::escape::rust_str(&k.source.origin),
                doc: axes.join(", "),
                mlx_name: rk.mlx_name.clone(),
                header: raw_string(&rk.header),
                body: raw_string(&rk.body),
                metal: raw_string(&rk.metal),
                metal_path: super::escape::rust_str(&format!("generated/{}", rk.metal_path)),
                inputs: buffers(&p.inputs),
                outputs: buffers(&p.outputs),
                sizes: p.sizes.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "),
                grid: p.grid.iter().map(dim).collect::<Vec<_>>().join(", "),
                threadgroup: p.threadgroup.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
                threadgroup_memory_bytes: p.threadgroup_memory_bytes,
            }
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("origin", &super::escape::comment(origin));
    ctx.insert("kernels", &views);
    ctx.insert("launchers", &launchers(kernels));
    r.render_template("launchers.rs.tera", &ctx)
}

/// `generated/rust/mod.rs`: one module per spec and the catalog of every kernel.
pub fn catalog_module(modules: &[(String, Vec<String>)]) -> String {
    let mut s = String::from(
        "// Generated by kernelgen from every spec under specs/. Do not edit: run `make generate`.\n\n\
         //! Every generated kernel, one module per spec.\n\n",
    );
    for (module, _) in modules {
        s.push_str(&format!("pub mod {module};\n"));
    }
    s.push_str("\n/// Every generated kernel, in spec and expansion order.\npub static CATALOG: &[&::kernelgen::KernelDef] = &[\n");
    for (module, statics) in modules {
        for name in statics {
            s.push_str(&format!("    &{module}::{name},\n"));
        }
    }
    s.push_str("];\n");
    s
}
