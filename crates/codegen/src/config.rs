//! The one entry point, [`Config`], on prost-build's model, and what a run generates.

use crate::render::{RenderedKernel, Renderer};
use crate::spec::SpecSource;
use crate::{emit, render, Error, Families};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which files a run generates, and how they refer to each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// A tree that is checked in, as kernelgen's `generated/`: `rust/mod.rs` declares
    /// each spec's module `rust/<stem>.rs` (documented with `//!`) and the catalog; each
    /// `KernelDef` `include_str!`s its `.metal` file; `manifest.json`.
    #[default]
    Tree,
    /// A build script's output (`OUT_DIR`): `kernels.rs` holds each spec's module, which
    /// `include!`s `rust/<stem>.rs` by a path relative to `kernels.rs` (so the tree works
    /// wherever it is written), and the catalog; no `rust/mod.rs`; the modules' own
    /// documentation is `//` comments, since `include!` takes no inner attributes. The
    /// `.metal` files and `manifest.json` are as in [`Layout::Tree`].
    OutDir,
    /// A proc-macro's expansion: `rust/<stem>.rs` only, each kernel's MSL inline, as
    /// there is no file beside the calling crate's code.
    Inline,
}

/// What to generate from, and how to lay it out; the one entry point, on prost-build's
/// model. A `Config` names the specs, the family folders and the [`Layout`];
/// [`Config::load`] reads them, [`Config::generate`] renders without touching the file
/// system, and [`Config::write`] and [`Config::check`] do both and then write or compare a
/// tree. The CLI, `kernelgen-build` and the proc-macros call it, so the discovery of family
/// folders and the files of each layout are written here once.
#[derive(Clone, Debug, Default)]
pub struct Config {
    specs: Vec<PathBuf>,
    families: Vec<PathBuf>,
    layout: Layout,
}

/// What [`Config::load`] read: the input of [`Config::generate`].
pub struct Input {
    /// Every spec, in a canonical order.
    pub specs: Vec<SpecSource>,
    /// kernelgen's families and those of the family folders.
    pub families: Families,
}

impl Input {
    /// `specs` with kernelgen's own families only.
    pub fn bundled(specs: Vec<SpecSource>) -> Self {
        Input { specs, families: Families::bundled() }
    }
}

impl Config {
    /// No specs, no family folders, [`Layout::Tree`].
    pub fn new() -> Self {
        Config::default()
    }

    /// A spec file, or a folder searched for `*.toml` specs (repeatable).
    pub fn specs(mut self, path: impl AsRef<Path>) -> Self {
        self.specs.push(path.as_ref().to_path_buf());
        self
    }

    /// A folder of family files, besides the `families/` found beside the specs (repeatable).
    pub fn families(mut self, dir: impl AsRef<Path>) -> Self {
        self.families.push(dir.as_ref().to_path_buf());
        self
    }

    /// Which files to generate (default [`Layout::Tree`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The spec paths given.
    pub fn spec_paths(&self) -> &[PathBuf] {
        &self.specs
    }

    /// The family folders a run reads: those given, then `families/` beside each spec
    /// folder where it exists. A folder reached twice (two spellings, a link) is read
    /// once, under its first name.
    pub fn family_dirs(&self) -> Vec<PathBuf> {
        self.family_folders().into_iter().filter_map(|(dir, there)| there.then_some(dir)).collect()
    }

    /// Every family folder a run looks at, with whether it reads it: those given (read,
    /// or an error if missing), then `families/` beside each spec folder (read where it
    /// exists), each once.
    fn family_folders(&self) -> Vec<(PathBuf, bool)> {
        let given = self.families.iter().map(|d| (d.clone(), true));
        let beside = self.specs.iter().filter_map(|p| families_beside(p)).map(|d| {
            let there = d.is_dir();
            (d, there)
        });
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut out = Vec::new();
        for (dir, there) in given.chain(beside) {
            let id = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if !seen.contains(&id) {
                seen.push(id);
                out.push((dir, there));
            }
        }
        out
    }

    /// kernelgen's families and those of [`Config::family_dirs`], recording every folder
    /// looked at for the message of an unknown family.
    pub fn load_families(&self) -> Result<Families, Error> {
        Ok(crate::read_families(&self.family_dirs())?.searched_in(self.family_folders()))
    }

