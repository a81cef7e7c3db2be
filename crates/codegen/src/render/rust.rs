//! The Rust side of generated kernels: one module per spec holding each
//! kernel's `KernelDef` (the launch contract, written as a Rust literal of the
//! same value the generator built) and the typed launchers, and the `mod.rs`
//! that gathers them. The text is formatted here, so it does not depend on an
//! installed rustfmt.

use crate::family::FamilyDef;
use crate::{names, Layout};
use super::{RenderError, RenderedKernel, Renderer};
use kernelgen_contract::{BufferDef, Dim, Format, KernelDef, Op, PackedLayout, Region, Source};
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

/// A Rust string literal for any text: Rust's own escaping, so no name or
/// path can end the literal or start code.
pub fn str_literal(text: &str) -> String {
    format!("{text:?}")
}

/// `Cow::Borrowed("...")`.
fn text(s: &str) -> String {
    format!("Cow::Borrowed({})", str_literal(s))
}

fn op(o: &Op) -> String {
    match o {
        Op::Const(c) => format!("Op::Const({c})"),
        Op::Size(i) => format!("Op::Size({i})"),
        other => format!("Op::{other:?}"),
    }
}

fn dim(d: &Dim) -> String {
    match d {
        Dim::Fixed(n) => format!("Dim::Fixed({n})"),
        Dim::Expr(ops) => format!("Dim::expr(&[{}])", ops.iter().map(op).collect::<Vec<_>>().join(", ")),
    }
}

fn source(s: Source) -> String {
    match s {
        Source::Data => "Source::Data".into(),
        Source::SizeValue(i) => format!("Source::SizeValue({i})"),
        Source::HostInts => "Source::HostInts".into(),
        other => unreachable!("kernelgen-contract grew a Source the generator does not write: {other:?}"),
    }
}

fn format_variant(f: Format) -> &'static str {
    match f {
        Format::Bytes => "Bytes",
        Format::Q4 => "Q4",
        Format::I8 => "I8",
        Format::I32 => "I32",
        Format::U32 => "U32",
        Format::F16 => "F16",
        Format::Bf16 => "Bf16",
        Format::F32 => "F32",
        other => unreachable!("kernelgen-contract grew a Format the generator does not write: {other:?}"),
    }
}

/// Region literals, one a line, indented by `indent` spaces.
fn regions(list: &[Region], indent: usize) -> String {
    if list.is_empty() {
        return "Cow::Borrowed(&[])".to_string();
    }
    let pad = " ".repeat(indent);
    let items: Vec<String> = list
        .iter()
        .map(|r| {
            let shape = r.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
            format!(
                "{pad}    Region {{ name: {}, offset: {}, bytes: {}, align: {}, format: Format::{}, shape: Cow::Borrowed(&[{shape}]) }},\n",
                text(&r.name),
                r.offset,
                r.bytes,
                r.align,
                format_variant(r.format)
            )
        })
        .collect();
    format!("Cow::Borrowed(&[\n{}{pad}])", items.concat())
}

fn buffer(b: &BufferDef) -> String {
    let regions = regions(&b.regions, 12);
    format!(
        "        BufferDef {{\n            name: {},\n            dtype: Dtype::{},\n            shape: Cow::Borrowed(&[{}]),\n            source: {},\n            regions: {regions},\n            align: {},\n            at_most: {},\n        }},\n",
        text(&b.name),
        b.dtype.variant_name(),
        b.shape.iter().map(dim).collect::<Vec<_>>().join(", "),
        source(b.source),
        b.align,
        b.at_most.map_or("None".to_string(), |i| format!("Some({i})"))
    )
}

fn buffers(list: &[BufferDef]) -> String {
    if list.is_empty() {
        return "Cow::Borrowed(&[])".into();
    }
    format!("Cow::Borrowed(&[\n{}    ])", list.iter().map(buffer).collect::<String>())
}

