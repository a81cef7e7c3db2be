//! Stage 4: render text. A pure function of the expanded kernels: each
//! family's tera template gives the body (and header), MLX's assembly gives
//! the full `.metal`, and the launcher source and the manifest describe them.

pub mod escape;
pub mod manifest;
pub mod mlx;
pub mod rust;
pub mod sandbox;

use crate::diag::Diagnostic;
use crate::expand::Kernel;
use crate::family::{FamilyDef, TemplateView};
use std::sync::Arc;
use kernelgen_contract::{CudaSource, KernelDef, TextRange};
use sha2::{Digest, Sha256};
use std::fmt;
use tera::{Context, Tera};

/// The launcher module's template; the families' own come from
/// `families::TEMPLATES`. All are compiled in, so the generator never depends
/// on the working directory.
const LAUNCHERS: (&str, &str) = ("launchers.rs.tera", include_str!("launchers.rs.tera"));

/// A kernel with its text and its contract.
#[derive(Clone)]
pub struct RenderedKernel {
    /// The kernel.
    pub kernel: Kernel,
    /// The launch contract every backend reads. Its `metal` is the checked-in
    /// `.metal`: a first line naming its origin, a stand-in for MLX's
    /// preamble, then exactly what MLX assembles (header, signature, body).
    pub def: KernelDef,
    /// Path of the `.metal` under the output directory.
    pub metal_path: String,
    /// SHA-256 of the `.metal` text, hex.
    pub sha256: String,
    /// The `.cu` where the family has a CUDA template (its text is `def.cuda`'s source).
    pub cuda: Option<CudaFile>,
}

/// A kernel's generated `.cu` file.
#[derive(Clone, Debug)]
pub struct CudaFile {
    /// Its path under the output directory (`cuda/<spec>/<kernel>.cu`).
    pub path: String,
    /// SHA-256 of its text, hex.
    pub sha256: String,
}

impl RenderedKernel {
    /// The `.metal` text.
    pub fn metal(&self) -> &str {
        &self.def.metal
    }

    /// The `.cu` path and text, where the kernel has a CUDA body.
    pub fn cuda_file(&self) -> Option<(&str, &str)> {
        Some((&self.cuda.as_ref()?.path, &self.def.cuda.as_ref()?.source))
    }
}

#[derive(Debug)]
/// A template that failed to render (a bug of the family's template, not of a spec).
pub struct RenderError {
    /// The kernel being rendered (empty for a template rendered on its own).
    pub kernel: String,
    /// The template's name.
    pub template: String,
    /// Tera's error, with its causes.
    pub message: String,
    /// The problem at its line and column in the template, where that can be said.
    pub location: Option<Box<Diagnostic>>,
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.location {
            f.write_str(d.render().trim_end())
        } else if self.kernel.is_empty() {
            write!(f, "template {} does not parse: {}", self.template, self.message)
        } else {
            write!(f, "rendering kernel `{}` with {} failed: {}", self.kernel, self.template, self.message)
        }
    }
}

impl std::error::Error for RenderError {}

/// The template engine with the launcher template and every family's loaded.
pub struct Renderer {
    tera: Tera,
}

/// The name a family's template is registered under (family names are unique).
fn template_key(family: &FamilyDef) -> String {
    format!("family/{}", family.name)
}

/// The name a family's CUDA template is registered under (a family name has no `.`).
fn cuda_template_key(family: &FamilyDef) -> String {
    format!("family/{}.cuda", family.name)
}

