//! Loading and running: an [`Emulator`] checks, translates, compiles and loads a `.metal`
//! source into a [`Program`]; a [`Dispatch`] runs one of its kernels.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    Binding, DeviceBuffer, EmuError, EmuOptions, FunctionConstantDecl, KernelSignature, Language, LoadOptions, MemoryCheck, POISON, Placement, RunOrder,
    compile, default_timeout, runtime, sanitizer_active, translate, translate::MAX_THREADGROUP_PARAMS, translate_cuda, workers_or_default,
};

/// Compiles and caches kernel objects.
pub struct Emulator {
    opts: EmuOptions,
    builder: compile::Builder,
    /// The Metal check of every load (`None` when [`EmuOptions::metal_check`] is off).
    checker: Option<kernelgen_msl::Checker>,
    /// Builds the objects of the threadgroup-memory check, made at the first that needs one.
    racecheck: Arc<RacecheckBuilder>,
}

/// The builder of the threadgroup-memory check's objects (its own flags and shim), made once.
struct RacecheckBuilder {
    cache_dir: PathBuf,
    builder: Mutex<Option<Arc<compile::Builder>>>,
}

impl RacecheckBuilder {
    fn get(&self) -> Result<Arc<compile::Builder>, EmuError> {
        let mut b = self.builder.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = &*b {
            return Ok(b.clone());
        }
        let made = Arc::new(compile::Builder::new(Some(self.cache_dir.clone()), compile::Build::Racecheck)?);
        *b = Some(made.clone());
        Ok(made)
    }
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
        let build = if opts.sanitize { compile::Build::Sanitize } else { compile::Build::Plain };
        let builder = compile::Builder::new(opts.cache_dir.clone(), build)?;
        let checker = if opts.metal_check { Some(checker_in(builder.cache_dir())?) } else { None };
        let racecheck = Arc::new(RacecheckBuilder { cache_dir: builder.cache_dir().to_path_buf(), builder: Mutex::new(None) });
        Ok(Emulator { opts, builder, checker, racecheck })
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
        if opts.language == Language::Cuda {
            return self.load_cuda(source, file_name, opts);
        }
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
            text = self.builder.preprocess(source, file_name, &opts.include_dirs, &opts.defines, Language::Metal)?;
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
        self.finish(prepared, file_name, Language::Metal)
    }

    /// A CUDA source (docs/emulator.md, "CUDA"): its directives checked, preprocessed, read
    /// (refusing what a kernel may not do) and translated.
    fn load_cuda(&self, source: &str, file_name: &str, opts: &LoadOptions) -> Result<Program, EmuError> {
        let invalid = |problems: Vec<translate::PrepError>| EmuError::InvalidCuda {
            file: file_name.to_string(),
            problems: problems
                .into_iter()
                .map(|e| match (e.line, e.file) {
                    (0, _) => format!("{file_name}: {}", e.message),
                    (l, Some(header)) => format!("{header}:{l}: {} (included from {file_name})", e.message),
                    (l, None) => format!("{file_name}:{l}: {}", e.message),
                })
                .collect(),
        };
        let mut refused = Vec::new();
        if !opts.include_dirs.is_empty() {
            refused.push(translate::prep_err(0, "a CUDA source includes only MLX's headers, which the emulator provides: give no include directories"));
        }
        if !opts.function_constants.is_empty() {
            refused.push(translate::prep_err(0, "function constants are Metal's; a CUDA source has none"));
        }
        refused.extend(translate_cuda::check_directives(source));
        if !refused.is_empty() {
            return Err(invalid(refused));
        }
        let text = self.builder.preprocess(source, file_name, &[], &opts.defines, Language::Cuda)?;
        let prepared = translate_cuda::translate(&text, file_name).map_err(invalid)?;
        self.finish(prepared, file_name, Language::Cuda)
    }

    /// Compiles (or finds in the cache) and loads a translated source.
    fn finish(&self, prepared: translate::Prepared, file_name: &str, language: Language) -> Result<Program, EmuError> {
        let built = self.builder.build(&prepared.cpp, file_name, language)?;
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
                language,
                cpp: prepared.cpp,
                symbols: prepared.symbols,
                racecheck_builder: self.racecheck.clone(),
                racecheck: Mutex::new(None),
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
    /// GPU threads run: the grid's size (for CUDA, the threads of its whole blocks).
    pub threads: u64,
    /// Threadgroups run.
    pub threadgroups: u64,
    /// Fiber context switches into GPU threads.
    pub switches: u64,
    /// Worker threads that ran threadgroups (fewer than asked for when the grid has fewer
    /// threadgroups or the process's pool of helper threads is exhausted).
    pub workers: usize,
    /// The threadgroup arrays of the threadgroup that allocated the most threadgroup memory:
    /// those it reached (each declaration once), in allocation order.
    pub threadgroup_arrays: Vec<ThreadgroupArray>,
    /// Wall-clock time of the dispatch.
    pub elapsed: Duration,
}

