//! Metal's vocabulary: the words of the Metal Shading Language that kernelgen's stages read,
//! in one place (naga's `back/msl/keywords.rs` is the model). The generator checks the names
//! of kernel parameters against [`reserved`] and assembles MLX's kernel signature from
//! [`Attribute`]; the emulator binds [`Attribute`] parameters to its threads' values; the
//! Metal check checks their types against [`Attribute::allowed_types`]. A second target
//! language gets a twin module of the same shape: its thread builtins, its reserved words,
//! its type names.

/// A thread attribute: a kernel parameter whose value the dispatch gives each thread
/// (`uint3 gid [[thread_position_in_grid]]`, MSL 5.2.3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Attribute {
    /// `[[thread_position_in_grid]]`.
    ThreadPositionInGrid,
    /// `[[threadgroup_position_in_grid]]`.
    ThreadgroupPositionInGrid,
    /// `[[thread_position_in_threadgroup]]`.
    ThreadPositionInThreadgroup,
    /// `[[threads_per_threadgroup]]`.
    ThreadsPerThreadgroup,
    /// `[[threads_per_grid]]`.
    ThreadsPerGrid,
    /// `[[threadgroups_per_grid]]`.
    ThreadgroupsPerGrid,
    /// `[[grid_size]]`.
    GridSize,
    /// `[[grid_origin]]`.
    GridOrigin,
    /// `[[dispatch_threads_per_threadgroup]]`.
    DispatchThreadsPerThreadgroup,
    /// `[[thread_index_in_simdgroup]]`.
    ThreadIndexInSimdgroup,
    /// `[[simdgroup_index_in_threadgroup]]`.
    SimdgroupIndexInThreadgroup,
    /// `[[thread_index_in_threadgroup]]`.
    ThreadIndexInThreadgroup,
    /// `[[threads_per_simdgroup]]`.
    ThreadsPerSimdgroup,
    /// `[[simdgroups_per_threadgroup]]`.
    SimdgroupsPerThreadgroup,
    /// `[[dispatch_simdgroups_per_threadgroup]]`.
    DispatchSimdgroupsPerThreadgroup,
    /// `[[thread_execution_width]]`.
    ThreadExecutionWidth,
    /// `[[thread_index_in_quadgroup]]`.
    ThreadIndexInQuadgroup,
    /// `[[quadgroup_index_in_threadgroup]]`.
    QuadgroupIndexInThreadgroup,
    /// `[[quadgroups_per_threadgroup]]`.
    QuadgroupsPerThreadgroup,
    /// `[[dispatch_quadgroups_per_threadgroup]]`.
    DispatchQuadgroupsPerThreadgroup,
}

/// The types Metal allows for a position or size attribute (MSL 5.2.3.6).
const VECTOR_TYPES: [&str; 6] = ["uint", "uint2", "uint3", "ushort", "ushort2", "ushort3"];
/// The types Metal allows for an index or count attribute.
const SCALAR_TYPES: [&str; 2] = ["uint", "ushort"];

impl Attribute {
    /// Every attribute, in declaration order (positions and sizes, then SIMD-groups, then
    /// quad-groups).
    pub const ALL: [Attribute; 20] = [
        Attribute::ThreadPositionInGrid,
        Attribute::ThreadgroupPositionInGrid,
        Attribute::ThreadPositionInThreadgroup,
        Attribute::ThreadsPerThreadgroup,
        Attribute::ThreadsPerGrid,
        Attribute::ThreadgroupsPerGrid,
        Attribute::GridSize,
        Attribute::GridOrigin,
        Attribute::DispatchThreadsPerThreadgroup,
        Attribute::ThreadIndexInSimdgroup,
        Attribute::SimdgroupIndexInThreadgroup,
        Attribute::ThreadIndexInThreadgroup,
        Attribute::ThreadsPerSimdgroup,
        Attribute::SimdgroupsPerThreadgroup,
        Attribute::DispatchSimdgroupsPerThreadgroup,
        Attribute::ThreadExecutionWidth,
        Attribute::ThreadIndexInQuadgroup,
        Attribute::QuadgroupIndexInThreadgroup,
        Attribute::QuadgroupsPerThreadgroup,
        Attribute::DispatchQuadgroupsPerThreadgroup,
    ];

