//! Whether two Metal sources differ in code or only in comments and
//! whitespace: both are split into C++ preprocessing tokens, without `//` and
//! `/* */` comments and whitespace, and the token lists compared.
//!
//! What the tokenizer knows, so that no code change passes for a comment one:
//! string and character literals (a `//` or `/*` inside one is text, escapes
//! included), raw strings (`R"x(...)x"`), numbers (`1.0e-5f`, `0x1p-3`,
//! `1'000`), the longest-match punctuators (`a + +b` is not `a ++b`), line
//! splices (backslash-newline), and preprocessor directives, which end at
//! their line's end: the newline that ends a `#define` is a token. Its one
//! conservative corner: `>>` and `> >` count as different (they differ
//! outside template argument lists), so that whitespace edit reads as code.

/// The tokens of `src`, comments and whitespace removed. A directive's end
/// of line is the token `"\n"`.
pub fn tokens(src: &str) -> Vec<&str> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Only whitespace (or nothing) since the last newline: a `#` here starts a directive.
    let mut line_start = true;
    let mut in_directive = false;
    while i < b.len() {
        let c = b[i];
        // A line splice joins two lines, anywhere.
        if c == b'\\' && (b.get(i + 1) == Some(&b'\n') || (b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n'))) {
            i += if b[i + 1] == b'\n' { 2 } else { 3 };
            continue;
        }
        if c == b'\n' {
            if in_directive {
                out.push("\n");
                in_directive = false;
            }
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            // To the end of the line (a splice continues the comment).
            i += 2;
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                    i += 2;
                } else {
                    i += 1;
                }
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        }
        let start = i;
        if c == b'#' && line_start {
            in_directive = true;
        }
        line_start = false;
        if c == b'"' || c == b'\'' {
            i = quoted(b, i);
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i += 1;
            while i < b.len() {
                let d = b[i];
                if (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P') {
                    i += 1;
                } else if d == b'\'' && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) {
                    i += 2;
                } else if d.is_ascii_alphanumeric() || d == b'_' || d == b'.' || d >= 0x80 {
                    i += 1;
                } else {
                    break;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            let word = &src[start..i];
            if b.get(i) == Some(&b'"') && matches!(word, "R" | "u8R" | "uR" | "UR" | "LR") {
                i = raw_string(b, i);
            } else if b.get(i) == Some(&b'"') || b.get(i) == Some(&b'\'') {
                // An encoding prefix (u8"", L'x') belongs to its literal.
                if matches!(word, "u8" | "u" | "U" | "L") {
                    i = quoted(b, i);
                }
            }
        } else {
            i += punctuator(&b[i..]);
        }
        // Slicing at byte offsets: every boundary above is an ASCII byte or the end.
        out.push(&src[start..i]);
    }
    out
}

/// The end of the string or character literal starting at `i` (its quote):
/// after the closing quote, or at the end of the line if it has none.
fn quoted(b: &[u8], mut i: usize) -> usize {
    let q = b[i];
    i += 1;
    while i < b.len() && b[i] != q && b[i] != b'\n' {
        i += if b[i] == b'\\' && i + 1 < b.len() { 2 } else { 1 };
    }
    if i < b.len() && b[i] == q {
        i + 1
    } else {
        i.min(b.len())
    }
}

/// The end of the raw string whose `"` is at `i`: `"delim( ... )delim"`.
fn raw_string(b: &[u8], i: usize) -> usize {
    let open = i + 1;
    let Some(paren) = b[open..].iter().position(|&c| c == b'(').map(|p| open + p) else {
        return b.len();
    };
    let delim = &b[open..paren];
    let mut j = paren + 1;
    while j < b.len() {
        if b[j] == b')' && b[j + 1..].starts_with(delim) && b.get(j + 1 + delim.len()) == Some(&b'"') {
            return j + 2 + delim.len();
        }
        j += 1;
    }
    b.len()
}

