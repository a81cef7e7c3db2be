//! MLX 0.32.2's CUDA custom-kernel source assembly, replicated byte for byte: what
//! `mlx::core::fast::cuda_kernel` (mlx/backend/cuda/custom_kernel.cpp, `build_kernel`) hands
//! to nvrtc for a name, input and output names, a body and a header. The strings below are
//! that file's, and were checked against the mlx-cuda-13 0.32.2 wheel's `libmlx.so`, which
//! holds each of them as one C string.
//!
//! For one kernel, in order: [`DEFAULT_HEADER`]; the header as given; [`NAMESPACE_OPEN`];
//! `__global__ void <kernel name>(`; per input `    const <type>* <name>,` followed, for an
//! input of one dimension or more, by `    const __grid_constant__ Shape <name>_shape,`,
//! `    const __grid_constant__ Strides <name>_strides,` and `    const __grid_constant__ int
//! <name>_ndim,`, each only when the body holds that text (a plain substring search of the
//! body alone: comments count, the header is not searched); per output `    <type>* <name>`,
//! separated by `,\n`, the last one closed by `) {\n`; then (only with template arguments,
//! which kernelgen never passes: its kernels are fully specialized) one `constexpr`/`using`
//! line each and a blank line; the body; [`CLOSING`].

use kernelgen_contract::BufferDef;

/// MLX's `default_header`: the source's first bytes (a newline comes first, so a `.cu` file
/// holding exactly what MLX compiles cannot start with a comment of kernelgen's: its first
/// line of text is the header's).
pub const DEFAULT_HEADER: &str = "\n#include \"mlx/backend/cuda/device/utils.cuh\"\n\n#include <cooperative_groups.h>\n\n";

/// What follows the header: the namespace the kernel is defined in and the `cg` alias.
pub const NAMESPACE_OPEN: &str = "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n";

/// What follows the body: the function's and the namespace's ends.
pub const CLOSING: &str = "\n}\n\n} // namespace mlx::core::cu\n";

/// MLX's `MAX_NDIM` (mlx/backend/cuda/device/config.h): the length of the `Shape` (int32) and
/// `Strides` (int64) arrays a kernel's `_shape` and `_strides` parameters hold.
pub const MAX_NDIM: usize = 10;

/// The suffixes of the parameters MLX adds after an input `x` whose name with the suffix the
/// body holds (`x_shape`), with their declarations' types.
pub const SHAPE_PARAMETERS: [(&str, &str); 3] =
    [("_shape", "const __grid_constant__ Shape"), ("_strides", "const __grid_constant__ Strides"), ("_ndim", "const __grid_constant__ int")];

/// The function name MLX gives a kernel named `name` without template arguments (with them
/// it appends `_<value>` for each, `_t`/`_f` for a bool): `custom_kernel_<name>`. Unlike on
/// Metal, neither the dtypes nor the sizes of the arguments are in it.
pub fn kernel_name(name: &str) -> String {
    format!("custom_kernel_{name}")
}

/// The assembled source, with the byte ranges of the header and the body in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    /// The whole source: what MLX hands to nvrtc.
    pub source: String,
    /// Byte range of the header in `source` (MLX's `header` argument).
    pub header: (usize, usize),
    /// Byte range of the body in `source` (MLX's `source` argument).
    pub body: (usize, usize),
}

