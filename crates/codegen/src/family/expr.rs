//! The expression language of family files: integer and float arithmetic,
//! comparisons, boolean operators, strings, and a few functions (`min`,
//! `max`, `round_up`, `ceil_div`, `if`, `has`, ...), over a family's axes,
//! geometry fields, derived values and run-time sizes.
//!
//! Expressions are parsed once, type-checked when the family file is read (so
//! an unknown name or a type error is reported at its span), then evaluated
//! for each variant and geometry. Run-time sizes stay symbolic: an expression
//! that uses them (a shape, a grid extent) becomes a contract [`Dim`], and
//! only arithmetic may touch them.
//!
//! ```text
//! expr    = or
//! or      = and ("||" and)*
//! and     = cmp ("&&" cmp)*
//! cmp     = sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
//! sum     = product (("+" | "-") product)*
//! product = unary (("*" | "/" | "%") unary)*
//! unary   = ("-" | "!") unary | atom
//! atom    = integer | float | "string" | 'string' | true | false
//!         | name ("." name)* | name "(" (expr ("," expr)*)? ")" | "(" expr ")"
//! ```

use kernelgen_contract::{Dim, Op};
use std::fmt;
use std::ops::Range;

/// Byte range within the expression's text.
pub type Span = Range<usize>;

/// The longest expression, in bytes of text.
pub const MAX_TEXT_BYTES: usize = 64 << 10;
/// The deepest parentheses, `-`, `!` and call arguments may nest: the parser recurses through
/// each (a debug build used 13 KiB of stack a level).
pub const MAX_NESTING: usize = 64;
/// The deepest an expression's tree may be (each operator applied to another's result: a sum
/// of 300 terms is 300 deep): checking and evaluating recurse through it.
pub const MAX_DEPTH: usize = 256;
/// The most nodes (values, names, operators, calls) one expression may have.
pub const MAX_NODES: usize = 10_000;
/// The longest string an expression may compute, in bytes.
pub const MAX_STRING_BYTES: usize = 64 << 10;

fn nested_too_deep(span: Span) -> ExprError {
    ExprError::new(span, format!("the expression is nested more than {MAX_NESTING} deep (parentheses, `-`, `!` and calls)"))
}

fn too_deep(span: Span) -> ExprError {
    ExprError::new(span, format!("the expression is more than {MAX_DEPTH} operations deep: compute parts of it as [let] values"))
}

/// A parse, type or evaluation problem, at a span of the expression.
#[derive(Clone, Debug, PartialEq)]
pub struct ExprError {
    /// Where in the expression's text.
    pub span: Span,
    /// What is wrong.
    pub message: String,
    /// The unknown name, when that is the error (a reader skips names it
    /// already reported as broken).
    pub unknown: Option<String>,
    /// What would be right, when there is more to say than the message.
    pub help: Option<String>,
}

impl ExprError {
    pub(crate) fn new(span: Span, message: impl Into<String>) -> Self {
        ExprError { span, message: message.into(), unknown: None, help: None }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// A binary operator.
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
}

impl BinOp {
    fn text(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// A unary operator.
pub enum UnOp {
    /// `-`
    Neg,
    /// `!`
    Not,
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where in the expression's text.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
/// The kinds of expression.
pub enum ExprKind {
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// A name, dotted for a field inside a table (`slot.bytes`).
    Name(String),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A call of a built-in function (`ceil_div(a, b)`, `dtype_size(d)`, ...).
    Call(String, Vec<Expr>),
}

impl Expr {
    /// Every name the expression reads (for blame and dependency order).
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let ExprKind::Name(n) = &e.kind {
                out.push(n.as_str());
            }
        });
        out
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match &self.kind {
            ExprKind::Unary(_, a) => a.walk(f),
            ExprKind::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| a.walk(f)),
            _ => {}
        }
    }
}

// ------------------------------------------------------------------ lexing

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