/// The `KernelDef` literal of one kernel (everything after `= `).
/// The kernel's sources are `include_str!("../<metal path>")` (and its `.cu`'s), relative to
/// the Rust module beside the `.metal` and `.cu` files (the one copy of each source), or
/// inline where no file is beside the module (a proc-macro's expansion).
fn def_literal(d: &KernelDef, metal_path: &str, cuda_path: Option<&str>, layout: Layout) -> String {
    let source = |path: &str, text: &str| match layout {
        Layout::Tree | Layout::OutDir => format!("Cow::Borrowed(include_str!({}))", str_literal(&format!("../{path}"))),
        Layout::Inline => format!("Cow::Borrowed({})", raw_string(text)),
    };
    let metal = source(metal_path, &d.metal);
    let range = |r: kernelgen_contract::TextRange| format!("TextRange {{ start: {}, end: {} }}", r.start, r.end);
    let cuda = match (&d.cuda, cuda_path) {
        (Some(c), Some(path)) => format!(
            "Some(CudaSource {{\n        mlx_name: {},\n        source: {},\n        header: {},\n        body: {},\n        path: {},\n        threadgroup: [{}],\n        shared_memory_bytes: {},\n        static_shared_memory_bytes: {},\n    }})",
            text(&c.mlx_name),
            source(path, &c.source),
            range(c.header),
            range(c.body),
            text(&c.path),
            c.threadgroup.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            c.shared_memory_bytes,
            c.static_shared_memory_bytes
        ),
        _ => "None".into(),
    };
    format!(
        "KernelDef {{\n    name: {},\n    family: {},\n    spec: {},\n    mlx_name: {},\n    metal: {metal},\n    header: {},\n    body: {},\n    metal_path: {},\n    inputs: {},\n    outputs: {},\n    sizes: Cow::Borrowed(&[{}]),\n    grid: [{}],\n    threadgroup: [{}],\n    threadgroup_memory_bytes: {},\n    cost: Cost {{ bytes_read: {}, bytes_written: {}, flops: {} }},\n    cuda: {cuda},\n}}",
        text(&d.name),
        text(&d.family),
        text(&d.spec),
        text(&d.mlx_name),
        range(d.header),
        range(d.body),
        text(&d.metal_path),
        buffers(&d.inputs),
        buffers(&d.outputs),
        d.sizes.iter().map(|s| text(s)).collect::<Vec<_>>().join(", "),
        d.grid.iter().map(dim).collect::<Vec<_>>().join(", "),
        d.threadgroup.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        d.threadgroup_memory_bytes,
        dim(&d.cost.bytes_read),
        dim(&d.cost.bytes_written),
        d.cost.flops.as_ref().map_or("None".to_string(), |f| format!("Some({})", dim(f))),
    )
}


/// `` `bf16 [M, 6144]` `` (in code quotes: rustdoc would read `[M]` as a link).
fn describe(b: &BufferDef, sizes: &[&str]) -> String {
    format!("`{} {}`", b.dtype.short_name(), b.shape_text(sizes))
}

#[derive(Serialize)]
struct KernelView {
    static_name: String,
    doc: String,
    def: String,
}

#[derive(Serialize)]
struct Arg {
    name: String,
    /// The Rust type of the argument (`&B::Array`, `&[i32]`).
    ty: String,
    /// Its dtype and shape.
    doc: String,
    /// What it holds, from the family file (free text; may be empty).
    what: String,
}

#[derive(Serialize)]
struct MethodView {
    name: String,
    static_name: String,
    /// The kernel's name and what it computes (free text).
    doc: String,
    /// The buffers the launcher fills itself (`` `Tin` (holds T) ``), or nothing.
    filled: String,
    args: Vec<Arg>,
    arrays: Vec<String>,
    host: Vec<String>,
    outputs: Vec<Arg>,
    /// Named-output struct, for kernels with more than one output.
    outputs_struct: Option<String>,
}

#[derive(Serialize)]
struct RegionArg {
    name: String,
    ty: String,
    variant: String,
    doc: String,
}

/// A packed buffer's layout static and its typed packer.
#[derive(Serialize)]
struct LayoutView {
    /// `GLM52_EXPERT_Q4_BF16_R4_SLOT`
    static_name: String,
    /// `SLOT`
    const_name: String,
    /// `pack_slot`
    fn_name: String,
    buffer: String,
    /// What the buffer holds, from the family file (free text; may be empty).
    what: String,
    def: String,
    doc: String,
    args: Vec<RegionArg>,
}

