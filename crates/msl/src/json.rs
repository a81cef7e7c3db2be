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
const SKIPPED: [&str; 9] =
    ["tokLen", "valueCategory", "mangledName", "decl", "lookups", "definitionData", "value", "storageClass", "opcode"];

pub fn parse(text: &str) -> Result<Value<'_>, String> {
    let mut p = Parser { s: text, b: text.as_bytes(), i: 0 };
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
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(c) if *c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self.b.get(self.i).is_some_and(|c| matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
                    self.i += 1;
                }
                Ok(Value::Number(&self.s[start..self.i]))
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
                        b'u' => {
                            let hex = self.s.get(j..j + 4).ok_or_else(|| self.err("short \\u escape"))?;
                            let mut code = u32::from_str_radix(hex, 16).map_err(|_| self.err("bad \\u escape"))?;
                            j += 4;
                            // A surrogate pair.
                            if (0xD800..0xDC00).contains(&code) && self.s.get(j..j + 2) == Some("\\u") {
                                if let Some(lo) = self.s.get(j + 2..j + 6).and_then(|h| u32::from_str_radix(h, 16).ok()) {
                                    code = 0x10000 + ((code - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF);
                                    j += 6;
                                }
                            }
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        }
                        other => out.push(other as char),
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

    /// Past one value, unparsed.
    fn skip(&mut self) -> Result<(), String> {
        self.ws();
        match self.b.get(self.i) {
            Some(b'{') | Some(b'[') => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.i) {
                    self.i += 1;
                    match c {
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(());
                            }
                        }
                        b'"' => {
                            // Inside a string: to its closing quote.
                            while let Some(&s) = self.b.get(self.i) {
                                self.i += if s == b'\\' { 2 } else { 1 };
                                if s == b'"' {
                                    break;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Err(self.err("unterminated value"))
            }
            _ => self.value().map(|_| ()),
        }
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
}