fn lex(text: &str) -> Result<Vec<(Tok, Span)>, ExprError> {
    const PUNCT: [&str; 19] = ["||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")", ",", ".", "?"];
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.' || ((b[i] == b'-' || b[i] == b'+') && matches!(b[i - 1], b'e' | b'E'))) {
                i += 1;
            }
            let raw: String = text[start..i].chars().filter(|&c| c != '_').collect();
            let span = start..i;
            let tok = if raw.contains(['.', 'e', 'E']) && !raw.starts_with("0x") {
                Tok::Float(raw.parse().map_err(|_| ExprError::new(span.clone(), format!("`{}` is not a number", &text[span.clone()])))?)
            } else if let Some(hex) = raw.strip_prefix("0x") {
                Tok::Int(i64::from_str_radix(hex, 16).map_err(|_| ExprError::new(span.clone(), format!("`{}` is not an integer that fits 64 bits", &text[span.clone()])))?)
            } else {
                Tok::Int(raw.parse().map_err(|_| ExprError::new(span.clone(), format!("`{}` is not an integer that fits 64 bits", &text[span.clone()])))?)
            };
            out.push((tok, span));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(text[start..i].to_string()), start..i));
        } else if c == b'"' || c == b'\'' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != c {
                i += 1;
            }
            if i >= b.len() {
                return Err(ExprError::new(start..b.len(), "the string is not closed"));
            }
            out.push((Tok::Str(text[start + 1..i].to_string()), start..i + 1));
            i += 1;
        } else if let Some(p) = PUNCT.iter().find(|p| text[i..].starts_with(**p)) {
            out.push((Tok::Punct(p), i..i + p.len()));
            i += p.len();
        } else {
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            return Err(ExprError::new(i..i + len, format!("unexpected `{}`", &text[i..i + len])));
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ parsing

struct Parser {
    toks: Vec<(Tok, Span)>,
    at: usize,
    end: usize,
    /// How deep the parser has recursed (parentheses, unary operators, call arguments).
    nesting: usize,
    /// Nodes made so far.
    nodes: usize,
}

impl Parser {
    /// A new node at `span`, counted against [`MAX_NODES`].
    fn node(&mut self, kind: ExprKind, span: Span) -> Result<Expr, ExprError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(ExprError::new(span, format!("the expression has more than {MAX_NODES} parts")));
        }
        Ok(Expr { kind, span })
    }

    /// Parses `f` one level deeper, within [`MAX_NESTING`].
    fn deeper(&mut self, f: fn(&mut Parser) -> Result<Expr, ExprError>) -> Result<Expr, ExprError> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            // (at the token that went one level too deep)
            return Err(nested_too_deep(self.toks[self.at.saturating_sub(1)].1.clone()));
        }
        let e = f(self);
        self.nesting -= 1;
        e
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.0)
    }

    fn span(&self) -> Span {
        self.toks.get(self.at).map_or(self.end..self.end, |t| t.1.clone())
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.peek() == Some(&Tok::Punct(match_punct(p))) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), ExprError> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(ExprError::new(self.span(), format!("expected `{p}`")))
        }
    }

    fn binary(&mut self, ops: &[(&str, BinOp)], next: fn(&mut Parser) -> Result<Expr, ExprError>, chain: bool) -> Result<Expr, ExprError> {
        let mut lhs = next(self)?;
        loop {
            let Some(&(_, op)) = ops.iter().find(|(p, _)| self.peek() == Some(&Tok::Punct(match_punct(p)))) else { return Ok(lhs) };
            let op_span = self.span();
            self.at += 1;
            let rhs = next(self)?;
            let span = lhs.span.start..rhs.span.end;
            lhs = self.node(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span)?;
            if !chain {
                if ops.iter().any(|(p, _)| self.peek() == Some(&Tok::Punct(match_punct(p)))) {
                    return Err(ExprError::new(op_span.start..self.span().end, "comparisons do not chain: use `&&`"));
                }
                return Ok(lhs);
            }
        }
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[("||", BinOp::Or)], Parser::and, true)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[("&&", BinOp::And)], Parser::cmp, true)
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let ops = [("==", BinOp::Eq), ("!=", BinOp::Ne), ("<=", BinOp::Le), (">=", BinOp::Ge), ("<", BinOp::Lt), (">", BinOp::Gt)];
        self.binary(&ops, Parser::sum, false)
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[("+", BinOp::Add), ("-", BinOp::Sub)], Parser::product, true)
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)], Parser::unary, true)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        let start = self.span().start;
        for (p, op) in [("-", UnOp::Neg), ("!", UnOp::Not)] {
            if self.eat(p) {
                let inner = self.deeper(Parser::unary)?;
                let span = start..inner.span.end;
                return self.node(ExprKind::Unary(op, Box::new(inner)), span);
            }
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let span = self.span();
        let Some((tok, _)) = self.toks.get(self.at).cloned() else {
            return Err(ExprError::new(span, "expected a value"));
        };
        self.at += 1;
        let kind = match tok {
            Tok::Int(i) => ExprKind::Int(i),
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Ident(name) if name == "true" || name == "false" => ExprKind::Bool(name == "true"),
            Tok::Ident(name) => {
                if self.eat("(") {
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.deeper(Parser::or)?);
                            if self.eat(")") {
                                break;
                            }
                            self.expect(",")?;
                        }
                    }
                    let end = self.toks[self.at - 1].1.end;
                    return self.node(ExprKind::Call(name, args), span.start..end);
                }
                let mut path = name;
                let mut end = span.end;
                while self.eat(".") {
                    match self.toks.get(self.at).cloned() {
                        Some((Tok::Ident(part), s)) => {
                            self.at += 1;
                            path.push('.');
                            path.push_str(&part);
                            end = s.end;
                        }
                        _ => return Err(ExprError::new(self.span(), "expected a field name after `.`")),
                    }
                }
                return self.node(ExprKind::Name(path), span.start..end);
            }
            Tok::Punct("(") => {
                let inner = self.deeper(Parser::or)?;
                self.expect(")")?;
                return Ok(inner);
            }
            Tok::Punct(p) => return Err(ExprError::new(span, format!("expected a value, found `{p}`"))),
        };
        self.node(kind, span)
    }
}

fn match_punct(p: &str) -> &'static str {
    ["||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")", ",", ".", "?"].into_iter().find(|q| *q == p).expect("a known punctuator")
}

/// Parses one expression, within [`MAX_TEXT_BYTES`], [`MAX_NESTING`], [`MAX_DEPTH`] and
/// [`MAX_NODES`].
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(ExprError::new(0..text.len(), format!("the expression is {} bytes long, above the limit of {MAX_TEXT_BYTES}", text.len())));
    }
    let toks = lex(text)?;
    if toks.is_empty() {
        return Err(ExprError::new(0..text.len(), "the expression is empty"));
    }
    let mut p = Parser { toks, at: 0, end: text.len(), nesting: 0, nodes: 0 };
    let e = p.or()?;
    if p.at < p.toks.len() {
        return Err(ExprError::new(p.span().start..text.len(), format!("unexpected `{}` after the expression", &text[p.span()])));
    }
    // A chain of operators nests without recursing in the parser (`1 + 1 + ...` is a tree as
    // deep as it is long): measured here, without recursion.
    let mut stack = vec![(&e, 1usize)];
    while let Some((x, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(too_deep(x.span.clone()));
        }
        match &x.kind {
            ExprKind::Unary(_, a) => stack.push((a, depth + 1)),
            ExprKind::Binary(_, a, b) => stack.extend([(&**a, depth + 1), (&**b, depth + 1)]),
            ExprKind::Call(_, args) => stack.extend(args.iter().map(|a| (a, depth + 1))),
            _ => {}
        }
    }
    Ok(e)
}