#[derive(Serialize)]
struct LauncherView {
    type_name: String,
    doc: String,
    methods: Vec<MethodView>,
    layouts: Vec<LayoutView>,
}

/// The Rust slice type a region's values take (in the `RegionData` variant named as its
/// `Format` is).
fn region_slice(f: Format) -> &'static str {
    match f {
        Format::Q4 | Format::I8 => "&[i8]",
        Format::I32 => "&[i32]",
        Format::U32 => "&[u32]",
        Format::F16 => "&[::kernelgen::half::f16]",
        Format::Bf16 => "&[::kernelgen::half::bf16]",
        Format::F32 => "&[f32]",
        Format::Bytes => "&[u8]",
        other => unreachable!("kernelgen-contract grew a Format the generator does not write: {other:?}"),
    }
}

fn layout_view(launcher: &str, l: &PackedLayout, family: &FamilyDef) -> LayoutView {
    let packed = family.packed.iter().find(|p| *p.name == *l.name);
    let static_name = names::layout_static(launcher, &l.name);
    let args = l
        .regions
        .iter()
        .map(|r| {
            let (ty, variant) = (region_slice(r.format), format_variant(r.format));
            let shape = if r.shape.is_empty() { format!("{} bytes", r.bytes) } else { format!("`{} [{}]`", r.format.name(), r.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) };
            let what = packed.and_then(|p| p.regions.iter().find(|x| *x.name == *r.name)).map(|x| x.doc.clone()).unwrap_or_default();
            RegionArg {
                name: r.name.to_string(),
                ty: ty.into(),
                variant: variant.into(),
                doc: format!("{shape}{}{what}, at bytes {}..{}", if what.is_empty() { "" } else { ": " }, r.offset, r.offset + r.bytes),
            }
        })
        .collect();
    LayoutView {
        def: format!(
            "PackedLayout {{\n    name: {},\n    bytes: {},\n    align: {},\n    regions: {},\n}}",
            text(&l.name),
            l.bytes,
            l.align,
            regions(&l.regions, 4)
        ),
        doc: format!("`{}`: {} bytes, {} regions", l.name, l.bytes, l.regions.len()),
        const_name: names::layout_const(&l.name),
        fn_name: names::pack_fn(&l.name),
        buffer: l.name.to_string(),
        what: packed.map(|p| p.doc.clone()).unwrap_or_default(),
        static_name,
        args,
    }
}

/// Typed launchers: one type per variant and geometry, one method per part
/// (`launch` for single-kernel families), arguments named as in the contract.
fn launchers(kernels: &[&RenderedKernel]) -> Vec<LauncherView> {
    let mut out: Vec<LauncherView> = Vec::new();
    for rk in kernels {
        let k = &rk.kernel;
        let d = &rk.def;
        let type_name = names::launcher_type(&k.launcher);
        let sizes = d.size_names();
        // what the family file says of the kernel and its buffers
        let part = k.family.parts.iter().find(|p| p.part == k.plan.part);
        let what = |name: &str| -> String {
            let buffer = part.and_then(|p| p.inputs.iter().chain(&p.outputs).find(|b| b.name == name));
            buffer.map_or_else(String::new, |b| b.doc.trim_end_matches('.').to_string())
        };
        let args: Vec<Arg> = d
            .inputs
            .iter()
            .filter(|b| matches!(b.source, Source::Data | Source::HostInts))
            .map(|b| Arg {
                name: b.name.to_string(),
                // Host integers are int32 (the expansion checks it).
                ty: if b.source == Source::HostInts { "&[i32]".into() } else { "&B::Array".into() },
                doc: describe(b, &sizes),
                what: what(&b.name),
            })
            .collect();
        let outputs: Vec<Arg> = d.outputs.iter().map(|b| Arg { name: b.name.to_string(), ty: String::new(), doc: describe(b, &sizes), what: what(&b.name) }).collect();
        let filled: Vec<String> = d
            .inputs
            .iter()
            .filter_map(|b| match b.source {
                Source::SizeValue(i) => Some(format!("`{}` (holds {})", b.name, sizes[i])),
                _ => None,
            })
            .collect();
        let kernel_doc = part.map_or("", |p| p.doc.trim_end_matches('.'));
        let method = MethodView {
            name: names::method(k.plan.part.as_deref()),
            static_name: names::kernel_static(&k.name),
            doc: if kernel_doc.is_empty() { format!("`{}`", k.name) } else { format!("`{}`: {kernel_doc}", k.name) },
            filled: filled.join(", "),
            outputs_struct: (outputs.len() > 1).then(|| names::outputs_struct(&k.name)),
            arrays: d.data_inputs().map(|b| b.name.to_string()).collect(),
            host: d.host_inputs().map(|b| b.name.to_string()).collect(),
            args,
            outputs,
        };
        match out.iter_mut().find(|l| l.type_name == type_name) {
            Some(l) => l.methods.push(method),
            None => {
                let mut doc: Vec<String> = k.variant.values.iter().map(|(a, v)| format!("{a} {v}")).collect();
                doc.insert(0, format!("geometry {}", k.geometry));
                let layouts = k.plan.packed.iter().map(|l| layout_view(&k.launcher, l, &k.family)).collect();
                out.push(LauncherView { type_name, doc: format!("{} kernels for {}", k.family.name, doc.join(", ")), methods: vec![method], layouts });
            }
        }
    }
    out
}