/// The length of the punctuator at the start of `b` (longest match).
fn punctuator(b: &[u8]) -> usize {
    const THREE: [&[u8]; 5] = [b"<<=", b">>=", b"...", b"->*", b"<=>"];
    const TWO: [&[u8]; 22] = [
        b"::", b"->", b"++", b"--", b"<<", b">>", b"<=", b">=", b"==", b"!=", b"&&", b"||", b"+=", b"-=", b"*=", b"/=", b"%=", b"&=", b"|=", b"^=", b"##", b".*",
    ];
    if THREE.iter().any(|p| b.starts_with(p)) {
        3
    } else if TWO.iter().any(|p| b.starts_with(p)) {
        2
    } else {
        // One character (a multi-byte one whole, so slices stay on boundaries).
        match b[0] {
            0x00..=0x7f => 1,
            _ => b.iter().skip(1).take_while(|&&c| (0x80..0xc0).contains(&c)).count() + 1,
        }
    }
}

/// Whether `a` and `b` are the same code: equal but for comments and whitespace.
pub fn same_code(a: &str, b: &str) -> bool {
    tokens(a) == tokens(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_whitespace_do_not_count() {
        assert!(same_code("int a = 1; // one\n", "int  a=1;   /* uno */\n\n"));
        assert!(same_code("// header\nkernel void f() {\n  x += 1;\n}\n", "kernel void f()\n{ x += 1; } // end"));
        assert!(same_code("a /* multi\nline */ b", "a b"));
        assert!(same_code("x = 1; // spliced \\\n still comment\ny", "x = 1;\ny"));
    }

    #[test]
    fn code_changes_count() {
        assert!(!same_code("int a = 1;", "int a = 2;"));
        assert!(!same_code("int a;", "inta;"));
        assert!(!same_code("a + +b", "a ++b"));
        assert!(!same_code("a - -b", "a --b"));
        assert!(!same_code("x = 1.0e-5f;", "x = 1.0e-6f;"));
        assert!(!same_code("x = 0x1p-3;", "x = 0x1p-4;"));
    }

    #[test]
    fn strings_keep_their_slashes() {
        // `//` inside a string is not a comment: the rest of the line is code.
        assert!(!same_code("s = \"a//b\"; x = 1;", "s = \"a//b\"; x = 2;"));
        assert!(!same_code("s = \"a/*b\"; x = 1; /* c */", "s = \"a/*b\"; x = 2; /* c */"));
        assert!(!same_code("s = \"a b\";", "s = \"a  b\";"));
        assert!(!same_code("c = '/'; x = 1;", "c = '/'; x = 2;"));
        assert!(!same_code("s = \"q\\\"//\"; x = 1;", "s = \"q\\\"//\"; x = 2;"));
        assert!(!same_code("s = R\"(a // b)\"; x = 1;", "s = R\"(a // b)\"; x = 2;"));
        assert!(same_code("s = R\"d(a )\" b)d\";  // c", "s = R\"d(a )\" b)d\";"));
        assert_eq!(tokens("u8\"x\" L'c' n = 1'000;"), vec!["u8\"x\"", "L'c'", "n", "=", "1'000", ";"]);
    }

    #[test]
    fn directives_end_at_their_line() {
        assert!(!same_code("#define A 1\nint b;", "#define A 1 int b;"));
        assert!(same_code("#define A 1 // one\nint b;", "#  define   A 1\nint b; // two"));
        assert!(same_code("#define A \\\n 1\nint b;", "#define A 1\nint b;"));
        assert_eq!(tokens("#include <metal_stdlib>\nx"), vec!["#", "include", "<", "metal_stdlib", ">", "\n", "x"]);
        // A `#` that does not start a line is a token, not a directive.
        assert!(same_code("a # b\nc", "a # b c"));
    }

    #[test]
    fn odd_input_does_not_panic() {
        for s in ["\"unterminated", "'", "/* open", "R\"x(open", "é + ü", "\\", "1e", "#", "a\r\nb", "\u{7f}"] {
            let _ = tokens(s);
        }
    }
}
