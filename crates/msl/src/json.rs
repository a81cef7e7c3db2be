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

/// A whole text as one tree (the check reads dumps with [`Reader`]).
#[cfg(test)]
pub fn parse(text: &str) -> Result<Value<'_>, String> {
    let mut p = Parser { s: text, b: text.as_bytes(), i: 0, depth: 0 };
    let v = p.value()?;
    p.ws();
    if p.i != p.b.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

/// A dump read one node at a time where the caller chooses: an object's fields up to its
/// `inner` children (clang prints `inner` last), then each child, parsed or itself streamed.
/// So a walk holds one declaration's tree at a time, not the translation unit's.
pub struct Reader<'a> {
    p: Parser<'a>,
}

/// An object's fields before `inner`, and whether `inner` follows (the reader is then at its
/// first child).
pub type Head<'a> = (Vec<(&'a str, Value<'a>)>, bool);

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Self {
        Self::at(text, 0)
    }

    /// A reader starting at byte `i` of `text`.
    pub fn at(text: &'a str, i: usize) -> Self {
        Reader { p: Parser { s: text, b: text.as_bytes(), i, depth: 0 } }
    }

    /// Whether the next value is an object.
    pub fn at_object(&mut self) -> bool {
        self.p.ws();
        self.p.b.get(self.p.i) == Some(&b'{')
    }

    /// The next value, whole.
    pub fn value(&mut self) -> Result<Value<'a>, String> {
        self.p.value()
    }

    /// Open the object at the reader and read its fields up to `inner`.
    pub fn head(&mut self) -> Result<Head<'a>, String> {
        self.p.expect(b'{')?;
        if self.p.depth >= MAX_DEPTH {
            return Err(self.p.err(&format!("{TOO_DEEP} {MAX_DEPTH} levels")));
        }
        self.p.depth += 1;
        let mut fields = Vec::new();
        self.p.ws();
        if self.p.b.get(self.p.i) == Some(&b'}') {
            self.p.i += 1;
            self.p.depth -= 1;
            return Ok((fields, false));
        }
        loop {
            self.p.ws();
            let key = self.p.key()?;
            self.p.expect(b':')?;
            if key == "inner" {
                self.p.expect(b'[')?;
                self.p.depth += 1;
                return Ok((fields, true));
            }
            if SKIPPED.contains(&key) {
                self.p.skip()?;
            } else {
                let v = self.p.value()?;
                fields.push((key, v));
            }
            self.p.ws();
            match self.p.b.get(self.p.i) {
                Some(b',') => self.p.i += 1,
                Some(b'}') => {
                    self.p.i += 1;
                    self.p.depth -= 1;
                    return Ok((fields, false));
                }
                _ => return Err(self.p.err("expected ',' or '}'")),
            }
        }
    }

    /// In `inner`: whether another child follows (the reader is then at it). At the end, reads
    /// past `]` and the rest of the object, keeping nothing of it.
    pub fn next_child(&mut self, first: bool) -> Result<bool, String> {
        self.p.ws();
        match self.p.b.get(self.p.i) {
            Some(b']') => {
                self.p.i += 1;
                self.p.depth -= 1;
                loop {
                    self.p.ws();
                    match self.p.b.get(self.p.i) {
                        Some(b'}') => {
                            self.p.i += 1;
                            self.p.depth -= 1;
                            return Ok(false);
                        }
                        Some(b',') => {
                            self.p.i += 1;
                            self.p.ws();
                            self.p.key()?;
                            self.p.expect(b':')?;
                            self.p.skip()?;
                        }
                        _ => return Err(self.p.err("expected ',' or '}'")),
                    }
                }
            }
            Some(b',') if !first => {
                self.p.i += 1;
                Ok(true)
            }
            Some(_) if first => Ok(true),
            _ => Err(self.p.err("expected ',' or ']'")),
        }
    }

    /// The rest of an object whose head was read: its children as an array, so the object is
    /// whole again.
    pub fn rest(&mut self, mut fields: Vec<(&'a str, Value<'a>)>) -> Result<Value<'a>, String> {
        let mut children = Vec::new();
        let mut first = true;
        while self.next_child(first)? {
            children.push(self.p.value()?);
            first = false;
        }
        fields.push(("inner", Value::Array(children)));
        Ok(Value::Object(fields))
    }

    /// Whether all of the text was read.
    pub fn finished(&mut self) -> bool {
        self.p.ws();
        self.p.i == self.p.b.len()
    }
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
        // (the check's dumps are compacted to one line: the byte says where)
        format!("{what} at byte {}", self.i)
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

/// Keys dropped from a dump as it is read, beside [`SKIPPED`]: `includedFrom` (the header
/// chain of a location, which the walk never reads).
const DROPPED: [&str; 1] = ["includedFrom"];

