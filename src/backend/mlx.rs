//! The MLX backend (feature `mlx`): generated kernels through
//! `mlx_rs::fast::MetalKernel`, each built once per process and cached.
//!
//! A launch is lazy, as every MLX op is: it adds the kernel to MLX's graph and
//! returns the unevaluated outputs, so a chain of launches (an expert's
//! `gate_up` then `down`) becomes one command buffer when the caller
//! evaluates. Nothing here evaluates or synchronizes: the launch checks read
//! only shapes and dtypes, and the one check that needs values (DeltaNet's
//! kept lengths at most T) takes them from the host, as the seed does. Errors
//! that only MLX can see (a Metal compile error, a pipeline limit) surface
//! where MLX raises them: at evaluation. [`MlxBackend::eager`] evaluates every
//! launch's outputs right away, for debugging.
//!
//! The body launched is the one for the GPU this process's MLX runs ([`gpu`]):
//! the Metal body on Apple silicon; the CUDA body (`KernelDef::cuda`, through
//! mlx-c's `mlx_fast_cuda_kernel_*`, which mlx-rs does not wrap) where MLX is
//! its CUDA build, on NVIDIA GPUs. A kernel whose family has no CUDA template
//! is refused there, naming the kernel, before anything is built
//! ([`MlxError::NoCudaBody`]). In an MLX with neither (the CPU build on Linux)
//! MLX refuses custom kernels with "[metal_kernel] No Metal back-end.", which
//! comes back as the source of the
//! [`LaunchError::Backend`](crate::launch::LaunchError) ([`MlxError::is_no_metal`]).
//!
//! Strided arrays are accepted: kernels are built with `ensure_row_contiguous`,
//! so MLX copies a strided input to row-major first (inside the graph).

/// The mlx-rs this backend is built on, so callers use the same version.
pub use mlx_rs;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use mlx_rs::error::Exception;
use mlx_rs::fast::{MetalKernel, MetalKernelApplyOptions, MetalKernelOptions, MetalKernelOutput};
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::{Array, Device, Stream};

use super::{Backend, Checked};
use crate::contract::{CudaSource, Dtype, KernelDef};
use crate::launch::{ArgInfo, Input};

/// Launches generated kernels through MLX, lazily (or eagerly, for debugging).
#[derive(Clone, Copy, Debug, Default)]
pub struct MlxBackend {
    eager: bool,
}

impl MlxBackend {
    /// Lazy launches: outputs come back unevaluated.
    pub fn new() -> Self {
        MlxBackend { eager: false }
    }

    /// Every launch evaluates its outputs before returning, so MLX's errors
    /// surface at the launch that caused them. For debugging only: each
    /// launch becomes a GPU round trip.
    pub fn eager() -> Self {
        MlxBackend { eager: true }
    }
}

/// Why MLX did not launch (or, eagerly, did not run) a kernel. MLX's own
/// error is kept whole.
#[derive(Debug)]
#[non_exhaustive]
pub enum MlxError {
    /// `MetalKernel::new` failed.
    Build(Exception),
    /// `MetalKernel::apply` failed (in an MLX without Metal, it fails here).
    Apply(Exception),
    /// The eager launch's evaluation failed (compiling or running the kernel).
    Eval(Exception),
    /// A kernel of this name was built from a different source in this process.
    NameConflict(String),
    /// An output dtype this build of the MLX backend cannot map.
    Unsupported(Dtype),
    /// A buffer of more bytes than an MLX array's dimension holds (2^31 - 1).
    TooLarge(usize),
    /// Moving an array between the host and MLX failed.
    Host(Exception),
    /// MLX runs CUDA here, and the kernel's family has no CUDA template.
    NoCudaBody {
        /// The kernel launched.
        kernel: String,
        /// Its family.
        family: String,
    },
    /// On CUDA, the launch needs more blocks along an axis of the grid than CUDA allows
    /// (2^31 - 1 along x, 65535 along y and z): refused before anything is built or launched,
    /// where CUDA would fail the evaluation.
    CudaGrid {
        /// The kernel launched.
        kernel: String,
        /// The axis: `x`, `y` or `z`.
        axis: char,
        /// The grid's threads along the axis, at the launch's sizes.
        threads: u64,
        /// Threads of a block along the axis.
        block: u64,
        /// CUDA's limit on blocks along the axis.
        limit: u64,
    },
    /// A call of mlx-c's CUDA custom-kernel API failed: MLX's message went to mlx-rs's
    /// error handler, which keeps it to itself.
    Cuda {
        /// The mlx-c function.
        call: &'static str,
        /// What it returned.
        status: i32,
    },
}

