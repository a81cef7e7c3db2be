//! Escaping for the languages generated text lands in. Every name or path
//! that reaches generated text and is not checked to be an identifier
//! (today: a spec's origin, `specs/<folders>/<file>.toml`, whose folder
//! names are whatever the file system allows) goes through one of these at
//! the place it is written, so no name can end a comment or a string early.
//!
//! - [`comment`]: the text of a `//` line comment, in MSL (C++) or Rust
//!   (`//`, `///`, `//!`). Only printable ASCII passes, minus the characters
//!   that mean something there: `\` (a backslash before the line end splices
//!   the next line into the comment in C++), `?` (`??/` is a backslash in a
//!   C++ trigraph) and `` ` `` (rustdoc's code spans). Everything else,
//!   newlines, control and bidirectional characters included, becomes
//!   `\u{..}`: the generated files stay ASCII (MLX reads kernel sources as
//!   ASCII) and free of "Trojan Source" text.
//! - [`rust_str`]: the contents of a Rust `"..."` string literal: the value
//!   the compiled literal holds is exactly the input.
//! - [`doc`]: free text (a family file's docs, and the names in them) as the
//!   text of Rust doc comments: one `///` line per line of the text, and no
//!   markdown that rustdoc would run (a code block is a doctest) or pass on as
//!   HTML.
//!
//! JSON (manifest.json) is escaped by serde_json.

use std::fmt::Write;

/// `text` made safe as the text of a `//` line comment (MSL or Rust); see
/// the module documentation. Readable: `specs/x y/a.toml` is unchanged.
pub fn comment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if (' '..='~').contains(&c) && !matches!(c, '\\' | '?' | '`') {
            out.push(c);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    out
}

/// `text` as the text of Rust doc comments, continuing a line the caller began (`/// - `x`: `):
/// each line break (of any kind, U+2028 included) starts a new line with `then` (the caller's
/// `    /// `, so nothing is ever outside a comment). Each new line's leading spaces are dropped
/// (four start a code block, which rustdoc would compile and run as a doctest), and so is the
/// markdown that reaches further: backtick and tilde fences (doctests too), `<` (HTML), and `[`
/// and `]` outside code spans (`lengths[b]` would be a link to `b`, which rustdoc warns of) are
/// backslash-escaped (rustdoc shows the character); `*/` becomes `*\/`; control, bidirectional
/// and other unprintable characters become `\u{..}`. Plain text is unchanged.
pub fn doc(text: &str, then: &str) -> String {
    let breaks = ['\n', '\r', '\u{b}', '\u{c}', '\u{85}', '\u{2028}', '\u{2029}'];
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.replace("\r\n", "\n").split(breaks).enumerate() {
        let line = if i == 0 { line } else { line.trim_start() };
        if i > 0 {
            out.push('\n');
            out.push_str(then);
        }
        let chars: Vec<char> = line.chars().collect();
        // a run of three or more backticks or tildes could open a fence
        let in_fence_run = |at: usize| {
            let c = chars[at];
            let run = |step: &mut dyn Iterator<Item = usize>| step.take_while(|&j| chars[j] == c).count();
            matches!(c, '`' | '~') && 1 + run(&mut (0..at).rev()) + run(&mut (at + 1..chars.len())) >= 3
        };
        // the backticks opening the code span the text is in (markdown's: closed by as many)
        let mut span = 0;
        for (at, &c) in chars.iter().enumerate() {
            let bidi = matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c == '`' && !in_fence_run(at) && (at == 0 || chars[at - 1] != '`') {
                let run = chars[at..].iter().take_while(|&&x| x == '`').count();
                span = match span {
                    0 => run,
                    open if open == run => 0,
                    open => open,
                };
            }
            let bracket = matches!(c, '[' | ']') && span == 0;
            if c.is_control() || bidi || (!c.is_ascii() && c.escape_debug().next() != Some(c)) {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            } else if c == '<' || bracket || in_fence_run(at) || (c == '/' && at > 0 && chars[at - 1] == '*') {
                out.push('\\');
                out.push(c);
            } else {
                out.push(c);
            }
        }
    }
    out
}

/// The contents of a Rust string literal (without the quotes) whose value is
/// `text`. ASCII only: anything else is a `\u{..}` escape.
pub fn rust_str(text: &str) -> String {
    text.chars().flat_map(char::escape_default).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "x\nkernel void evil(device float* a [[buffer(0)]]) { a[0] = 1; }\n#define Z \\\r\u{202e}é`??/\"";

    #[test]
    fn plain_paths_are_unchanged() {
        for s in ["specs/experts.toml", "my specs/sub-dir/a_b.toml", "kernels!(mine)"] {
            assert_eq!(comment(s), s);
            assert_eq!(rust_str(s), s);
        }
    }

    #[test]
    fn a_comment_stays_one_printable_ascii_line() {
        let c = comment(HOSTILE);
        assert!(c.chars().all(|c| (' '..='~').contains(&c)), "{c}");
        assert!(!c.contains('\n') && !c.contains('\r') && !c.contains('`') && !c.contains('?'));
        // The only backslashes are the escapes' own, never last on the line.
        assert!(c.match_indices('\\').all(|(i, _)| c[i + 1..].starts_with("u{")), "{c}");
        assert!(c.starts_with("x\\u{a}kernel void evil"), "{c}");
    }

    #[test]
    fn doc_text_stays_in_its_comments() {
        assert_eq!(doc("gate projection, `[I, H]`", "/// "), "gate projection, `[I, H]`");
        assert_eq!(doc("a\n  b\r\nc\u{2028}d", "  /// "), "a\n  /// b\n  /// c\n  /// d");
        assert_eq!(doc("```rust\n~~~\n``x`` */<", "/// "), "\\`\\`\\`rust\n/// \\~\\~\\~\n/// ``x`` *\\/\\<");
        assert_eq!(doc("a */ b\u{202e}\u{7}", "/// "), "a *\\/ b\\u{202e}\\u{7}");
        assert_eq!(doc("µs × 2", "/// "), "µs × 2");
        // brackets would be links, but in a code span
        assert_eq!(doc("lengths[b], `x[i]` and ``a ` [b]`` then [c]", "/// "), "lengths\\[b\\], `x[i]` and ``a ` [b]`` then \\[c\\]");
    }

    #[test]
    fn a_string_literal_round_trips() {
        let s = rust_str(HOSTILE);
        assert!(s.is_ascii() && !s.contains('\n'));
        // Undo the escapes as the Rust lexer does.
        let mut back = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                assert_ne!(c, '"', "an unescaped quote would end the literal: {s}");
                back.push(c);
                continue;
            }
            match chars.next().unwrap() {
                'n' => back.push('\n'),
                'r' => back.push('\r'),
                't' => back.push('\t'),
                'u' => {
                    assert_eq!(chars.next(), Some('{'));
                    let hex: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    back.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                }
                other => back.push(other),
            }
        }
        assert_eq!(back, HOSTILE);
    }
}
