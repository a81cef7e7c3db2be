//! `kernelgen verify`: every generated kernel (or those --filter matches), verified by
//! `kernelgen-verify` in the emulator or on MLX's GPU, printed as a table as the outcomes
//! arrive.

use crate::error::Error;
use crate::out::outln;
use globset::Glob;
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::{EmuBackend, EmuOptions};
use kernelgen_verify::bodies::CUDA_SUFFIX;
use kernelgen_verify::{Options, Outcome, Replay, Values, VerifyBackend};
use std::process::ExitCode;

/// Where `verify` runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// The emulator: every property, then the values.
    Emu,
    /// MLX's GPU: the values, through the typed launch path.
    Mlx,
}

pub fn verify(specs: &crate::SpecArgs, filter: Option<&str>, target: Target, sanitize: bool, options: &Options) -> Result<ExitCode, Error> {
    if target == Target::Mlx && sanitize {
        return Err(Error::msg("--sanitize builds the emulator's kernels: it does not apply to --backend mlx".to_string()));
    }
    if sanitize {
        kernelgen_emu::reexec_with_sanitizer_if_needed().map_err(|e| Error::io("cannot start under the sanitizer runtime", e))?;
    }
    let generated = crate::codegen_cmds::run_pipeline(specs)?;
    let matcher = match filter {
        Some(f) => Some(Glob::new(f).map_err(|source| Error::Filter { filter: f.to_string(), source })?.compile_matcher()),
        None => None,
    };
    let selected: Vec<&RenderedKernel> = generated.kernels.iter().filter(|r| matcher.as_ref().is_none_or(|m| m.is_match(&r.kernel.name))).collect();
    if selected.is_empty() {
        return Err(Error::msg(format!("no kernel matches --filter {}", filter.unwrap_or(""))));
    }
    match target {
        Target::Emu => report(&EmuBackend::new(EmuOptions { sanitize, ..EmuOptions::default() })?, &selected, sanitize, options),
        Target::Mlx => mlx(&selected, options),
    }
}

#[cfg(feature = "mlx")]
fn mlx(selected: &[&RenderedKernel], options: &Options) -> Result<ExitCode, Error> {
    use kernelgen::backend::mlx::{Gpu, MlxBackend, gpu};
    let language = match gpu() {
        Gpu::Metal => "Metal",
        Gpu::Cuda => "CUDA",
        Gpu::None => return Err(Error::msg("--backend mlx: this MLX has no GPU backend (neither Metal nor CUDA): its kernels cannot run".to_string())),
    };
    outln!("Every kernel runs on MLX's GPU ({language} bodies), launched through the typed launch path.");
    report(&MlxBackend::new(), selected, false, options)
}

#[cfg(not(feature = "mlx"))]
fn mlx(_: &[&RenderedKernel], _: &Options) -> Result<ExitCode, Error> {
    Err(Error::msg("--backend mlx needs a kernelgen built with the feature `mlx` (on Linux: `make gpu-build`, see mlx/README.md)".to_string()))
}

/// Verifies `selected` on `backend`, printing the table as the outcomes arrive.
fn report<B: VerifyBackend>(backend: &B, selected: &[&RenderedKernel], sanitize: bool, options: &Options) -> Result<ExitCode, Error> {
    // a kernel with a CUDA body has a second row, `<name> [cuda]`
    let label = |r: &&RenderedKernel| r.kernel.name.len() + if r.def.cuda.is_some() { CUDA_SUFFIX.len() } else { 0 };
    let width = selected.iter().map(label).max().unwrap_or(6).max(6);
    // `M=2,K=2,S=3`: each size with a value of up to two digits (the rows print as they finish)
    let sizes = selected.iter().map(|r| r.def.sizes.iter().map(|s| s.len() + 4).sum::<usize>()).max().unwrap_or(0).max(10);
    let under = if sanitize { ", under AddressSanitizer and UBSan" } else { "" };
    if backend.emulator().is_none() {
        outln!("Each kernel's outputs are compared with its reference: the f64 model within its bound (kernelgen's");
        outln!("families; the replay model follows the emulator's arithmetic, not a GPU's), or a family file's numpy");
        outln!("reference within its tolerance. MAX ULP and BOUND: the largest error and the largest allowed, in ulps.");
    } else if options.no_reference {
        outln!("Every kernel is checked for out-of-bounds accesses, unwritten outputs, reads of uninitialized memory and");
        outln!("run-order dependence{under}; no reference is called (--no-reference).");
    } else {
        outln!("Every kernel is checked for out-of-bounds accesses, unwritten outputs, reads of uninitialized memory and");
        outln!("run-order dependence{under}, then compared with its reference: the replay model bit for bit and the f64 model");
        outln!("within its bound (kernelgen's families), or a family file's numpy reference within its tolerance.");
        outln!("MAX ULP and BOUND: the largest error and the largest allowed, in ulps (of the output's largest value for the f64 model).");
    }
    if backend.emulator().is_some() && selected.iter().any(|r| r.def.cuda.is_some()) {
        outln!("A kernel with a CUDA body has it verified the same way, on the same inputs: its row is `<kernel> [cuda]`.");
    }
    outln!("{:<width$}  {:<sizes$}  {:<10}  {:>8}  {:>8}  {:>7}", "KERNEL", "SIZES", "REFERENCE", "MAX ULP", "BOUND", "TIME");
    let report = kernelgen_verify::run(backend, selected, options, |o| row(o, width, sizes));
    let failures: Vec<String> = report.outcomes.iter().filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.label()))).collect();
    for f in &failures {
        eprintln!("FAILED {f}");
    }
    outln!("verify: {} passed, {} failed", report.passed(), failures.len());
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// One row of the table.
fn row(o: &Outcome, width: usize, sizes: usize) {
    let (reference, max_ulp, bound) = match &o.result {
        Err(_) => ("FAIL".to_string(), "-".to_string(), "-".to_string()),
        Ok(Values::Model { max_ulp, bound, replay }) => {
            let models = if *replay == Replay::BitForBit { "replay+f64" } else { "f64" };
            (models.into(), format!("{max_ulp:.3}"), format!("{bound:.3}"))
        }
        Ok(Values::Tolerance { max_ulp, tolerance }) => ("numpy".into(), format!("{max_ulp:.3}"), tolerance.to_string()),
        Ok(Values::None) => ("none".into(), "-".into(), "-".into()),
        Ok(Values::Skipped) => ("skipped".into(), "-".into(), "-".into()),
    };
    outln!("{:<width$}  {:<sizes$}  {:<10}  {:>8}  {:>8}  {:>6.2}s", o.label(), o.sizes, reference, max_ulp, bound, o.seconds);
}
