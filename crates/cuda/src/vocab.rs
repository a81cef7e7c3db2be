//! CUDA's vocabulary: the words of CUDA C++ and of the source MLX wraps a CUDA body in that
//! kernelgen's stages read, in one place (the twin of `kernelgen_msl::vocab`, of the same
//! shape: the thread builtins, the reserved words, the type names). The generator checks the
//! names of a CUDA kernel's parameters against [`reserved`] (buffer types are
//! [`Dtype::cuda_name`](kernelgen_contract::Dtype::cuda_name), beside Metal's, on the contract's one dtype table); the emulator's CUDA
//! mode reads a source with the rest: the headers it may include ([`INCLUDES`]), the macros
//! nvrtc predefines, and the names those headers give a body.

#[cfg(test)]
use kernelgen_contract::Dtype;

/// A built-in variable: what the launch gives each thread (CUDA C++ Programming Guide,
/// "Built-in Variables"). A CUDA kernel reads them as globals; Metal passes the same values as
/// attributed parameters (named in each variant's docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Builtin {
    /// `threadIdx` (`uint3`): the thread's position in its block (Metal's
    /// `thread_position_in_threadgroup`).
    ThreadIdx,
    /// `blockIdx` (`uint3`): the block's position in the grid (`threadgroup_position_in_grid`).
    BlockIdx,
    /// `blockDim` (`dim3`): threads per block (`threads_per_threadgroup`).
    BlockDim,
    /// `gridDim` (`dim3`): blocks in the grid (`threadgroups_per_grid`): MLX launches
    /// `ceil(grid / threadgroup)` blocks per axis, the grid counting threads as on Metal.
    GridDim,
    /// `warpSize` (`int`, 32): threads per warp (`threads_per_simdgroup`).
    WarpSize,
}

impl Builtin {
    /// Every built-in variable.
    pub const ALL: [Builtin; 5] = [Builtin::ThreadIdx, Builtin::BlockIdx, Builtin::BlockDim, Builtin::GridDim, Builtin::WarpSize];

    /// The variable's name (`threadIdx`).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::ThreadIdx => "threadIdx",
            Builtin::BlockIdx => "blockIdx",
            Builtin::BlockDim => "blockDim",
            Builtin::GridDim => "gridDim",
            Builtin::WarpSize => "warpSize",
        }
    }

    /// The built-in variable of a name (`blockDim`).
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Its type: `uint3` for positions, `dim3` for sizes, `int` for the warp size.
    pub fn cuda_type(self) -> &'static str {
        match self {
            Builtin::ThreadIdx | Builtin::BlockIdx => "uint3",
            Builtin::BlockDim | Builtin::GridDim => "dim3",
            Builtin::WarpSize => "int",
        }
    }
}

/// CUDA's keywords beyond C++'s: execution and memory spaces, and the other qualifiers a
/// kernel source may carry (each holds `__`, which C++ reserves anyway).
pub const KEYWORDS: [&str; 15] = [
    "__global__",
    "__device__",
    "__host__",
    "__noinline__",
    "__forceinline__",
    "__inline_hint__",
    "__shared__",
    "__constant__",
    "__managed__",
    "__grid_constant__",
    "__restrict__",
    "__launch_bounds__",
    "__maxnreg__",
    "__cluster_dims__",
    "__align__",
];

/// The namespaces a body inside MLX's assembled source can name unqualified: those it opens
/// (`mlx::core::cu`), the alias it declares (`cg`), and those its headers use (`std`,
/// `cuda::std`, `cooperative_groups`). A parameter of one of these names hides it.
pub const NAMESPACES: [&str; 7] = ["mlx", "core", "cu", "cg", "cooperative_groups", "std", "cuda"];

/// The names MLX's CUDA headers (`mlx/backend/cuda/device/utils.cuh`, `config.h`) give a body
/// besides namespaces: the types of the `_shape`/`_strides` parameters and the macros.
/// MLX 0.32.2 defines no `inf` for CUDA (its Metal preamble and CPU SIMD header do).
pub const MLX_NAMES: [&str; 5] = ["Shape", "Strides", "complex64_t", "MAX_NDIM", "WARP_SIZE"];

/// The scalar type names CUDA's vector types are spelled from (`float4`, `uchar2`,
/// `longlong3`), with the C++ scalars they share.
pub const SCALAR_TYPE_NAMES: [&str; 14] =
    ["bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong", "float", "double", "size_t"];

/// The other type names of CUDA and its half-precision headers a body sees (`cuda_fp16.h`,
/// `cuda_bf16.h`).
pub const OTHER_TYPE_NAMES: [&str; 11] =
    ["dim3", "half", "half2", "nv_bfloat16", "nv_bfloat162", "__half", "__half2", "__nv_bfloat16", "__nv_bfloat162", "__half_raw", "__nv_bfloat16_raw"];

/// The static `__shared__` memory one block may declare (CUDA's limit without an opt-in to more,
/// which MLX's `cuda_kernel` does not make), in bytes.
pub const MAX_STATIC_SHARED_BYTES: u64 = 48 * 1024;

/// Threads in one block, at most (every architecture since compute capability 2.0).
pub const MAX_THREADS_PER_BLOCK: u64 = 1024;

/// A block's extents, at most, in x, y and z.
pub const MAX_BLOCK_EXTENTS: [u64; 3] = [1024, 1024, 64];

/// The headers a kernel source MLX assembles may include, as written after `#include`: MLX's two
/// ([`DEFAULT_HEADER`](crate::mlx::DEFAULT_HEADER) includes them) and CUDA's half-precision ones.
pub const INCLUDES: [&str; 4] = ["\"mlx/backend/cuda/device/utils.cuh\"", "<cooperative_groups.h>", "<cuda_fp16.h>", "<cuda_bf16.h>"];