    /// MLX's attribute table (`metal_attributes` of its custom-kernel source assembly), in
    /// its order: MLX 0.32 adds a parameter `<mlx_type> <name> [[<name>]]` for each one whose
    /// name a plain substring search finds in the body (comments count), in this order,
    /// after the buffers.
    pub const MLX_ORDER: [Attribute; 20] = [
        Attribute::DispatchQuadgroupsPerThreadgroup,
        Attribute::DispatchSimdgroupsPerThreadgroup,
        Attribute::DispatchThreadsPerThreadgroup,
        Attribute::GridOrigin,
        Attribute::GridSize,
        Attribute::QuadgroupIndexInThreadgroup,
        Attribute::QuadgroupsPerThreadgroup,
        Attribute::SimdgroupIndexInThreadgroup,
        Attribute::SimdgroupsPerThreadgroup,
        Attribute::ThreadExecutionWidth,
        Attribute::ThreadIndexInQuadgroup,
        Attribute::ThreadIndexInSimdgroup,
        Attribute::ThreadIndexInThreadgroup,
        Attribute::ThreadPositionInGrid,
        Attribute::ThreadPositionInThreadgroup,
        Attribute::ThreadgroupPositionInGrid,
        Attribute::ThreadgroupsPerGrid,
        Attribute::ThreadsPerGrid,
        Attribute::ThreadsPerSimdgroup,
        Attribute::ThreadsPerThreadgroup,
    ];

    /// The Metal attribute name.
    pub fn name(self) -> &'static str {
        match self {
            Attribute::ThreadPositionInGrid => "thread_position_in_grid",
            Attribute::ThreadgroupPositionInGrid => "threadgroup_position_in_grid",
            Attribute::ThreadPositionInThreadgroup => "thread_position_in_threadgroup",
            Attribute::ThreadsPerThreadgroup => "threads_per_threadgroup",
            Attribute::ThreadsPerGrid => "threads_per_grid",
            Attribute::ThreadgroupsPerGrid => "threadgroups_per_grid",
            Attribute::GridSize => "grid_size",
            Attribute::GridOrigin => "grid_origin",
            Attribute::DispatchThreadsPerThreadgroup => "dispatch_threads_per_threadgroup",
            Attribute::ThreadIndexInSimdgroup => "thread_index_in_simdgroup",
            Attribute::SimdgroupIndexInThreadgroup => "simdgroup_index_in_threadgroup",
            Attribute::ThreadIndexInThreadgroup => "thread_index_in_threadgroup",
            Attribute::ThreadsPerSimdgroup => "threads_per_simdgroup",
            Attribute::SimdgroupsPerThreadgroup => "simdgroups_per_threadgroup",
            Attribute::DispatchSimdgroupsPerThreadgroup => "dispatch_simdgroups_per_threadgroup",
            Attribute::ThreadExecutionWidth => "thread_execution_width",
            Attribute::ThreadIndexInQuadgroup => "thread_index_in_quadgroup",
            Attribute::QuadgroupIndexInThreadgroup => "quadgroup_index_in_threadgroup",
            Attribute::QuadgroupsPerThreadgroup => "quadgroups_per_threadgroup",
            Attribute::DispatchQuadgroupsPerThreadgroup => "dispatch_quadgroups_per_threadgroup",
        }
    }

    /// The attribute of a Metal attribute name (`thread_position_in_grid`).
    pub fn from_name(name: &str) -> Option<Attribute> {
        Attribute::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether it is a position or size (up to three components: `uint3`) rather than an
    /// index or count (`uint`).
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            Attribute::ThreadPositionInGrid
                | Attribute::ThreadgroupPositionInGrid
                | Attribute::ThreadPositionInThreadgroup
                | Attribute::ThreadsPerThreadgroup
                | Attribute::ThreadsPerGrid
                | Attribute::ThreadgroupsPerGrid
                | Attribute::GridSize
                | Attribute::GridOrigin
                | Attribute::DispatchThreadsPerThreadgroup
        )
    }

    /// The types Metal allows a parameter with this attribute to have, in Metal's spelling
    /// (`uint`, `uint2`, `uint3`, `ushort`, `ushort2`, `ushort3` for a vector; `uint`,
    /// `ushort` for a scalar).
    pub fn allowed_types(self) -> &'static [&'static str] {
        if self.is_vector() { &VECTOR_TYPES } else { &SCALAR_TYPES }
    }

    /// The type MLX's source assembly declares the parameter with: `uint3` or `uint`.
    pub fn mlx_type(self) -> &'static str {
        if self.is_vector() { "uint3" } else { "uint" }
    }
}