impl std::fmt::Display for MlxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MlxError::Build(e) => write!(f, "MLX failed to build the kernel: {e}"),
            MlxError::Apply(e) => write!(f, "MLX failed to launch the kernel: {e}"),
            MlxError::Eval(e) => write!(f, "MLX failed to evaluate the kernel's outputs: {e}"),
            MlxError::Host(e) => write!(f, "MLX failed to move an array between the host and MLX: {e}"),
            MlxError::NameConflict(name) => write!(f, "a kernel named `{name}` was already built from another source in this process"),
            MlxError::Unsupported(d) => write!(f, "no MLX dtype for {d}"),
            MlxError::TooLarge(n) => write!(f, "a buffer of {n} bytes: an MLX array's dimension holds at most {} elements", i32::MAX),
            MlxError::NoCudaBody { kernel, family } => write!(
                f,
                "kernel `{kernel}` has no CUDA body, and MLX here runs CUDA: family `{family}` has only a Metal template (a CUDA one is `{family}.cuda.tera` beside its family file)"
            ),
            MlxError::CudaGrid { kernel, axis, threads, block, limit } => write!(
                f,
                "kernel `{kernel}`: {threads} threads along the grid's {axis} in blocks of {block} are {} blocks, above CUDA's limit of {limit} along {axis}; launch it on fewer rows at a time",
                threads.div_ceil(*block)
            ),
            MlxError::Cuda { call, status } => write!(f, "MLX's `{call}` failed (status {status})"),
        }
    }
}

impl std::error::Error for MlxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.exception().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl MlxError {
    /// MLX's own error, when MLX raised one.
    pub fn exception(&self) -> Option<&Exception> {
        match self {
            MlxError::Build(e) | MlxError::Apply(e) | MlxError::Eval(e) | MlxError::Host(e) => Some(e),
            MlxError::NameConflict(_)
            | MlxError::Unsupported(_)
            | MlxError::TooLarge(_)
            | MlxError::NoCudaBody { .. }
            | MlxError::CudaGrid { .. }
            | MlxError::Cuda { .. } => None,
        }
    }

    /// True when MLX failed because it was built without Metal (the CPU
    /// build on Linux): its "[metal_kernel] No Metal back-end." error.
    pub fn is_no_metal(&self) -> bool {
        self.exception().is_some_and(|e| e.what().contains("No Metal back-end"))
    }
}

/// The GPU language this process's MLX runs custom kernels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gpu {
    /// Metal (Apple silicon): kernels launch their `.metal` body.
    Metal,
    /// CUDA (MLX's CUDA build, NVIDIA GPUs): kernels launch their `.cu` body.
    Cuda,
    /// Neither (MLX's CPU build): MLX refuses custom kernels.
    None,
}

/// The GPU language of this process's MLX, asked once.
pub fn gpu() -> Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    *GPU.get_or_init(|| {
        install_error_handler();
        let (mut metal, mut cuda) = (false, false);
        // SAFETY: each call writes one bool through a valid pointer.
        let (m, c) = unsafe { (mlx_sys::mlx_metal_is_available(&mut metal), mlx_sys::mlx_cuda_is_available(&mut cuda)) };
        match (m == 0 && metal, c == 0 && cuda) {
            (true, _) => Gpu::Metal,
            (false, true) => Gpu::Cuda,
            (false, false) => Gpu::None,
        }
    })
}

/// mlx-rs's error handler, before any call of mlx-c's own: mlx-c's default handler ends the
/// process. mlx-rs installs it on its first fallible operation; this is a cheap one.
fn install_error_handler() {
    let _ = Device::try_default();
}

/// kernelgen's dtype as MLX's (`None` for one this version does not know).
pub fn to_mlx_dtype(dtype: Dtype) -> Option<mlx_rs::Dtype> {
    Some(match dtype {
        Dtype::F32 => mlx_rs::Dtype::Float32,
        Dtype::F16 => mlx_rs::Dtype::Float16,
        Dtype::Bf16 => mlx_rs::Dtype::Bfloat16,
        Dtype::I8 => mlx_rs::Dtype::Int8,
        Dtype::U8 => mlx_rs::Dtype::Uint8,
        Dtype::U16 => mlx_rs::Dtype::Uint16,
        Dtype::I32 => mlx_rs::Dtype::Int32,
        Dtype::U32 => mlx_rs::Dtype::Uint32,
        Dtype::Bool => mlx_rs::Dtype::Bool,
        _ => return None,
    })
}

/// MLX's dtype as kernelgen's; `None` for the ones no kernel takes (64-bit,
/// i16, complex).
pub fn from_mlx_dtype(dtype: mlx_rs::Dtype) -> Option<Dtype> {
    Some(match dtype {
        mlx_rs::Dtype::Float32 => Dtype::F32,
        mlx_rs::Dtype::Float16 => Dtype::F16,
        mlx_rs::Dtype::Bfloat16 => Dtype::Bf16,
        mlx_rs::Dtype::Int8 => Dtype::I8,
        mlx_rs::Dtype::Uint8 => Dtype::U8,
        mlx_rs::Dtype::Uint16 => Dtype::U16,
        mlx_rs::Dtype::Int32 => Dtype::I32,
        mlx_rs::Dtype::Uint32 => Dtype::U32,
        mlx_rs::Dtype::Bool => Dtype::Bool,
        _ => return None,
    })
}

/// A kernel MLX built, in the language MLX runs.
enum Kernel {
    Metal(MetalKernel),
    Cuda(CudaKernel),
}

/// mlx-c's handle of a CUDA custom kernel (mlx-rs wraps only Metal's).
struct CudaKernel(mlx_sys::mlx_fast_cuda_kernel);

impl Drop for CudaKernel {
    fn drop(&mut self) {
        // SAFETY: the handle came from `mlx_fast_cuda_kernel_new` and is freed once, here.
        unsafe { mlx_sys::mlx_fast_cuda_kernel_free(self.0) }
    }
}

