//! kernelgen's C++ tokenizer for Metal sources: tokens with their byte offsets, lines and
//! columns (1-based, columns in bytes as clang counts them). Comments, whitespace and line
//! splices (backslash-newline) are skipped; a `//` comment continues over a splice. Every
//! reader of MSL (the check's rules and rewrites, `kernelgen diff`'s comparison) reads these
//! tokens.
//!
//! What it knows, so that a token is one C++ preprocessing token: string and character
//! literals (a `//` or `/*` inside one is text; escapes; encoding prefixes `u8"x"`, `L'c'`;
//! raw strings `R"d(...)d"`, which may span lines), numbers (`1.0e-5f`, `0x1p-3`, `1'000`),
//! identifiers (non-ASCII letters included), the longest-match punctuators (`a + +b` is not
//! `a ++b`), and preprocessor directives, which end at their logical line's end.
//! [`Directives`] says how a directive comes out. Its one simplification: `>>` is one token,
//! also where it closes two template argument lists.

/// What a [`Token`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An identifier or keyword (`kernel`, `float4`, `metal`).
    Ident,
    /// A number (`1.5h`, `0x1p-3`, `1'000`).
    Number,
    /// A string literal, prefix included (`"a"`, `u8"a"`, `R"(a)"`), or the `<header>` of an
    /// `#include` under [`Directives::AllOpen`].
    Str,
    /// A character literal, prefix included (`'a'`, `L'a'`).
    Char,
    /// An operator or punctuator (`->`, `[`, `::`), or any other character.
    Punct,
    /// A preprocessor directive's start, or a whole directive: see [`Directives`].
    Directive,
}

/// One token of a source.
#[derive(Clone, Debug)]
pub struct Token {
    /// What it is.
    pub kind: Kind,
    /// Its text as written (an opened directive's first token: `#define`, whatever the
    /// spacing after the `#`).
    pub text: String,
    /// Byte offset in the source.
    pub offset: usize,
    /// Line of its first byte, from 1.
    pub line: u32,
    /// Column of its first byte, in bytes, from 1.
    pub col: u32,
    /// Part of a preprocessor directive that is opened (a `#define` and its body).
    pub pp: bool,
}

impl Token {
    /// Whether its text is `s`.
    pub fn is(&self, s: &str) -> bool {
        self.text == s
    }

    /// The byte offset just past it: `src[offset..end()]` is its text (for every token but
    /// an opened directive's first, whose text is spelled `#name`).
    pub fn end(&self) -> usize {
        self.offset + self.text.len()
    }
}

/// How [`tokenize_with`] gives a preprocessor directive (a `#` first on its line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directives {
    /// What [`tokenize`] does, for the Metal check: a `#define` is a [`Kind::Directive`] token
    /// `#define` followed by its body's tokens, all marked [`Token::pp`] (code the rules and
    /// rewrites read); any other directive is one `Directive` token, its logical line up to a
    /// `//` comment (`#include <metal_stdlib>`).
    DefinesOpen,
    /// Every directive opened: a `Directive` token of `#` and the directive's name
    /// (`#include`, `#pragma`; `#` alone for a null directive or a line marker), then its
    /// tokens, all marked `pp`; an `#include`'s `<header>` is one [`Kind::Str`] token. A
    /// directive ends before the next token that is not `pp` or is a `Directive`, so two
    /// sources are the same code, comments and whitespace aside, when their tokens agree in
    /// kind, text and `pp`.
    AllOpen,
}

const PUNCT3: [&str; 5] = ["<<=", ">>=", "...", "->*", "<=>"];
const PUNCT2: [&str; 22] = [
    "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
    "##", ".*",
];

/// The tokens of `src`, directives as the Metal check reads them ([`Directives::DefinesOpen`]).
pub fn tokenize(src: &str) -> Vec<Token> {
    tokenize_with(src, Directives::DefinesOpen)
}

/// The length of the line splice (backslash-newline, or backslash-CR-LF) at `i`, if one is there.
fn splice(b: &[u8], i: usize) -> Option<usize> {
    match (b.get(i), b.get(i + 1), b.get(i + 2)) {
        (Some(b'\\'), Some(b'\n'), _) => Some(2),
        (Some(b'\\'), Some(b'\r'), Some(b'\n')) => Some(3),
        _ => None,
    }
}