    /// Reads every spec and family file; no spec at all is an error. A family folder
    /// inside a spec folder is read as families, not searched for specs.
    pub fn load(&self) -> Result<Input, Error> {
        let family_dirs: Vec<PathBuf> = self.family_dirs().iter().filter_map(|d| std::fs::canonicalize(d).ok()).collect();
        let specs = crate::discover::read_specs_except(&self.specs, &family_dirs)?;
        if specs.is_empty() {
            return Err(Error::NoSpecs(self.specs.clone()));
        }
        Ok(Input { specs, families: self.load_families()? })
    }

    /// Validates, expands and renders `input` into the files of the layout. No I/O.
    pub fn generate(&self, input: Input) -> Result<Generated, Error> {
        let families = &input.families;
        let (models, mut diags) = crate::validate_all(input.specs, families);
        // Expansion checks the family constraints even when validation found
        // problems, so one run reports all of them.
        let kernels = match crate::expand::expand(&models) {
            Ok(kernels) => kernels,
            Err(more) => {
                diags.extend(more);
                Vec::new()
            }
        };
        if !diags.is_empty() {
            return Err(Error::Spec(diags));
        }
        let renderer = Renderer::new(families.iter()).map_err(Error::Render)?;
        let rendered = kernels.iter().map(|k| renderer.render_kernel(k)).collect::<Result<Vec<_>, _>>().map_err(Error::Render)?;

        let mut files = emit::Tree::new();
        let mut modules: Vec<(String, Vec<String>)> = Vec::new();
        for model in &models {
            let of_spec: Vec<&RenderedKernel> = rendered.iter().filter(|r| Arc::ptr_eq(&r.kernel.source, &model.source)).collect();
            if of_spec.is_empty() {
                continue;
            }
            let module = render::rust::spec_module(&renderer, &model.source.origin, &of_spec, self.layout).map_err(Error::Render)?;
            files.insert(format!("rust/{}.rs", model.source.stem), module);
            modules.push((model.source.stem.clone(), of_spec.iter().map(|r| crate::names::kernel_static(&r.kernel.name)).collect()));
        }
        if self.layout != Layout::Inline {
            for r in &rendered {
                files.insert(r.metal_path.clone(), r.metal().to_string());
            }
            let (path, catalog) = render::rust::catalog_module(&modules, self.layout);
            files.insert(path.into(), catalog);
            files.insert("manifest.json".into(), render::manifest::manifest(&rendered));
        }
        Ok(Generated { kernels: rendered, files })
    }

    /// Loads, generates and makes `dir` hold exactly the generated tree (see [`emit::write`]).
    pub fn write(&self, dir: &Path) -> Result<(Generated, emit::Written), Error> {
        let generated = self.generate(self.load()?)?;
        let written = emit::write(dir, &generated.files).map_err(Error::Emit)?;
        Ok((generated, written))
    }

    /// Loads, generates and reports how `dir` differs from the generated tree (see
    /// [`emit::check`]); never writes.
    pub fn check(&self, dir: &Path) -> Result<(Generated, Vec<emit::Difference>), Error> {
        let generated = self.generate(self.load()?)?;
        let diffs = emit::check(dir, &generated.files).map_err(Error::Emit)?;
        Ok((generated, diffs))
    }
}

/// Everything one run generates.
pub struct Generated {
    /// Every kernel, rendered, in spec and expansion order.
    pub kernels: Vec<RenderedKernel>,
    /// Relative path under the output directory -> contents.
    pub files: emit::Tree,
}

/// The whole pipeline after reading, with kernelgen's own families, in the
/// checked-in tree's layout: [`Config::generate`] with the defaults.
pub fn generate(sources: Vec<SpecSource>) -> Result<Generated, Error> {
    Config::new().generate(Input::bundled(sources))
}