/// A built kernel and the source it was built from (the body of the language it runs).
struct Built {
    kernel: Kernel,
    header: String,
    body: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

impl Built {
    fn is_from(&self, def: &KernelDef, header: &str, body: &str) -> bool {
        self.header == header && self.body == body && self.inputs == def.input_names() && self.outputs == def.output_names()
    }
}

// SAFETY: a `MetalKernel` and an `mlx_fast_cuda_kernel` each own a heap object of
// mlx-c's (a name, sources and a C++ closure) with no tie to the thread that made
// it; the cache only touches it while holding its mutex, so it is never used from
// two threads at once.
unsafe impl Send for Built {}

fn cache() -> &'static Mutex<HashMap<String, Built>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Built>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A launch's made input (run-time sizes, checked host values) as MLX's CUDA build should
/// hand it to a kernel: out of host-written managed memory. MLX keeps an array of at most 8
/// bytes in a small pool of managed memory that the GPU reads across the bus, and an array made
/// from host data in managed memory that moves to the GPU at its first use there, and back at
/// each CPU write. Every block of a grid reads a run-time size, so the grouped expert step,
/// whose `Kin` and `Sin` were such arrays, ran 2 to 3 times as long as its kernels alone
/// (docs/benchmarks.md, 2026-12-04). So the values are gathered, on the stream the kernel
/// launches on, into an array of at least 16 bytes (a GPU op's output, so written by the GPU
/// and out of the small pool), and the kernel reads a view of its first elements. Each
/// distinct value is gathered once per thread and stream: an MLX array never changes, so later
/// launches reuse it and add nothing to the graph for it. (Per thread: MLX does not evaluate
/// one unevaluated array from two threads' graphs. In a static, which is never dropped, not a
/// thread-local, whose arrays would be freed as the process exits: MLX's CUDA build can fail
/// freeing CUDA objects once the driver has shut down, docs/gpu.md.)
fn device_values(v: &crate::launch::HostValues, stream: &Stream) -> Result<Array, MlxError> {
    /// Distinct values kept; past this the cache starts over (a graph keeps what it uses).
    const KEPT: usize = 1024;
    type Key = (std::thread::ThreadId, i32, Vec<u64>, Vec<i32>);
    static MADE: OnceLock<Mutex<HashMap<Key, Array>>> = OnceLock::new();
    let made = MADE.get_or_init(|| Mutex::new(HashMap::new()));
    // a made array is reused on the thread and stream it was gathered on (MLX numbers its streams)
    let key: Key = (std::thread::current().id(), stream.get_index().map_err(MlxError::Host)?, v.shape.clone(), v.values.clone());
    if let Some(a) = made.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&key) {
        return Ok(a.clone());
    }
    // 4 int32 at least, so the host array is out of MLX's small pool too
    let n = v.values.len();
    let padded: Vec<i32> = v.values.iter().copied().chain(std::iter::repeat(0)).take(n.max(OUT_OF_SMALL_POOL_BYTES / 4)).collect();
    let len = i32::try_from(padded.len()).map_err(|_| MlxError::TooLarge(padded.len() * 4))?;
    let shape: Vec<i32> = v.shape.iter().map(|&d| i32_of(d)).collect();
    let view = gathered_view(&Array::from_slice(&padded, &[len]), n, &shape, stream)?;
    let mut made = made.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if made.len() >= KEPT {
        made.clear();
    }
    made.insert(key, view.clone());
    Ok(view)
}

/// MLX's CUDA build serves an allocation of this many bytes or fewer from its small pool of
/// managed memory, which the GPU reads across the bus (its allocator.cpp; see [`device_values`]).
const SMALL_POOL_MAX_BYTES: usize = 8;
/// The bytes an array is given to be out of the small pool (MLX rounds 9 to 16 bytes up to 16).
const OUT_OF_SMALL_POOL_BYTES: usize = 16;

/// Whether MLX's CUDA build may keep `a` in its small pool: an array of 1 to 8 bytes (a slice of
/// a larger buffer is not, and copying it too costs a small gather).
fn in_small_pool(a: &Array) -> bool {
    (1..=SMALL_POOL_MAX_BYTES).contains(&a.nbytes())
}

/// A caller's input that MLX may keep in its small pool, as MLX's CUDA build should hand it to
/// a kernel: gathered on the launch's stream, and the kernel reads a view of the gather in the
/// input's shape and dtype ([`gathered_view`]). Every warp of the masked DeltaNet step reads its
/// mask of B * T bytes, which in the pool made the step several times slower at small B
/// (docs/benchmarks.md, eleventh session).
fn off_the_small_pool(a: &Array, stream: &Stream) -> Result<Array, MlxError> {
    let flat = mlx_rs::with_stream(stream, || a.reshape(&[a.size() as i32])).map_err(MlxError::Host)?;
    gathered_view(&flat, a.size(), a.shape(), stream)
}

/// The first `n` elements of the one-dimensional `flat`, in `shape`, as a view of their gather
/// on `stream` ([`padded_gather`]): what the kernel reads of a made input or of a small one.
/// Every op of the copy runs on the launch's stream, so it adds no cross-stream wait.
fn gathered_view(flat: &Array, n: usize, shape: &[i32], stream: &Stream) -> Result<Array, MlxError> {
    let gathered = padded_gather(flat, n, stream)?;
    mlx_rs::with_stream(stream, || gathered.index(..n as i32).reshape(shape)).map_err(MlxError::Host)
}

