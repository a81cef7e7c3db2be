//! The rules names must follow to become Rust, Metal and file names: spec file
//! stems name modules (`pub mod <stem>;`, `rust/<stem>.rs`), geometry names start
//! kernel names, which the family and axis values continue and which name files
//! (`<kernel>.metal`), statics (upper case) and launcher types (CamelCase); a family
//! file's parts name launcher methods, and its buffers name Metal kernel parameters
//! and Rust arguments.

/// The longest spec file stem or geometry name, in bytes. Kernel names (a
/// geometry name, the family and the axis values) then stay far below the
/// 255-byte limit on file names.
pub const MAX_NAME_LEN: usize = 64;

/// The longest kernel file name, `<kernel>.metal`, most file systems allow.
pub const MAX_FILE_NAME_LEN: usize = 255;

/// Every Rust keyword, strict or reserved, in any edition: none can name a
/// module (`pub mod fn;` does not parse, nor does `r#self`).
pub const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super",
    "trait", "true", "type", "unsafe", "use", "where", "while", // strict, 2015
    "async", "await", "dyn", // strict since 2018
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield",
    "try", "gen", // reserved
];

/// Whether `s` is a Rust keyword (strict or reserved), which no generated name may be.
pub fn is_rust_keyword(s: &str) -> bool {
    RUST_KEYWORDS.contains(&s)
}

/// Lowercase ASCII letters, digits and `_`, starting with a letter.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase()) && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The CamelCase launcher type name of a kernel name: `glm52_expert_q4` ->
/// `Glm52ExpertQ4`. Expansion uses it to find names that collide; the Rust renderer
/// to name the types.
pub fn camel(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// MLX's attribute table: detected by a plain substring search of the body
/// (comments count), emitted in this order with these types.
pub const MLX_ATTRIBUTES: &[(&str, &str)] = &[
    ("dispatch_quadgroups_per_threadgroup", "uint"),
    ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"),
    ("grid_origin", "uint3"),
    ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"),
    ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"),
    ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"),
    ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"),
    ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"),
    ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"),
    ("threadgroups_per_grid", "uint3"),
    ("threads_per_grid", "uint3"),
    ("threads_per_simdgroup", "uint"),
    ("threads_per_threadgroup", "uint3"),
];

/// Lowercase ASCII letters, digits and `_`, at least one: a piece of a kernel name (an
/// axis value, the word a boolean or integer axis adds).
pub fn is_name_part(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Names a generated launcher gives its own argument and functions.
pub const LAUNCHER_NAMES: &[&str] = &["backend", "launch", "pack"];

/// Why `s` cannot name an argument, a field or a method of a generated launcher, if it
/// cannot (the names are the family file's buffers, regions and parts).
pub fn rust_reserved(s: &str) -> Option<&'static str> {
    if !is_identifier(s) {
        Some("not snake_case (lowercase letters, digits and `_`, starting with a letter)")
    } else if is_rust_keyword(s) {
        Some("a Rust keyword")
    } else if LAUNCHER_NAMES.contains(&s) {
        Some("a name the generated launcher uses itself")
    } else {
        None
    }
}

/// C++17's keywords and alternative tokens (MSL is C++14 with Metal's additions below).
const CPP_KEYWORDS: &[&str] = &[
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast", "continue", "decltype", "default",
    "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
    "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
];

/// Metal's address spaces, function qualifiers and the names of its namespaces.
const MSL_KEYWORDS: &[&str] = &[
    "device", "constant", "threadgroup", "threadgroup_imageblock", "thread", "ray_data", "object_data", "kernel",
    "vertex", "fragment", "visible", "metal", "simd",
];

/// A Metal scalar, vector or matrix type name (`half`, `uint3`, `float4x4`), or a
/// `<name>_t` typedef (`int32_t`, `bfloat16_t`).
fn is_msl_type(s: &str) -> bool {
    const SCALARS: &[&str] = &["bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "bfloat", "size_t", "ptrdiff_t"];
    let b = s.as_bytes();
    let scalar = |x: &str| SCALARS.contains(&x);
    let n = |c: u8| (b'2'..=b'4').contains(&c);
    scalar(s)
        || s.ends_with("_t")
        || (b.len() > 1 && n(b[b.len() - 1]) && scalar(&s[..s.len() - 1]))
        || (b.len() > 3 && n(b[b.len() - 1]) && b[b.len() - 2] == b'x' && n(b[b.len() - 3]) && scalar(&s[..s.len() - 3]))
}

/// Why `s` cannot name a parameter of a generated Metal kernel, if it cannot: a C++ or
/// Metal keyword, a Metal type, or an attribute parameter MLX adds to the signature.
pub fn msl_reserved(s: &str) -> Option<&'static str> {
    if CPP_KEYWORDS.contains(&s) {
        Some("a C++ keyword")
    } else if MSL_KEYWORDS.contains(&s) {
        Some("a Metal keyword")
    } else if is_msl_type(s) {
        Some("a Metal type")
    } else if MLX_ATTRIBUTES.iter().any(|(a, _)| *a == s) {
        Some("a parameter MLX adds to the kernel itself")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_joins_the_parts_capitalized() {
        assert_eq!(camel("glm52_expert_q4_bf16_r4"), "Glm52ExpertQ4Bf16R4");
        assert_eq!(camel("a_1b_c2"), "A1bC2");
        assert_eq!(camel("v2"), camel("v_2"));
        assert_eq!(camel("w_expert"), camel("w__expert"));
    }

    #[test]
    fn reserved_names() {
        for s in ["float", "half4", "float4x4", "int32_t", "bfloat16_t", "device", "thread_position_in_grid", "class"] {
            assert!(msl_reserved(s).is_some(), "{s}");
        }
        for s in ["x", "state_in", "Tin", "weights4", "floaty", "q4"] {
            assert_eq!(msl_reserved(s), None, "{s}");
        }
        for s in ["fn", "self", "backend", "launch", "pack", "Main", "x-y", "9x", ""] {
            assert!(rust_reserved(s).is_some(), "{s}");
        }
        assert_eq!(rust_reserved("gate_up"), None);
        assert!(is_name_part("bf16") && is_name_part("4bit") && !is_name_part("a\"b") && !is_name_part("x/y") && !is_name_part("") && !is_name_part("m\u{e4}in"));
    }

    #[test]
    fn keywords_are_not_identifiers_we_accept() {
        for kw in ["fn", "type", "self", "mod", "gen", "try", "async", "yield"] {
            assert!(is_identifier(kw) && is_rust_keyword(kw), "{kw}");
        }
        assert!(!is_rust_keyword("union") && !is_rust_keyword("experts"));
    }
}