impl Renderer {
    /// A renderer for kernels of these families.
    pub fn new<'a>(families: impl IntoIterator<Item = &'a Arc<FamilyDef>>) -> Result<Self, RenderError> {
        let mut tera = sandbox::engine();
        // (for the launcher template only: a family template naming it is refused as unknown)
        tera.register_filter("doc", |value: &tera::Value, args: &std::collections::HashMap<String, tera::Value>| {
            let then = args.get("then").and_then(tera::Value::as_str).unwrap_or("/// ");
            Ok(tera::Value::String(escape::doc(value.as_str().unwrap_or_default(), then)))
        });
        // (parsed once a process: every generation renders it)
        static PARSED: std::sync::LazyLock<Result<tera::Template, String>> =
            std::sync::LazyLock::new(|| tera::Template::new(LAUNCHERS.0, None, LAUNCHERS.1).map_err(|e| error_chain(&e)));
        let parsed = PARSED.clone().map_err(|message| RenderError::new("", LAUNCHERS.0, message))?;
        tera.templates.insert(LAUNCHERS.0.into(), parsed);
        tera.build_inheritance_chains().map_err(|e| RenderError::new("", LAUNCHERS.0, error_chain(&e)))?;
        for f in families {
            // (reading the family file parsed and checked the template)
            sandbox::add(&mut tera, &template_key(f), (*f.parsed).clone()).map_err(|e| RenderError::new("", &f.template.0, error_chain(&e)))?;
            if let Some(t) = &f.cuda {
                sandbox::add(&mut tera, &cuda_template_key(f), (*t.parsed).clone()).map_err(|e| RenderError::new("", &t.path, error_chain(&e)))?;
            }
        }
        Ok(Renderer { tera })
    }

    /// A template's header (empty unless the family has one; else the `header` section and a
    /// newline) and body for one kernel, tidied and linted; a problem is reported at its place
    /// in the template where that can be said ([`located`]).
    fn sections(&self, k: &Kernel, key: &str, template: TemplateView<'_>) -> Result<(String, String), RenderError> {
        let fail = |message: String| RenderError::new(&k.name, template.path, message);
        let section = |name: &str| -> Result<String, RenderError> {
            let mut ctx = Context::from_value(serde_json::Value::Object(k.plan.params.clone())).map_err(|e| fail(error_chain(&e)))?;
            ctx.insert("section", name);
            ctx.insert("kernel", &k.name);
            let text = sandbox::render(&self.tera, key, &ctx).map_err(|e| located(k, template, &ctx, error_chain(&e), None))?;
            if let Err((bytes, message)) = lint(&text) {
                return Err(located(k, template, &ctx, message, Some(bytes)));
            }
            Ok(tidy(&text))
        };
        let header = if k.family.has_header { section("header")? + "\n" } else { String::new() };
        let body = section("body")?;
        Ok((header, body))
    }

    /// Renders one kernel: its `.metal` text (and `.cu`, where the family has a CUDA template)
    /// and its contract.
    pub fn render_kernel(&self, k: &Kernel) -> Result<RenderedKernel, RenderError> {
        let template = k.family.template.0.as_str();
        let fail = |message: String| RenderError::new(&k.name, template, message);
        let (header, body) = self.sections(k, &template_key(&k.family), k.family.metal_template())?;

        let plan = &k.plan;
        let mlx_name = mlx::mlx_kernel_name(&k.name, &plan.inputs, &plan.outputs);
        let assembled = mlx::assemble(&mlx_name, &header, &body, &plan.inputs, &plan.outputs);
        let mut metal = origin_line(k, template);
        metal.push_str("// Below is the source MLX 0.32 compiles for this kernel: its Metal preamble (the next two lines stand in\n");
        metal.push_str("// for it), the header, the signature MLX writes from the argument list, and the body.\n");
        let small = mlx::small_runtime_inputs(&plan.inputs, plan.sizes.len());
        if !small.is_empty() {
            metal.push_str(&format!(
                "// At launch sizes that give {} fewer than 8 elements, MLX declares {} `const constant` instead of `const device`.\n",
                small.join(", "),
                if small.len() == 1 { "it" } else { "each such input" }
            ));
        }
        metal.push_str("#include <metal_stdlib>\nusing namespace metal;\n");
        let offset = metal.len();
        metal.push_str(&assembled.source);
        if !metal.is_ascii() {
            return Err(fail("the rendered source is not ASCII; MLX reads kernel sources as ASCII".into()));
        }
        let range = |(start, end): (usize, usize)| -> Result<TextRange, RenderError> {
            let at = |n: usize| u32::try_from(offset + n).map_err(|_| fail("the rendered source is larger than 4 GiB".into()));
            Ok(TextRange { start: at(start)?, end: at(end)? })
        };
        let (header, body) = (range(assembled.header)?, range(assembled.body)?);
        let sha256 = hex(&Sha256::digest(metal.as_bytes()));
        let metal_path = format!("metal/{}/{}.metal", k.source.stem, k.name);
        let (cuda, cuda_file) = match self.render_cuda(k)? {
            Some((source, file)) => (Some(source), Some(file)),
            None => (None, None),
        };
        let def = KernelDef {
            name: k.name.clone().into(),
            family: k.family.name.clone().into(),
            spec: k.source.origin.clone().into(),
            mlx_name: mlx_name.into(),
            metal: metal.into(),
            header,
            body,
            metal_path: format!("generated/{metal_path}").into(),
            inputs: plan.inputs.clone().into(),
            outputs: plan.outputs.clone().into(),
            sizes: plan.sizes.iter().map(|s| s.clone().into()).collect::<Vec<_>>().into(),
            grid: plan.grid.clone(),
            threadgroup: plan.threadgroup.map(|t| t as u32),
            threadgroup_memory_bytes: plan.threadgroup_memory_bytes as u32,
            cost: plan.cost.clone(),
            cuda,
        };
        Ok(RenderedKernel { kernel: k.clone(), def, metal_path, sha256, cuda: cuda_file })
    }

    /// The kernel's CUDA source, where its family has a CUDA template: exactly what MLX's
    /// `cuda_kernel` assembles, its header starting with the line naming the spec and template
    /// (MLX's own header comes first, so that is the first line kernelgen writes).
    fn render_cuda(&self, k: &Kernel) -> Result<Option<(CudaSource, CudaFile)>, RenderError> {
        let Some(t) = k.family.cuda_template() else { return Ok(None) };
        let fail = |message: String| RenderError::new(&k.name, t.path, message);
        let (header, body) = self.sections(k, &cuda_template_key(&k.family), t)?;
        let header = origin_line(k, t.path) + &header;
        let mlx_name = kernelgen_cuda::mlx::kernel_name(&k.name);
        let assembled = kernelgen_cuda::mlx::assemble(&mlx_name, &header, &body, &k.plan.inputs, &k.plan.outputs).map_err(fail)?;
        if !assembled.source.is_ascii() {
            return Err(fail("the rendered source is not ASCII; MLX reads kernel sources as ASCII".into()));
        }
        let range = |(start, end): (usize, usize)| -> Result<TextRange, RenderError> {
            let at = |n: usize| u32::try_from(n).map_err(|_| fail("the rendered source is larger than 4 GiB".into()));
            Ok(TextRange { start: at(start)?, end: at(end)? })
        };
        let (header, body) = (range(assembled.header)?, range(assembled.body)?);
        let path = format!("cuda/{}/{}.cu", k.source.stem, k.name);
        let sha256 = hex(&Sha256::digest(assembled.source.as_bytes()));
        let source = CudaSource {
            mlx_name: mlx_name.into(),
            source: assembled.source.into(),
            header,
            body,
            path: format!("generated/{path}").into(),
            threadgroup: k.plan.cuda_threadgroup.map(|t| t as u32),
            shared_memory_bytes: 0,
            static_shared_memory_bytes: k.plan.cuda_shared_memory_bytes as u32,
        };
        Ok(Some((source, CudaFile { path, sha256 })))
    }

    /// Renders the template `name` with `ctx`.
    pub fn render_template(&self, name: &str, ctx: &Context) -> Result<String, RenderError> {
        self.tera.render(name, ctx).map_err(|e| RenderError::new("", name, error_chain(&e)))
    }
}