/// The first `n` elements of the one-dimensional `flat`, gathered on `stream` into an array of
/// at least 16 bytes (the positions past `n` repeat the first): a GPU op's output, so written
/// by the GPU and out of MLX's small pool. The gather is lazy like the launch; its index array
/// is made once per thread, stream and length (as [`device_values`] keeps its arrays), so it
/// moves to the GPU once.
fn padded_gather(flat: &Array, n: usize, stream: &Stream) -> Result<Array, MlxError> {
    /// Index arrays kept; past this (threads come and go) the cache starts over.
    const KEPT: usize = 1024;
    type Key = (std::thread::ThreadId, i32, usize, usize);
    static ORDERS: OnceLock<Mutex<HashMap<Key, Array>>> = OnceLock::new();
    let len = n.max(OUT_OF_SMALL_POOL_BYTES.div_ceil(flat.item_size().max(1)));
    let key: Key = (std::thread::current().id(), stream.get_index().map_err(MlxError::Host)?, n, len);
    let mut orders = ORDERS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if orders.len() >= KEPT && !orders.contains_key(&key) {
        orders.clear();
    }
    let order = orders
        .entry(key)
        .or_insert_with(|| {
            let positions: Vec<i32> = (0..len).map(|i| if i < n { i as i32 } else { 0 }).collect();
            Array::from_slice(&positions, &[len as i32])
        })
        .clone();
    drop(orders);
    mlx_rs::with_stream(stream, || flat.take_axis(&order, 0)).map_err(MlxError::Host)
}

/// The stream a CUDA kernel launches on: the thread's scoped stream, else MLX's GPU stream.
fn launch_stream() -> Stream {
    mlx_rs::thread_local_default_stream().unwrap_or_else(Stream::gpu)
}

/// The stream to launch on when the caller chose none. mlx-rs launches custom
/// kernels on the thread's scoped stream, else on MLX's default GPU stream;
/// an MLX built without a GPU has no such stream, and mlx-c would refuse the
/// empty handle before MLX sees the kernel. There the default device's stream
/// is used instead, so MLX itself answers (with "No Metal back-end").
fn fallback_stream() -> Result<Option<Stream>, Exception> {
    if mlx_rs::thread_local_default_stream().is_some() || !Stream::gpu().as_ptr().ctx.is_null() {
        return Ok(None);
    }
    Stream::try_default_on_device(&Device::try_default()?).map(Some)
}

/// CUDA's limits on a grid's blocks along x, y and z.
const CUDA_GRID_BLOCKS: [u64; 3] = CudaSource::MAX_GRID_BLOCKS;

/// [`MlxError::CudaGrid`] where a launch of `grid` threads in blocks of `threadgroup` (as MLX's
/// `cuda_kernel` divides them, rounding up) exceeds CUDA's limits.
fn check_cuda_grid(kernel: &str, grid: [u64; 3], threadgroup: [u64; 3]) -> Result<(), MlxError> {
    for (i, axis) in ['x', 'y', 'z'].into_iter().enumerate() {
        let (threads, block, limit) = (grid[i], threadgroup[i].max(1), CUDA_GRID_BLOCKS[i]);
        if threads.div_ceil(block) > limit {
            return Err(MlxError::CudaGrid { kernel: kernel.to_string(), axis, threads, block, limit });
        }
    }
    Ok(())
}

/// A value the plan checked to fit MLX's `i32`.
fn i32_of(n: u64) -> i32 {
    i32::try_from(n).expect("the launch checks keep sizes within i32")
}

impl Backend for MlxBackend {
    type Array = Array;
    type Error = MlxError;

