//! `generate`, `check` and `list`: the generator's commands.

use crate::error::Error;
use crate::out::outln;
use crate::{warn_unknown_sizes, CostArgs, SpecArgs};
use kernelgen_codegen::{Config, Generated};
use kernelgen_review::{ListCosts, Tree};
use std::path::Path;
use std::process::ExitCode;

/// The generator's configuration for the command line's paths. A path the user named
/// that is not there is an error saying which option named it.
fn config(args: &SpecArgs) -> Result<Config, Error> {
    for (flag, paths) in [("--specs", &args.specs), ("--families", &args.families)] {
        for p in paths {
            if let Err(e) = std::fs::metadata(p) {
                return Err(Error::io(format_args!("{flag} {}", p.display()), e));
            }
        }
    }
    let config = args.specs.iter().fold(Config::new(), Config::specs);
    Ok(args.families.iter().fold(config, Config::families))
}

/// Reads the specs and families and generates everything in memory; every
/// command but `generate` and `check` starts here.
pub fn run_pipeline(args: &SpecArgs) -> Result<Generated, Error> {
    let config = config(args)?;
    Ok(config.load().and_then(|input| config.generate(input))?)
}

pub fn generate(specs: &SpecArgs, out: &Path) -> Result<ExitCode, Error> {
    let (generated, written) = config(specs)?.write(out)?;
    for warning in &written.warnings {
        eprintln!("warning: {warning}");
    }
    let changes = written.changes;
    if changes.is_empty() {
        outln!("{}: up to date ({} kernels, {} files)", out.display(), generated.kernels.len(), generated.files.len());
    } else {
        for change in &changes {
            outln!("{change}");
        }
        outln!("{}: {} files updated ({} kernels)", out.display(), changes.len(), generated.kernels.len());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(specs: &SpecArgs, out: &Path) -> Result<ExitCode, Error> {
    let (generated, diffs) = config(specs)?.check(out)?;
    if diffs.is_empty() {
        outln!("{}: fresh ({} kernels, {} files)", out.display(), generated.kernels.len(), generated.files.len());
        return Ok(ExitCode::SUCCESS);
    }
    for diff in &diffs {
        outln!("{diff}");
    }
    outln!("{}: {} files differ from what the specs generate; run `make generate` and commit the result", out.display(), diffs.len());
    Ok(ExitCode::from(1))
}

pub fn list(specs: &SpecArgs, cost: &CostArgs) -> Result<ExitCode, Error> {
    if cost.print_gpu_help() {
        return Ok(ExitCode::SUCCESS);
    }
    let generated = run_pipeline(specs)?;
    let (gpu, sizes) = cost.resolve()?;
    // The cost columns read the manifest the specs generate, as `diff` reads it.
    let tree = Tree { label: "the specs".into(), files: generated.files.clone() };
    let costs = ListCosts::new(&tree, gpu, sizes.clone()).map_err(Error::Review)?;
    warn_unknown_sizes(&sizes, &costs.kernels().iter().collect::<Vec<_>>());
    let rows: Vec<[String; 9]> = generated
        .kernels
        .iter()
        .map(|r| {
            let k = &r.kernel;
            let p = &k.plan;
            let variant = k.variant.values.iter().map(|(a, v)| format!("{a}={v}")).collect::<Vec<_>>().join(",");
            let buffers = p
                .inputs
                .iter()
                .chain(&p.outputs)
                .map(|b| format!("{}:{}[{}]", b.name, b.dtype.short_name(), b.shape.iter().map(|d| d.describe(&r.def.size_names())).collect::<Vec<_>>().join(",")))
                .collect::<Vec<_>>()
                .join(" ");
            // The bodies MLX can launch: Metal always, CUDA where the family has a CUDA template.
            let bodies = if r.def.cuda.is_some() { "metal,cuda" } else { "metal" };
            [
                k.name.clone(),
                k.family.name.clone(),
                bodies.to_string(),
                format!("{variant},geometry={}", k.geometry),
                // (a CUDA body's block, where the family gives it one of its own)
                match p.cuda_threadgroup != p.threadgroup && r.def.cuda.is_some() {
                    true => format!("{} (cuda {})", p.threadgroup.iter().product::<u64>(), p.cuda_threadgroup.iter().product::<u64>()),
                    false => p.threadgroup.iter().product::<u64>().to_string(),
                },
                p.threadgroup_memory_bytes.to_string(),
                costs.cells(&k.name)[0].clone(),
                costs.cells(&k.name)[1].clone(),
                buffers,
            ]
        })
        .collect();
    let [bytes_title, roofline_title] = costs.header();
    let header = ["KERNEL", "FAMILY", "BODIES", "VARIANT", "THREADS/TG", "TG MEMORY", &bytes_title, &roofline_title, "BUFFERS"];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        outln!("{}", s.trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    outln!("{} kernels", rows.len());
    let mut families: Vec<&kernelgen_codegen::family::FamilyDef> = Vec::new();
    for r in &generated.kernels {
        if !families.iter().any(|f| f.name == r.kernel.family.name) {
            families.push(&r.kernel.family);
        }
    }
    for f in families {
        outln!("  {}: {} ({})", f.name, f.summary, f.source.origin);
    }
    for line in costs.footer() {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