#[derive(Clone, Copy)]
enum Compacting {
    Normal,
    /// In a string that started at this offset of the output.
    InString { start: usize, escaped: bool },
    /// After a string that started at this offset: a key when a ':' follows.
    AfterString { start: usize },
    /// Skipping a dropped key's value: open brackets, in a string, after a backslash.
    Skip { depth: usize, in_string: bool, escaped: bool, begun: bool },
    /// After a dropped value: a ',' that followed the object's first key goes too.
    AfterSkip,
}

/// Makes clang's pretty-printed JSON compact as it is read, chunk by chunk: whitespace outside
/// strings goes, and so do the keys no rule reads with their values ([`SKIPPED`], [`DROPPED`]).
/// Most of a dump is indentation and locations' bookkeeping: what is kept is a fifth of it, so
/// the check's memory follows the AST rather than its printing.
pub struct Compactor {
    state: Compacting,
}

impl Default for Compactor {
    fn default() -> Self {
        Compactor { state: Compacting::Normal }
    }
}

impl Compactor {
    /// Append the compact form of `chunk` (the next bytes of the dump) to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        for &c in chunk {
            self.byte(c, out);
        }
    }

    fn byte(&mut self, c: u8, out: &mut Vec<u8>) {
        let ws = matches!(c, b' ' | b'\n' | b'\r' | b'\t');
        match self.state {
            Compacting::InString { start, escaped } => {
                out.push(c);
                self.state = match (escaped, c) {
                    (false, b'"') => Compacting::AfterString { start },
                    (false, b'\\') => Compacting::InString { start, escaped: true },
                    _ => Compacting::InString { start, escaped: false },
                };
            }
            Compacting::AfterString { start } => {
                if ws {
                    return;
                }
                let key = &out[start + 1..out.len() - 1];
                if c == b':' && SKIPPED.iter().chain(&DROPPED).any(|k| k.as_bytes() == key) {
                    out.truncate(start);
                    if out.last() == Some(&b',') {
                        out.pop();
                    }
                    self.state = Compacting::Skip { depth: 0, in_string: false, escaped: false, begun: false };
                } else {
                    self.state = Compacting::Normal;
                    self.byte(c, out);
                }
            }
            Compacting::Skip { depth, in_string, escaped, begun } => {
                if in_string {
                    let closed = !escaped && c == b'"';
                    self.state = if closed && depth == 0 {
                        Compacting::AfterSkip
                    } else {
                        Compacting::Skip { depth, in_string: !closed, escaped: !escaped && c == b'\\', begun }
                    };
                    return;
                }
                if ws {
                    return;
                }
                match c {
                    b'"' => self.state = Compacting::Skip { depth, in_string: true, escaped: false, begun: true },
                    b'{' | b'[' => self.state = Compacting::Skip { depth: depth + 1, in_string: false, escaped: false, begun: true },
                    b'}' | b']' if depth > 0 => {
                        self.state = if depth == 1 {
                            Compacting::AfterSkip
                        } else {
                            Compacting::Skip { depth: depth - 1, in_string: false, escaped: false, begun: true }
                        };
                    }
                    // the end of a scalar (a number, true, false, null)
                    b',' | b'}' | b']' if depth == 0 && begun => {
                        self.state = Compacting::AfterSkip;
                        self.byte(c, out);
                    }
                    _ => self.state = Compacting::Skip { depth, in_string: false, escaped: false, begun: true },
                }
            }
            Compacting::AfterSkip => {
                if ws {
                    return;
                }
                self.state = Compacting::Normal;
                if !(c == b',' && out.last() == Some(&b'{')) {
                    self.byte(c, out);
                }
            }
            Compacting::Normal => {
                if ws {
                    return;
                }
                if c == b'"' {
                    self.state = Compacting::InString { start: out.len(), escaped: false };
                }
                out.push(c);
            }
        }
    }
}

#[cfg(test)]
mod compactor_tests {
    use super::*;

    fn compact(text: &str, chunk: usize) -> String {
        let mut c = Compactor::default();
        let mut out = Vec::new();
        for piece in text.as_bytes().chunks(chunk) {
            c.feed(piece, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn compacting_keeps_what_the_walk_reads_in_any_chunking() {
        let dump = "{\n  \"tokLen\": 3,\n  \"kind\" : \"A b\",\n  \"loc\": { \"offset\": 1, \"includedFrom\": {\n \"file\": \"x \\\" y\" }, \"col\": 4 },\n  \"valueCategory\": \"prvalue\",\n  \"inner\": [ { \"decl\": { \"a\": [1, {\"b\": \"}\"}] } }, \"s\\\\\" ],\n  \"value\": \"1\"\n}";
        let want = r#"{"kind":"A b","loc":{"offset":1,"col":4},"inner":[{},"s\\"]}"#;
        for chunk in [1, 2, 3, 7, 1000] {
            assert_eq!(compact(dump, chunk), want, "chunks of {chunk}");
        }
        assert!(parse(want).is_ok());
    }
}
