//! `kernelgen verify`: every generated kernel (or those --filter matches), verified by
//! `kernelgen-verify` in the emulator, printed as a table as the outcomes arrive.

use crate::error::Error;
use crate::out::outln;
use globset::Glob;
use kernelgen_codegen::render::RenderedKernel;
use kernelgen_emu::{EmuBackend, EmuOptions};
use kernelgen_verify::{Options, Outcome, Values};
use std::process::ExitCode;

pub fn verify(specs: &crate::SpecArgs, filter: Option<&str>, sanitize: bool, options: &Options) -> Result<ExitCode, Error> {
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
    let backend = EmuBackend::new(EmuOptions { sanitize, ..EmuOptions::default() })?;
    let width = selected.iter().map(|r| r.kernel.name.len()).max().unwrap_or(6).max(6);
    outln!("Every kernel is checked for out-of-bounds accesses, unwritten outputs, reads of uninitialized memory and");
    if options.no_reference {
        outln!("run-order dependence{}; no reference is called (--no-reference).", if sanitize { ", under AddressSanitizer and UBSan" } else { "" });
    } else {
        outln!("run-order dependence{}, then compared with its reference: the replay model bit for bit and the f64 model", if sanitize { ", under AddressSanitizer and UBSan" } else { "" });
        outln!("within its bound (kernelgen's families), or a family file's numpy reference within its tolerance.");
        outln!("MAX ULP and BOUND: the largest error and the largest allowed, in ulps (of the output's largest value for the f64 model).");
    }
    outln!("{:<width$}  {:<10}  {:<10}  {:>8}  {:>8}  {:>7}", "KERNEL", "SIZES", "REFERENCE", "MAX ULP", "BOUND", "TIME");
    let report = kernelgen_verify::run(&backend, &selected, options, |o| row(o, width));
    let failures: Vec<String> = report.failures().map(|(kernel, e)| format!("{kernel}: {e}")).collect();
    for f in &failures {
        eprintln!("FAILED {f}");
    }
    outln!("verify: {} passed, {} failed", report.passed(), failures.len());
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// One row of the table.
fn row(o: &Outcome, width: usize) {
    let (reference, max_ulp, bound) = match &o.result {
        Err(_) => ("FAIL".to_string(), "-".to_string(), "-".to_string()),
        Ok(Values::Model { max_ulp, bound }) => ("replay+f64".into(), format!("{max_ulp:.3}"), format!("{bound:.3}")),
        Ok(Values::Tolerance { max_ulp, tolerance }) => ("numpy".into(), format!("{max_ulp:.3}"), tolerance.to_string()),
        Ok(Values::None) => ("none".into(), "-".into(), "-".into()),
        Ok(Values::Skipped) => ("skipped".into(), "-".into(), "-".into()),
    };
    outln!("{:<width$}  {:<10}  {:<10}  {:>8}  {:>8}  {:>6.2}s", o.kernel, o.sizes, reference, max_ulp, bound, o.seconds);
}
