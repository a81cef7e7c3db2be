//! Loading and running: an [`Emulator`] checks, translates, compiles and loads a `.metal`
//! source into a [`Program`], which dispatches its kernels.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::{
    DeviceBuffer, EmuError, EmuOptions, FunctionConstantDecl, KernelSignature, LoadOptions, POISON, Placement, RunOrder, compile,
    default_timeout, runtime, sanitizer_active, translate, workers_or_default,
};

/// Compiles and caches kernel objects.
pub struct Emulator {
    opts: EmuOptions,
    builder: compile::Builder,
    /// The Metal check of every load (`None` when [`EmuOptions::metal_check`] is off).
    checker: Option<kernelgen_msl::Checker>,
}

impl Emulator {
    /// An emulator with these options: finds g++, sets up the cache directory and
    /// precompiles the Metal stand-in once per cache; compiles no kernel yet.
    pub fn new(opts: EmuOptions) -> Result<Emulator, EmuError> {
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        return Err(runtime::unsupported());
        if opts.sanitize && !sanitizer_active() {
            return Err(EmuError::Sanitizer {
                message: "the AddressSanitizer runtime is not preloaded in this process; start it with \
                          kernelgen_emu::sanitizer_env() (or call reexec_with_sanitizer_if_needed() first thing)"
                    .into(),
            });
        }
        let builder = compile::Builder::new(opts.cache_dir.clone(), opts.sanitize)?;
        let checker = if opts.metal_check { Some(checker_in(builder.cache_dir())?) } else { None };
        Ok(Emulator { opts, builder, checker })
    }

    /// The Metal check every load runs, on its own (what `kernelgen lint` uses): results
    /// cached under the emulator cache of `opts` (shared with the emulator's loads). Needs
    /// clang, not g++, and works on every target.
    pub fn metal_checker(opts: &EmuOptions) -> Result<kernelgen_msl::Checker, EmuError> {
        let cache = match &opts.cache_dir {
            Some(d) => d.clone(),
            None => compile::default_cache_dir()?,
        };
        // the emulator's cache folder is checked (and created) as the emulator's load does
        let cache = kernelgen_msl::private_dir::PrivateDir::open(&cache).map_err(compile::cache_error)?;
        checker_in(cache.path())
    }

    /// The options it was made with.
    pub fn options(&self) -> &EmuOptions {
        &self.opts
    }

    /// The cache directory in use.
    pub fn cache_dir(&self) -> &std::path::Path {
        self.builder.cache_dir()
    }

    /// Compile (or take from cache) one full .metal source. `file_name` is used for
    /// `#line` and messages. The same as [`Emulator::load_with`] with no options.
    pub fn load(&self, source: &str, file_name: &str) -> Result<Program, EmuError> {
        self.load_with(source, file_name, &LoadOptions::default())
    }

    /// [`Emulator::load`] with include directories, predefined macros and function
    /// constant values (see [`LoadOptions`], and docs/emulator.md, "Preprocessing and include paths").
    pub fn load_with(&self, source: &str, file_name: &str, opts: &LoadOptions) -> Result<Program, EmuError> {
        if let Some(checker) = &self.checker {
            checker.check_with(source, file_name, &opts.include_dirs, &opts.defines).map_err(|problems| {
                // a limit of the check (size, nesting, time) says nothing about the source
                match problems.iter().find(|p| p.is_not_checked()) {
                    Some(limit) => EmuError::MetalCheck { message: limit.to_string() },
                    None => EmuError::InvalidMetal { file: file_name.to_string(), problems },
                }
            })?;
        }
        let preprocessed = !opts.include_dirs.is_empty() || !opts.defines.is_empty() || translate::needs_preprocessing(source);
        let text;
        let source = if preprocessed {
            text = self.builder.preprocess(source, file_name, &opts.include_dirs, &opts.defines)?;
            text.as_str()
        } else {
            source
        };
        let topts = translate::Options { preprocessed, function_constants: &opts.function_constants };
        let prepared = translate::translate_with(source, file_name, &topts).map_err(|e| EmuError::Compile {
            file: file_name.to_string(),
            message: match (e.line, &e.file) {
                (0, _) => format!("{file_name}: error: {}", e.message),
                (l, Some(header)) => format!("{header}:{l}: error: {} (included from {file_name})", e.message),
                (l, None) => format!("{file_name}:{l}: error: {}", e.message),
            },
        })?;
        let built = self.builder.build(&prepared.cpp, file_name)?;
        let object = runtime::Object::load(&built.so_path, &prepared.symbols, file_name)?;
        let by_name = prepared.kernels.iter().enumerate().map(|(i, k)| (k.name.clone(), i)).collect();
        Ok(Program {
            inner: Arc::new(ProgramInner {
                kernels: prepared.kernels,
                by_name,
                object,
                file_name: file_name.to_string(),
                opts: self.opts.clone(),
                so_path: built.so_path,
                compiled: built.compiled,
                function_constants: prepared.function_constants,
            }),
        })
    }
}

