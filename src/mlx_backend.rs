//! Launching a generated kernel through MLX (`mlx_rs::fast::MetalKernel`),
//! behind the cargo feature `mlx`.
//!
//! [`apply`] is the one entry point the typed launchers use: it builds the
//! kernel's `MetalKernel` once per kernel name (cached for the process), hands
//! MLX exactly what the [`KernelDef`] says (header, body, buffer names, output
//! shapes and dtypes at the run-time sizes, grid and threadgroup), evaluates the
//! outputs, and turns every MLX failure into an [`MlxLaunchError`]: without a
//! Metal device (Linux, the CPU build of MLX) that is MLX's own "no Metal
//! back-end" error, never a panic.
//!
//! On Linux this builds against the CPU wheel of MLX through `make test-mlx`
//! (see `mlx/README.md`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use mlx_rs::fast::{MetalKernel, MetalKernelApplyOptions, MetalKernelOptions, MetalKernelOutput};
use mlx_rs::{Array, Device, Stream};

use crate::contract::{BufferDef, Dtype, KernelDef, Source};

/// What MLX was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlxStage {
    /// `MetalKernel::new`.
    Build,
    /// `MetalKernel::apply` (on a machine without Metal, MLX fails here).
    Apply,
    /// Evaluating the outputs (compiling and running the kernel).
    Eval,
}

impl fmt::Display for MlxStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MlxStage::Build => "building the kernel",
            MlxStage::Apply => "launching the kernel",
            MlxStage::Eval => "evaluating the outputs",
        })
    }
}

/// Why [`apply`] did not return outputs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MlxLaunchError {
    /// The call does not match the kernel's contract (argument count, shape,
    /// dtype, run-time sizes, or a size MLX's `i32` cannot hold). Nothing
    /// reached MLX.
    #[error("kernel `{kernel}`, {argument}: expected {expected}, got {given}")]
    Contract {
        kernel: &'static str,
        argument: String,
        expected: String,
        given: String,
    },
    /// MLX itself failed; `message` is MLX's text.
    #[error("kernel `{kernel}`: MLX failed {stage}: {message}")]
    Mlx {
        kernel: &'static str,
        stage: MlxStage,
        message: String,
    },
}

impl MlxLaunchError {
    /// The kernel the error is about.
    pub fn kernel(&self) -> &'static str {
        match self {
            MlxLaunchError::Contract { kernel, .. } | MlxLaunchError::Mlx { kernel, .. } => kernel,
        }
    }

    /// True when MLX failed because it was built without Metal (the CPU
    /// build on Linux): its "[metal_kernel] No Metal back-end." error.
    pub fn is_no_metal(&self) -> bool {
        match self {
            MlxLaunchError::Mlx { message, .. } => message.contains("No Metal back-end"),
            MlxLaunchError::Contract { .. } => false,
        }
    }
}

/// kernelgen's dtype as MLX's.
pub fn to_mlx_dtype(dtype: Dtype) -> mlx_rs::Dtype {
    match dtype {
        Dtype::F32 => mlx_rs::Dtype::Float32,
        Dtype::F16 => mlx_rs::Dtype::Float16,
        Dtype::Bf16 => mlx_rs::Dtype::Bfloat16,
        Dtype::I8 => mlx_rs::Dtype::Int8,
        Dtype::U8 => mlx_rs::Dtype::Uint8,
        Dtype::U16 => mlx_rs::Dtype::Uint16,
        Dtype::I32 => mlx_rs::Dtype::Int32,
        Dtype::U32 => mlx_rs::Dtype::Uint32,
        Dtype::Bool => mlx_rs::Dtype::Bool,
    }
}

/// MLX's dtype as kernelgen's; `None` for the ones no kernel uses (64-bit,
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

/// A built kernel and what it was built from.
struct Cached {
    kernel: MetalKernel,
    header: &'static str,
    body: &'static str,
    inputs: Vec<&'static str>,
    outputs: Vec<&'static str>,
}

impl Cached {
    fn built_from(&self, def: &KernelDef) -> bool {
        self.header == def.header
            && self.body == def.body
            && self.inputs == def.input_names()
            && self.outputs == def.output_names()
    }
}

// SAFETY: a `MetalKernel` owns a heap object of mlx-c's (a name, sources and a
// C++ closure) with no tie to the thread that made it; the cache below only
// touches it while holding its mutex, so it is never used from two threads at
// once.
unsafe impl Send for Cached {}

fn cache() -> &'static Mutex<HashMap<&'static str, Cached>> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Cached>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn contract(
    def: &KernelDef,
    argument: impl Into<String>,
    expected: impl fmt::Display,
    given: impl fmt::Display,
) -> MlxLaunchError {
    MlxLaunchError::Contract {
        kernel: def.name,
        argument: argument.into(),
        expected: expected.to_string(),
        given: given.to_string(),
    }
}