// ------------------------------------------------------------------ types

/// What an expression computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A boolean.
    Bool,
    /// A string.
    Str,
    /// An integer that depends on run-time sizes: only arithmetic may use it.
    Size,
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Type::Int => "an integer",
            Type::Float => "a float",
            Type::Bool => "a boolean",
            Type::Str => "a string",
            Type::Size => "a run-time size",
        })
    }
}

/// What names mean where an expression is checked.
pub trait Scope {
    /// The type of a name, or `None` if it is not known here.
    fn type_of(&self, name: &str) -> Option<Type>;
    /// Whether `has(name)` may ask about it (an optional field).
    fn is_field(&self, name: &str) -> bool;
    /// Every known name, for "did you mean".
    fn names(&self) -> Vec<String>;
}

/// The functions of the language: name, and what they take.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("min", "min(a, b): the smaller of two numbers"),
    ("max", "max(a, b): the larger of two numbers"),
    ("round_up", "round_up(n, m): n rounded up to a multiple of m"),
    ("ceil_div", "ceil_div(a, b): a / b rounded up"),
    ("abs", "abs(x)"),
    ("if", "if(condition, a, b): a when the condition holds, else b"),
    ("has", "has(field): whether the geometry gives an optional field"),
    ("float", "float(n): an integer as a float"),
    ("f32", "f32(x): x rounded to the nearest f32"),
    ("f32_bits", "f32_bits(x): the bits of x rounded to f32, as an integer"),
    ("is_finite", "is_finite(x): whether x is finite as an f32"),
    ("metal_type", "metal_type(dtype): the Metal type name of a dtype (\"bf16\" -> \"bfloat16_t\")"),
    ("dtype_size", "dtype_size(dtype): bytes per element of a dtype"),
    ("hex", "hex(n, digits): n in lowercase hexadecimal, zero-padded"),
    ("sci", "sci(x): x in shortest scientific notation (1e-6)"),
    ("sci_f32", "sci_f32(x): x rounded to f32, in shortest scientific notation"),
    ("concat", "concat(a, b, ...): the values as text, joined"),
    ("near_multiples", "near_multiples(n, m): the multiples of m nearest n, as text (\"64 or 128\")"),
];

fn numeric(t: Type) -> bool {
    matches!(t, Type::Int | Type::Float | Type::Size)
}

/// Type-checks `e` in `scope`; every problem is reported.
pub fn check(e: &Expr, scope: &dyn Scope) -> Result<Type, Vec<ExprError>> {
    let mut errors = Vec::new();
    let t = check_into(e, scope, &mut errors);
    match t {
        Some(t) if errors.is_empty() => Ok(t),
        _ => Err(errors),
    }
}

/// Like [`check`], and the result must have type `want` (an integer where
/// `want` is [`Type::Size`] is fine: a constant dimension).
pub fn check_as(e: &Expr, scope: &dyn Scope, want: Type, what: &str) -> Result<(), Vec<ExprError>> {
    let t = check(e, scope)?;
    let ok = t == want || (want == Type::Size && t == Type::Int) || (want == Type::Float && t == Type::Int);
    if ok { Ok(()) } else { Err(vec![ExprError::new(e.span.clone(), format!("{what} must be {want}, but this is {t}"))]) }
}

fn check_into(e: &Expr, scope: &dyn Scope, errors: &mut Vec<ExprError>) -> Option<Type> {
    let err = |errors: &mut Vec<ExprError>, m: String| {
        errors.push(ExprError::new(e.span.clone(), m));
        None
    };
    match &e.kind {
        ExprKind::Int(_) => Some(Type::Int),
        ExprKind::Float(_) => Some(Type::Float),
        ExprKind::Bool(_) => Some(Type::Bool),
        ExprKind::Str(_) => Some(Type::Str),
        ExprKind::Name(n) => match scope.type_of(n) {
            Some(t) => Some(t),
            None => {
                let names = scope.names();
                let hint = crate::schema::suggest(n, names.iter().map(String::as_str));
                // with no near name, the names there are (a few dozen at most in a family)
                let help = (hint.is_empty() && !names.is_empty()).then(|| format!("the names here are {}", crate::schema::key_list(names.iter().map(String::as_str))));
                errors.push(ExprError { span: e.span.clone(), message: format!("unknown name `{n}`{hint}"), unknown: Some(n.clone()), help });
                None
            }
        },
        ExprKind::Unary(op, a) => {
            let t = check_into(a, scope, errors)?;
            match (op, t) {
                (UnOp::Neg, Type::Int | Type::Float) => Some(t),
                (UnOp::Not, Type::Bool) => Some(Type::Bool),
                (UnOp::Neg, _) => err(errors, format!("`-` needs a number, but this is {t}")),
                (UnOp::Not, _) => err(errors, format!("`!` needs a boolean, but this is {t}")),
            }
        }
        ExprKind::Binary(op, a, b) => {
            let (ta, tb) = (check_into(a, scope, errors), check_into(b, scope, errors));
            let (ta, tb) = (ta?, tb?);
            let sym = op.text();
            match op {
                BinOp::Or | BinOp::And => {
                    if ta == Type::Bool && tb == Type::Bool {
                        Some(Type::Bool)
                    } else {
                        err(errors, format!("`{sym}` needs two booleans, but these are {ta} and {tb}"))
                    }
                }
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    if ta == Type::Size || tb == Type::Size {
                        return err(errors, format!("`{sym}` cannot compare a run-time size: it is unknown until launch"));
                    }
                    let ordered = !matches!(op, BinOp::Eq | BinOp::Ne);
                    let comparable = (numeric(ta) && numeric(tb)) || (ta == tb && (!ordered || ta == Type::Str));
                    if comparable { Some(Type::Bool) } else { err(errors, format!("`{sym}` cannot compare {ta} with {tb}")) }
                }
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                    if !numeric(ta) || !numeric(tb) {
                        return err(errors, format!("`{sym}` needs two numbers, but these are {ta} and {tb}"));
                    }
                    if (ta == Type::Size || tb == Type::Size) && (ta == Type::Float || tb == Type::Float) {
                        return err(errors, format!("`{sym}` cannot mix a run-time size with a float"));
                    }
                    if *op == BinOp::Rem && (ta == Type::Size || tb == Type::Size) {
                        return err(errors, "`%` cannot use a run-time size".into());
                    }
                    Some(if ta == Type::Size || tb == Type::Size {
                        Type::Size
                    } else if ta == Type::Float || tb == Type::Float {
                        Type::Float
                    } else {
                        Type::Int
                    })
                }
            }
        }
        ExprKind::Call(name, args) => check_call(e, name, args, scope, errors),
    }
}

