//! What every generated kernel promises and requires, as plain data.
//!
//! One `KernelDef` per generated kernel is the single source of truth for its
//! argument layout (as ggml-metal's shared argument header is): the launchers,
//! the MLX backend, the emulator backend, `kernelgen verify` and the manifest
//! all read the same description, so they cannot disagree about buffer order,
//! dtypes or shapes.

use std::fmt;

/// Element types a kernel buffer can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    I8,
    U8,
    U16,
    I32,
    U32,
    Bool,
}

impl Dtype {
    pub const ALL: [Dtype; 9] = [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::I8,
        Dtype::U8,
        Dtype::U16,
        Dtype::I32,
        Dtype::U32,
        Dtype::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 | Dtype::U16 => 2,
            Dtype::I8 | Dtype::U8 | Dtype::Bool => 1,
        }
    }

    /// The Metal type name MLX writes in a kernel signature (`get_type_string`).
    pub const fn metal_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::F16 => "float16_t",
            Dtype::Bf16 => "bfloat16_t",
            Dtype::I8 => "int8_t",
            Dtype::U8 => "uint8_t",
            Dtype::U16 => "uint16_t",
            Dtype::I32 => "int32_t",
            Dtype::U32 => "uint32_t",
            Dtype::Bool => "bool",
        }
    }

    /// numpy's name for the dtype (bf16 has none in numpy: it travels as uint16).
    pub const fn numpy_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::Bf16 => "bfloat16",
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::Bool => "bool",
        }
    }

    /// The short name used in specs and kernel names.
    pub const fn short_name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::Bool => "bool",
        }
    }

    /// Parses numpy names (`float32`, `bfloat16`, ...) and short names (`f32`, `bf16`, ...).
    pub fn parse(name: &str) -> Option<Dtype> {
        Dtype::ALL
            .into_iter()
            .find(|d| d.numpy_name() == name || d.short_name() == name)
            .or(match name {
                "half" => Some(Dtype::F16),
                "float" => Some(Dtype::F32),
                _ => None,
            })
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// One dimension (or grid extent) as `coeff * product of run-time sizes`.
///
/// `sizes` index into [`KernelDef::sizes`]. Every seed geometry is of this form
/// (for example the DeltaNet grid's `B * Hv` is `Dim { coeff: Hv, sizes: &[B] }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim {
    pub coeff: u64,
    pub sizes: &'static [usize],
}

impl Dim {
    pub const fn fixed(n: u64) -> Dim {
        Dim {
            coeff: n,
            sizes: &[],
        }
    }

    /// The value at the given run-time sizes; `None` on overflow.
    pub fn eval(&self, sizes: &[u64]) -> Option<u64> {
        self.sizes
            .iter()
            .try_fold(self.coeff, |acc, &i| acc.checked_mul(sizes[i]))
    }

    /// `"4*M"`, `"128"`, `"32*B*T"`, with the size names of `def`.
    pub fn describe(&self, names: &[&str]) -> String {
        let mut parts = Vec::new();
        if self.coeff != 1 || self.sizes.is_empty() {
            parts.push(self.coeff.to_string());
        }
        parts.extend(self.sizes.iter().map(|&i| names[i].to_string()));
        parts.join("*")
    }
}

/// A named byte range inside a packed buffer (an expert slot's weight and
/// scale regions). The emulator poisons the gaps between regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: &'static str,
    pub offset: u64,
    pub bytes: u64,
    /// Required alignment of `offset` (and of the buffer's start), in bytes.
    pub align: u64,
}

/// Where a buffer's contents come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Given by the caller (an input) or produced by the kernel (an output).
    Data,
    /// A one-element int32 input that carries run-time size `sizes[i]`; the
    /// launcher fills it, so a new value never recompiles the kernel.
    SizeValue(usize),
}

/// One kernel argument buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferDef {
    pub name: &'static str,
    pub dtype: Dtype,
    pub shape: &'static [Dim],
    pub source: Source,
    /// Declared regions of a packed byte buffer (empty for ordinary arrays).
    pub regions: &'static [Region],
    /// Alignment in bytes the kernel relies on for the buffer's start.
    pub align: u64,
    /// Every element must be at most run-time size `sizes[i]`: a count the
    /// kernel loops over (DeltaNet's kept lengths). Checked before launch.
    pub at_most: Option<usize>,
}

impl BufferDef {
    /// Elements at the given run-time sizes.
    pub fn elements(&self, sizes: &[u64]) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.eval(sizes)?))
    }

    /// Shape at the given run-time sizes.
    pub fn shape_at(&self, sizes: &[u64]) -> Option<Vec<u64>> {
        self.shape.iter().map(|d| d.eval(sizes)).collect()
    }
}

/// Everything a backend needs to launch one generated kernel.
///
/// A `KernelDef` is trusted data: launches are safe because the checks in
/// `crate::launch` hold the arguments to this contract *and* the kernel was
/// generated from the same spec and verified against it (`kernelgen verify`,
/// with guard pages). A hand-written `KernelDef` is its author's
/// responsibility.
#[derive(Clone, Copy, Debug)]
pub struct KernelDef {
    /// kernelgen's name: `<geometry>_<family>_<axis values>[_<part>]`.
    pub name: &'static str,
    pub family: &'static str,
    /// The spec file it was generated from, relative to the project root.
    pub spec: &'static str,
    /// The function name MLX gives the kernel (`custom_kernel_<name>_<types>`).
    pub mlx_name: &'static str,
    /// The header (helper functions placed before the kernel) and the body,
    /// as handed to `MetalKernel::new`.
    pub header: &'static str,
    pub body: &'static str,
    /// The full source exactly as MLX assembles it (the checked-in `.metal`).
    pub metal: &'static str,
    /// Path of the `.metal` file, relative to the project root.
    pub metal_path: &'static str,
    pub inputs: &'static [BufferDef],
    pub outputs: &'static [BufferDef],
    /// Run-time sizes, named as in the spec (e.g. `["M"]`); they never recompile.
    pub sizes: &'static [&'static str],
    /// Threads in the grid (MLX's `grid` counts threads, not threadgroups).
    pub grid: [Dim; 3],
    pub threadgroup: [u32; 3],
    pub threadgroup_memory_bytes: u32,
}

impl KernelDef {
    pub fn threads_per_threadgroup(&self) -> u32 {
        self.threadgroup.iter().product()
    }

    /// Grid extents at the given run-time sizes; `None` on overflow.
    pub fn grid_at(&self, sizes: &[u64]) -> Option<[u64; 3]> {
        Some([
            self.grid[0].eval(sizes)?,
            self.grid[1].eval(sizes)?,
            self.grid[2].eval(sizes)?,
        ])
    }

    pub fn input_names(&self) -> Vec<&'static str> {
        self.inputs.iter().map(|b| b.name).collect()
    }

    pub fn output_names(&self) -> Vec<&'static str> {
        self.outputs.iter().map(|b| b.name).collect()
    }
}