/// The first line of a generated source: where it comes from, and what to edit instead.
fn origin_line(k: &Kernel, template: &str) -> String {
    format!(
        "// Generated by kernelgen from {} (kernel {}, family {}). Do not edit: change the spec or {}, then run `make generate`.\n",
        escape::comment(&k.source.origin),
        k.name,
        k.family.name,
        escape::comment(template)
    )
}

impl RenderError {
    fn new(kernel: &str, template: &str, message: String) -> Self {
        RenderError { kernel: kernel.into(), template: template.into(), message, location: None }
    }
}

/// Kernel `k`'s render with `ctx` failed (`message`, tera's), or wrote something wrong at the
/// bytes `output` of what it wrote: the problem, located in the template when a render with
/// markers says where ([`sandbox::trace`]) in `template` (the Metal or the CUDA one).
fn located(k: &Kernel, template: TemplateView<'_>, ctx: &Context, message: String, output: Option<std::ops::Range<usize>>) -> RenderError {
    let mut error = RenderError::new(&k.name, template.path, message.clone());
    let text = template.text;
    let Some(trace) = sandbox::trace(template.parsed, text, ctx) else { return error };
    let (span, message, help) = match output {
        Some(bytes) => match trace.result.as_ref().ok().and_then(|_| trace.origin(text, bytes.start, bytes.len())) {
            Some(span) => (span, message, None),
            None => return error,
        },
        None => {
            // (the same render with markers fails as the render did, and where)
            let (Err(_), Some(reached)) = (&trace.result, trace.reached) else { return error };
            // tera's messages begin with "Failed to render 'family/x': ": the location says more
            let cause = message.strip_prefix("Failed to render ").and_then(|m| m.split_once(": ")).map_or(message.as_str(), |(_, cause)| cause).to_string();
            match sandbox::missing_variable(&message).and_then(|name| Some((name, sandbox::locate_variable(text, reached, name)?))) {
                Some((name, (at, len))) => {
                    let mut known: Vec<String> = ctx.clone().into_json().as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
                    sandbox::defined_names(&template.parsed.ast, &mut known);
                    known.sort();
                    known.dedup();
                    let hint = crate::schema::suggest(name, known.iter().map(String::as_str));
                    let help = hint.is_empty().then(|| format!("the template receives {}", crate::schema::key_list(known.iter().map(String::as_str))));
                    (at..at + len, format!("`{name}` is not defined{hint}"), help)
                }
                None => (sandbox::tag_at(text, reached), cause, None),
            }
        }
    };
    let source = k.family.source_of(template);
    let (start, end) = (span.start.min(source.text.len()), span.end.min(source.text.len()));
    let span = if source.text.is_char_boundary(start) && source.text.is_char_boundary(end) { start..end } else { start..start };
    let message = format!("rendering kernel `{}`: {message}", k.name);
    error.location = Some(Box::new(Diagnostic { source, span, field: "(template)".into(), message, help }));
    error
}