fn check_call(e: &Expr, name: &str, args: &[Expr], scope: &dyn Scope, errors: &mut Vec<ExprError>) -> Option<Type> {
    let arity = |n: usize, errors: &mut Vec<ExprError>| -> bool {
        if args.len() == n {
            true
        } else {
            errors.push(ExprError::new(e.span.clone(), format!("`{name}` takes {n} argument{}, given {}", if n == 1 { "" } else { "s" }, args.len())));
            false
        }
    };
    if name == "has" {
        if !arity(1, errors) {
            return None;
        }
        return match &args[0].kind {
            ExprKind::Name(n) if scope.is_field(n) => Some(Type::Bool),
            _ => {
                errors.push(ExprError::new(args[0].span.clone(), "`has` takes the name of a geometry field"));
                None
            }
        };
    }
    let types: Vec<Option<Type>> = args.iter().map(|a| check_into(a, scope, errors)).collect();
    if types.iter().any(Option::is_none) {
        return None;
    }
    let t: Vec<Type> = types.into_iter().flatten().collect();
    let bad = |errors: &mut Vec<ExprError>, what: &str| {
        errors.push(ExprError::new(e.span.clone(), format!("`{name}` takes {what}, given {}", t.iter().map(Type::to_string).collect::<Vec<_>>().join(", "))));
        None
    };
    match name {
        "min" | "max" => {
            if !arity(2, errors) {
                return None;
            }
            match (t[0], t[1]) {
                (Type::Size, Type::Int | Type::Size) | (Type::Int, Type::Size) => Some(Type::Size),
                (Type::Int, Type::Int) => Some(Type::Int),
                (a, b) if a != Type::Size && b != Type::Size && numeric(a) && numeric(b) => Some(Type::Float),
                _ => bad(errors, "two numbers"),
            }
        }
        "round_up" => {
            if !arity(2, errors) {
                return None;
            }
            if t == [Type::Int, Type::Int] { Some(Type::Int) } else { bad(errors, "two integers") }
        }
        "ceil_div" => {
            if !arity(2, errors) {
                return None;
            }
            match (t[0], t[1]) {
                (Type::Int, Type::Int) => Some(Type::Int),
                (Type::Size | Type::Int, Type::Size | Type::Int) => Some(Type::Size),
                _ => bad(errors, "two integers"),
            }
        }
        "abs" => {
            if !arity(1, errors) {
                return None;
            }
            if matches!(t[0], Type::Int | Type::Float) { Some(t[0]) } else { bad(errors, "a number") }
        }
        "if" => {
            if !arity(3, errors) {
                return None;
            }
            if t[0] != Type::Bool {
                return bad(errors, "a boolean condition");
            }
            match (t[1], t[2]) {
                (Type::Size, _) | (_, Type::Size) => bad(errors, "values that do not depend on run-time sizes"),
                (a, b) if a == b => Some(a),
                (a, b) if numeric(a) && numeric(b) => Some(Type::Float),
                _ => bad(errors, "two values of one type"),
            }
        }
        "float" => {
            if arity(1, errors) && t[0] == Type::Int { Some(Type::Float) } else { bad(errors, "an integer") }
        }
        "f32" | "f32_bits" | "is_finite" | "sci" | "sci_f32" => {
            if !arity(1, errors) {
                return None;
            }
            if !matches!(t[0], Type::Int | Type::Float) {
                return bad(errors, "a number");
            }
            Some(match name {
                "f32" => Type::Float,
                "f32_bits" => Type::Int,
                "is_finite" => Type::Bool,
                _ => Type::Str,
            })
        }
        "metal_type" | "dtype_size" => {
            if !arity(1, errors) {
                return None;
            }
            if t[0] != Type::Str {
                return bad(errors, "a dtype name");
            }
            Some(if name == "metal_type" { Type::Str } else { Type::Int })
        }
        "hex" | "near_multiples" => {
            if !arity(2, errors) {
                return None;
            }
            if t == [Type::Int, Type::Int] { Some(Type::Str) } else { bad(errors, "two integers") }
        }
        "concat" => {
            if t.contains(&Type::Size) { bad(errors, "values that do not depend on run-time sizes") } else { Some(Type::Str) }
        }
        _ => {
            let hint = crate::schema::suggest(name, FUNCTIONS.iter().map(|f| f.0));
            errors.push(ExprError::new(e.span.clone(), format!("unknown function `{name}`{hint}")));
            None
        }
    }
}

// ------------------------------------------------------------------ values

/// The value of an expression that does not depend on run-time sizes.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