/// The `use` lines of one group of [`names::IMPORTS`].
fn use_lines(group: &[(&str, &[&str])]) -> String {
    let line = |(path, names): &(&str, &[&str])| match names {
        [one] => format!("#[allow(unused_imports)]\nuse {path}::{one};"),
        _ => format!("#[allow(unused_imports)]\nuse {path}::{{{}}};", names.join(", ")),
    };
    group.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// The Rust module for one spec's kernels.
pub fn spec_module(r: &Renderer, origin: &str, kernels: &[&RenderedKernel], layout: Layout) -> Result<String, RenderError> {
    let views: Vec<KernelView> = kernels
        .iter()
        .map(|rk| {
            let k = &rk.kernel;
            let mut axes: Vec<String> = k.variant.values.iter().map(|(a, v)| format!("{a} {v}")).collect();
            axes.push(format!("geometry {}", k.geometry));
            if let Some(part) = &k.plan.part {
                axes.push(format!("part {part}"));
            }
            KernelView { static_name: names::kernel_static(&k.name), doc: axes.join(", "), def: def_literal(&rk.def, &rk.metal_path, rk.cuda.as_ref().map(|c| c.path.as_str()), layout) }
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("imports", &names::IMPORTS.map(use_lines));
    // `include!`d text takes no inner attributes (nor inner doc comments).
    ctx.insert("module_doc", if layout == Layout::OutDir { "//" } else { "//!" });
    ctx.insert("origin", &super::escape::comment(origin));
    ctx.insert("kernels", &views);
    ctx.insert("launchers", &launchers(kernels));
    r.render_template("launchers.rs.tera", &ctx)
}

/// The catalog: one module per spec and every kernel, at the path it has in the layout
/// (`rust/mod.rs` in a checked-in tree, `kernels.rs` in `OUT_DIR`).
pub fn catalog_module(modules: &[(String, Vec<String>)], layout: Layout) -> (&'static str, String) {
    let (path, mut s) = match layout {
        Layout::OutDir => (
            "kernels.rs",
            String::from("// Generated by kernelgen-build. Do not edit: change the specs or family files.\n\n// Every generated kernel, one module per spec.\n\n"),
        ),
        Layout::Tree | Layout::Inline => (
            "rust/mod.rs",
            String::from("// Generated by kernelgen from every spec under specs/. Do not edit: run `make generate`.\n\n//! Every generated kernel, one module per spec.\n\n"),
        ),
    };
    for (module, _) in modules {
        match layout {
            // Relative to this file, wherever the tree is written.
            Layout::OutDir => s.push_str(&format!("pub mod {module} {{\n    include!(\"rust/{module}.rs\");\n}}\n")),
            Layout::Tree | Layout::Inline => s.push_str(&format!("pub mod {module};\n")),
        }
    }
    s.push_str("\n/// Every generated kernel, in spec and expansion order.\npub static CATALOG: &[&::kernelgen::KernelDef] = &[\n");
    for (module, statics) in modules {
        for name in statics {
            s.push_str(&format!("    &{module}::{name},\n"));
        }
    }
    s.push_str("];\n");
    (path, s)
}