    fn describe(&self, a: &Array) -> ArgInfo {
        ArgInfo {
            dtype: from_mlx_dtype(a.dtype()).ok_or_else(|| format!("{:?}", a.dtype())),
            shape: a.shape().iter().map(|&d| d.max(0) as u64).collect(),
            bytes: a.nbytes() as u64,
            // ensure_row_contiguous: MLX copies strided inputs before the kernel.
            row_contiguous: true,
            // MLX allocates its buffers page-aligned; views are copied (above).
            address: None,
        }
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<Array>, MlxError> {
        let (plan, arrays) = (launch.plan(), launch.arrays());
        let def = plan.def();
        // A Metal-only kernel is refused on CUDA before anything is built or launched.
        let cuda = gpu() == Gpu::Cuda;
        let (header, body) = source_for(def, gpu())?;
        // The CUDA body's block may differ from the Metal threadgroup; the grid is the same.
        let block = match (cuda, &def.cuda) {
            (true, Some(c)) => c.threadgroup,
            _ => plan.threadgroup(),
        };
        if cuda {
            check_cuda_grid(&def.name, plan.grid().map(u64::from), block.map(u64::from))?;
        }
        // On CUDA, one stream for the launch: its made inputs are gathered where it runs, and
        // so are the caller's inputs that MLX keeps in its small pool.
        let stream = cuda.then(launch_stream);
        let made: Vec<Option<Array>> = plan
            .inputs()
            .iter()
            .map(|input| match (input, &stream) {
                (Input::Array(i), Some(stream)) if in_small_pool(arrays[*i]) => off_the_small_pool(arrays[*i], stream).map(Some),
                (Input::Array(_), _) => Ok(None),
                (Input::Values(v), Some(stream)) => device_values(v, stream).map(Some),
                (Input::Values(v), None) => Ok(Some(Array::from_slice(&v.values, &v.shape.iter().map(|&d| i32_of(d)).collect::<Vec<_>>()))),
            })
            .collect::<Result<_, _>>()?;
        let inputs: Vec<&Array> = plan
            .inputs()
            .iter()
            .zip(&made)
            .map(|(input, made)| match (input, made) {
                (_, Some(a)) => a,
                (Input::Array(i), None) => arrays[*i],
                (Input::Values(_), None) => unreachable!("made above"),
            })
            .collect();
        let mut outputs: Vec<MetalKernelOutput> = Vec::with_capacity(plan.outputs().len());
        for o in plan.outputs() {
            let dtype = to_mlx_dtype(o.dtype).ok_or_else(|| MlxError::Unsupported(o.dtype))?;
            outputs.push(MetalKernelOutput { shape: o.shape.iter().map(|&d| i32_of(d)).collect(), dtype });
        }
        let grid = plan.grid().map(|g| i32_of(g.into()));
        let threadgroup = block.map(|t| i32_of(t.into()));
        let mut cache = cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let built = match cache.get(def.name.as_ref()) {
            Some(b) if b.is_from(def, header, body) => b,
            Some(_) => return Err(MlxError::NameConflict(def.name.to_string())),
            None => {
                let kernel = if cuda { Kernel::Cuda(build_cuda(def)?) } else { Kernel::Metal(build_metal(def)?) };
                let built = Built {
                    kernel,
                    header: header.to_string(),
                    body: body.to_string(),
                    inputs: def.input_names().iter().map(|s| s.to_string()).collect(),
                    outputs: def.output_names().iter().map(|s| s.to_string()).collect(),
                };
                cache.entry(def.name.to_string()).or_insert(built)
            }
        };

        // SAFETY (both languages): MLX's custom-kernel `apply` requires that, for these
        // inputs, outputs and launch configuration, the kernel stays inside its buffers,
        // never writes an input, writes every output element (no init_value is set) with
        // values valid for its dtype, and has no data races. The kernel is generated from the
        // same spec as `def`, and `kernelgen verify` (the emulator with guard regions,
        // poisoned outputs and every run order, for the Metal body and the CUDA body alike)
        // establishes these for every launch that satisfies `def`'s contract. `launch` is
        // `check`'s for exactly these arrays (a `Checked` is made nowhere else): every dtype,
        // shape, byte length and bounded value was checked, the made inputs hold the run-time
        // sizes and checked host values, a copy out of the small pool holds its input's
        // values in its dtype and shape, the outputs get `def`'s shapes and dtypes, the grid
        // and threadgroup (on CUDA, the body's block) are `def`'s at the checked sizes, and
        // `ensure_row_contiguous` makes
        // every input row-contiguous, as the body assumes.
        let result = match &built.kernel {
            Kernel::Metal(kernel) => {
                let ([gx, gy, gz], [tx, ty, tz]) = (grid, threadgroup);
                let launch = || unsafe { kernel.apply(&inputs, &outputs, (gx, gy, gz), (tx, ty, tz), MetalKernelApplyOptions::default()) };
                match fallback_stream().map_err(MlxError::Apply)? {
                    None => launch(),
                    Some(stream) => mlx_rs::with_stream(&stream, launch),
                }
                .map_err(MlxError::Apply)
            }
            Kernel::Cuda(kernel) => {
                let stream = stream.as_ref().expect("a CUDA kernel is built only where MLX runs CUDA");
                unsafe { apply_cuda(kernel, &inputs, &outputs, grid, threadgroup, stream) }
            }
        };
        drop(cache);
        let outputs = result?;
        if self.eager {
            mlx_rs::transforms::eval(outputs.iter()).map_err(MlxError::Eval)?;
        }
        Ok(outputs)
    }
}

/// The header and body MLX builds `def` from where its GPU is `gpu`: the CUDA body on
/// CUDA ([`MlxError::NoCudaBody`] where the family has none), else the Metal body.
pub fn source_for(def: &KernelDef, gpu: Gpu) -> Result<(&str, &str), MlxError> {
    match (gpu, &def.cuda) {
        (Gpu::Cuda, Some(c)) => Ok((c.header(), c.body())),
        (Gpu::Cuda, None) => Err(MlxError::NoCudaBody { kernel: def.name.to_string(), family: def.family.to_string() }),
        (Gpu::Metal | Gpu::None, _) => Ok((def.header(), def.body())),
    }
}

fn build_metal(def: &KernelDef) -> Result<MetalKernel, MlxError> {
    let options = MetalKernelOptions { header: def.header().to_string(), ensure_row_contiguous: KernelDef::ENSURE_ROW_CONTIGUOUS, atomic_outputs: false };
    MetalKernel::new(&def.name, &def.input_names(), &def.output_names(), def.body(), options).map_err(MlxError::Build)
}

/// mlx-c's vector of strings, freed when dropped.
struct CStrings(mlx_sys::mlx_vector_string);

impl CStrings {
    fn new(names: &[&str]) -> Self {
        let owned: Vec<std::ffi::CString> = names.iter().map(|n| c_string(n)).collect();
        let mut pointers: Vec<*const std::ffi::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        // SAFETY: `pointers` holds `owned.len()` valid C strings; mlx-c copies them.
        CStrings(unsafe { mlx_sys::mlx_vector_string_new_data(pointers.as_mut_ptr(), pointers.len()) })
    }
}

impl Drop for CStrings {
    fn drop(&mut self) {
        // SAFETY: made by `mlx_vector_string_new_data`, freed once.
        unsafe { mlx_sys::mlx_vector_string_free(self.0) };
    }
}

/// A generated name or source as a C string (they never hold a NUL: the generator writes
/// ASCII text and identifiers).
fn c_string(text: &str) -> std::ffi::CString {
    std::ffi::CString::new(text).expect("generated names and sources hold no NUL byte")
}

fn status(call: &'static str, status: i32) -> Result<(), MlxError> {
    if status == 0 { Ok(()) } else { Err(MlxError::Cuda { call, status }) }
}

/// Builds the kernel's CUDA body with mlx-c (`mlx_fast_cuda_kernel_new`: MLX assembles the
/// source, as `generated/cuda/` holds it, and compiles it at the first evaluation).
fn build_cuda(def: &KernelDef) -> Result<CudaKernel, MlxError> {
    let Some(cuda) = &def.cuda else { unreachable!("run refuses a kernel without a CUDA body first") };
    install_error_handler();
    let (inputs, outputs) = (CStrings::new(&def.input_names()), CStrings::new(&def.output_names()));
    let (name, body, header) = (c_string(&def.name), c_string(cuda.body()), c_string(cuda.header()));
    let shared_memory = i32::try_from(cuda.shared_memory_bytes).map_err(|_| MlxError::Cuda { call: "mlx_fast_cuda_kernel_new (shared memory over i32)", status: -1 })?;
    // SAFETY: every pointer is a live C string or vector for the call; mlx-c copies them.
    let kernel = unsafe { mlx_sys::mlx_fast_cuda_kernel_new(name.as_ptr(), inputs.0, outputs.0, body.as_ptr(), header.as_ptr(), KernelDef::ENSURE_ROW_CONTIGUOUS, shared_memory) };
    if kernel.ctx.is_null() {
        return Err(MlxError::Cuda { call: "mlx_fast_cuda_kernel_new", status: -1 });
    }
    Ok(CudaKernel(kernel))
}

/// Adds the CUDA kernel to MLX's graph on `stream` (the launch's: [`launch_stream`]):
/// lazily, as `MetalKernel::apply` does.
///
/// # Safety
/// As `MetalKernel::apply`: see the launch's SAFETY comment in `run`.
unsafe fn apply_cuda(kernel: &CudaKernel, inputs: &[&Array], outputs: &[MetalKernelOutput], grid: [i32; 3], threadgroup: [i32; 3], stream: &Stream) -> Result<Vec<Array>, MlxError> {
    struct Config(mlx_sys::mlx_fast_cuda_kernel_config);
    impl Drop for Config {
        fn drop(&mut self) {
            // SAFETY: made by `mlx_fast_cuda_kernel_config_new`, freed once.
            unsafe { mlx_sys::mlx_fast_cuda_kernel_config_free(self.0) }
        }
    }
    struct Arrays(mlx_sys::mlx_vector_array);
    impl Drop for Arrays {
        fn drop(&mut self) {
            // SAFETY: made by `mlx_vector_array_new*`, freed once.
            unsafe { mlx_sys::mlx_vector_array_free(self.0) };
        }
    }
    install_error_handler();
    // SAFETY: every handle passed is live for its call; shapes point to `len` ints.
    unsafe {
        let config = Config(mlx_sys::mlx_fast_cuda_kernel_config_new());
        for o in outputs {
            status("mlx_fast_cuda_kernel_config_add_output_arg", mlx_sys::mlx_fast_cuda_kernel_config_add_output_arg(config.0, o.shape.as_ptr(), o.shape.len(), o.dtype.into()))?;
        }
        let ([gx, gy, gz], [tx, ty, tz]) = (grid, threadgroup);
        status("mlx_fast_cuda_kernel_config_set_grid", mlx_sys::mlx_fast_cuda_kernel_config_set_grid(config.0, gx, gy, gz))?;
        status("mlx_fast_cuda_kernel_config_set_thread_group", mlx_sys::mlx_fast_cuda_kernel_config_set_thread_group(config.0, tx, ty, tz))?;
        let handles: Vec<mlx_sys::mlx_array> = inputs.iter().map(|a| a.as_ptr()).collect();
        let ins = Arrays(mlx_sys::mlx_vector_array_new_data(handles.as_ptr(), handles.len()));
        let mut outs = Arrays(mlx_sys::mlx_vector_array_new());
        status("mlx_fast_cuda_kernel_apply", mlx_sys::mlx_fast_cuda_kernel_apply(&mut outs.0, kernel.0, ins.0, config.0, stream.as_ptr()))?;
        (0..mlx_sys::mlx_vector_array_size(outs.0))
            .map(|i| {
                let mut a = mlx_sys::mlx_array_new();
                status("mlx_vector_array_get", mlx_sys::mlx_vector_array_get(&mut a, outs.0, i)).map(|()| Array::from_ptr(a))
            })
            .collect()
    }
}

/// Wraps packed bytes (a generated packer's output) as an MLX `uint8` array:
/// MLX owns `bytes` from here on and frees them when the last array using
/// them is dropped. The bytes are page-aligned, so MLX's Metal allocator
/// uses them in place, without a copy (the seed's zero-copy slot view,
/// without its `unsafe`); an MLX without Metal copies them. A buffer of 2^31 bytes or
/// more is [`MlxError::TooLarge`] (an MLX dimension is an `i32`).
pub fn array_from_bytes(bytes: crate::pack::AlignedBytes) -> Result<Array, MlxError> {
    let shape = [i32::try_from(bytes.len()).map_err(|_| MlxError::TooLarge(bytes.len()))?];
    Ok(managed_u8_array(bytes, &shape))
}

/// A `u8` MLX array of `shape` over `bytes`, without a copy: MLX owns them from here and
/// frees them when the array goes. `shape`'s product is `bytes.len()`.
fn managed_u8_array(bytes: crate::pack::AlignedBytes, shape: &[i32]) -> Array {
    unsafe extern "C" fn release(payload: *mut std::ffi::c_void) {
        // SAFETY: `payload` is the Box made below, released exactly once by MLX.
        drop(unsafe { Box::from_raw(payload.cast::<crate::pack::AlignedBytes>()) });
    }
    let data = bytes.as_ptr().cast_mut().cast::<std::ffi::c_void>();
    let payload = Box::into_raw(Box::new(bytes)).cast::<std::ffi::c_void>();
    // SAFETY: `data` points to the product of `shape` bytes owned by `payload`, which stays
    // alive (and never moves: it is on the heap) until MLX calls `release`; MLX only reads
    // the bytes.
    unsafe {
        let raw = mlx_sys::mlx_array_new_data_managed_payload(data, shape.as_ptr(), shape.len() as i32, mlx_sys::mlx_dtype__MLX_UINT8, payload, Some(release));
        Array::from_ptr(raw)
    }
}

/// Stacks packed buffers of one layout (S experts' `pack_slot` outputs, say) into the MLX
/// `uint8` array `[S, layout.bytes]` that a kernel taking an array of them reads (the expert
/// family's `slots`), as [`crate::pack::stack`] stacks them, then wraps it as
/// [`array_from_bytes`] wraps one buffer (in place where MLX has Metal). Each dimension must
/// fit an `i32`; the whole may pass 2^31 bytes (256 residency slots of a large expert do).
pub fn array_from_slots(layout: &crate::contract::PackedLayout, buffers: &[&[u8]]) -> Result<Array, crate::pack::PackError> {
    let too_large = |n: usize| crate::pack::PackError { buffer: layout.name.to_string(), problems: vec![("(all)".into(), MlxError::TooLarge(n).to_string())] };
    let shape = [i32::try_from(buffers.len()).map_err(|_| too_large(buffers.len()))?, i32::try_from(layout.bytes).map_err(|_| too_large(layout.bytes as usize))?];
    Ok(managed_u8_array(crate::pack::stack(layout, buffers)?, &shape))
}

/// Packs a buffer from MLX arrays, one per region in the layout's order
/// (`int8` for Q4 and int8 regions, `float32`, `float16`, `bfloat16`,
/// `int32`, `uint32`, `uint8`), as the generated host packers do, and wraps
/// the result without a copy ([`array_from_bytes`]). This evaluates the
/// arrays (packing is set-up work, not a launch).
pub fn pack_arrays(layout: &crate::contract::PackedLayout, arrays: &[&Array]) -> Result<Array, crate::pack::PackError> {
    use crate::pack::{PackError, RegionData};
    let fail = |region: &str, what: String| PackError { buffer: layout.name.to_string(), problems: vec![(region.to_string(), what)] };
    if arrays.len() != layout.regions.len() {
        return Err(fail("(all)", format!("expected {} arrays, given {}", layout.regions.len(), arrays.len())));
    }
    for (r, a) in layout.regions.iter().zip(arrays) {
        a.eval().map_err(|e| fail(&r.name, format!("MLX failed to evaluate it: {e}")))?;
    }
    let mut data = Vec::with_capacity(arrays.len());
    for (r, a) in layout.regions.iter().zip(arrays) {
        use crate::contract::Format;
        // a region with a shape takes an array of that shape (a transposed matrix has the
        // same element count)
        let shape: Vec<u64> = a.shape().iter().map(|&d| d as u64).collect();
        if !r.shape.is_empty() && shape != *r.shape {
            return Err(fail(&r.name, format!("expected an array of shape {:?}, given {shape:?}", r.shape)));
        }
        let wrong = |want: &str, e: mlx_rs::error::AsSliceError| fail(&r.name, format!("expected a row-contiguous {want} array, given a {:?} one: {e}", a.dtype()));
        let d = match r.format {
            Format::Q4 | Format::I8 => RegionData::I8(a.try_as_slice::<i8>().map_err(|e| wrong("int8", e))?),
            Format::F32 => RegionData::F32(a.try_as_slice::<f32>().map_err(|e| wrong("float32", e))?),
            Format::F16 => RegionData::F16(a.try_as_slice::<half::f16>().map_err(|e| wrong("float16", e))?),
            Format::Bf16 => RegionData::Bf16(a.try_as_slice::<half::bf16>().map_err(|e| wrong("bfloat16", e))?),
            Format::I32 => RegionData::I32(a.try_as_slice::<i32>().map_err(|e| wrong("int32", e))?),
            Format::U32 => RegionData::U32(a.try_as_slice::<u32>().map_err(|e| wrong("uint32", e))?),
            _ => RegionData::Bytes(a.try_as_slice::<u8>().map_err(|e| wrong("uint8", e))?),
        };
        let d = if r.format == Format::Q4 { if let RegionData::I8(v) = d { RegionData::Q4(v) } else { d } } else { d };
        data.push(d);
    }
    array_from_bytes(crate::pack::pack(layout, &data)?).map_err(|e| fail("(all)", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small input's copy (made where MLX runs CUDA; its arithmetic is the same on any
    /// stream, so this runs it on the CPU's): the input's shape, dtype and values, a 0-d one
    /// and one-byte elements among them, out of a gather of at least 16 bytes.
    #[test]
    fn a_small_input_is_copied_with_its_shape_dtype_and_values() {
        let cpu = Stream::cpu();
        let cases = [
            Array::from_slice(&[true], &[1, 1]),
            Array::from_slice(&[true, false, true, true, false, false], &[2, 3]),
            Array::from_slice(&[7u8], &[]),
            Array::from_slice(&[1.5f32, -2.0], &[2]),
            Array::from_slice(&[3i32], &[1]).as_dtype(mlx_rs::Dtype::Bfloat16).unwrap().reshape(&[1, 1]).unwrap(),
        ];
        for a in &cases {
            assert!(in_small_pool(a), "{a:?}");
            let copy = off_the_small_pool(a, &cpu).unwrap();
            assert_eq!((copy.shape(), copy.dtype()), (a.shape(), a.dtype()));
            let (a32, c32) = (a.as_dtype(mlx_rs::Dtype::Float32).unwrap(), copy.as_dtype(mlx_rs::Dtype::Float32).unwrap());
            mlx_rs::transforms::eval([&a32, &c32]).unwrap();
            assert_eq!(a32.as_slice::<f32>(), c32.as_slice::<f32>(), "{a:?}");
        }
        // the gather behind the view: 16 bytes at least, the input's elements first
        for a in &cases {
            let gathered = padded_gather(&a.reshape(&[a.size() as i32]).unwrap(), a.size(), &cpu).unwrap();
            assert!(gathered.nbytes() >= OUT_OF_SMALL_POOL_BYTES && gathered.ndim() == 1, "{a:?}: {gathered:?}");
            let head = gathered.index(..a.size() as i32).reshape(a.shape()).unwrap();
            assert!(head.eq_values(a).unwrap(), "{a:?}: {gathered:?}");
        }
        // 9 bytes, or none: MLX allocates them out of the pool, or not at all
        assert!(!in_small_pool(&Array::from_slice(&[0u8; 9], &[9])) && !in_small_pool(&Array::from_slice(&[0u8; 0], &[0])));
    }

    /// A made input (run-time sizes, checked host values) on a stream, as on CUDA: its values in
    /// its shape, as int32, out of a gather of at least 16 bytes.
    #[test]
    fn made_inputs_hold_their_values_in_their_shape() {
        let cpu = Stream::cpu();
        for (shape, values) in [(vec![1], vec![8]), (vec![2, 3], vec![1, -2, 3, 4, 5, 6]), (vec![5], vec![9, 8, 7, 6, 5])] {
            let v = crate::launch::HostValues { shape: shape.clone(), values: values.clone() };
            let a = device_values(&v, &cpu).unwrap();
            let want: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
            assert_eq!((a.shape(), a.dtype()), (want.as_slice(), mlx_rs::Dtype::Int32));
            a.eval().unwrap();
            assert_eq!(a.as_slice::<i32>(), values.as_slice());
        }
    }

    #[test]
    fn a_grid_past_cudas_block_limits_is_refused_naming_the_axis() {
        // the grouped gate_up: z = M * K samples in blocks of 1
        assert!(check_cuda_grid("g", [128, 512, 65535], [128, 1, 1]).is_ok());
        let e = check_cuda_grid("g", [128, 512, 65536], [128, 1, 1]).unwrap_err();
        assert!(matches!(e, MlxError::CudaGrid { axis: 'z', threads: 65536, block: 1, limit: 65535, .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "kernel `g`: 65536 threads along the grid's z in blocks of 1 are 65536 blocks, above CUDA's limit of 65535 along z; launch it on fewer rows at a time"
        );
        // y counts blocks of the threadgroup's y, rounded up: 65535 * 4 + 1 threads are 65536 blocks
        assert!(check_cuda_grid("g", [32, 65535 * 4, 1], [32, 4, 1]).is_ok());
        assert!(matches!(check_cuda_grid("g", [32, 65535 * 4 + 1, 1], [32, 4, 1]), Err(MlxError::CudaGrid { axis: 'y', .. })));
        // x allows 2^31 - 1 blocks
        assert!(check_cuda_grid("g", [u64::from(u32::MAX), 1, 1], [32, 1, 1]).is_ok());
    }
}
