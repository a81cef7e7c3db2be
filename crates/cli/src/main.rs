//! `kernelgen`: generate MLX Metal kernels and their launchers from specs,
//! check that `generated/` is fresh, list the catalog.
//!
//! Exit codes: 0 success, 1 a check found differences, 2 bad spec or usage.

mod codegen_cmds;
mod diff_cmd;
mod error;
mod exec_cmds;
mod lint_cmd;
mod npy;
mod out;
mod verify;

use crate::error::Error;
use crate::out::outln;
use clap::{Parser, Subcommand};
use kernelgen_review::gpu;
use kernelgen_review::view::{KernelView, Sizes};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "kernelgen", version, about = "Ahead-of-time MLX Metal kernels: specs in, reviewable MSL and typed launchers out")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where specs are read from.
#[derive(clap::Args, Clone)]
pub struct SpecArgs {
    /// Spec file or directory of `*.toml` specs, searched recursively, hidden files and the
    /// family folders skipped (repeatable).
    #[arg(long = "specs", value_name = "PATH", default_value = "specs")]
    pub specs: Vec<PathBuf>,
    /// A folder of family files (`<family>.toml` beside `<family>.metal.tera`),
    /// besides kernelgen's own families and a `families/` folder beside the
    /// specs (repeatable).
    #[arg(long = "families", value_name = "DIR")]
    pub families: Vec<PathBuf>,
}

/// The GPU and run-time sizes costs are evaluated for.
#[derive(clap::Args, Clone)]
pub struct CostArgs {
    /// The Apple GPU of the roofline time (m1, m1-pro, m1-max, m1-ultra,
    /// m2..., m3..., m4, m4-pro, m4-max, m5; see `--gpu help`).
    #[arg(long, value_name = "NAME", default_value = gpu::DEFAULT_GPU)]
    pub gpu: String,
    /// A run-time size for the costs: NAME=VALUE (repeatable). Every size
    /// not given is 1: one row, one token, one sequence.
    #[arg(long = "size", value_name = "NAME=VALUE")]
    pub sizes: Vec<String>,
}

impl CostArgs {
    /// With `--gpu help`: prints the GPU table, with the source of every
    /// figure, and says so (the command then does nothing else).
    pub fn print_gpu_help(&self) -> bool {
        if self.gpu != "help" {
            return false;
        }
        outln!("The GPUs --gpu takes: memory bandwidth, FP32 peak, and where each figure comes from.");
        for g in gpu::GPUS {
            outln!("{:<11} {}\n            bandwidth: {}\n            FP32: {}", g.key, g.summary(), g.bandwidth_source, g.fp32_source);
        }
        true
    }

    /// The GPU and the sizes costs are evaluated at.
    pub fn resolve(&self) -> Result<(&'static gpu::Gpu, Sizes), Error> {
        let g = gpu::find(&self.gpu).ok_or_else(|| Error::msg(format!("unknown GPU `{}` for --gpu; known: {}", self.gpu, gpu::keys())))?;
        let mut sizes = BTreeMap::new();
        for s in &self.sizes {
            let (name, value) = s.split_once('=').ok_or_else(|| Error::msg(format!("--size {s}: expected NAME=VALUE, e.g. M=4")))?;
            let value: u64 = value.trim().parse().map_err(|_| Error::msg(format!("--size {s}: `{value}` is not a non-negative integer")))?;
            sizes.insert(name.trim().to_string(), value);
        }
        Ok((g, Sizes(sizes)))
    }
}

/// Warns about `--size` names no kernel has (a typo would silently cost nothing).
pub fn warn_unknown_sizes(sizes: &Sizes, kernels: &[&KernelView]) {
    for name in sizes.unknown(kernels) {
        eprintln!("warning: --size {name}: no kernel has a run-time size named `{name}`");
    }
}

