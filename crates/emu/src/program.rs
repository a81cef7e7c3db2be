//! Loading and running: an [`Emulator`] checks, translates, compiles and loads a `.metal`
//! source into a [`Program`]; a [`Dispatch`] runs one of its kernels.

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

/// One dispatch of a kernel: the grid (in threads, as MLX counts it), the threadgroup, and
/// how it runs. What is not set is the emulator's ([`EmuOptions`]). [`Program::run`] runs it
/// on a set of buffers; the same value may run again on others.
///
/// ```no_run
/// use kernelgen_emu::{DeviceBuffer, Dispatch, EmuOptions, Emulator, RunOrder};
/// let emu = Emulator::new(EmuOptions::default())?;
/// let prog = emu.load(
///     "[[kernel]] void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] *= 2.0f; }",
///     "twice.metal",
/// )?;
/// let mut x = DeviceBuffer::from_bytes(&[0u8; 64]);
/// let reversed = Dispatch::new("twice", [16, 1, 1], [4, 1, 1]).order(RunOrder::Reverse).workers(1);
/// prog.run(&reversed, &mut [&mut x])?;
/// # Ok::<(), kernelgen_emu::EmuError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch<'k> {
    kernel: &'k str,
    grid: [u32; 3],
    threadgroup: [u32; 3],
    order: Option<RunOrder>,
    workers: Option<usize>,
    placement: Option<Placement>,
    timeout: Option<Duration>,
    threadgroup_poison: u8,
}

impl<'k> Dispatch<'k> {
    /// `kernel` (a name of [`Program::kernels`]) over `grid` threads in threadgroups of
    /// `threadgroup`, run as the emulator's options say.
    pub fn new(kernel: &'k str, grid: [u32; 3], threadgroup: [u32; 3]) -> Self {
        Dispatch { kernel, grid, threadgroup, order: None, workers: None, placement: None, timeout: None, threadgroup_poison: POISON }
    }

    /// The order the fibers of a threadgroup run in, and threadgroups are assigned to workers
    /// (instead of [`EmuOptions::order`]).
    pub fn order(self, order: RunOrder) -> Self {
        Dispatch { order: Some(order), ..self }
    }

    /// The worker threads that run its threadgroups (instead of [`EmuOptions::workers`]; 0:
    /// automatic, as there).
    pub fn workers(self, workers: usize) -> Self {
        Dispatch { workers: Some(workers), ..self }
    }

    /// Where the buffers' data sits in their pages (instead of [`EmuOptions::placement`]).
    pub fn placement(self, placement: Placement) -> Self {
        Dispatch { placement: Some(placement), ..self }
    }

    /// How long it may run before it is stopped with [`EmuError::Timeout`] (instead of
    /// [`EmuOptions::timeout`]).
    pub fn timeout(self, limit: Duration) -> Self {
        Dispatch { timeout: Some(limit), ..self }
    }

    /// The byte threadgroup memory is filled with before each threadgroup runs (default
    /// [`POISON`], 0xFF: an uninitialized float reads as NaN).
    pub fn threadgroup_poison(self, byte: u8) -> Self {
        Dispatch { threadgroup_poison: byte, ..self }
    }
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

    /// Runs `kernel` over `grid` threads in threadgroups of `threadgroup` (MLX semantics),
    /// in the emulator's run order, on its workers, with its placement and time limit:
    /// [`Program::run`] of [`Dispatch::new`].
    pub fn dispatch(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
    ) -> Result<DispatchStats, EmuError> {
        self.run(&Dispatch::new(kernel, grid, threadgroup), buffers)
    }

    /// Runs one dispatch on `buffers` (`buffers[i]` is `[[buffer(i)]]`).
    pub fn run(&self, dispatch: &Dispatch<'_>, buffers: &mut [&mut DeviceBuffer]) -> Result<DispatchStats, EmuError> {
        let mut bufs: Vec<runtime::Buf<'_>> = buffers.iter_mut().map(|b| runtime::Buf::Mut(&mut **b)).collect();
        self.run_bufs(dispatch, &mut bufs)
    }

    /// The dispatch behind both: buffers the kernel writes, reads, or reads in place.
    pub(crate) fn run_bufs(&self, dispatch: &Dispatch<'_>, buffers: &mut [runtime::Buf<'_>]) -> Result<DispatchStats, EmuError> {
        let Dispatch { kernel, grid, threadgroup, .. } = *dispatch;
        let opts = &self.inner.opts;
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
            order: dispatch.order.unwrap_or(opts.order),
            threadgroup_poison: dispatch.threadgroup_poison,
            sanitize: opts.sanitize,
            guard_pages: opts.guard_pages,
            workers: workers_or_default(dispatch.workers.unwrap_or(opts.workers)),
            placement: dispatch.placement.unwrap_or(opts.placement),
            time_limit: dispatch.timeout.or(opts.timeout).unwrap_or_else(default_timeout),
        })
    }
}
