//! A small C++ tokenizer: enough to find keywords, attributes and declarations with their
//! lines and columns (1-based, columns in bytes as clang counts them). Comments are skipped;
//! preprocessor directives become one `Directive` token per logical line.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ident,
    Number,
    Str,
    Char,
    Punct,
    Directive,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub kind: Kind,
    pub text: String,
    /// Byte offset in the source.
    pub offset: usize,
    pub line: u32,
    pub col: u32,
    /// Inside a preprocessor directive (a `#define` body).
    pub pp: bool,
}

impl Token {
    pub fn is(&self, s: &str) -> bool {
        self.text == s
    }
}

const PUNCT3: [&str; 4] = ["<<=", ">>=", "...", "->*"];
const PUNCT2: [&str; 19] =
    ["::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "&=", "|=", "^="];

pub fn tokenize(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let mut at_line_start = true;
    let mut in_define = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            in_define = false;
            i += 1;
            line += 1;
            line_start = i;
            at_line_start = true;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let col = (i - line_start) as u32 + 1;
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        }
        let start = i;
        let kind;
        if c == b'#' && at_line_start {
            // `#define` stays tokenized (its body is code that rewrites and rules must see);
            // any other directive is one token up to the end of its logical line.
            let word_end = {
                let mut j = i + 1;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                let ws = j;
                while j < b.len() && b[j].is_ascii_alphabetic() {
                    j += 1;
                }
                (ws, j)
            };
            if &src[word_end.0..word_end.1] == "define" {
                out.push(Token { kind: Kind::Directive, text: "#define".into(), offset: start, line, col, pp: true });
                i = word_end.1;
                at_line_start = false;
                in_define = true;
                continue;
            }
            let start_line = line;
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                    i += 2;
                    line += 1;
                    line_start = i;
                    continue;
                }
                if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
                    break;
                }
                i += 1;
            }
            out.push(Token {
                kind: Kind::Directive,
                text: src[start..i].to_string(),
                offset: start,
                line: start_line,
                col,
                pp: true,
            });
            continue;
        }
        if c == b'\\' && b.get(i + 1) == Some(&b'\n') {
            // A line continuation (inside a #define): whitespace.
            i += 2;
            line += 1;
            line_start = i;
            continue;
        }
        at_line_start = false;
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            kind = Kind::Ident;
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            while i < b.len() {
                let d = b[i];
                let exponent_sign = (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P');
                if d.is_ascii_alphanumeric() || d == b'.' || d == b'_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            kind = Kind::Number;
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            kind = if c == b'"' { Kind::Str } else { Kind::Char };
        } else {
            let rest = &src[i..];
            let n = if PUNCT3.iter().any(|p| rest.starts_with(p)) {
                3
            } else if PUNCT2.iter().any(|p| rest.starts_with(p)) {
                2
            } else {
                rest.chars().next().map_or(1, |ch| ch.len_utf8())
            };
            i += n;
            kind = Kind::Punct;
        }
        out.push(Token { kind, text: src[start..i].to_string(), offset: start, line, col, pp: in_define });
    }
    out
}

/// Index of the token closing the bracket opened at `open` (`(`/`)`, `[`/`]`, `{`/`}`, `<`/`>` not handled).
pub fn matching(toks: &[Token], open: usize) -> Option<usize> {
    let (o, c) = match toks.get(open)?.text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        "{" => ("{", "}"),
        _ => return None,
    };
    let mut depth = 0i32;
    for (j, t) in toks.iter().enumerate().skip(open) {
        if t.kind != Kind::Punct {
            continue;
        }
        if t.text == o {
            depth += 1;
        } else if t.text == c {
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_positions() {
        let t = tokenize("a /* x\n y */ b\n  #define X \\\n 1\n\"s\" 1.5h x->y");
        let texts: Vec<_> = t.iter().map(|t| (t.text.as_str(), t.line, t.col)).collect();
        assert_eq!(
            texts,
            vec![
                ("a", 1, 1),
                ("b", 2, 7),
                ("#define", 3, 3),
                ("X", 3, 11),
                ("1", 4, 2),
                ("\"s\"", 5, 1),
                ("1.5h", 5, 5),
                ("x", 5, 10),
                ("->", 5, 11),
                ("y", 5, 13)
            ]
        );
    }
}