/// A byte that continues an identifier (any byte of a non-ASCII character included).
fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The end of the string or character literal whose opening quote is at `i`: after the
/// closing quote, or at the end of the line if it has none.
fn quoted(b: &[u8], mut i: usize) -> usize {
    let q = b[i];
    i += 1;
    while i < b.len() && b[i] != q && b[i] != b'\n' {
        i += if b[i] == b'\\' && i + 1 < b.len() { 2 } else { 1 };
    }
    if i < b.len() && b[i] == q { i + 1 } else { i }
}

/// The end of the raw string whose `"` is at `i` (`"delim( ... )delim"`), or the source's end
/// if it is not closed. Without a valid delimiter before its `(` (at most 16 characters, no
/// space, parenthesis or backslash), it ends as a plain string would.
fn raw_string(b: &[u8], i: usize) -> usize {
    let open = i + 1;
    let end_of_delim = b[open..].iter().take(17).position(|&c| matches!(c, b'(' | b')' | b'\\' | b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c));
    let Some(paren) = end_of_delim.map(|p| open + p).filter(|&p| b[p] == b'(') else {
        return quoted(b, i);
    };
    let delim = &b[open..paren];
    (paren + 1..b.len())
        .find(|&j| b[j] == b')' && b[j + 1..].starts_with(delim) && b.get(j + 1 + delim.len()) == Some(&b'"'))
        .map_or(b.len(), |j| j + 2 + delim.len())
}

