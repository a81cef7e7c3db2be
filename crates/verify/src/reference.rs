//! References: what a kernel's outputs must be. A family file names its own (`[verify]
//! reference`): one of kernelgen's Rust models (`"rust:expert"`, [`crate::bundled`]) or a numpy
//! function beside the family file (`"refs/x.py:function"`, [`crate::python`]).

use crate::bundled::{self, RustReference};
use crate::case::{Case, random_case};
use crate::compare::Expected;
use crate::error::Error;
use kernelgen::contract::{KernelDef, Tolerance};
use kernelgen_codegen::diag::line_col;
use kernelgen_codegen::family::{FamilyDef, ReferenceDef};
use kernelgen_codegen::model::Params;
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::Language;
use std::path::PathBuf;

/// The buffers and plan parameters a Rust reference reads, by name. A test checks them against
/// kernelgen's family files (every parameter planned for every kernel of a family that names
/// the reference, every buffer of its kernels declared, every declared buffer some kernel's),
/// and [`Kernel`] refuses a read of anything undeclared.
#[derive(Clone, Copy, Debug)]
pub struct Declaration {
    /// The plan parameters (axes, fields, `let`s) it reads.
    pub params: &'static [&'static str],
    /// The inputs it draws, over every kernel of the family.
    pub inputs: &'static [&'static str],
    /// The outputs it models, over every kernel of the family.
    pub outputs: &'static [&'static str],
}

/// A kernel as a reference sees it: its contract, the values its family planned for it, and
/// the family; with a [`Declaration`], reads of what it does not declare are refused.
#[derive(Clone, Copy)]
pub struct Kernel<'a> {
    rendered: &'a RenderedKernel,
    body: Language,
    declared: Option<(&'static str, &'static Declaration)>,
}

impl<'a> Kernel<'a> {
    /// A generated kernel, its `body` the one run (a replay model follows that body's order).
    pub fn new(rendered: &'a RenderedKernel, body: Language) -> Self {
        Kernel { rendered, body, declared: None }
    }

    /// The body run: Metal, or the kernel's CUDA body.
    pub fn body(&self) -> Language {
        self.body
    }

    /// The same kernel, for the Rust reference `name` that declares `declared`.
    pub(crate) fn declaring(self, name: &'static str, declared: &'static Declaration) -> Self {
        Kernel { declared: Some((name, declared)), ..self }
    }

    /// The launch contract.
    pub fn def(&self) -> &'a KernelDef {
        &self.rendered.def
    }

    /// The kernel's name.
    pub fn name(&self) -> &'a str {
        &self.rendered.kernel.name
    }

    /// Its family.
    pub fn family(&self) -> &'a FamilyDef {
        &self.rendered.kernel.family
    }

    /// Every value the template is rendered with (what a Python reference gets as `params`).
    pub fn params(&self) -> &'a Params {
        &self.rendered.kernel.plan.params
    }

    fn undeclared(&self, kind: &'static str, name: &str, declared: impl Fn(&Declaration) -> bool) -> Result<(), Error> {
        match self.declared {
            Some((reference, d)) if !declared(d) => Err(Error::Undeclared { reference, kind, name: name.to_string() }),
            _ => Ok(()),
        }
    }

    fn param(&self, name: &str, expected: &'static str) -> Result<&'a serde_json::Value, Error> {
        self.undeclared("parameter", name, |d| d.params.contains(&name))?;
        self.params().get(name).ok_or_else(|| Error::Param { family: self.family().name.clone(), name: name.to_string(), expected })
    }

    /// The integer plan parameter `name`.
    pub fn int(&self, name: &str) -> Result<usize, Error> {
        let bad = || Error::Param { family: self.family().name.clone(), name: name.to_string(), expected: "integer" };
        self.param(name, "integer")?.as_u64().and_then(|v| usize::try_from(v).ok()).ok_or_else(bad)
    }

    /// The string plan parameter `name` (an axis value, say).
    pub fn string(&self, name: &str) -> Result<&'a str, Error> {
        let bad = || Error::Param { family: self.family().name.clone(), name: name.to_string(), expected: "string" };
        self.param(name, "string")?.as_str().ok_or_else(bad)
    }

    /// Whether the kernel has the input `name`.
    pub fn has_input(&self, name: &str) -> Result<bool, Error> {
        self.undeclared("buffer", name, |d| d.inputs.contains(&name))?;
        Ok(self.def().inputs.iter().any(|b| b.name.as_ref() == name))
    }

    /// Refuses a case or expectation that names a buffer the reference does not declare.
    pub(crate) fn check_declared<'n>(&self, inputs: impl Iterator<Item = &'n String>, outputs: impl Iterator<Item = &'n String>) -> Result<(), Error> {
        for name in inputs {
            self.undeclared("buffer", name, |d| d.inputs.contains(&name.as_str()))?;
        }
        for name in outputs {
            self.undeclared("buffer", name, |d| d.outputs.contains(&name.as_str()))?;
        }
        Ok(())
    }
}

