//! kernelgen's generator. Data flows one way, one module per stage:
//!
//! ```text
//! spec/      TOML text (or the proc-macro's tokens) -> spanned tree
//! validate/  tree -> SpecModel, checked against the family's schema
//! expand/    SpecModel -> [Kernel]: axes x geometries, named, planned, limits checked
//! render/    Kernel -> MSL (tera + MLX's assembly), launcher Rust, manifest
//! emit/      rendered tree -> files under generated/ (or a staleness report)
//! ```
//! Families (`families/`) say what each kernel family needs; their MSL lives
//! in `templates/<family>.metal.tera`.

pub mod diag;
pub mod emit;
pub mod expand;
pub mod families;
pub mod family;
pub mod model;
pub mod render;
pub mod spec;
pub mod validate;

use diag::{Diagnostic, Diagnostics};
use render::{RenderError, RenderedKernel, Renderer};
use spec::SpecSource;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a generation run failed.
#[derive(Debug)]
pub enum Error {
    /// A spec path could not be read.
    Io { path: PathBuf, message: String },
    /// One or more problems in the specs.
    Spec(Diagnostics),
    /// A template failed to render (a template bug, not a spec problem).
    Render(RenderError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, message } => write!(f, "error: {}: {message}", path.display()),
            Error::Spec(d) => write!(f, "{d}"),
            Error::Render(e) => write!(f, "error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Everything one run generates.
pub struct Generated {
    pub kernels: Vec<RenderedKernel>,
    /// Relative path under the output directory -> contents.
    pub files: emit::Tree,
}

/// Spec files named by `paths`: a directory gives its `*.toml` files (sorted,
/// recursively), a file gives itself.
pub fn read_specs(paths: &[PathBuf]) -> Result<Vec<SpecSource>, Error> {
    let mut out = Vec::new();
    for path in paths {
        let io = |p: &Path, e: std::io::Error| Error::Io { path: p.to_path_buf(), message: e.to_string() };
        let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
        let files: Vec<(PathBuf, String)> = if meta.is_dir() {
            let base = dir_name(path);
            let mut found = Vec::new();
            collect_toml(path, path, &mut found).map_err(|e| io(path, e))?;
            found.sort();
            found.into_iter().map(|(rel, p)| (p, format!("{base}/{rel}"))).collect()
        } else {
            let parent = path.parent().map(dir_name).unwrap_or_else(|| "specs".into());
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            vec![(path.clone(), format!("{parent}/{file}"))]
        };
        for (file, origin) in files {
            let text = std::fs::read_to_string(&file).map_err(|e| io(&file, e))?;
            let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            out.push(SpecSource { display: file.display().to_string(), origin, stem, text });
        }
    }
    Ok(out)
}

/// The last component of a directory path, resolving `.` and `..`, so the
/// recorded origin does not depend on the working directory.
fn dir_name(path: &Path) -> String {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "specs".into())
}

fn collect_toml(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_toml(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "toml") {
            let rel = path.strip_prefix(root).expect("walk stays under root").to_string_lossy().replace('\\', "/");
            out.push((rel, path));
        }
    }
    Ok(())
}

/// Parses and validates every spec: the models of every spec whose family
/// is known, and every problem found.
pub fn validate_all(sources: Vec<SpecSource>) -> (Vec<validate::SpecModel>, Diagnostics) {
    let mut diags = Diagnostics::default();
    let mut models = Vec::new();
    let mut stems: Vec<(String, String)> = Vec::new();
    for source in sources {
        let source = Arc::new(source);
        let whole = 0..source.text.len().min(1);
        if !validate::is_identifier(&source.stem) {
            diags.push(Diagnostic {
                source: source.clone(),
                span: whole.clone(),
                field: "(file name)".into(),
                message: format!("spec file name `{}` cannot name a Rust module", source.stem),
                help: Some("rename the file to lowercase letters, digits and `_`, starting with a letter".into()),
            });
        }
        if let Some((_, other)) = stems.iter().find(|(s, _)| *s == source.stem) {
            diags.push(Diagnostic {
                source: source.clone(),
                span: whole.clone(),
                field: "(file name)".into(),
                message: format!("another spec, {other}, has the same file name; both would generate module `{}`", source.stem),
                help: Some("rename one of the files".into()),
            });
        }
        stems.push((source.stem.clone(), source.display.clone()));
        let tree = match spec::toml::parse(&source.text) {
            Ok(tree) => tree,
            Err((message, span)) => {
                diags.push(Diagnostic { source: source.clone(), span, field: "(syntax)".into(), message: format!("TOML syntax error: {message}"), help: None });
                continue;
            }
        };
        let (model, problems) = validate::validate(source, &tree);
        models.extend(model);
        diags.extend(problems);
    }
    (models, diags)
}

/// How the generated tree is laid out.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How each kernel's source appears in its Rust `KernelDef`.
    pub metal: render::rust::MetalText,
}

impl Default for Options {
    /// The emitted tree: Rust modules `include_str!` the `.metal` files beside them.
    fn default() -> Self {
        Options { metal: render::rust::MetalText::Include }
    }
}

/// The whole pipeline after reading: validate, expand, render (the emitted
/// tree's layout).
pub fn generate(sources: Vec<SpecSource>) -> Result<Generated, Error> {
    generate_with(sources, Options::default())
}

/// [`generate`] with explicit [`Options`].
pub fn generate_with(sources: Vec<SpecSource>, options: Options) -> Result<Generated, Error> {
    let (models, mut diags) = validate_all(sources);
    // Expansion checks the family constraints even when validation found
    // problems, so one run reports all of them.
    let kernels = match expand::expand(&models) {
        Ok(kernels) => kernels,
        Err(more) => {
            diags.extend(more);
            Vec::new()
        }
    };
    if !diags.is_empty() {
        return Err(Error::Spec(diags));
    }
    let renderer = Renderer::new().map_err(Error::Render)?;
    let rendered = kernels.iter().map(|k| renderer.render_kernel(k)).collect::<Result<Vec<_>, _>>().map_err(Error::Render)?;

    let mut files = emit::Tree::new();
    let mut modules: Vec<(String, Vec<String>)> = Vec::new();
    for model in &models {
        let of_spec: Vec<&RenderedKernel> = rendered.iter().filter(|r| Arc::ptr_eq(&r.kernel.source, &model.source)).collect();
        if of_spec.is_empty() {
            continue;
        }
        let module = render::rust::spec_module(&renderer, &model.source.origin, &of_spec, options.metal).map_err(Error::Render)?;
        files.insert(format!("rust/{}.rs", model.source.stem), module);
        modules.push((model.source.stem.clone(), of_spec.iter().map(|r| r.kernel.name.to_uppercase()).collect()));
    }
    for r in &rendered {
        files.insert(r.metal_path.clone(), r.metal().to_string());
    }
    files.insert("rust/mod.rs".into(), render::rust::catalog_module(&modules));
    files.insert(emit::MARKER.into(), render::manifest::manifest(&rendered));
    Ok(Generated { kernels: rendered, files })
}
