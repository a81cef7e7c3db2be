//! Both bodies of a kernel: its Metal body, and its CUDA body where its family has a CUDA
//! template ([`KernelDef::cuda`](kernelgen::contract::KernelDef::cuda)). In the emulator a run
//! verifies each as a job of its own, the same way: the same case (drawn from the same seed),
//! every property check, the same reference. The CUDA body runs on an [`EmuBackend`] made by
//! [`EmuBackend::with_language`], which loads `def.cuda.source` as CUDA and launches it through
//! the same launch plan; a test of one's own does the same with [`check`](crate::check).

use crate::run::{Outcome, VerifyBackend, verify_kernel};
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::{EmuBackend, Language};

/// One job of a run: a kernel (its index in the run) and the body verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Body {
    pub(crate) kernel: usize,
    pub(crate) language: Language,
}

/// The bodies a run verifies, in the kernels' order: each kernel's Metal body, then its CUDA
/// body when it has one and `cuda` (the emulator launching CUDA bodies) is there. A backend
/// that is not the emulator launches the one body its platform has.
pub(crate) fn bodies(kernels: &[&RenderedKernel], cuda: Option<&EmuBackend>) -> Vec<Body> {
    let mut bodies = Vec::with_capacity(kernels.len());
    for (kernel, r) in kernels.iter().enumerate() {
        bodies.push(Body { kernel, language: Language::Metal });
        if cuda.is_some() && r.def.cuda.is_some() {
            bodies.push(Body { kernel, language: Language::Cuda });
        }
    }
    bodies
}

/// The emulator launching CUDA bodies, when `backend` is the emulator.
pub(crate) fn cuda_backend<B: VerifyBackend>(backend: &B) -> Option<EmuBackend> {
    backend.emulator().map(|emu| emu.with_language(Language::Cuda))
}

/// Verifies one body: the CUDA one on `cuda`, the other on `backend`.
pub(crate) fn verify_body<B: VerifyBackend>(backend: &B, cuda: Option<&EmuBackend>, r: &RenderedKernel, body: Body, options: &crate::Options) -> Outcome {
    match (body.language, cuda) {
        (Language::Cuda, Some(cuda)) => verify_kernel(cuda, r, options),
        _ => verify_kernel(backend, r, options),
    }
}

/// What follows a kernel's name in its CUDA body's [`Outcome::label`].
pub const CUDA_SUFFIX: &str = " [cuda]";

impl Outcome {
    /// The kernel's name, followed by ` [cuda]` for its CUDA body: a row of `kernelgen verify`.
    pub fn label(&self) -> String {
        match self.body {
            Language::Cuda => format!("{}{CUDA_SUFFIX}", self.kernel),
            _ => self.kernel.clone(),
        }
    }
}