/// MLX's `build_kernel` for a kernel without template arguments: the source MLX 0.32.2
/// compiles for `cuda_kernel(name, inputs, outputs, body, header)` applied to arrays of the
/// buffers' dtypes and ranks. MLX refuses a kernel without outputs; so does this.
pub fn assemble(kernel_name: &str, header: &str, body: &str, inputs: &[BufferDef], outputs: &[BufferDef]) -> Result<Assembled, String> {
    if outputs.is_empty() {
        return Err("MLX's cuda_kernel needs at least one output".into());
    }
    let mut s = String::with_capacity(header.len() + body.len() + 1024);
    s.push_str(DEFAULT_HEADER);
    let header_range = (s.len(), s.len() + header.len());
    s.push_str(header);
    s.push_str(NAMESPACE_OPEN);
    s.push_str("__global__ void ");
    s.push_str(kernel_name);
    s.push_str("(\n");
    for b in inputs {
        s.push_str(&format!("    const {}* {},\n", b.dtype.cuda_name(), b.name));
        if !b.shape.is_empty() {
            for (suffix, ty) in SHAPE_PARAMETERS {
                if body.contains(&format!("{}{suffix}", b.name)) {
                    s.push_str(&format!("    {ty} {}{suffix},\n", b.name));
                }
            }
        }
    }
    for (i, b) in outputs.iter().enumerate() {
        s.push_str(&format!("    {}* {}", b.dtype.cuda_name(), b.name));
        s.push_str(if i + 1 < outputs.len() { ",\n" } else { ") {\n" });
    }
    let body_start = s.len();
    s.push_str(body);
    let body_range = (body_start, s.len());
    s.push_str(CLOSING);
    Ok(Assembled { source: s, header: header_range, body: body_range })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgen_contract::{Dim, Dtype, Source};
    use std::borrow::Cow;

    fn buffer(name: &'static str, dtype: Dtype, shape: &'static [Dim]) -> BufferDef {
        BufferDef { name: Cow::Borrowed(name), dtype, shape: Cow::Borrowed(shape), source: Source::Data, regions: Cow::Borrowed(&[]), align: 1, at_most: None }
    }

    /// The whole text for a kernel of each input kind: shape parameters only for the input
    /// of one dimension or more whose `_shape`/`_ndim` the body names (a comment counts), none
    /// for a 0-d input even when named, none for what only the header names.
    #[test]
    fn the_source_is_mlx_0_32_2s() {
        static ROWS: [Dim; 2] = [Dim::Fixed(4), Dim::Fixed(8)];
        let inputs = [buffer("x", Dtype::Bf16, &ROWS), buffer("s", Dtype::F32, &[]), buffer("w", Dtype::U8, &ROWS)];
        let outputs = [buffer("y", Dtype::F16, &ROWS), buffer("n", Dtype::U32, &ROWS)];
        let header = "// made by hand\n__device__ float w_strides_helper() { return 1.0f; }\n";
        let body = "  // x_ndim\n  y[0] = x[x_shape[0] - 1] + s[0]; // s_shape\n  n[0] = w[0];";
        let a = assemble(&kernel_name("k"), header, body, &inputs, &outputs).unwrap();
        let want = "\n#include \"mlx/backend/cuda/device/utils.cuh\"\n\n#include <cooperative_groups.h>\n\n\
            // made by hand\n__device__ float w_strides_helper() { return 1.0f; }\n\
            namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n\
            __global__ void custom_kernel_k(\n\
            \x20   const __nv_bfloat16* x,\n\
            \x20   const __grid_constant__ Shape x_shape,\n\
            \x20   const __grid_constant__ int x_ndim,\n\
            \x20   const float* s,\n\
            \x20   const uint8_t* w,\n\
            \x20   __half* y,\n\
            \x20   uint32_t* n) {\n\
            \x20 // x_ndim\n  y[0] = x[x_shape[0] - 1] + s[0]; // s_shape\n  n[0] = w[0];\n}\n\n} // namespace mlx::core::cu\n";
        assert_eq!(a.source, want);
        assert_eq!(&a.source[a.header.0..a.header.1], header);
        assert_eq!(&a.source[a.body.0..a.body.1], body);
    }

    #[test]
    fn one_output_closes_the_list_and_none_is_refused() {
        let outputs = [buffer("y", Dtype::F32, &[])];
        let a = assemble("custom_kernel_z", "", "  y[0] = 0.0f;", &[], &outputs).unwrap();
        assert!(a.source.contains("__global__ void custom_kernel_z(\n    float* y) {\n  y[0] = 0.0f;\n}\n"), "{}", a.source);
        assert_eq!(a.header, (DEFAULT_HEADER.len(), DEFAULT_HEADER.len()));
        assert!(assemble("custom_kernel_z", "", "", &outputs, &[]).is_err());
    }
}
