//! A small JSON reader for clang's AST dumps: tens of megabytes a check (most of it
//! indentation), read into a tree that borrows its keys and strings from the text. Objects
//! keep their keys in order (clang prints a dozen at most), so a lookup is a short scan.
//! Values of keys the AST walk never reads are skipped unparsed.

use std::borrow::Cow;

#[derive(Debug)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// The number's text (clang prints integers).
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Value<'a>>),
    Object(Vec<(&'a str, Value<'a>)>),
}

impl<'a> Value<'a> {
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(fields) => fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value<'a>>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
}

/// Keys whose values no rule reads (clang's JSON dump prints them on most nodes).
const SKIPPED: [&str; 8] =
    ["tokLen", "valueCategory", "mangledName", "decl", "lookups", "definitionData", "value", "opcode"];

/// How deeply arrays and objects may nest. `value` recurses once a level, and so does the AST
/// walk over the tree (and dropping it): deeper input is an error, not a stack overflow. clang's
/// dump of a check that stays under [`crate`]'s output cap nests at most about 32,000 deep (its
/// indentation grows with the depth, so a dump nested `d` deep is `d * d` bytes at least); the
/// caller runs the parse on a thread whose stack holds this depth.
pub const MAX_DEPTH: usize = 50_000;

/// The error for input nested deeper than [`MAX_DEPTH`] starts with this.
pub const TOO_DEEP: &str = "nested more than";