/// Bytes as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// tera's errors nest the useful part (line, column, cause) in sources.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// Trailing spaces removed, runs of blank lines folded to one, no blank
/// lines at either end: templates stay readable without whitespace control
/// on every tag.
fn tidy(text: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim_end) {
        if line.is_empty() && lines.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// Checks on rendered MSL that no compiler would make: the first problem, at its bytes.
fn lint(text: &str) -> Result<(), (std::ops::Range<usize>, String)> {
    if let Some(pos) = text.find("{{").or_else(|| text.find("{%")) {
        let near: String = text[pos..].chars().take(20).collect();
        return Err((pos..pos + 2, format!("template syntax left in the output near `{near}`")));
    }
    if let Some((pos, c)) = text.char_indices().find(|(_, c)| !c.is_ascii()) {
        return Err((pos..pos + c.len_utf8(), format!("the output holds `{}`, which is not ASCII; MLX reads kernel sources as ASCII", c.escape_unicode())));
    }
    // An unsuffixed float literal is double arithmetic in C++ (and float on
    // Metal): results would differ between the GPU and the emulator.
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split("//").next().unwrap_or("");
        if let Some((at, lit)) = unsuffixed_float(code) {
            return Err((start + at..start + at + lit.len(), format!("float literal `{lit}` has no `f` suffix: write `{lit}f`")));
        }
        start += line.len();
    }
    Ok(())
}

/// The first float literal of `code` without an `f` (or `h`) suffix: where, and its text.
fn unsuffixed_float(code: &str) -> Option<(usize, String)> {
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        if b[i] == b'0' && i + 1 < b.len() && (b[i + 1] == b'x' || b[i + 1] == b'X') {
            i += 2;
            while i < b.len() && (b[i].is_ascii_hexdigit() || b[i] == b'\'') {
                i += 1;
            }
        } else {
            let mut float = false;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i < b.len() && b[i] == b'.' {
                float = true;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                float = true;
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let suffixed = i < b.len() && matches!(b[i], b'f' | b'F' | b'h' | b'H');
            if float && !suffixed {
                return Some((start, code[start..i].to_string()));
            }
        }
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_unsuffixed_float_literals() {
        assert_eq!(unsuffixed_float("x * 0.5;"), Some((4, "0.5".into())));
        assert_eq!(unsuffixed_float("x * 1e-6;"), Some((4, "1e-6".into())));
        assert_eq!(unsuffixed_float("x * 0.5f + 1e-6f + 2.0h"), None);
        assert_eq!(unsuffixed_float("a[3] + 0x4B000000u + v2.x"), None);
        assert_eq!(unsuffixed_float("float2 y = 8388608.0f;"), None);
    }

    #[test]
    fn tidy_folds_blank_lines_and_trailing_space() {
        assert_eq!(tidy("\n\n  a;  \n\n\n  b;\n\n"), "  a;\n\n  b;");
    }
}