impl Value {
    /// As it appears in messages and in `concat`: integers in decimal,
    /// strings bare.
    pub fn text(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format!("{f}"),
            Value::Bool(b) => b.to_string(),
            Value::Str(s) => s.clone(),
        }
    }

    /// The value a template sees.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Value::Int(i) => serde_json::json!(i),
            Value::Float(f) => serde_json::json!(f),
            Value::Bool(b) => serde_json::json!(b),
            Value::Str(s) => serde_json::json!(s),
        }
    }

    fn as_f64(&self) -> f64 {
        match self {
            Value::Int(i) => *i as f64,
            Value::Float(f) => *f,
            _ => f64::NAN,
        }
    }
}

/// What names are bound to while evaluating.
pub trait Env {
    /// A value, or `None` for a run-time size (symbolic).
    fn value(&self, name: &str) -> Result<Option<Value>, String>;
    /// The index of run-time size `name`.
    fn size_index(&self, name: &str) -> Option<usize>;
    /// Whether the geometry gives optional field `name`.
    fn has(&self, name: &str) -> bool;
}

/// Evaluates an expression that does not depend on run-time sizes.
pub fn eval(e: &Expr, env: &dyn Env) -> Result<Value, ExprError> {
    match symbolic(e, env)? {
        Sym::Value(v) => Ok(v),
        Sym::Dim(_) => Err(ExprError::new(e.span.clone(), "this depends on a run-time size, but only its value at generation time is usable here")),
    }
}

/// Evaluates a dimension, grid extent or byte count: a constant, or an
/// expression over run-time sizes. A single product (`Hv * B`) is written as
/// the generator writes products (`Dim::product`), whatever its order.
pub fn eval_dim(e: &Expr, env: &dyn Env) -> Result<Dim, ExprError> {
    match symbolic(e, env)? {
        Sym::Value(Value::Int(n)) if n >= 0 => Ok(Dim::Fixed(n as u64)),
        Sym::Value(v) => Err(ExprError::new(e.span.clone(), format!("a dimension must be a non-negative integer, but this is {}", v.text()))),
        Sym::Dim(d) => Ok(d.into_dim()),
    }
}

/// A partly evaluated expression: a value, or postfix ops over sizes.
enum Sym {
    Value(Value),
    Dim(SymDim),
}

/// Postfix ops, remembered also as a monomial when it is one.
struct SymDim {
    ops: Vec<Op>,
    /// `coeff * sizes...` when the expression is a single product.
    monomial: Option<(u64, Vec<usize>)>,
}

impl SymDim {
    fn into_dim(self) -> Dim {
        match self.monomial {
            Some((coeff, sizes)) => Dim::product(coeff, &sizes),
            None => Dim::Expr(self.ops.into()),
        }
    }

    fn of_value(n: u64) -> SymDim {
        SymDim { ops: vec![Op::Const(n)], monomial: Some((n, Vec::new())) }
    }
}

fn symbolic(e: &Expr, env: &dyn Env) -> Result<Sym, ExprError> {
    let fail = |m: String| ExprError::new(e.span.clone(), m);
    Ok(match &e.kind {
        ExprKind::Int(i) => Sym::Value(Value::Int(*i)),
        ExprKind::Float(f) => Sym::Value(Value::Float(*f)),
        ExprKind::Bool(b) => Sym::Value(Value::Bool(*b)),
        ExprKind::Str(s) => Sym::Value(Value::Str(s.clone())),
        ExprKind::Name(n) => match env.value(n).map_err(fail)? {
            Some(v) => Sym::Value(v),
            None => {
                let i = env.size_index(n).ok_or_else(|| fail(format!("`{n}` has no value here")))?;
                Sym::Dim(SymDim { ops: vec![Op::Size(i)], monomial: Some((1, vec![i])) })
            }
        },
        ExprKind::Unary(op, a) => {
            let v = value_of(a, env)?;
            Sym::Value(match (op, v) {
                (UnOp::Neg, Value::Int(i)) => Value::Int(i.checked_neg().ok_or_else(|| fail("overflow".into()))?),
                (UnOp::Neg, Value::Float(f)) => Value::Float(-f),
                (UnOp::Not, Value::Bool(b)) => Value::Bool(!b),
                (_, v) => return Err(fail(format!("cannot apply this to {}", v.text()))),
            })
        }
        ExprKind::Binary(op, a, b) => {
            if matches!(op, BinOp::And | BinOp::Or) {
                // Short-circuit, so `has(x) && x > 0` is safe.
                let l = bool_of(a, env)?;
                if (*op == BinOp::And && !l) || (*op == BinOp::Or && l) {
                    return Ok(Sym::Value(Value::Bool(l)));
                }
                return Ok(Sym::Value(Value::Bool(bool_of(b, env)?)));
            }
            let (l, r) = (symbolic(a, env)?, symbolic(b, env)?);
            match (l, r) {
                (Sym::Value(l), Sym::Value(r)) => Sym::Value(binary(*op, l, r).map_err(fail)?),
                (l, r) => Sym::Dim(dim_binary(*op, to_symdim(l, a)?, to_symdim(r, b)?).map_err(fail)?),
            }
        }
        ExprKind::Call(name, args) => call(e, name, args, env)?,
    })
}

fn to_symdim(s: Sym, e: &Expr) -> Result<SymDim, ExprError> {
    match s {
        Sym::Dim(d) => Ok(d),
        Sym::Value(Value::Int(n)) if n >= 0 => Ok(SymDim::of_value(n as u64)),
        Sym::Value(v) => Err(ExprError::new(e.span.clone(), format!("a run-time size can only be combined with non-negative integers, not {}", v.text()))),
    }
}