/// The kernel-parameter attributes besides the thread attributes: resources bound by index,
/// `stage_in`, and `function_constant` (a parameter that exists only when a constant is true).
pub const PARAMETER_ATTRIBUTES: [&str; 7] =
    ["buffer", "texture", "sampler", "threadgroup", "stage_in", "visible_function_table", "function_constant"];

/// C++17's keywords and alternative tokens (MSL is C++ with Metal's additions below).
pub const CPP_KEYWORDS: [&str; 84] = [
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast", "continue", "decltype", "default",
    "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
    "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
];

/// Metal's address spaces (MSL 4).
pub const ADDRESS_SPACES: [&str; 7] = ["device", "constant", "threadgroup", "threadgroup_imageblock", "thread", "ray_data", "object_data"];

/// Metal's function qualifiers (MSL 5.1).
pub const FUNCTION_QUALIFIERS: [&str; 4] = ["kernel", "vertex", "fragment", "visible"];

/// The namespaces of Metal's standard library.
pub const NAMESPACES: [&str; 2] = ["metal", "simd"];

/// Metal's scalar type names (MSL 2.1) that vectors and matrices are spelled from.
pub const SCALAR_TYPE_NAMES: [&str; 14] =
    ["bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "bfloat", "size_t", "ptrdiff_t"];

/// Whether `s` is one of Metal's address-space keywords.
pub fn is_address_space(s: &str) -> bool {
    ADDRESS_SPACES.contains(&s)
}

/// Whether `s` names a Metal scalar, vector or matrix type (`half`, `uint3`, `float4x4`), or
/// is a `<name>_t` typedef (`int32_t`, `bfloat16_t`). Matrices are matched for every scalar
/// (Metal has them for `half` and `float`), so the answer errs towards "a type".
pub fn is_type_name(s: &str) -> bool {
    let b = s.as_bytes();
    let scalar = |x: &str| SCALAR_TYPE_NAMES.contains(&x);
    let lanes = |c: u8| (b'2'..=b'4').contains(&c);
    scalar(s)
        || s.ends_with("_t")
        || (b.len() > 1 && lanes(b[b.len() - 1]) && scalar(&s[..s.len() - 1]))
        || (b.len() > 3 && lanes(b[b.len() - 1]) && b[b.len() - 2] == b'x' && lanes(b[b.len() - 3]) && scalar(&s[..s.len() - 3]))
}

/// Why `s` cannot name a variable or parameter of a Metal source, if it cannot: "a C++
/// keyword", "a Metal keyword" (an address space, a function qualifier, a standard
/// namespace) or "a Metal type".
pub fn reserved(s: &str) -> Option<&'static str> {
    if CPP_KEYWORDS.contains(&s) {
        Some("a C++ keyword")
    } else if is_address_space(s) || FUNCTION_QUALIFIERS.contains(&s) || NAMESPACES.contains(&s) {
        Some("a Metal keyword")
    } else if is_type_name(s) {
        Some("a Metal type")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_names_round_trip_and_mlx_lists_each_once() {
        for a in Attribute::ALL {
            assert_eq!(Attribute::from_name(a.name()), Some(a));
            assert_eq!(Attribute::MLX_ORDER.iter().filter(|&&m| m == a).count(), 1, "{a:?}");
        }
        assert_eq!(Attribute::from_name("buffer"), None);
        assert_eq!(Attribute::GridSize.mlx_type(), "uint3");
        assert_eq!(Attribute::ThreadIndexInSimdgroup.allowed_types(), ["uint", "ushort"]);
        assert!(Attribute::ThreadPositionInGrid.allowed_types().contains(&"ushort2"));
    }

    #[test]
    fn reserved_words() {
        for (s, why) in [
            ("float", "a C++ keyword"),
            ("class", "a C++ keyword"),
            ("device", "a Metal keyword"),
            ("kernel", "a Metal keyword"),
            ("simd", "a Metal keyword"),
            ("half4", "a Metal type"),
            ("float4x4", "a Metal type"),
            ("int32_t", "a Metal type"),
            ("bfloat16_t", "a Metal type"),
        ] {
            assert_eq!(reserved(s), Some(why), "{s}");
        }
        for s in ["x", "state_in", "Tin", "weights4", "floaty", "q4", "half5", "float4x5", "thread_position_in_grid"] {
            assert_eq!(reserved(s), None, "{s}");
        }
        assert!(is_address_space("threadgroup") && !is_address_space("kernel"));
    }
}
