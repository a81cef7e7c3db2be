//! The manifest's integer expressions, read back: `12288*M + 12599296`,
//! `ceil_div(T, 64)`, `(B + T)*2`, exactly as [`Dim::describe`] writes them
//! (sums, differences, products, floor quotients, `ceil_div`, `min`, `max`,
//! decimal constants and run-time size names). A review reads the old side
//! of a change from text alone, so it evaluates both sides this way.
//!
//! [`Dim::describe`]: kernelgen_contract::Dim::describe

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
/// A parsed expression.
pub enum Expr {
    /// A decimal constant.
    Num(u64),
    /// A run-time size, by name (`M`).
    Name(String),
    /// An operator or two-argument function applied to two operands.
    Bin(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// The operators and functions of an [`Expr::Bin`].
pub enum BinOp {
    /// `a + b`.
    Add,
    /// `a - b`; a negative difference does not evaluate.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`, rounded down.
    Div,
    /// `ceil_div(a, b)`: `a / b` rounded up.
    CeilDiv,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
}

/// Why a text is not an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The whole text that was parsed.
    pub text: String,
    /// The byte offset in it where parsing failed.
    pub at: usize,
    /// What was expected or wrong there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` at byte {}: {}", self.text, self.at, self.message)
    }
}

impl std::error::Error for ParseError {}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn fail<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError { text: self.text.to_string(), at: self.at, message: message.into() })
    }

    fn skip_space(&mut self) {
        while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), ParseError> {
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(format!("expected `{}`", c as char))
        }
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.product()?;
        loop {
            let op = match self.peek() {
                Some(b'+') => BinOp::Add,
                Some(b'-') => BinOp::Sub,
                _ => return Ok(left),
            };
            self.at += 1;
            let right = self.product()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn product(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.atom()?;
        loop {
            let op = match self.peek() {
                Some(b'*') => BinOp::Mul,
                Some(b'/') => BinOp::Div,
                _ => return Ok(left),
            };
            self.at += 1;
            let right = self.atom()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Some(b'(') => {
                self.at += 1;
                let e = self.sum()?;
                self.expect(b')')?;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_digit()) {
                    self.at += 1;
                }
                match self.text[start..self.at].parse::<u64>() {
                    Ok(n) => Ok(Expr::Num(n)),
                    Err(_) => {
                        self.at = start;
                        self.fail("constant out of range")
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
                    self.at += 1;
                }
                let name = &self.text[start..self.at];
                if self.peek() != Some(b'(') {
                    return Ok(Expr::Name(name.to_string()));
                }
                let op = match name {
                    "ceil_div" => BinOp::CeilDiv,
                    "min" => BinOp::Min,
                    "max" => BinOp::Max,
                    _ => {
                        self.at = start;
                        return self.fail(format!("unknown function `{name}`"));
                    }
                };
                self.at += 1;
                let a = self.sum()?;
                self.expect(b',')?;
                let b = self.sum()?;
                self.expect(b')')?;
                Ok(Expr::Bin(op, Box::new(a), Box::new(b)))
            }
            Some(_) => self.fail("expected a number, a size name or `(`"),
            None => self.fail("unexpected end"),
        }
    }
}

/// Parses one expression.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    let mut p = Parser { text, bytes: text.as_bytes(), at: 0 };
    let e = p.sum()?;
    if p.peek().is_some() {
        return p.fail("unexpected text after the expression");
    }
    Ok(e)
}

impl Expr {
    /// The value with the given sizes; `None` on overflow, a negative
    /// difference, a zero divisor or an unknown name (as
    /// [`kernelgen_contract::Dim::eval`]).
    pub fn eval(&self, size: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        match self {
            Expr::Num(n) => Some(*n),
            Expr::Name(n) => size(n),
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(size)?, b.eval(size)?);
                match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    BinOp::Div => a.checked_div(b),
                    BinOp::CeilDiv => a.checked_add(b.checked_sub(1)?)?.checked_div(b),
                    BinOp::Min => Some(a.min(b)),
                    BinOp::Max => Some(a.max(b)),
                }
            }
        }
    }

    /// The size names it reads, in order of first use.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Num(_) => {}
            Expr::Name(n) => {
                if !out.contains(&n.as_str()) {
                    out.push(n);
                }
            }
            Expr::Bin(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
        }
    }
}

/// Parses and evaluates `text` with the given sizes.
pub fn eval_text(text: &str, size: &dyn Fn(&str) -> Option<u64>) -> Result<Option<u64>, ParseError> {
    Ok(parse(text)?.eval(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgen_contract::{Dim, Op};

    fn at(text: &str, vals: &[(&str, u64)]) -> Option<u64> {
        let f = |n: &str| vals.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        eval_text(text, &f).unwrap()
    }

    #[test]
    fn reads_what_describe_writes() {
        let names = ["B", "T"];
        let dims = [
            Dim::Expr(vec![Op::Const(4), Op::Size(0), Op::Mul].into()),
            Dim::Expr(vec![Op::Size(0), Op::Size(1), Op::Add, Op::Const(2), Op::Mul].into()),
            Dim::Expr(vec![Op::Size(1), Op::Const(64), Op::CeilDiv].into()),
            Dim::Expr(vec![Op::Size(1), Op::Size(0), Op::Const(3), Op::Sub, Op::Sub].into()),
            Dim::Expr(vec![Op::Size(1), Op::Size(0), Op::Const(3), Op::Mul, Op::Div].into()),
            Dim::Expr(vec![Op::Size(1), Op::Size(0), Op::Min, Op::Size(0), Op::Const(9), Op::Max, Op::Add].into()),
            Dim::product(12288, &[0, 1]),
            Dim::Fixed(12599296),
        ];
        for d in &dims {
            let text = d.describe(&names);
            let e = parse(&text).unwrap_or_else(|e| panic!("{e}"));
            for b in [1u64, 2, 5, 100] {
                for t in [1u64, 3, 64, 65, 1000] {
                    let f = |n: &str| match n {
                        "B" => Some(b),
                        "T" => Some(t),
                        _ => None,
                    };
                    assert_eq!(e.eval(&f), d.eval(&[b, t]), "{text} at B={b} T={t}");
                }
            }
        }
    }

    #[test]
    fn precedence_errors_and_names() {
        assert_eq!(at("2 + 3*4", &[]), Some(14));
        assert_eq!(at("12288*M + 12599296", &[("M", 2)]), Some(12288 * 2 + 12599296));
        assert_eq!(at("10 - 4 - 3", &[]), Some(3));
        assert_eq!(at("1 - 2", &[]), None);
        assert_eq!(at("4/0", &[]), None);
        assert_eq!(at("X", &[]), None);
        assert_eq!(at("18446744073709551615*2", &[]), None);
        assert!(parse("").is_err());
        assert!(parse("2 +").is_err());
        assert!(parse("sqrt(4, 2)").is_err());
        assert!(parse("(1").is_err());
        assert!(parse("1 2").is_err());
        assert!(parse("99999999999999999999").is_err());
        assert_eq!(parse("ceil_div(T, 64)*B + T").unwrap().names(), vec!["T", "B"]);
    }
}