fn dim_binary(op: BinOp, mut l: SymDim, r: SymDim) -> Result<SymDim, String> {
    let monomial = match (op, &l.monomial, &r.monomial) {
        (BinOp::Mul, Some((ca, sa)), Some((cb, sb))) => {
            let coeff = ca.checked_mul(*cb).ok_or("overflow")?;
            Some((coeff, sa.iter().chain(sb).copied().collect()))
        }
        _ => None,
    };
    let o = match op {
        BinOp::Add => Op::Add,
        BinOp::Sub => Op::Sub,
        BinOp::Mul => Op::Mul,
        BinOp::Div => Op::Div,
        other => return Err(format!("`{}` cannot use a run-time size", other.text())),
    };
    l.ops.extend(r.ops);
    l.ops.push(o);
    Ok(SymDim { ops: l.ops, monomial })
}

fn value_of(e: &Expr, env: &dyn Env) -> Result<Value, ExprError> {
    eval(e, env)
}

fn bool_of(e: &Expr, env: &dyn Env) -> Result<bool, ExprError> {
    match eval(e, env)? {
        Value::Bool(b) => Ok(b),
        v => Err(ExprError::new(e.span.clone(), format!("expected a boolean, found {}", v.text()))),
    }
}

fn int_of(e: &Expr, env: &dyn Env) -> Result<i64, ExprError> {
    match eval(e, env)? {
        Value::Int(i) => Ok(i),
        v => Err(ExprError::new(e.span.clone(), format!("expected an integer, found {}", v.text()))),
    }
}

fn binary(op: BinOp, l: Value, r: Value) -> Result<Value, String> {
    use Value::*;
    let overflow = || format!("`{}` overflows 64-bit integers", op.text());
    Ok(match (op, &l, &r) {
        (BinOp::Eq, _, _) => Bool(equal(&l, &r)),
        (BinOp::Ne, _, _) => Bool(!equal(&l, &r)),
        (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, Str(a), Str(b)) => Bool(ordered(op, a.cmp(b))),
        (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, Int(a), Int(b)) => Bool(ordered(op, a.cmp(b))),
        (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, _, _) => {
            Bool(l.as_f64().partial_cmp(&r.as_f64()).is_some_and(|o| ordered(op, o)))
        }
        (BinOp::Add, Int(a), Int(b)) => Int(a.checked_add(*b).ok_or_else(overflow)?),
        (BinOp::Sub, Int(a), Int(b)) => Int(a.checked_sub(*b).ok_or_else(overflow)?),
        (BinOp::Mul, Int(a), Int(b)) => Int(a.checked_mul(*b).ok_or_else(overflow)?),
        (BinOp::Div, Int(_), Int(0)) | (BinOp::Rem, Int(_), Int(0)) => return Err(format!("`{}` by zero", op.text())),
        (BinOp::Div, Int(a), Int(b)) => Int(a.checked_div(*b).ok_or_else(overflow)?),
        (BinOp::Rem, Int(a), Int(b)) => Int(a.checked_rem(*b).ok_or_else(overflow)?),
        (BinOp::Add, _, _) => Float(l.as_f64() + r.as_f64()),
        (BinOp::Sub, _, _) => Float(l.as_f64() - r.as_f64()),
        (BinOp::Mul, _, _) => Float(l.as_f64() * r.as_f64()),
        (BinOp::Div, _, _) => Float(l.as_f64() / r.as_f64()),
        (BinOp::Rem, _, _) => Float(l.as_f64() % r.as_f64()),
        (BinOp::And | BinOp::Or, _, _) => unreachable!("short-circuited by the caller"),
    })
}

fn equal(l: &Value, r: &Value) -> bool {
    match (l, r) {
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => l.as_f64() == r.as_f64() && (l == r || !matches!((l, r), (Value::Int(_), Value::Int(_)))),
        _ => l == r,
    }
}

fn ordered(op: BinOp, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        BinOp::Lt => o == Less,
        BinOp::Le => o != Greater,
        BinOp::Gt => o == Greater,
        BinOp::Ge => o != Less,
        _ => unreachable!("only ordering operators"),
    }
}

/// `a / b` rounded up (`b > 0`).
fn ceil_div(a: i64, b: i64) -> i64 {
    a / b + i64::from(a % b > 0)
}

/// `"X or Y"`: the multiples of `m` around `n`, for hints.
pub fn near_multiples(n: i64, m: i64) -> String {
    if m <= 0 {
        return String::new();
    }
    // (in 128 bits: the multiples around an i64 may lie outside it; then they are left out)
    let (n, m) = (i128::from(n), i128::from(m));
    let below = n.div_euclid(m) * m;
    let fits = |x: i128| i64::try_from(x).is_ok();
    let near: Vec<String> = [below, below + m].into_iter().filter(|&x| fits(x) && (x > 0 || x == below + m)).map(|x| x.to_string()).collect();
    near.join(" or ")
}