/// The tokens of `src`, directives as `directives` says.
pub fn tokenize_with(src: &str, directives: Directives) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let mut at_line_start = true;
    // Inside an opened directive: its tokens are `pp`, and a newline ends it.
    let mut in_directive = false;
    // Inside an opened `#include`: `<` starts a header name.
    let mut in_include = false;
    // The line and line start after `b[from..to]`, which may hold newlines.
    let advance = |from: usize, to: usize, line: &mut u32, line_start: &mut usize| {
        for (k, _) in b[from..to].iter().enumerate().filter(|(_, c)| **c == b'\n') {
            *line += 1;
            *line_start = from + k + 1;
        }
    };
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            in_directive = false;
            in_include = false;
            i += 1;
            line += 1;
            line_start = i;
            at_line_start = true;
            continue;
        }
        if let Some(n) = splice(b, i) {
            // A line continuation (inside a #define): whitespace.
            i += n;
            line += 1;
            line_start = i;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let col = (i - line_start) as u32 + 1;
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            // To the end of the line; a splice continues the comment.
            while i < b.len() && b[i] != b'\n' {
                match splice(b, i) {
                    Some(n) => {
                        i += n;
                        line += 1;
                        line_start = i;
                    }
                    None => i += 1,
                }
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let from = i;
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            advance(from, i, &mut line, &mut line_start);
            continue;
        }
        let start = i;
        let kind;
        if c == b'#' && at_line_start {
            // `#define` stays tokenized (its body is code that rewrites and rules must see);
            // any other directive is one token up to the end of its logical line, unless
            // every directive is opened.
            let word_end = {
                // Spaces, tabs, splices and `/* */` comments may come before the name.
                let mut j = i + 1;
                loop {
                    if b.get(j).is_some_and(|&c| c == b' ' || c == b'\t') {
                        j += 1;
                    } else if let Some(n) = splice(b, j) {
                        j += n;
                    } else if b[j..].starts_with(b"/*") {
                        j = b[j + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |p| j + 2 + p + 2);
                    } else {
                        break;
                    }
                }
                let ws = j;
                while j < b.len() && b[j].is_ascii_alphabetic() {
                    j += 1;
                }
                (ws, j)
            };
            let name = &src[word_end.0..word_end.1];
            if name == "define" || directives == Directives::AllOpen {
                in_include = matches!(name, "include" | "include_next" | "import");
                out.push(Token { kind: Kind::Directive, text: format!("#{name}"), offset: start, line, col, pp: true });
                i = word_end.1;
                advance(start, i, &mut line, &mut line_start);
                at_line_start = false;
                in_directive = true;
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
        at_line_start = false;
        if c == b'<' && in_include {
            // A header name: `<metal_stdlib>` is one token, spaces included.
            i = b[i..].iter().position(|&d| d == b'>' || d == b'\n').map_or(b.len(), |p| i + p + usize::from(b[i + p] == b'>'));
            kind = Kind::Str;
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && ident_byte(b[i]) {
                i += 1;
            }
            // An encoding prefix belongs to its literal: `u8"x"`, `L'c'`, `R"d(x)d"`.
            kind = match (&src[start..i], b.get(i)) {
                ("R" | "u8R" | "uR" | "UR" | "LR", Some(b'"')) => {
                    i = raw_string(b, i);
                    Kind::Str
                }
                ("u8" | "u" | "U" | "L", Some(&q @ (b'"' | b'\''))) => {
                    i = quoted(b, i);
                    if q == b'"' { Kind::Str } else { Kind::Char }
                }
                _ => Kind::Ident,
            };
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            while i < b.len() {
                let d = b[i];
                let exponent_sign = (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P');
                if ident_byte(d) || d == b'.' || exponent_sign {
                    i += 1;
                } else if d == b'\'' && b.get(i + 1).copied().is_some_and(ident_byte) {
                    // A digit separator: `1'000`.
                    i += 2;
                } else {
                    break;
                }
            }
            kind = Kind::Number;
        } else if c == b'"' || c == b'\'' {
            i = quoted(b, i);
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
        out.push(Token { kind, text: src[start..i].to_string(), offset: start, line, col, pp: in_directive });
        // A raw string, or a string with a spliced line, spans lines.
        advance(start, i, &mut line, &mut line_start);
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

/// The body of the `#define` whose directive token is at `define` ([`Directives::DefinesOpen`]
/// tokens): the macro's name's index and the range of its body's tokens (after a function-like
/// macro's parameters).
pub fn define_body(toks: &[Token], define: usize) -> Option<(usize, std::ops::Range<usize>)> {
    if !(toks.get(define)?.kind == Kind::Directive && toks[define].text == "#define") {
        return None;
    }
    let name = define + 1;
    let n = toks.get(name).filter(|n| n.kind == Kind::Ident && n.pp)?;
    let mut j = name + 1;
    // a function-like macro's parameters: `(` right after the name
    if toks.get(j).is_some_and(|p| p.is("(") && p.offset == n.end()) {
        while toks.get(j).is_some_and(|p| p.pp && !p.is(")")) {
            j += 1;
        }
        j += 1;
    }
    let start = j.min(toks.len());
    let len = toks[start..].iter().take_while(|b| b.pp && b.kind != Kind::Directive).count();
    Some((name, start..start + len))
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

    fn texts(toks: &[Token]) -> Vec<&str> {
        toks.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn literals_are_one_token() {
        let t = tokenize("s = R\"d(a )\" // b)d\"; n = 1'000; c = u8'x'; w = L\"y\"; f = 0x1p-3f;");
        assert_eq!(
            texts(&t),
            ["s", "=", "R\"d(a )\" // b)d\"", ";", "n", "=", "1'000", ";", "c", "=", "u8'x'", ";", "w", "=", "L\"y\"", ";", "f", "=", "0x1p-3f", ";"]
        );
        assert_eq!(t.iter().map(|t| t.kind).filter(|k| *k != Kind::Ident && *k != Kind::Punct).collect::<Vec<_>>(), [Kind::Str, Kind::Number, Kind::Char, Kind::Str, Kind::Number]);
        // Without a `(` after a short delimiter, `R"` starts a plain string.
        assert_eq!(texts(&tokenize("R\"a\" + f(x)")), ["R\"a\"", "+", "f", "(", "x", ")"]);
    }

    #[test]
    fn lines_stay_right_across_raw_strings_splices_and_unterminated_strings() {
        let at = |src: &str| tokenize(src).iter().map(|t| (t.text.clone(), t.line, t.col)).collect::<Vec<_>>();
        assert_eq!(at("R\"(a\nb)\" x"), [("R\"(a\nb)\"".to_string(), 1, 1), ("x".into(), 2, 5)]);
        // A splice continues a `//` comment.
        assert_eq!(at("a // c \\\n still\nb"), [("a".to_string(), 1, 1), ("b".into(), 3, 1)]);
        assert_eq!(at("a // c \\\r\n still\r\nb"), [("a".to_string(), 1, 1), ("b".into(), 3, 1)]);
        // An unterminated literal ends at its line's end, not on the next line.
        assert_eq!(at("\"abc\nx"), [("\"abc".to_string(), 1, 1), ("x".into(), 2, 1)]);
        assert_eq!(at("\"a\\\nb\" x"), [("\"a\\\nb\"".to_string(), 1, 1), ("x".into(), 2, 4)]);
    }

    #[test]
    fn identifiers_and_punctuators_take_the_longest_match() {
        assert_eq!(texts(&tokenize("aé b é+ü")), ["aé", "b", "é", "+", "ü"]);
        assert!(tokenize("é").iter().all(|t| t.kind == Kind::Ident));
        assert_eq!(texts(&tokenize("a+++b <=> c##d x.*p a%=b >>= ->*")), ["a", "++", "+", "b", "<=>", "c", "##", "d", "x", ".*", "p", "a", "%=", "b", ">>=", "->*"]);
    }

    #[test]
    fn directives_open_or_whole() {
        let src = "#include <metal_stdlib> // c\n#  pragma once\n# 1 \"f\"\n#define A(x) x##1 \\\n + 2\nx";
        let all: Vec<_> = tokenize_with(src, Directives::AllOpen).into_iter().map(|t| (t.kind, t.text, t.pp)).collect();
        let d = |text: &str| (Kind::Directive, text.to_string(), true);
        let pp = |kind: Kind, text: &str| (kind, text.to_string(), true);
        assert_eq!(
            all,
            [
                d("#include"),
                pp(Kind::Str, "<metal_stdlib>"),
                d("#pragma"),
                pp(Kind::Ident, "once"),
                d("#"),
                pp(Kind::Number, "1"),
                pp(Kind::Str, "\"f\""),
                d("#define"),
                pp(Kind::Ident, "A"),
                pp(Kind::Punct, "("),
                pp(Kind::Ident, "x"),
                pp(Kind::Punct, ")"),
                pp(Kind::Ident, "x"),
                pp(Kind::Punct, "##"),
                pp(Kind::Number, "1"),
                pp(Kind::Punct, "+"),
                pp(Kind::Number, "2"),
                (Kind::Ident, "x".to_string(), false),
            ]
        );
        // Comments and splices before the name are whitespace.
        let spaced = tokenize_with("# /* a */ \\\n include /* b\n */ <x>\ny", Directives::AllOpen);
        assert_eq!(spaced.iter().map(|t| (t.text.as_str(), t.line)).collect::<Vec<_>>(), [("#include", 1), ("<x>", 3), ("y", 4)]);
        assert_eq!(texts(&tokenize("#/**/define A 1")), ["#define", "A", "1"]);
        // The Metal check's form: only `#define` is opened.
        let check: Vec<_> = tokenize(src).into_iter().map(|t| (t.kind, t.text, t.pp)).take(4).collect();
        assert_eq!(check, [d("#include <metal_stdlib> "), d("#  pragma once"), d("# 1 \"f\""), d("#define")]);
        // `<` is a header name only in an include.
        assert_eq!(texts(&tokenize_with("#if A < B\n#include < x >", Directives::AllOpen)), ["#if", "A", "<", "B", "#include", "< x >"]);
    }

    #[test]
    fn odd_input_does_not_panic() {
        for s in ["\"unterminated", "'", "/* open", "R\"x(open", "R\"", "R\"12345678901234567(", "é + ü", "\\", "\\\r", "1e", "1'", "#", "#include <", "u8", "L'", "a\r\nb", "\u{7f}"] {
            for mode in [Directives::DefinesOpen, Directives::AllOpen] {
                let toks = tokenize_with(s, mode);
                assert!(toks.iter().all(|t| s[t.offset..].starts_with(&t.text)), "{s:?}: {toks:?}");
            }
        }
    }
}