/// The path of an [`INCLUDES`] entry, without its quotes or angle brackets.
pub fn include_path(include: &str) -> &str {
    include.trim_matches(['"', '<', '>'])
}

/// The macros nvrtc predefines for MLX's compile on an H200 (sm_90), which a source's
/// conditionals may test.
pub const PREDEFINED_MACROS: [(&str, &str); 3] = [("__CUDACC__", "1"), ("__CUDACC_RTC__", "1"), ("__CUDA_ARCH__", "900")];

/// The types [`INCLUDES`] give a body beyond CUDA's own ([`is_type_name`]): MLX's (`Shape`,
/// `AlignedVector`, ...), cooperative groups' (`thread_block`, ...) and `cuda::std`'s.
pub const HEADER_TYPE_NAMES: [&str; 9] = ["Shape", "Strides", "AlignedVector", "Limits", "thread_block", "thread_block_tile", "grid_group", "numeric_limits", "array"];

/// The templates [`INCLUDES`] give a body (a `<` after one opens its arguments): MLX's,
/// cooperative groups' and `cuda::std`'s.
pub const HEADER_TEMPLATES: [&str; 13] = [
    "AlignedVector", "Limits", "load_vector", "store_vector", "unsafe_load_vector", "unsafe_store_vector", "is_aligned", "elem_to_loc", "elem_to_loc_nd",
    "thread_block_tile", "tiled_partition", "numeric_limits", "array",
];

/// Whether `s` names a CUDA scalar or vector type (`uint`, `float4`, `dim3`, `nv_bfloat162`),
/// or is a `<name>_t` typedef (`int32_t`).
pub fn is_type_name(s: &str) -> bool {
    let scalar = |x: &str| SCALAR_TYPE_NAMES.contains(&x);
    let vector = s.strip_suffix(['1', '2', '3', '4']).is_some_and(scalar);
    scalar(s) || vector || s.ends_with("_t") || OTHER_TYPE_NAMES.contains(&s)
}

/// Why `s` cannot name a parameter of a kernel MLX assembles for CUDA, if it cannot: "a name
/// C++ reserves" (it holds `__` or starts with `_` and a capital), "a CUDA built-in variable",
/// "a CUDA type", or "a name MLX's CUDA kernel source uses" (a namespace, an MLX type or
/// macro). C++'s own keywords are not repeated here: the generator checks every buffer name
/// against them as a Metal parameter first.
pub fn reserved(s: &str) -> Option<&'static str> {
    let b = s.as_bytes();
    if s.contains("__") || (b.len() > 1 && b[0] == b'_' && b[1].is_ascii_uppercase()) {
        Some("a name C++ reserves")
    } else if Builtin::from_name(s).is_some() {
        Some("a CUDA built-in variable")
    } else if is_type_name(s) {
        Some("a CUDA type")
    } else if NAMESPACES.contains(&s) || MLX_NAMES.contains(&s) {
        Some("a name MLX's CUDA kernel source uses")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_round_trip() {
        for b in Builtin::ALL {
            assert_eq!(Builtin::from_name(b.name()), Some(b));
            assert_eq!(reserved(b.name()), Some("a CUDA built-in variable"));
        }
        assert_eq!(Builtin::from_name("threadIdx.x"), None);
        assert_eq!(Builtin::GridDim.cuda_type(), "dim3");
        assert_eq!(Builtin::ThreadIdx.cuda_type(), "uint3");
    }

    #[test]
    fn reserved_words() {
        for (s, why) in [
            ("__shared__", "a name C++ reserves"),
            ("a__b", "a name C++ reserves"),
            ("_Max", "a name C++ reserves"),
            ("warpSize", "a CUDA built-in variable"),
            ("half", "a CUDA type"),
            ("half2", "a CUDA type"),
            ("nv_bfloat16", "a CUDA type"),
            ("float4", "a CUDA type"),
            ("ulonglong2", "a CUDA type"),
            ("uint", "a CUDA type"),
            ("dim3", "a CUDA type"),
            ("int32_t", "a CUDA type"),
            ("cg", "a name MLX's CUDA kernel source uses"),
            ("cuda", "a name MLX's CUDA kernel source uses"),
            ("Shape", "a name MLX's CUDA kernel source uses"),
            ("MAX_NDIM", "a name MLX's CUDA kernel source uses"),
        ] {
            assert_eq!(reserved(s), Some(why), "{s}");
        }
        for s in ["x", "state_in", "w_q", "float5", "half3", "uint8", "inf", "x_shape", "_x", "block", "shared"] {
            assert_eq!(reserved(s), None, "{s}");
        }
        assert!(KEYWORDS.iter().all(|k| reserved(k).is_some()));
    }

    /// MLX's default header includes only headers a source may include.
    #[test]
    fn the_default_header_includes_what_a_source_may() {
        let included: Vec<&str> = crate::mlx::DEFAULT_HEADER.lines().filter_map(|l| l.strip_prefix("#include ")).collect();
        assert_eq!(included.len(), 2);
        assert!(included.iter().all(|i| INCLUDES.contains(i)), "{included:?}");
        assert_eq!(include_path(INCLUDES[0]), "mlx/backend/cuda/device/utils.cuh");
        assert_eq!(include_path(INCLUDES[1]), "cooperative_groups.h");
    }

    #[test]
    fn every_dtype_names_a_cuda_type() {
        assert!(Dtype::ALL.iter().all(|d| is_type_name(d.cuda_name())));
    }
}