/// What a kernel's outputs must be, on inputs of the reference's choosing.
pub trait Reference: Sync {
    /// The inputs to run `kernel` on (from `seed`: the same seed, the same inputs).
    fn case(&self, kernel: &Kernel<'_>, seed: u64) -> Result<Case, Error>;
    /// What each output must be on `case` (drawn from `seed`), by output name.
    fn expected(&self, kernel: &Kernel<'_>, case: &Case, seed: u64) -> Result<Vec<(String, Expected)>, Error>;
}

/// Random inputs from `kernel`'s contract at its family's `[verify] sizes` (2 for each size
/// not given) and `[verify] inputs`: the inputs of a family with no Rust reference.
pub fn family_case(kernel: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
    let v = &kernel.family().verify;
    let sizes: Vec<(&str, u64)> = kernel.def().sizes.iter().map(|n| (n.as_ref(), v.sizes.iter().find(|(s, _)| s == n.as_ref()).map_or(2, |(_, x)| *x))).collect();
    random_case(kernel.def(), &sizes, &v.inputs, seed)
}

/// A family file's numpy function, within the family's tolerance.
pub struct PythonReference {
    /// The Python file, found inside the family file's folder.
    pub path: PathBuf,
    /// The function.
    pub function: String,
    /// How close float outputs must be (`[verify] tolerance`, exact by default).
    pub tolerance: Tolerance,
}

impl Reference for PythonReference {
    fn case(&self, kernel: &Kernel<'_>, seed: u64) -> Result<Case, Error> {
        family_case(kernel, seed)
    }

    fn expected(&self, kernel: &Kernel<'_>, case: &Case, _seed: u64) -> Result<Vec<(String, Expected)>, Error> {
        crate::python::call(&self.path, &self.function, kernel.def(), kernel.params(), case, self.tolerance)
    }
}

/// The reference a family names, found.
pub enum Resolved {
    /// One of kernelgen's Rust models.
    Rust(&'static RustReference),
    /// A numpy function beside the family file.
    Python(PythonReference),
    /// None: the properties only.
    None,
}

impl Resolved {
    /// As a [`Reference`], where there is one.
    pub fn reference(&self) -> Option<&dyn Reference> {
        match self {
            Resolved::Rust(r) => Some(r),
            Resolved::Python(p) => Some(p),
            Resolved::None => None,
        }
    }
}

/// `path:line:col` of byte `offset` of `family`'s file.
pub(crate) fn family_at(family: &FamilyDef, offset: usize) -> String {
    let (line, col) = line_col(&family.source.text, offset);
    format!("{}:{line}:{col}", family.source.display)
}

/// The reference `family` names in its `[verify]` section: a Rust reference by its name, or a
/// Python file checked on disk; an unknown name or a file that cannot be used is an error at
/// the family file's line.
pub fn resolve(family: &FamilyDef) -> Result<Resolved, Error> {
    let Some(named) = &family.verify.reference else { return Ok(Resolved::None) };
    let at = || family_at(family, named.span.start);
    match &named.value {
        ReferenceDef::Rust(name) => bundled::find(name).map(Resolved::Rust).ok_or_else(|| Error::NoReference {
            at: at(),
            message: format!("kernelgen has no Rust reference `{name}`"),
            help: format!(
                "kernelgen's Rust references are {}; a family of your own names a numpy function beside its family file instead, e.g. \"refs/{}.py:reference\"",
                bundled::BUNDLED.iter().map(|r| format!("`rust:{}`", r.name)).collect::<Vec<_>>().join(", "),
                family.name
            ),
        }),
        ReferenceDef::Python { .. } => match family.python_reference() {
            Some(Ok((path, function))) => {
                Ok(Resolved::Python(PythonReference { path, function: function.to_string(), tolerance: family.verify.tolerance.unwrap_or(Tolerance::Exact) }))
            }
            Some(Err(message)) => Err(Error::NoReference {
                at: at(),
                message,
                help: "name a regular Python file inside the family file's folder, reached through no symbolic link".into(),
            }),
            None => Ok(Resolved::None),
        },
    }
}