fn mlx_err(def: &KernelDef, stage: MlxStage, e: mlx_rs::error::Exception) -> MlxLaunchError {
    MlxLaunchError::Mlx {
        kernel: def.name,
        stage,
        message: e.what().to_string(),
    }
}

fn to_i32(def: &KernelDef, argument: String, value: u64) -> Result<i32, MlxLaunchError> {
    i32::try_from(value).map_err(|_| contract(def, argument, "a value that fits MLX's i32", value))
}

/// A buffer's shape at `sizes` in MLX's `i32`s.
fn shape_i32(def: &KernelDef, b: &BufferDef, sizes: &[u64]) -> Result<Vec<i32>, MlxLaunchError> {
    let shape = b
        .shape_at(sizes)
        .ok_or_else(|| contract(def, b.name, "a shape without u64 overflow", "an overflow"))?;
    shape
        .into_iter()
        .map(|d| to_i32(def, format!("{} shape", b.name), d))
        .collect()
}

/// The stream to launch on when the caller chose none. mlx-rs launches custom
/// kernels on the thread's scoped stream, else on MLX's default GPU stream;
/// an MLX built without a GPU has no such stream, and mlx-c would refuse the
/// empty handle before MLX sees the kernel. There the default device's stream
/// is used instead, so MLX itself answers (with "No Metal back-end").
fn fallback_stream() -> Result<Option<Stream>, mlx_rs::error::Exception> {
    if mlx_rs::thread_local_default_stream().is_some() || !Stream::gpu().as_ptr().ctx.is_null() {
        return Ok(None);
    }
    Stream::try_default_on_device(&Device::try_default()?).map(Some)
}

fn show_shape(shape: &[i32]) -> String {
    format!("{shape:?}")
}

/// The array MLX gets for a [`Source::SizeValue`] input: run-time size
/// `sizes[i]` as a one-element i32 (or u32) of the buffer's shape.
fn size_value(
    def: &KernelDef,
    b: &BufferDef,
    i: usize,
    sizes: &[u64],
) -> Result<Array, MlxLaunchError> {
    let shape = shape_i32(def, b, sizes)?;
    if shape.iter().product::<i32>() != 1 {
        return Err(contract(
            def,
            b.name,
            "a one-element size buffer",
            show_shape(&shape),
        ));
    }
    let value = *sizes
        .get(i)
        .ok_or_else(|| contract(def, b.name, format!("run-time size #{i}"), "no such size"))?;
    let name = || {
        format!(
            "{} (size {})",
            b.name,
            def.sizes.get(i).copied().unwrap_or("?")
        )
    };
    match b.dtype {
        Dtype::I32 => Ok(Array::from_slice(&[to_i32(def, name(), value)?], &shape)),
        Dtype::U32 => {
            let v = u32::try_from(value)
                .map_err(|_| contract(def, name(), "a value that fits u32", value))?;
            Ok(Array::from_slice(&[v], &shape))
        }
        other => Err(contract(def, b.name, "an i32 or u32 size buffer", other)),
    }
}