/// `families/` beside the folder a spec path names (the folder itself, or a file's
/// folder), as written: `kernels/specs` and `kernels/specs/x.toml` give
/// `kernels/families`. The path is not resolved through links, so a linked spec folder
/// finds the families beside the link; only a path ending in `.` or `..` (which names
/// no folder to be beside) is resolved first.
fn families_beside(spec: &Path) -> Option<PathBuf> {
    let dir = if spec.is_dir() { spec } else { spec.parent()? };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    match dir.components().next_back() {
        Some(std::path::Component::Normal(_)) => Some(dir.parent().unwrap_or(Path::new("")).join("families")),
        _ => std::fs::canonicalize(dir).ok()?.parent().map(|p| p.join("families")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n";

    fn input() -> Input {
        let source = SpecSource { display: "specs/tiny.toml".into(), origin: "specs/tiny.toml".into(), stem: "tiny".into(), text: TINY.into() };
        Input::bundled(vec![source])
    }

    /// Each layout's files, and the module text they share.
    #[test]
    fn each_layout_generates_its_own_files() {
        let tree = Config::new().generate(input()).unwrap().files;
        let out = Config::new().layout(Layout::OutDir).generate(input()).unwrap().files;
        let inline = Config::new().layout(Layout::Inline).generate(input()).unwrap().files;
        assert!(tree.contains_key("rust/mod.rs") && !tree.contains_key("kernels.rs"));
        assert!(out.contains_key("kernels.rs") && !out.contains_key("rust/mod.rs"));
        assert_eq!(inline.keys().collect::<Vec<_>>(), ["rust/tiny.rs"]);
        let module = &tree["rust/tiny.rs"];
        assert!(module.contains("\n//! Kernels of `specs/tiny.toml`"), "{module}");
        assert!(module.contains("include_str!(\"../metal/tiny/"));
        // include! takes no inner attributes: the same text with `//` for `//!`
        assert!(!out["rust/tiny.rs"].contains("//!"));
        assert_eq!(out["rust/tiny.rs"].replace("\n// Kernels of", "\n//! Kernels of").lines().count(), module.lines().count());
        assert_eq!(out["rust/tiny.rs"], module.lines().map(|l| l.strip_prefix("//!").map_or(l.to_string(), |r| format!("//{r}"))).collect::<Vec<_>>().join("\n") + "\n");
        assert!(!inline["rust/tiny.rs"].contains("include_str!") && inline["rust/tiny.rs"].contains("metal: Cow::Borrowed(r#\""), "{}", inline["rust/tiny.rs"]);
        for (path, text) in tree.iter().filter(|(p, _)| p.ends_with(".metal") || *p == "manifest.json") {
            assert_eq!(out.get(path), Some(text), "{path} is the same in both trees");
        }
    }

    /// `kernels.rs` names each module's file relative to itself, and every file it names
    /// is in the tree: it compiles wherever the tree is written.
    #[test]
    fn kernels_rs_includes_its_modules_relative_to_itself() {
        let out = Config::new().layout(Layout::OutDir).generate(input()).unwrap().files;
        let kernels = &out["kernels.rs"];
        assert!(kernels.contains("pub mod tiny {\n    include!(\"rust/tiny.rs\");\n}\n"), "{kernels}");
        assert!(!kernels.contains("OUT_DIR") && !kernels.contains("//!"), "{kernels}");
        assert!(kernels.contains("pub static CATALOG: &[&::kernelgen::KernelDef] = &[\n    &tiny::TINY_EXPERT_Q4_BF16_R4_GATE_UP,"), "{kernels}");
    }

    #[test]
    fn no_spec_found_is_an_error_naming_the_paths() {
        let dir = tempfile::tempdir().unwrap();
        let e = Config::new().specs(dir.path()).load().err().expect("no specs");
        assert_eq!(e.to_string(), format!("error: no spec files (*.toml) found in {}", dir.path().display()));
    }

    #[test]
    fn families_are_found_beside_the_spec_folder_as_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernels/specs")).unwrap();
        let specs = dir.path().join("kernels/specs");
        assert_eq!(families_beside(&specs), Some(dir.path().join("kernels/families")));
        assert_eq!(families_beside(&specs.join("x.toml")), Some(dir.path().join("kernels/families")));
        assert_eq!(families_beside(Path::new("src")), Some(PathBuf::from("families")), "a relative folder");
        assert_eq!(families_beside(Path::new("x.toml")), std::env::current_dir().unwrap().parent().map(|p| p.join("families")));
        assert_eq!(families_beside(&specs.join(".")), Some(dir.path().canonicalize().unwrap().join("kernels/families")));
    }

    /// A family folder given twice, or given and found beside the specs, is read once.
    #[test]
    fn a_family_folder_reached_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernels/specs")).unwrap();
        std::fs::create_dir_all(dir.path().join("kernels/families")).unwrap();
        let families = dir.path().join("kernels/families");
        let config = Config::new().specs(dir.path().join("kernels/specs")).families(&families).families(dir.path().join("kernels/specs/../families"));
        assert_eq!(config.family_dirs(), vec![families]);
    }
}
