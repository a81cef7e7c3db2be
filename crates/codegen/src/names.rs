//! The rules a spec's names must follow to become Rust and file names: spec
//! file stems name modules (`pub mod <stem>;`, `rust/<stem>.rs`), geometry
//! names start kernel names, which name files (`<kernel>.metal`), statics
//! (upper case) and launcher types (CamelCase).

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
    fn keywords_are_not_identifiers_we_accept() {
        for kw in ["fn", "type", "self", "mod", "gen", "try", "async", "yield"] {
            assert!(is_identifier(kw) && is_rust_keyword(kw), "{kw}");
        }
        assert!(!is_rust_keyword("union") && !is_rust_keyword("experts"));
    }
}