impl DispatchStats {
    /// The most threadgroup memory one threadgroup allocated, in bytes (without the
    /// emulator's guards).
    pub fn threadgroup_memory(&self) -> usize {
        self.threadgroup_arrays.iter().map(|a| a.bytes).sum()
    }
}

/// A threadgroup array a threadgroup allocated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadgroupArray {
    /// Its name in the source.
    pub name: String,
    /// Its size.
    pub bytes: usize,
    /// The `.metal` line of its declaration.
    pub line: u32,
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
    memory_check: Option<MemoryCheck>,
    shared_memory: u32,
    /// Bytes per `[[threadgroup(i)]]` index; an index past the table is kept to be refused.
    threadgroup_memory: [Option<u32>; MAX_THREADGROUP_PARAMS as usize],
    threadgroup_index_past: Option<u32>,
}

impl<'k> Dispatch<'k> {
    /// `kernel` (a name of [`Program::kernels`]) over `grid` threads in threadgroups of
    /// `threadgroup`, run as the emulator's options say.
    pub fn new(kernel: &'k str, grid: [u32; 3], threadgroup: [u32; 3]) -> Self {
        Dispatch {
            kernel,
            grid,
            threadgroup,
            order: None,
            workers: None,
            placement: None,
            timeout: None,
            threadgroup_poison: POISON,
            memory_check: None,
            shared_memory: 0,
            threadgroup_memory: [None; MAX_THREADGROUP_PARAMS as usize],
            threadgroup_index_past: None,
        }
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

    /// Run with the threadgroup-memory check ([`MemoryCheck`]; `None`, the default: without):
    /// every access to threadgroup memory is checked for races and bounds, in the threadgroups
    /// the check runs (a grid of more than 16 runs the 8 at each end only). Not under sanitize:
    /// such a dispatch runs the check's own object, without AddressSanitizer.
    pub fn memory_check(self, check: Option<MemoryCheck>) -> Self {
        Dispatch { memory_check: check, ..self }
    }

    /// A CUDA launch's dynamic shared memory, in bytes (MLX's `shared_memory`): what every
    /// `extern __shared__` array of a block is (default 0).
    pub fn shared_memory(self, bytes: u32) -> Self {
        Dispatch { shared_memory: bytes, ..self }
    }

    /// The size in bytes of the kernel's `[[threadgroup(index)]]` parameter (Metal's
    /// `setThreadgroupMemoryLength:atIndex:`): a threadgroup array of that size, guarded and
    /// checked as the others. Every index the kernel declares needs one, and only those.
    pub fn threadgroup_memory(mut self, index: u32, bytes: u32) -> Self {
        match self.threadgroup_memory.get_mut(index as usize) {
            Some(slot) => *slot = Some(bytes),
            None => self.threadgroup_index_past = Some(index),
        }
        self
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
    language: Language,
    /// The prepared C++, and its entry symbols, for the threadgroup-memory check's object.
    cpp: String,
    symbols: Vec<String>,
    racecheck_builder: Arc<RacecheckBuilder>,
    racecheck: Mutex<Option<Arc<runtime::Object>>>,
}

impl ProgramInner {
    /// The object built for the threadgroup-memory check, built (or taken from the cache) at
    /// the first dispatch that needs it.
    fn racecheck_object(&self) -> Result<Arc<runtime::Object>, EmuError> {
        let mut object = self.racecheck.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = &*object {
            return Ok(o.clone());
        }
        let built = self.racecheck_builder.get()?.build(&self.cpp, &self.file_name, self.language)?;
        let loaded = Arc::new(runtime::Object::load(&built.so_path, &self.symbols, &self.file_name)?);
        *object = Some(loaded.clone());
        Ok(loaded)
    }
}

/// A loaded `.metal` (or `.cu`) file.
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

    /// The language it was loaded as.
    pub fn language(&self) -> Language {
        self.inner.language
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
        if dispatch.shared_memory > 0 && self.inner.language != Language::Cuda {
            return Err(launch("dynamic shared memory is CUDA's; a Metal kernel declares its threadgroup memory".into()));
        }
        let threadgroup_memory = threadgroup_params(sig, dispatch).map_err(launch)?;
        let want = sig.buffer_count();
        if buffers.len() != want {
            return Err(launch(format!(
                "kernel binds buffers 0..{} ({} expected) but {} were given",
                want,
                want,
                buffers.len()
            )));
        }
        let racecheck;
        let (object, sanitize) = match dispatch.memory_check {
            None => (&self.inner.object, opts.sanitize),
            Some(_) => {
                racecheck = self.inner.racecheck_object()?;
                (&*racecheck, false)
            }
        };
        runtime::dispatch(runtime::DispatchArgs {
            object,
            entry: idx,
            kernel: sig,
            file_name: &self.inner.file_name,
            buffers,
            grid,
            threadgroup,
            order: dispatch.order.unwrap_or(opts.order),
            threadgroup_poison: dispatch.threadgroup_poison,
            sanitize,
            guard_pages: opts.guard_pages,
            workers: workers_or_default(dispatch.workers.unwrap_or(opts.workers)),
            placement: dispatch.placement.unwrap_or(opts.placement),
            time_limit: dispatch.timeout.or(opts.timeout).unwrap_or_else(default_timeout),
            memory_check: dispatch.memory_check,
            language: self.inner.language,
            shared_memory: dispatch.shared_memory,
            threadgroup_memory,
        })
    }
}

/// The bytes of each `[[threadgroup(i)]]` parameter of `sig`, by index, from the sizes the
/// dispatch gives: one for every index the kernel declares and none for another, each a
/// positive multiple of 16 bytes (as Metal requires).
fn threadgroup_params(sig: &KernelSignature, dispatch: &Dispatch<'_>) -> Result<Vec<usize>, String> {
    let declared = |i: u32| sig.params.iter().find(|p| p.binding == Binding::Threadgroup(i));
    let undeclared = |i: u32| format!("threadgroup memory is given for index {i}, which the kernel does not declare ([[threadgroup({i})]])");
    if let Some(i) = dispatch.threadgroup_index_past {
        return Err(undeclared(i));
    }
    let mut sizes = Vec::new();
    for (i, bytes) in dispatch.threadgroup_memory.iter().enumerate() {
        let i = i as u32;
        match (declared(i), *bytes) {
            (None, None) => {}
            (None, Some(_)) => return Err(undeclared(i)),
            (Some(p), None) => {
                return Err(format!(
                    "parameter `{}` [[threadgroup({i})]] needs a size: give one for index {i} (`Dispatch::threadgroup_memory`, `--threadgroup-memory {i}=BYTES`)",
                    p.name
                ));
            }
            (Some(p), Some(b)) if b == 0 || b % 16 != 0 => {
                return Err(format!("parameter `{}` [[threadgroup({i})]]: {b} bytes; Metal takes a positive multiple of 16", p.name));
            }
            (Some(_), Some(b)) => {
                sizes.resize(i as usize + 1, 0);
                sizes[i as usize] = b as usize;
            }
        }
    }
    Ok(sizes)
}
