//! MLX's custom-kernel source assembly (MLX 0.32 `metal_kernel`), written once
//! and shared by every family, so the checked-in `.metal` and the strings a
//! launcher hands to MLX cannot disagree.

use crate::model::BufferDef;
use kernelgen_msl::vocab::Attribute;

/// MLX passes inputs with fewer elements than this in the `constant` space.
const MAX_CONSTANT_ARRAY_SIZE: u64 = 8;

/// How MLX passes an input, from its element count at launch.
fn input_class(b: &BufferDef) -> (&'static str, &'static str, &'static str) {
    // (address space, reference or pointer, kernel-name suffix)
    if b.shape.is_empty() {
        ("constant", "&", "s")
    } else if b.fixed_elements().is_some_and(|n| n < MAX_CONSTANT_ARRAY_SIZE) {
        ("constant", "*", "c")
    } else {
        // Run-time shapes are shown at 8 elements or more (the device form).
        ("device", "*", "")
    }
}

/// Inputs whose run-time shape can fall under 8 elements: MLX passes those
/// in the `constant` space at such sizes, which changes the signature and name.
pub fn small_runtime_inputs(inputs: &[BufferDef], size_count: usize) -> Vec<&str> {
    let ones = vec![1; size_count];
    inputs
        .iter()
        .filter(|b| !b.shape.is_empty() && b.fixed_elements().is_none())
        .filter(|b| b.shape.iter().map(|d| d.eval(&ones).unwrap_or(u64::MAX)).product::<u64>() < MAX_CONSTANT_ARRAY_SIZE)
        .map(|b| b.name.as_ref())
        .collect()
}

/// The function name MLX gives a kernel with no template arguments.
pub fn mlx_kernel_name(name: &str, inputs: &[BufferDef], outputs: &[BufferDef]) -> String {
    let mut out = format!("custom_kernel_{name}");
    for b in inputs {
        out.push('_');
        out.push_str(b.dtype.metal_name());
        out.push_str(input_class(b).2);
    }
    for b in outputs {
        out.push('_');
        out.push_str(b.dtype.metal_name());
    }
    out
}

/// The assembled source with the byte ranges of the header and the body in it.
pub struct Assembled {
    /// The whole source.
    pub source: String,
    /// Byte range of the header in `source`.
    pub header: (usize, usize),
    /// Byte range of the body in `source`.
    pub body: (usize, usize),
}

/// MLX's `write_signature` for a kernel without template arguments: the
/// header verbatim, the signature from the argument list, the body, `}`.
pub fn assemble(func_name: &str, header: &str, body: &str, inputs: &[BufferDef], outputs: &[BufferDef]) -> Assembled {
    let mut s = String::with_capacity(header.len() + body.len() + 1024);
    s.push_str(header);
    let header_range = (0, header.len());
    s.push_str("[[kernel]] void ");
    s.push_str(func_name);
    s.push_str("(\n");
    let mut index = 0usize;
    for b in inputs {
        let (space, reference, _) = input_class(b);
        s.push_str(&format!("  const {space} {}{reference} {} [[buffer({index})]],\n", b.dtype.metal_name(), b.name));
        index += 1;
        if !b.shape.is_empty() {
            if body.contains(&format!("{}_shape", b.name)) {
                s.push_str(&format!("  const constant int* {}_shape [[buffer({index})]],\n", b.name));
                index += 1;
            }
            if body.contains(&format!("{}_strides", b.name)) {
                s.push_str(&format!("  const constant int64_t* {}_strides [[buffer({index})]],\n", b.name));
                index += 1;
            }
            if body.contains(&format!("{}_ndim", b.name)) {
                s.push_str(&format!("  const constant int& {}_ndim [[buffer({index})]],\n", b.name));
                index += 1;
            }
        }
    }
    let attributes: Vec<String> = Attribute::MLX_ORDER
        .iter()
        .filter(|a| body.contains(a.name()))
        .map(|a| format!("  {} {name} [[{name}]]", a.mlx_type(), name = a.name()))
        .collect();
    // MLX's own end-of-list test, kept as is (it counts shape buffers in
    // `index`, which malforms some signatures; kernelgen's families always
    // reference an attribute, which avoids that case).
    for b in outputs {
        s.push_str(&format!("  device {}* {} [[buffer({index})]]", b.dtype.metal_name(), b.name));
        if index < inputs.len() + outputs.len() - 1 || !attributes.is_empty() {
            s.push_str(",\n");
        } else {
            s.push_str(") {\n");
        }
        index += 1;
    }
    for (i, attr) in attributes.iter().enumerate() {
        s.push_str(attr);
        s.push_str(if i + 1 < attributes.len() { ",\n" } else { ") {\n" });
    }
    let body_start = s.len();
    s.push_str(body);
    let body_range = (body_start, s.len());
    s.push_str("\n}\n");
    Assembled { source: s, header: header_range, body: body_range }
}