/// The emulator's Metal check: function constants declared (the emulator runs them), results
/// cached in `<cache>/msl`.
fn checker_in(cache: &std::path::Path) -> Result<kernelgen_msl::Checker, EmuError> {
    let opts = kernelgen_msl::Options {
        cache_dir: Some(cache.join("msl")),
        cache_results: true,
        function_constants: kernelgen_msl::FunctionConstants::Declare,
        ..kernelgen_msl::Options::default()
    };
    kernelgen_msl::Checker::new(opts).map_err(|e| EmuError::MetalCheck { message: e.to_string() })
}

/// Counters of one dispatch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// GPU threads run (the grid's size).
    pub threads: u64,
    /// Threadgroups run.
    pub threadgroups: u64,
    /// Fiber context switches into GPU threads.
    pub switches: u64,
    /// Worker threads that ran threadgroups (fewer than asked for when the grid has fewer
    /// threadgroups or the process's pool of helper threads is exhausted).
    pub workers: usize,
    /// Wall-clock time of the dispatch.
    pub elapsed: Duration,
}

struct ProgramInner {
    kernels: Vec<KernelSignature>,
    by_name: HashMap<String, usize>,
    object: runtime::Object,
    file_name: String,
    opts: EmuOptions,
    so_path: PathBuf,
    compiled: bool,
    function_constants: Vec<FunctionConstantDecl>,
}

/// A loaded `.metal` file.
#[derive(Clone)]
pub struct Program {
    inner: Arc<ProgramInner>,
}

impl Program {
    /// Every `[[kernel]]` (and `host_name` instantiation) in the file; templated kernels
    /// themselves are not listed, only their instantiations.
    pub fn kernels(&self) -> &[KernelSignature] {
        &self.inner.kernels
    }

    /// The signature of one kernel.
    pub fn kernel(&self, name: &str) -> Option<&KernelSignature> {
        self.inner.by_name.get(name).map(|&i| &self.inner.kernels[i])
    }

    /// Path of the compiled object.
    pub fn object_path(&self) -> &std::path::Path {
        &self.inner.so_path
    }

    /// Every `[[function_constant(n)]]` the program declares, with the value it got.
    pub fn function_constants(&self) -> &[FunctionConstantDecl] {
        &self.inner.function_constants
    }

    /// Whether `load` compiled (false: the object came from the cache).
    pub fn was_compiled(&self) -> bool {
        self.inner.compiled
    }

    /// Run `kernel` over `grid` threads in threadgroups of `threadgroup` (MLX semantics).
    pub fn dispatch(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
    ) -> Result<DispatchStats, EmuError> {
        self.dispatch_with_order(kernel, buffers, grid, threadgroup, self.inner.opts.order)
    }

    /// [`Program::dispatch`] with a run order other than the emulator's.
    pub fn dispatch_with_order(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
    ) -> Result<DispatchStats, EmuError> {
        self.dispatch_with(kernel, buffers, grid, threadgroup, order, self.inner.opts.workers)
    }

    /// [`Program::dispatch`] with a run order and a worker count (0: automatic, see
    /// [`EmuOptions::workers`]) other than the emulator's.
    pub fn dispatch_with(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
        workers: usize,
    ) -> Result<DispatchStats, EmuError> {
        let mut bufs: Vec<runtime::Buf<'_>> = buffers.iter_mut().map(|b| runtime::Buf::Mut(&mut **b)).collect();
        self.dispatch_bufs(kernel, &mut bufs, grid, threadgroup, order, workers, POISON, self.inner.opts.placement)
    }

    /// The dispatch behind every other: buffers the kernel writes, reads, or reads in place.
    pub(crate) fn dispatch_bufs(
        &self,
        kernel: &str,
        buffers: &mut [runtime::Buf<'_>],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
        workers: usize,
        threadgroup_poison: u8,
        placement: Placement,
    ) -> Result<DispatchStats, EmuError> {
        let launch = |message: String| EmuError::Launch { kernel: kernel.to_string(), message };
        let Some(&idx) = self.inner.by_name.get(kernel) else {
            let names: Vec<&str> = self.inner.kernels.iter().map(|k| k.name.as_str()).collect();
            return Err(launch(format!("no such kernel in {}; kernels: {}", self.inner.file_name, names.join(", "))));
        };
        let sig = &self.inner.kernels[idx];
        if threadgroup.contains(&0) {
            return Err(launch(format!("threadgroup {threadgroup:?} has a zero dimension")));
        }
        let total: u64 = threadgroup.iter().map(|&t| t as u64).product();
        const MAX: u64 = kernelgen::contract::limits::MAX_THREADS_PER_THREADGROUP;
        if total > MAX {
            return Err(launch(format!("threadgroup {threadgroup:?} has {total} threads; at most {MAX}")));
        }
        let want = sig.buffer_count();
        if buffers.len() != want {
            return Err(launch(format!(
                "kernel binds buffers 0..{} ({} expected) but {} were given",
                want,
                want,
                buffers.len()
            )));
        }
        runtime::dispatch(runtime::DispatchArgs {
            object: &self.inner.object,
            entry: idx,
            kernel: sig,
            file_name: &self.inner.file_name,
            buffers,
            grid,
            threadgroup,
            order,
            threadgroup_poison,
            sanitize: self.inner.opts.sanitize,
            guard_pages: self.inner.opts.guard_pages,
            workers: workers_or_default(workers),
            placement,
            time_limit: self.inner.opts.timeout.unwrap_or_else(default_timeout),
        })
    }
}