pub fn parse(text: &str) -> Result<Value<'_>, String> {
    let mut p = Parser { s: text, b: text.as_bytes(), i: 0, depth: 0 };
    let v = p.value()?;
    p.ws();
    if p.i != p.b.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Arrays and objects open around the current position.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> String {
        let line = self.b[..self.i.min(self.b.len())].iter().filter(|&&c| c == b'\n').count() + 1;
        format!("{what} at line {line}")
    }

    fn ws(&mut self) {
        // clang indents by two spaces a level: whole runs of eight at a time.
        while let Some(chunk) = self.b.get(self.i..self.i + 8) {
            if u64::from_ne_bytes(chunk.try_into().unwrap()) != 0x2020_2020_2020_2020 {
                break;
            }
            self.i += 8;
        }
        while let Some(&c) = self.b.get(self.i) {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                self.i += 1;
                if c == b'\n' {
                    while let Some(chunk) = self.b.get(self.i..self.i + 8) {
                        if u64::from_ne_bytes(chunk.try_into().unwrap()) != 0x2020_2020_2020_2020 {
                            break;
                        }
                        self.i += 8;
                    }
                }
            } else {
                break;
            }
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected '{}'", c as char)))
        }
    }

    fn value(&mut self) -> Result<Value<'a>, String> {
        self.ws();
        if matches!(self.b.get(self.i), Some(b'{' | b'[')) {
            if self.depth >= MAX_DEPTH {
                return Err(self.err(&format!("{TOO_DEEP} {MAX_DEPTH} levels")));
            }
            self.depth += 1;
            let v = self.container();
            self.depth -= 1;
            return v;
        }
        match self.b.get(self.i) {
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(c) if *c == b'-' || c.is_ascii_digit() => self.number(),
            _ => Err(self.err("expected a value")),
        }
    }

    /// A number as JSON writes it: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Result<Value<'a>, String> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - from
        };
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.b[int_start] == b'0') {
            return Err(self.err("bad number"));
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(self.err("bad number"));
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("bad number"));
            }
        }
        Ok(Value::Number(&self.s[start..self.i]))
    }

    /// An object or an array (at its opening bracket).
    fn container(&mut self) -> Result<Value<'a>, String> {
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Object(fields));
                }
                loop {
                    self.ws();
                    let key = self.key()?;
                    self.expect(b':')?;
                    if SKIPPED.contains(&key) {
                        self.skip()?;
                    } else {
                        let v = self.value()?;
                        fields.push((key, v));
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(fields));
                        }
                        _ => return Err(self.err("expected ',' or '}'")),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.err("expected ',' or ']'")),
                    }
                }
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn word(&mut self, w: &str, v: Value<'a>) -> Result<Value<'a>, String> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(self.err("expected a value"))
        }
    }

    /// A key: clang's keys have no escapes.
    fn key(&mut self) -> Result<&'a str, String> {
        if self.b.get(self.i) != Some(&b'"') {
            return Err(self.err("expected a key"));
        }
        let start = self.i + 1;
        let Some(len) = self.b[start..].iter().position(|&c| c == b'"' || c == b'\\') else {
            return Err(self.err("unterminated key"));
        };
        if self.b[start + len] == b'\\' {
            return Err(self.err("escaped key"));
        }
        self.i = start + len + 1;
        Ok(&self.s[start..start + len])
    }

    fn string(&mut self) -> Result<Cow<'a, str>, String> {
        let start = self.i + 1;
        let Some(len) = self.b[start..].iter().position(|&c| c == b'"' || c == b'\\') else {
            return Err(self.err("unterminated string"));
        };
        if self.b[start + len] == b'"' {
            self.i = start + len + 1;
            return Ok(Cow::Borrowed(&self.s[start..start + len]));
        }
        // With escapes: decode.
        let mut out = String::from(&self.s[start..start + len]);
        let mut j = start + len;
        loop {
            match self.b.get(j) {
                Some(b'"') => {
                    self.i = j + 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let e = *self.b.get(j + 1).ok_or_else(|| self.err("unterminated escape"))?;
                    j += 2;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'"' | b'\\' | b'/' => out.push(e as char),
                        b'u' => {
                            let code = self.hex4(j)?;
                            j += 4;
                            let c = match code {
                                // A surrogate pair: a high one, then a low one.
                                0xD800..=0xDBFF => {
                                    let lo = match self.b.get(j..j + 2) {
                                        Some(b"\\u") => self.hex4(j + 2)?,
                                        _ => return Err(self.err("unpaired surrogate in \\u escape")),
                                    };
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return Err(self.err("unpaired surrogate in \\u escape"));
                                    }
                                    j += 6;
                                    char::from_u32(0x10000 + ((code - 0xD800) << 10) + (lo - 0xDC00))
                                }
                                0xDC00..=0xDFFF => None,
                                _ => char::from_u32(code),
                            };
                            out.push(c.ok_or_else(|| self.err("unpaired surrogate in \\u escape"))?);
                        }
                        _ => return Err(self.err("bad escape")),
                    }
                }
                Some(_) => {
                    // Copy up to the next quote or backslash (UTF-8 stays whole).
                    let run = self.b[j..].iter().position(|&c| c == b'"' || c == b'\\').unwrap_or(self.b.len() - j);
                    out.push_str(&self.s[j..j + run]);
                    j += run;
                }
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    /// Four hex digits at `j` (of a `\\u` escape).
    fn hex4(&self, j: usize) -> Result<u32, String> {
        match self.b.get(j..j + 4) {
            Some(h) if h.iter().all(u8::is_ascii_hexdigit) => {
                Ok(h.iter().fold(0, |v, &c| v * 16 + (c as char).to_digit(16).unwrap_or(0)))
            }
            _ => Err(self.err("bad \\u escape")),
        }
    }

    /// Past one value, unparsed: brackets must match and strings end (their contents and the
    /// scalars between are not checked). No recursion: a stack of the open brackets.
    fn skip(&mut self) -> Result<(), String> {
        self.ws();
        if !matches!(self.b.get(self.i), Some(b'{' | b'[')) {
            return self.value().map(|_| ());
        }
        let mut open: Vec<u8> = Vec::new();
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'{' | b'[' => open.push(c),
                b'}' | b']' => {
                    let want = if c == b'}' { b'{' } else { b'[' };
                    if open.pop() != Some(want) {
                        self.i -= 1;
                        return Err(self.err("mismatched bracket"));
                    }
                    if open.is_empty() {
                        return Ok(());
                    }
                }
                b'"' => {
                    // Inside a string: to its closing quote.
                    loop {
                        match self.b.get(self.i) {
                            Some(b'\\') => self.i += 2,
                            Some(b'"') => {
                                self.i += 1;
                                break;
                            }
                            Some(_) => self.i += 1,
                            None => return Err(self.err("unterminated string")),
                        }
                    }
                }
                _ => {}
            }
        }
        Err(self.err("unterminated value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_clang_prints() {
        let v = parse(r#" {"id": "0x1", "kind": "X", "n": -12, "ok": true, "no": null, "s": "a\"b\\c\u00e9",
            "tokLen": {"x": [1, "]}"]}, "inner": [{"kind": "Y"}, []]} "#)
        .unwrap();
        assert_eq!(v.get("kind").and_then(Value::as_str), Some("X"));
        assert_eq!(v.get("n").and_then(|n| if let Value::Number(t) = n { Some(*t) } else { None }), Some("-12"));
        assert_eq!(v.get("ok").and_then(Value::as_bool), Some(true));
        assert_eq!(v.get("s").and_then(Value::as_str), Some("a\"b\\c\u{e9}"));
        assert!(v.get("tokLen").is_none());
        let inner = v.get("inner").and_then(Value::as_array).unwrap();
        assert_eq!(inner[0].get("kind").and_then(Value::as_str), Some("Y"));
        assert!(parse("{\"a\": 1,}").is_err());
        assert!(parse("[1, 2] x").is_err());
    }

    fn string_of(json: &str) -> Result<String, String> {
        parse(json).map(|v| v.as_str().expect("a string").to_string())
    }

    #[test]
    fn escapes_are_json_s_only() {
        assert_eq!(string_of(r#""\" \\ \/ \b \f \n \r \t \u0041""#).as_deref(), Ok("\" \\ / \u{8} \u{c} \n \r \t A"));
        // A backslash before a multi-byte character (it used to slice the character in two).
        assert!(string_of("\"\\\u{e9}\"").unwrap_err().contains("bad escape"));
        assert!(string_of(r#""a\qb""#).unwrap_err().contains("bad escape"));
        assert!(string_of(r#""\u+041""#).is_err());
        assert!(string_of(r#""\u00e""#).is_err());
        assert!(string_of("\"\\").is_err());
    }

    #[test]
    fn surrogates_pair_or_fail() {
        assert_eq!(string_of(r#""\ud83d\ude00!""#).as_deref(), Ok("\u{1F600}!"));
        for lone in [r#""\ud83d""#, r#""\ud83dx""#, r#""\ude00""#, r#""\ud83d\u0041""#, r#""\ud83d\ud83d""#] {
            assert!(string_of(lone).unwrap_err().contains("surrogate"), "{lone}");
        }
    }

    #[test]
    fn numbers_follow_json_s_grammar() {
        for ok in ["0", "-12", "3.25", "1e5", "-1.5E-3", "2e+10"] {
            assert!(matches!(parse(ok), Ok(Value::Number(n)) if n == ok), "{ok}");
        }
        for bad in ["-", "--1", "1e", "1.", "01", "1e+", "-.5", "+1", "1.e3"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn skipped_values_match_their_brackets() {
        assert!(parse(r#"{"tokLen": [}"#).is_err());
        assert!(parse(r#"{"tokLen": {"a": [1}], "kind": "X"}"#).is_err());
        assert!(parse(r#"{"tokLen": [[1, 2]"#).is_err());
        assert!(parse(r#"{"tokLen": ["abc"#).is_err());
        // Brackets and an escaped quote inside a skipped string are the string's.
        let v = parse(r#"{"tokLen": ["]}\"", {"x": "[{"}], "kind": "X"}"#).unwrap();
        assert_eq!(v.get("kind").and_then(Value::as_str), Some("X"));
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_an_error() {
        // On the stack the check gives the reader (a test thread's is too small for the limit).
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let r = crate::deep_stack(|| parse(&deep).map(|_| ()).unwrap_err()).unwrap();
        assert!(r.starts_with(TOO_DEEP), "{r}");
        let skipped = format!("{{\"tokLen\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&skipped).is_ok(), "a skipped value is read without recursion");
        // At the limit: read, walked and dropped.
        let n = MAX_DEPTH / 2 - 1;
        let at = format!("{}{{}}{}", "{\"kind\": \"X\", \"inner\": [".repeat(n), "]}".repeat(n));
        let walked = crate::deep_stack(|| crate::ast::parse(&at, &|_| true).map(|a| a.functions.len())).unwrap();
        assert_eq!(walked, Ok(0));
    }
}