/// Launches `def` at the run-time `sizes` and returns its outputs, evaluated.
///
/// `inputs` are the arrays of `def`'s [`Source::Data`] inputs, in contract
/// order; the [`Source::SizeValue`] inputs are not passed: they are made here
/// from `sizes` (which follow `def.sizes`). This is the convention of
/// `Backend::run_unchecked`. The counts, every input's dtype and exact shape at
/// `sizes`, and every extent MLX takes as `i32` are checked here as a backstop
/// ([`MlxLaunchError::Contract`], before anything reaches MLX); the typed
/// launcher layer checks all of that and the rest of each [`BufferDef`]'s
/// preconditions (regions, alignment, row-contiguity) before calling, and
/// reports them as its own errors.
///
/// The kernel is built once per `def.name` and cached for the process; MLX
/// compiles it on first use (`ensure_row_contiguous` is on, so strided inputs
/// are copied first). Without a scoped stream it runs on MLX's GPU stream, or,
/// in an MLX without a GPU, on the default device's stream. Errors from MLX at
/// any stage, including "No Metal back-end" on machines without Metal, come
/// back as [`MlxLaunchError::Mlx`].
pub fn apply(
    def: &KernelDef,
    inputs: &[&Array],
    sizes: &[u64],
) -> Result<Vec<Array>, MlxLaunchError> {
    if sizes.len() != def.sizes.len() {
        return Err(contract(
            def,
            "run-time sizes",
            format!("{} ({})", def.sizes.len(), def.sizes.join(", ")),
            sizes.len(),
        ));
    }
    let data: Vec<&BufferDef> = def
        .inputs
        .iter()
        .filter(|b| b.source == Source::Data)
        .collect();
    if inputs.len() != data.len() {
        let names: Vec<&str> = data.iter().map(|b| b.name).collect();
        return Err(contract(
            def,
            "inputs",
            format!("{} data inputs ({})", data.len(), names.join(", ")),
            inputs.len(),
        ));
    }
    for (b, a) in data.iter().zip(inputs) {
        let want = shape_i32(def, b, sizes)?;
        if a.dtype() != to_mlx_dtype(b.dtype) {
            return Err(contract(def, b.name, b.dtype, format!("{:?}", a.dtype())));
        }
        if a.shape() != want.as_slice() {
            return Err(contract(
                def,
                b.name,
                show_shape(&want),
                show_shape(a.shape()),
            ));
        }
    }
    let size_values: Vec<Array> = def
        .inputs
        .iter()
        .filter_map(|b| match b.source {
            Source::SizeValue(i) => Some(size_value(def, b, i, sizes)),
            Source::Data => None,
        })
        .collect::<Result<_, _>>()?;
    let (mut given, mut made) = (inputs.iter(), size_values.iter());
    let all_inputs: Vec<&Array> = def
        .inputs
        .iter()
        .map(|b| match b.source {
            Source::Data => *given.next().expect("counted above"),
            Source::SizeValue(_) => made.next().expect("made above"),
        })
        .collect();
    let outputs = def
        .outputs
        .iter()
        .map(|b| {
            Ok(MetalKernelOutput {
                shape: shape_i32(def, b, sizes)?,
                dtype: to_mlx_dtype(b.dtype),
            })
        })
        .collect::<Result<Vec<_>, MlxLaunchError>>()?;
    let grid = def
        .grid_at(sizes)
        .ok_or_else(|| contract(def, "grid", "a grid without u64 overflow", "an overflow"))?;
    let grid = (
        to_i32(def, "grid x".into(), grid[0])?,
        to_i32(def, "grid y".into(), grid[1])?,
        to_i32(def, "grid z".into(), grid[2])?,
    );
    let tg = def.threadgroup;
    let threadgroup = (
        to_i32(def, "threadgroup x".into(), tg[0].into())?,
        to_i32(def, "threadgroup y".into(), tg[1].into())?,
        to_i32(def, "threadgroup z".into(), tg[2].into())?,
    );

    let mut cache = cache()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let cached = match cache.get(def.name) {
        Some(c) if c.built_from(def) => c,
        Some(_) => {
            return Err(contract(
                def,
                "kernel name",
                "one definition per name",
                "a second definition with another header, body or buffer names",
            ));
        }
        None => {
            let kernel = MetalKernel::new(
                def.name,
                &def.input_names(),
                &def.output_names(),
                def.body,
                MetalKernelOptions {
                    header: def.header.to_string(),
                    ensure_row_contiguous: true,
                    atomic_outputs: false,
                },
            )
            .map_err(|e| mlx_err(def, MlxStage::Build, e))?;
            cache.entry(def.name).or_insert(Cached {
                kernel,
                header: def.header,
                body: def.body,
                inputs: def.input_names(),
                outputs: def.output_names(),
            })
        }
    };

    // SAFETY: `MetalKernel::apply` requires that, for these inputs, outputs and
    // launch configuration, the kernel stays inside its buffers, never writes
    // an input, writes every output element (no init_value is set) with values
    // valid for its dtype, and has no data races. The kernel body is generated
    // from the same spec as `def`, and the generator's verification (`kernelgen
    // verify`: the emulator with guard pages) establishes these for every
    // launch that satisfies `def`'s contract. Callers (the typed launchers)
    // validate every BufferDef with contract checks before calling: dtype, rank
    // and every dimension, byte lengths, regions inside packed slots,
    // alignment. Counts, dtypes, exact shapes and i32 ranges are checked again
    // above, and the size values are made here from `sizes`. The outputs get
    // exactly `def`'s shapes and dtypes, the grid and threadgroup are `def`'s
    // at `sizes`, and `ensure_row_contiguous` makes every input row-contiguous,
    // as the body assumes.
    let launch = || unsafe {
        cached.kernel.apply(
            &all_inputs,
            &outputs,
            grid,
            threadgroup,
            MetalKernelApplyOptions::default(),
        )
    };
    let result = match fallback_stream() {
        Ok(None) => launch(),
        Ok(Some(stream)) => mlx_rs::with_stream(&stream, launch),
        Err(e) => Err(e),
    };
    drop(cache);
    let arrays = result.map_err(|e| mlx_err(def, MlxStage::Apply, e))?;
    mlx_rs::transforms::eval(arrays.iter()).map_err(|e| mlx_err(def, MlxStage::Eval, e))?;
    Ok(arrays)
}