/// How the emulator runs.
#[derive(clap::Args, Clone, Copy)]
pub struct EmuRunArgs {
    /// Worker threads that run a dispatch's threadgroups (default: $KERNELGEN_EMU_WORKERS,
    /// else one per core). Results are the same bits for every count.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Stop a dispatch that runs longer than this, with an error naming the kernel and
    /// the threadgroups still running (default: $KERNELGEN_EMU_TIMEOUT, else 60).
    #[arg(long, value_name = "SECS", value_parser = kernelgen_emu::parse_timeout)]
    pub timeout: Option<std::time::Duration>,
}

impl EmuRunArgs {
    fn apply(self) {
        if let Some(n) = self.workers {
            kernelgen_emu::set_default_workers(n as usize);
        }
        if let Some(limit) = self.timeout {
            kernelgen_emu::set_default_timeout(limit);
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Regenerate the output directory from the specs (atomically: on any
    /// error nothing is written).
    Generate {
        #[command(flatten)]
        specs: SpecArgs,
        /// Output directory; nothing outside it is written. What is written does not
        /// depend on it: the contracts name each kernel's file `generated/metal/...`,
        /// as the tree is checked in.
        #[arg(long, value_name = "DIR", default_value = "generated")]
        out: PathBuf,
    },
    /// Exit 1 and list every stale, missing and orphaned file if the output
    /// directory is not exactly what `generate` would write. Never writes.
    Check {
        #[command(flatten)]
        specs: SpecArgs,
        #[arg(long, value_name = "DIR", default_value = "generated")]
        out: PathBuf,
    },
    /// Print a table of every kernel the specs generate, with bytes per
    /// launch and roofline time on an Apple GPU, then the kernels' warnings.
    List {
        #[command(flatten)]
        specs: SpecArgs,
        #[command(flatten)]
        cost: CostArgs,
    },
    /// What the specs and templates generate now against a committed
    /// revision of the generated tree (default HEAD) or another folder: kernels
    /// added, removed, renamed, changed in code or only in comments; resource,
    /// cost and contract changes; warnings; the MSL diff, one section per edit.
    /// Exit 0 when nothing differs, 1 when something does, 2 on errors.
    Diff(diff_cmd::DiffArgs),
    /// Build every generated kernel (or those matching --filter), run it in
    /// the emulator on seeded random inputs, and compare with the family's
    /// references: bit for bit against the replay model, within the stated
    /// bound against the f64 model. Exit 1 on any failure.
    Verify {
        #[command(flatten)]
        specs: SpecArgs,
        /// Only kernels whose name matches this glob (e.g. `tiny_*`).
        #[arg(long, value_name = "GLOB")]
        filter: Option<String>,
        /// Build the kernels with AddressSanitizer and UBSan.
        #[arg(long)]
        sanitize: bool,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Check the properties only: call no reference, even where the family names one.
        #[arg(long)]
        no_reference: bool,
        #[command(flatten)]
        emulator: EmuRunArgs,
    },
    /// Run one generated kernel in the emulator on .npy inputs and write each
    /// output as DIR/<name>.npy. Shapes and dtypes are checked against the
    /// kernel's contract before anything runs; bf16 travels as uint16 bits.
    Run {
        /// Kernel name, as `kernelgen list` shows it.
        kernel: String,
        /// An input: NAME=FILE.npy (repeatable; every input is required).
        #[arg(long = "input", value_name = "NAME=FILE.npy")]
        inputs: Vec<String>,
        /// A run-time size: NAME=VALUE (optional: sizes follow from the input
        /// shapes, and a given one must agree with them).
        #[arg(long = "size", value_name = "NAME=VALUE")]
        sizes: Vec<String>,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        specs: SpecArgs,
        #[command(flatten)]
        emulator: EmuRunArgs,
    },
    /// Check .metal files as Apple's Metal compiler would (address spaces,
    /// MSL's C++ restrictions, kernel signatures; what the emulator checks
    /// before every load): print every problem as file:line:col: message, exit
    /// 1 if there were any. Needs clang.
    Lint {
        /// The .metal files.
        #[arg(required = true, value_name = "FILE.metal")]
        files: Vec<PathBuf>,
        /// A directory searched for #include (repeatable).
        #[arg(long = "include", short = 'I', value_name = "DIR")]
        include_dirs: Vec<PathBuf>,
        /// A predefined macro, NAME or NAME=VALUE (repeatable).
        #[arg(long = "define", short = 'D', value_name = "NAME[=VALUE]")]
        defines: Vec<String>,
    },
    /// Run any Metal kernel file (kernelgen's or hand-written, MLX-style
    /// templated kernels included) in the emulator.
    Emu {
        /// The .metal file.
        file: PathBuf,
        /// Kernel (function or host_name); needed when the file has several.
        #[arg(long)]
        kernel: Option<String>,
        /// Threads in the grid, X,Y,Z (MLX semantics: threads, not threadgroups).
        #[arg(long, value_name = "X,Y,Z")]
        grid: String,
        #[arg(long, value_name = "X,Y,Z")]
        threadgroup: String,
        /// An input buffer: INDEX=FILE.npy (repeatable).
        #[arg(long = "buffer", value_name = "INDEX=FILE.npy")]
        buffers: Vec<String>,
        /// An output buffer: INDEX=DTYPE:SHAPE, e.g. 2=float32:4,128 (repeatable);
        /// filled with 0xFF bytes before the kernel runs.
        #[arg(long = "output", value_name = "INDEX=DTYPE:SHAPE")]
        outputs: Vec<String>,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Build with AddressSanitizer and UBSan.
        #[arg(long)]
        sanitize: bool,
        /// A directory searched for #include (repeatable), e.g. MLX's include/ for
        /// "mlx/backend/metal/kernels/...".
        #[arg(long = "include", short = 'I', value_name = "DIR")]
        include_dirs: Vec<PathBuf>,
        /// A predefined macro, NAME or NAME=VALUE (repeatable).
        #[arg(long = "define", short = 'D', value_name = "NAME[=VALUE]")]
        defines: Vec<String>,
        /// The value of [[function_constant(INDEX)]]: true, false, an integer or a float
        /// (repeatable); one without a value does not compile where it is read.
        #[arg(long = "function-constant", value_name = "INDEX=VALUE")]
        function_constants: Vec<String>,
        #[command(flatten)]
        emulator: EmuRunArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate { specs, out } => codegen_cmds::generate(&specs, &out),
        Command::Check { specs, out } => codegen_cmds::check(&specs, &out),
        Command::List { specs, cost } => codegen_cmds::list(&specs, &cost),
        Command::Diff(args) => diff_cmd::diff(&args),
        Command::Verify { specs, filter, sanitize, seed, no_reference, emulator } => {
            emulator.apply();
            verify::verify(&specs, filter.as_deref(), sanitize, &kernelgen_verify::Options { seed, no_reference })
        }
        Command::Run { kernel, inputs, sizes, out, specs, emulator } => {
            emulator.apply();
            exec_cmds::run(&specs, &kernel, &inputs, &sizes, &out)
        }
        Command::Lint { files, include_dirs, defines } => lint_cmd::lint(&files, &include_dirs, &defines),
        Command::Emu { file, kernel, grid, threadgroup, buffers, outputs, out, sanitize, include_dirs, defines, function_constants, emulator } => {
            emulator.apply();
            exec_cmds::emu(exec_cmds::EmuArgs {
                file: &file,
                kernel: kernel.as_deref(),
                grid: &grid,
                threadgroup: &threadgroup,
                buffers: &buffers,
                outputs: &outputs,
                out: &out,
                sanitize,
                include_dirs: &include_dirs,
                defines: &defines,
                function_constants: &function_constants,
            })
        }
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            let message = error.to_string();
            eprint!("{message}");
            if !message.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(2)
        }
    }
}