fn call(e: &Expr, name: &str, args: &[Expr], env: &dyn Env) -> Result<Sym, ExprError> {
    let fail = |m: String| ExprError::new(e.span.clone(), m);
    let v = |i: usize| value_of(&args[i], env);
    let n = |i: usize| int_of(&args[i], env);
    let f = |i: usize| -> Result<f64, ExprError> {
        match v(i)? {
            Value::Int(x) => Ok(x as f64),
            Value::Float(x) => Ok(x),
            other => Err(ExprError::new(args[i].span.clone(), format!("expected a number, found {}", other.text()))),
        }
    };
    let s = |i: usize| -> Result<String, ExprError> {
        match v(i)? {
            Value::Str(x) => Ok(x),
            other => Err(ExprError::new(args[i].span.clone(), format!("expected a string, found {}", other.text()))),
        }
    };
    let value = match name {
        "has" => match &args[0].kind {
            ExprKind::Name(field) => Value::Bool(env.has(field)),
            _ => return Err(fail("`has` takes the name of a geometry field".into())),
        },
        "if" => return if bool_of(&args[0], env)? { symbolic(&args[1], env) } else { symbolic(&args[2], env) },
        "min" | "max" | "ceil_div" => {
            let (a, b) = (symbolic(&args[0], env)?, symbolic(&args[1], env)?);
            match (a, b) {
                (Sym::Value(Value::Int(a)), Sym::Value(Value::Int(b))) => Value::Int(match name {
                    "min" => a.min(b),
                    "max" => a.max(b),
                    _ => {
                        if b <= 0 {
                            return Err(fail(format!("ceil_div by {b}")));
                        }
                        ceil_div(a, b)
                    }
                }),
                (Sym::Value(a), Sym::Value(b)) if name != "ceil_div" => {
                    let (a, b) = (a.as_f64(), b.as_f64());
                    Value::Float(if name == "min" { a.min(b) } else { a.max(b) })
                }
                (a, b) => {
                    let (mut a, b) = (to_symdim(a, &args[0])?, to_symdim(b, &args[1])?);
                    a.ops.extend(b.ops);
                    a.ops.push(match name {
                        "min" => Op::Min,
                        "max" => Op::Max,
                        _ => Op::CeilDiv,
                    });
                    return Ok(Sym::Dim(SymDim { ops: a.ops, monomial: None }));
                }
            }
        }
        "round_up" => {
            let (a, m) = (n(0)?, n(1)?);
            if m <= 0 {
                return Err(fail(format!("round_up to {m}")));
            }
            Value::Int(ceil_div(a, m).checked_mul(m).ok_or_else(|| fail("overflow".into()))?)
        }
        "abs" => match v(0)? {
            Value::Int(x) => Value::Int(x.checked_abs().ok_or_else(|| fail("overflow".into()))?),
            Value::Float(x) => Value::Float(x.abs()),
            other => return Err(fail(format!("abs of {}", other.text()))),
        },
        "float" => Value::Float(n(0)? as f64),
        "f32" => Value::Float(f64::from(f(0)? as f32)),
        "f32_bits" => Value::Int(i64::from((f(0)? as f32).to_bits())),
        "is_finite" => Value::Bool((f(0)? as f32).is_finite()),
        "sci" => Value::Str(format!("{:e}", f(0)?)),
        "sci_f32" => Value::Str(format!("{:e}", f(0)? as f32)),
        "metal_type" | "dtype_size" => {
            let d = s(0)?;
            let dtype = crate::model::dtype_from_short(&d).ok_or_else(|| fail(format!("`{d}` is not a dtype (the dtypes are {})", crate::model::dtype_names())))?;
            if name == "metal_type" { Value::Str(dtype.metal_name().into()) } else { Value::Int(dtype.size() as i64) }
        }
        "hex" => {
            let (x, digits) = (n(0)?, n(1)?);
            Value::Str(format!("{x:0width$x}", width = digits.clamp(0, 16) as usize))
        }
        "near_multiples" => Value::Str(near_multiples(n(0)?, n(1)?)),
        "concat" => {
            let mut text = String::new();
            for a in args {
                text.push_str(&value_of(a, env)?.text());
                if text.len() > MAX_STRING_BYTES {
                    return Err(fail(format!("`concat` makes a string longer than the limit of {MAX_STRING_BYTES} bytes")));
                }
            }
            Value::Str(text)
        }
        other => return Err(fail(format!("unknown function `{other}`"))),
    };
    Ok(Sym::Value(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Vars(BTreeMap<&'static str, Value>, Vec<&'static str>);

    impl Scope for Vars {
        fn type_of(&self, name: &str) -> Option<Type> {
            if self.1.contains(&name) {
                return Some(Type::Size);
            }
            self.0.get(name).map(|v| match v {
                Value::Int(_) => Type::Int,
                Value::Float(_) => Type::Float,
                Value::Bool(_) => Type::Bool,
                Value::Str(_) => Type::Str,
            })
        }
        fn is_field(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().chain(&self.1).map(|s| s.to_string()).collect()
        }
    }

    impl Env for Vars {
        fn value(&self, name: &str) -> Result<Option<Value>, String> {
            if self.1.contains(&name) {
                return Ok(None);
            }
            self.0.get(name).cloned().map(Some).ok_or_else(|| format!("`{name}` is not given"))
        }
        fn size_index(&self, name: &str) -> Option<usize> {
            self.1.iter().position(|s| *s == name)
        }
        fn has(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }
    }

    fn vars() -> Vars {
        let mut m = BTreeMap::new();
        m.insert("D", Value::Int(200));
        m.insert("Hv", Value::Int(32));
        m.insert("eps", Value::Float(1e-6));
        m.insert("quant", Value::Str("q4".into()));
        m.insert("slot.bytes", Value::Int(4096));
        Vars(m, vec!["B", "T"])
    }

    fn value(text: &str) -> Value {
        let e = parse(text).unwrap();
        check(&e, &vars()).unwrap_or_else(|errs| panic!("{text}: {errs:?}"));
        eval(&e, &vars()).unwrap()
    }

    #[test]
    fn arithmetic_and_functions() {
        assert_eq!(value("min(1024, ceil_div(D, 128) * 32)"), Value::Int(64));
        assert_eq!(value("round_up(D + 1, 256)"), Value::Int(256));
        assert_eq!(value("if(quant == 'q4', D / 2, D)"), Value::Int(100));
        assert_eq!(value("D % 8 == 0 && !(quant != \"q4\")"), Value::Bool(true));
        assert_eq!(value("concat('as_type<float>(0x', hex(f32_bits(eps), 8), 'u)')"), Value::Str("as_type<float>(0x358637bdu)".into()));
        assert_eq!(value("sci_f32(eps)"), Value::Str("1e-6".into()));
        assert_eq!(value("sci(1e-50)"), Value::Str("1e-50".into()));
        assert_eq!(value("metal_type('bf16')"), Value::Str("bfloat16_t".into()));
        assert_eq!(value("has(slot.bytes) && slot.bytes > 0"), Value::Bool(true));
        assert_eq!(value("near_multiples(66, 4)"), Value::Str("64 or 68".into()));
        assert_eq!(value("-3 + 2 * 4"), Value::Int(5));
        assert_eq!(value("1_000 * 2"), Value::Int(2000));
        assert_eq!(value("f32(eps) > 0.0 && is_finite(eps)"), Value::Bool(true));
    }

    /// `FUNCTIONS` (the names "did you mean" offers and the docs list), the type checker
    /// and the evaluator each name every function: an example of each keeps them in step.
    #[test]
    fn every_listed_function_checks_and_evaluates() {
        let examples = [
            ("min", "min(D, 7)", Value::Int(7)),
            ("max", "max(D, 7)", Value::Int(200)),
            ("round_up", "round_up(D, 64)", Value::Int(256)),
            ("ceil_div", "ceil_div(D, 64)", Value::Int(4)),
            ("abs", "abs(7 - D)", Value::Int(193)),
            ("if", "if(D > 7, 1, 2)", Value::Int(1)),
            ("has", "has(eps)", Value::Bool(true)),
            ("float", "float(D)", Value::Float(200.0)),
            ("f32", "f32(0.1)", Value::Float(0.1f32 as f64)),
            ("f32_bits", "f32_bits(1.0)", Value::Int(0x3f80_0000)),
            ("is_finite", "is_finite(1e39)", Value::Bool(false)),
            ("metal_type", "metal_type('f16')", Value::Str("float16_t".into())),
            ("dtype_size", "dtype_size('bf16')", Value::Int(2)),
            ("hex", "hex(255, 4)", Value::Str("00ff".into())),
            ("sci", "sci(0.00025)", Value::Str("2.5e-4".into())),
            ("sci_f32", "sci_f32(0.1)", Value::Str("1e-1".into())),
            ("concat", "concat('D=', D, ', ', quant)", Value::Str("D=200, q4".into())),
            ("near_multiples", "near_multiples(D, 64)", Value::Str("192 or 256".into())),
        ];
        let listed: Vec<&str> = FUNCTIONS.iter().map(|f| f.0).collect();
        let tried: Vec<&str> = examples.iter().map(|x| x.0).collect();
        assert_eq!(listed, tried, "one example per function of FUNCTIONS, in its order");
        for (name, text, want) in examples {
            assert!(text.starts_with(&format!("{name}(")), "{text}");
            assert_eq!(value(text), want, "{text}");
        }
    }

    #[test]
    fn run_time_sizes_become_dims() {
        let dim = |text: &str| {
            let e = parse(text).unwrap();
            check(&e, &vars()).unwrap();
            eval_dim(&e, &vars()).unwrap()
        };
        assert_eq!(dim("B * Hv"), Dim::product(32, &[0]));
        assert_eq!(dim("Hv * B"), Dim::product(32, &[0]));
        assert_eq!(dim("B * T"), Dim::product(1, &[0, 1]));
        assert_eq!(dim("T"), Dim::size(1));
        assert_eq!(dim("D * 2"), Dim::Fixed(400));
        assert_eq!(dim("B * T + 1").describe(&["B", "T"]), "B*T + 1");
        assert_eq!(dim("ceil_div(T, 64)").describe(&["B", "T"]), "ceil_div(T, 64)");
    }

    #[test]
    fn errors_name_the_span() {
        let err = |text: &str| -> (String, String) {
            let e = match parse(text) {
                Ok(e) => e,
                Err(p) => return (text[p.span.clone()].to_string(), p.message),
            };
            let errs = check(&e, &vars()).expect_err(text);
            (text[errs[0].span.clone()].to_string(), errs[0].message.clone())
        };
        assert_eq!(err("D + Dx").0, "Dx");
        assert!(err("D + Dx").1.contains("unknown name `Dx`; did you mean `D`?"));
        assert_eq!(err("quant + 1").1, "`+` needs two numbers, but these are a string and an integer");
        assert!(err("B > 3").1.contains("run-time size"));
        assert!(err("minn(1, 2)").1.contains("did you mean `min`"));
        assert_eq!(err("1 < 2 < 3").1, "comparisons do not chain: use `&&`");
        assert_eq!(err("(1 + 2").1, "expected `)`");
        assert_eq!(err("1 $ 2").0, "$");
        assert_eq!(err("has(3)").1, "`has` takes the name of a geometry field");
        assert!(err("round_up(1)").1.contains("takes 2 arguments"));
    }

    #[test]
    fn evaluation_errors() {
        let e = parse("D / (D - 200)").unwrap();
        assert!(eval(&e, &vars()).unwrap_err().message.contains("by zero"));
        let e = parse("9223372036854775807 + D").unwrap();
        assert!(eval(&e, &vars()).unwrap_err().message.contains("overflow"));
        // the multiples around the ends of 64 bits: those that exist
        assert_eq!(near_multiples(i64::MAX, 2), "9223372036854775806");
        assert_eq!(near_multiples(i64::MIN, 3), "-9223372036854775806");
        assert_eq!(near_multiples(i64::MAX, i64::MAX), "9223372036854775807");
        assert_eq!(near_multiples(i64::MIN, i64::MAX), "-9223372036854775807");
    }
}
