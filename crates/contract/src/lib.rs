//! What every generated kernel promises and requires, as plain data.
//!
//! One [`KernelDef`] per generated kernel is the single source of truth for its
//! argument layout (as ggml-metal's shared argument header is): the generator
//! builds it, renders it into the launcher source and the manifest, and the
//! runtime's launch checks, every backend and `kernelgen verify` read it back.
//! The generator and the runtime share this crate, so there is one definition
//! of every contract type and nothing to keep in sync.
//!
//! Every list and name is a [`Cow`]: generated code holds `'static` borrowed
//! data in statics, the generator and tools hold owned data built at run time.
//! This crate has no dependencies.

#![warn(missing_docs)]

use std::borrow::Cow;
use std::fmt;

/// A name or text: borrowed in generated statics, owned when built at run time.
pub type Text = Cow<'static, str>;
/// A list: borrowed in generated statics, owned when built at run time.
pub type List<T> = Cow<'static, [T]>;

/// Element types a kernel buffer can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Dtype {
    /// 32-bit float (`float`).
    F32,
    /// 16-bit IEEE float (`half`).
    F16,
    /// bfloat16 (`bfloat16_t`).
    Bf16,
    /// Signed 8-bit integer (`int8_t`).
    I8,
    /// Unsigned 8-bit integer (`uint8_t`); packed buffers are `u8` arrays.
    U8,
    /// Unsigned 16-bit integer (`uint16_t`).
    U16,
    /// Signed 32-bit integer (`int32_t`).
    I32,
    /// Unsigned 32-bit integer (`uint32_t`).
    U32,
    /// Boolean, one byte (`bool`).
    Bool,
}

impl Dtype {
    /// Every dtype, in declaration order.
    pub const ALL: [Dtype; 9] = [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::I8,
        Dtype::U8,
        Dtype::U16,
        Dtype::I32,
        Dtype::U32,
        Dtype::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F16 | Dtype::Bf16 | Dtype::U16 => 2,
            Dtype::I8 | Dtype::U8 | Dtype::Bool => 1,
        }
    }

    /// The Metal type name MLX writes in a kernel signature (`get_type_string`).
    pub const fn metal_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::F16 => "float16_t",
            Dtype::Bf16 => "bfloat16_t",
            Dtype::I8 => "int8_t",
            Dtype::U8 => "uint8_t",
            Dtype::U16 => "uint16_t",
            Dtype::I32 => "int32_t",
            Dtype::U32 => "uint32_t",
            Dtype::Bool => "bool",
        }
    }

    /// The CUDA type MLX writes for the dtype in a kernel signature (MLX 0.32's
    /// `dtype_to_cuda_type`, mlx/backend/cuda/utils.cpp).
    pub const fn cuda_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float",
            Dtype::F16 => "__half",
            Dtype::Bf16 => "__nv_bfloat16",
            Dtype::I8 => "int8_t",
            Dtype::U8 => "uint8_t",
            Dtype::U16 => "uint16_t",
            Dtype::I32 => "int32_t",
            Dtype::U32 => "uint32_t",
            Dtype::Bool => "bool",
        }
    }

    /// numpy's name for the dtype (bf16 has none in numpy: it travels as uint16).
    pub const fn numpy_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::Bf16 => "bfloat16",
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::Bool => "bool",
        }
    }

    /// The short name used in specs and kernel names.
    pub const fn short_name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::Bool => "bool",
        }
    }

    /// The variant's name, as generated Rust spells it (`Dtype::Bf16`).
    pub const fn variant_name(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "Bf16",
            Dtype::I8 => "I8",
            Dtype::U8 => "U8",
            Dtype::U16 => "U16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::Bool => "Bool",
        }
    }

    /// Whether the kernel reads it as a floating-point number.
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F16 | Dtype::Bf16)
    }

    /// Parses short names (`f32`, `bf16`, ...) and numpy names (`float32`, `bfloat16`, ...).
    pub fn parse(name: &str) -> Option<Dtype> {
        Dtype::ALL
            .into_iter()
            .find(|d| d.numpy_name() == name || d.short_name() == name)
            .or(match name {
                "half" => Some(Dtype::F16),
                "float" => Some(Dtype::F32),
                _ => None,
            })
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// One step of a [`Dim`] expression, in postfix order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Push a constant.
    Const(u64),
    /// Push run-time size `sizes[i]` (an index into [`KernelDef::sizes`]).
    Size(usize),
    /// `a + b`; undefined on overflow.
    Add,
    /// `a - b`; undefined (evaluates to `None`) when `b > a`.
    Sub,
    /// `a * b`; undefined on overflow.
    Mul,
    /// Floor division; undefined for a zero divisor.
    Div,
    /// `ceil(a / b)`; undefined for a zero divisor.
    CeilDiv,
    /// The smaller of `a` and `b`.
    Min,
    /// The larger of `a` and `b`.
    Max,
}

/// A dimension, grid extent or byte count: a constant, or an integer
/// expression over the kernel's run-time sizes (postfix [`Op`]s).
///
/// The generator writes every constant as [`Dim::Fixed`] and every other
/// value as [`Dim::Expr`], so two equal dimensions compare equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A constant.
    Fixed(u64),
    /// An expression over the run-time sizes, in postfix order.
    Expr(List<Op>),
}

impl Dim {
    /// An expression (for generated statics: `Dim::expr(&[Op::Size(0)])`).
    pub const fn expr(ops: &'static [Op]) -> Dim {
        Dim::Expr(Cow::Borrowed(ops))
    }

    /// Run-time size `i`.
    pub fn size(i: usize) -> Dim {
        Dim::Expr(Cow::Owned(vec![Op::Size(i)]))
    }

    /// `coeff * sizes[i]` (just the size when `coeff` is 1).
    pub fn scaled(coeff: u64, i: usize) -> Dim {
        Dim::product(coeff, &[i])
    }

    /// `coeff * sizes[i0] * sizes[i1] * ...`, written as the generator writes
    /// products (a constant when `sizes` is empty, no factor 1).
    pub fn product(coeff: u64, sizes: &[usize]) -> Dim {
        if sizes.is_empty() {
            return Dim::Fixed(coeff);
        }
        let mut ops = Vec::with_capacity(2 * sizes.len() + 1);
        if coeff != 1 {
            ops.push(Op::Const(coeff));
        }
        for (n, &i) in sizes.iter().enumerate() {
            ops.push(Op::Size(i));
            if n > 0 || coeff != 1 {
                ops.push(Op::Mul);
            }
        }
        Dim::Expr(Cow::Owned(ops))
    }

    /// The constant, if the dimension does not depend on run-time sizes.
    pub fn as_fixed(&self) -> Option<u64> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Expr(_) => None,
        }
    }

    /// When the dimension is `c * sizes[i]` (or `sizes[i] * c`, or `sizes[i]`):
    /// `(i, c)`, from which a launch can read the size off an argument's shape.
    pub fn linear_in_one_size(&self) -> Option<(usize, u64)> {
        match self {
            Dim::Fixed(_) => None,
            Dim::Expr(ops) => match ops.as_ref() {
                [Op::Size(i)] => Some((*i, 1)),
                [Op::Const(c), Op::Size(i), Op::Mul] | [Op::Size(i), Op::Const(c), Op::Mul] => Some((*i, *c)),
                _ => None,
            },
        }
    }

    /// The run-time sizes the dimension depends on.
    pub fn sizes_used(&self) -> Vec<usize> {
        let mut out = Vec::new();
        if let Dim::Expr(ops) = self {
            for op in ops.iter() {
                if let Op::Size(i) = op {
                    if !out.contains(i) {
                        out.push(*i);
                    }
                }
            }
        }
        out
    }

    /// The value at the given run-time sizes; `None` on overflow, a negative
    /// difference, a zero divisor, a size index out of range or a malformed
    /// expression.
    pub fn eval(&self, sizes: &[u64]) -> Option<u64> {
        let ops = match self {
            Dim::Fixed(n) => return Some(*n),
            Dim::Expr(ops) => ops,
        };
        let mut stack: Vec<u64> = Vec::with_capacity(4);
        for op in ops.iter() {
            let v = match *op {
                Op::Const(c) => c,
                Op::Size(i) => *sizes.get(i)?,
                _ => {
                    let b = stack.pop()?;
                    let a = stack.pop()?;
                    match op {
                        Op::Add => a.checked_add(b)?,
                        Op::Sub => a.checked_sub(b)?,
                        Op::Mul => a.checked_mul(b)?,
                        Op::Div => a.checked_div(b)?,
                        Op::CeilDiv => a.checked_add(b.checked_sub(1)?)?.checked_div(b)?,
                        Op::Min => a.min(b),
                        Op::Max => a.max(b),
                        Op::Const(_) | Op::Size(_) => unreachable!("handled above"),
                    }
                }
            };
            stack.push(v);
        }
        match stack.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// Infix text with the given size names: `"4*M"`, `"128"`, `"Hv*B"`,
    /// `"ceil_div(T, 64)"`. [`Dim::parse`] reads it back.
    pub fn describe(&self, names: &[&str]) -> String {
        let ops = match self {
            Dim::Fixed(n) => return n.to_string(),
            Dim::Expr(ops) => ops,
        };
        // (text, precedence): 3 atoms and calls, 2 products, 1 sums.
        let mut stack: Vec<(String, u8)> = Vec::new();
        for op in ops.iter() {
            let item = match *op {
                Op::Const(c) => (c.to_string(), 3),
                Op::Size(i) => (names.get(i).map_or_else(|| format!("size{i}"), |n| n.to_string()), 3),
                _ => {
                    let (Some(b), Some(a)) = (stack.pop(), stack.pop()) else {
                        return "(malformed)".into();
                    };
                    let wrap = |(t, p): (String, u8), min: u8| if p < min { format!("({t})") } else { t };
                    match op {
                        // A sum on the right keeps its parentheses: `a + (b - c)` is not
                        // `a + b - c` when `b < c`, and `Dim::parse` reads sums left to right.
                        Op::Add => (format!("{} + {}", a.0, wrap(b, 2)), 1),
                        Op::Sub => (format!("{} - {}", a.0, wrap(b, 2)), 1),
                        Op::Mul => (format!("{}*{}", wrap(a, 2), wrap(b, 3)), 2),
                        Op::Div => (format!("{}/{}", wrap(a, 2), wrap(b, 3)), 2),
                        Op::CeilDiv => (format!("ceil_div({}, {})", a.0, b.0), 3),
                        Op::Min => (format!("min({}, {})", a.0, b.0), 3),
                        Op::Max => (format!("max({}, {})", a.0, b.0), 3),
                        Op::Const(_) | Op::Size(_) => unreachable!("handled above"),
                    }
                }
            };
            stack.push(item);
        }
        match stack.pop() {
            Some((text, _)) if stack.is_empty() => text,
            _ => "(malformed)".into(),
        }
    }

    /// The dimension [`Dim::describe`] wrote as `text` with the same size names
    /// (distinct identifiers): `parse(&d.describe(names), names) == Ok(d)` for every
    /// well-formed `d` whose sizes are in `names`, a constant being [`Dim::Fixed`].
    /// Sums, differences, products, floor quotients, `ceil_div`, `min`, `max`,
    /// decimal constants, size names and parentheses, with any spacing; `-` and
    /// `+` (and `*` and `/`) group left to right. The manifest's dimensions, grid
    /// and costs are such texts, and a review reads an old manifest from its text.
    pub fn parse(text: &str, names: &[&str]) -> Result<Dim, DimParseError> {
        let mut p = DimParser { text, names, at: 0, depth: 0, ops: Vec::new() };
        p.sum()?;
        if p.peek().is_some() {
            return p.fail("unexpected text after the expression");
        }
        Ok(match p.ops.as_slice() {
            [Op::Const(n)] => Dim::Fixed(*n),
            _ => Dim::Expr(Cow::Owned(p.ops)),
        })
    }
}

/// Why a text is not a [`Dim`] ([`Dim::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimParseError {
    /// The whole text that was parsed.
    pub text: String,
    /// The byte offset in it where parsing failed.
    pub at: usize,
    /// What was expected or wrong there.
    pub message: String,
}

impl fmt::Display for DimParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` at byte {}: {}", self.text, self.at, self.message)
    }
}

impl std::error::Error for DimParseError {}

/// Parentheses and calls nested deeper than this are refused: a hostile
/// manifest must not overflow the parser's stack. [`Dim::describe`] nests one
/// level per operator, and a kernel's expressions have a handful.
const MAX_DIM_NESTING: usize = 256;

/// A recursive-descent reader of [`Dim::describe`]'s text, emitting postfix [`Op`]s.
struct DimParser<'a> {
    text: &'a str,
    names: &'a [&'a str],
    at: usize,
    depth: usize,
    ops: Vec<Op>,
}

impl DimParser<'_> {
    fn fail<T>(&self, message: impl Into<String>) -> Result<T, DimParseError> {
        Err(DimParseError { text: self.text.to_string(), at: self.at, message: message.into() })
    }

    /// The next byte after any whitespace.
    fn peek(&mut self) -> Option<u8> {
        let b = self.text.as_bytes();
        while b.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
        b.get(self.at).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), DimParseError> {
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(format!("expected `{}`", c as char))
        }
    }

    /// The bytes from `at` on that `more` accepts, as text.
    fn take_while(&mut self, more: impl Fn(u8) -> bool) -> &str {
        let start = self.at;
        while self.text.as_bytes().get(self.at).is_some_and(|&b| more(b)) {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    /// `next (op next)*` for the operators of one precedence level, grouped left to right.
    fn left_to_right(&mut self, ops: [(u8, Op); 2], next: fn(&mut Self) -> Result<(), DimParseError>) -> Result<(), DimParseError> {
        next(self)?;
        loop {
            let at = self.peek();
            let Some(&(_, op)) = ops.iter().find(|(c, _)| at == Some(*c)) else { return Ok(()) };
            self.at += 1;
            next(self)?;
            self.ops.push(op);
        }
    }

    fn sum(&mut self) -> Result<(), DimParseError> {
        self.left_to_right([(b'+', Op::Add), (b'-', Op::Sub)], Self::product)
    }

    fn product(&mut self) -> Result<(), DimParseError> {
        self.left_to_right([(b'*', Op::Mul), (b'/', Op::Div)], Self::atom)
    }

    /// A sum inside parentheses or a call's argument list: one level deeper.
    fn nested_sum(&mut self) -> Result<(), DimParseError> {
        if self.depth == MAX_DIM_NESTING {
            return self.fail(format!("nested more than {MAX_DIM_NESTING} deep"));
        }
        self.depth += 1;
        self.sum()?;
        self.depth -= 1;
        Ok(())
    }

    fn atom(&mut self) -> Result<(), DimParseError> {
        match self.peek() {
            Some(b'(') => {
                self.at += 1;
                self.nested_sum()?;
                self.expect(b')')
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.at;
                let digits = self.take_while(|b| b.is_ascii_digit());
                match digits.parse::<u64>() {
                    Ok(n) => {
                        self.ops.push(Op::Const(n));
                        Ok(())
                    }
                    Err(_) => {
                        self.at = start;
                        self.fail("constant out of range")
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.at;
                let word = self.take_while(|b| b.is_ascii_alphanumeric() || b == b'_');
                let (name, names) = (word.to_string(), self.names);
                if self.peek() != Some(b'(') {
                    return match names.iter().position(|n| *n == name) {
                        Some(i) => {
                            self.ops.push(Op::Size(i));
                            Ok(())
                        }
                        None => {
                            self.at = start;
                            self.fail(format!("unknown size `{name}` (the sizes: {})", if names.is_empty() { "none".to_string() } else { names.join(", ") }))
                        }
                    };
                }
                let op = match name.as_str() {
                    "ceil_div" => Op::CeilDiv,
                    "min" => Op::Min,
                    "max" => Op::Max,
                    _ => {
                        self.at = start;
                        return self.fail(format!("unknown function `{name}` (the functions: ceil_div, min, max)"));
                    }
                };
                self.at += 1;
                self.nested_sum()?;
                self.expect(b',')?;
                self.nested_sum()?;
                self.expect(b')')?;
                self.ops.push(op);
                Ok(())
            }
            Some(_) => self.fail("expected a number, a size name or `(`"),
            None => self.fail("unexpected end"),
        }
    }
}

/// How the bytes of a packed buffer's region encode its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Opaque bytes.
    Bytes,
    /// Two signed 4-bit values a byte, least significant nibble first, each
    /// stored as `value + 8` (zero point 8): values -8..=7.
    Q4,
    /// Signed 8-bit integers.
    I8,
    /// Signed 32-bit integers.
    I32,
    /// Unsigned 32-bit integers.
    U32,
    /// 16-bit IEEE floats.
    F16,
    /// bfloat16 values.
    Bf16,
    /// 32-bit floats.
    F32,
}

impl Format {
    /// The name family files use (`q4`, `i8`, `f32`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Format::Bytes => "u8",
            Format::Q4 => "q4",
            Format::I8 => "i8",
            Format::I32 => "i32",
            Format::U32 => "u32",
            Format::F16 => "f16",
            Format::Bf16 => "bf16",
            Format::F32 => "f32",
        }
    }

    /// The format of a family-file name ([`Format::name`]), if there is one.
    pub fn parse(name: &str) -> Option<Format> {
        [Format::Bytes, Format::Q4, Format::I8, Format::I32, Format::U32, Format::F16, Format::Bf16, Format::F32].into_iter().find(|f| f.name() == name)
    }

    /// Bytes that `values` values take (`None` for an odd count of 4-bit values).
    pub const fn bytes_for(self, values: u64) -> Option<u64> {
        match self {
            Format::Bytes | Format::I8 => Some(values),
            Format::Q4 => if values % 2 == 0 { Some(values / 2) } else { None },
            Format::F16 | Format::Bf16 => values.checked_mul(2),
            Format::I32 | Format::U32 | Format::F32 => values.checked_mul(4),
        }
    }
}

/// A named byte range inside a packed buffer (an expert slot's weight and
/// scale regions). The emulator poisons the gaps between regions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    /// The region's name (`gate_weights`), as the family file declares it.
    pub name: Text,
    /// Offset of the region's first byte in the buffer.
    pub offset: u64,
    /// Bytes the region spans (`format` bytes for `shape` values).
    pub bytes: u64,
    /// Required alignment of `offset` (and of the buffer's start), in bytes.
    pub align: u64,
    /// How the region's bytes encode its values.
    pub format: Format,
    /// The values' logical shape, row-major (empty: just `bytes` bytes).
    pub shape: List<u64>,
}

/// A packed buffer's whole layout (every region, not only those one kernel
/// reads): what the generated packers fill, shared by every part of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PackedLayout {
    /// The buffer (kernel argument) it lays out.
    pub name: Text,
    /// Total size of the buffer in bytes, gaps and padding included.
    pub bytes: u64,
    /// Alignment the kernels rely on for the buffer's start.
    pub align: u64,
    /// In offset order as the family declares them.
    pub regions: List<Region>,
}

/// Where a buffer's contents come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Given by the caller as a backend array (an input) or produced by the
    /// kernel (an output).
    Data,
    /// A one-element int32 input that carries run-time size `sizes[i]`; the
    /// launcher fills it, so a new value never recompiles the kernel.
    SizeValue(usize),
    /// Given by the caller as host integers (a slice), which the launcher
    /// checks (see [`BufferDef::at_most`]) and hands to the backend as an
    /// array: values the launch must see without reading device memory.
    HostInts,
}

/// One kernel argument buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferDef {
    /// The argument's name in the kernel's signature (`x`, `slot`).
    pub name: Text,
    /// The element type.
    pub dtype: Dtype,
    /// The shape, outermost dimension first, in terms of the run-time sizes.
    pub shape: List<Dim>,
    /// Where the contents come from.
    pub source: Source,
    /// Declared regions of a packed byte buffer (empty for ordinary arrays). A packed buffer's
    /// shape is `[bytes]`, or `[S, bytes]` (leading dimensions, then the bytes of one) for an
    /// array of packed buffers laid out alike: the regions' offsets are then relative to each
    /// buffer's start ([`BufferDef::region_ranges`]).
    pub regions: List<Region>,
    /// Alignment in bytes the kernel relies on for the buffer's start.
    pub align: u64,
    /// Every element must be at most run-time size `sizes[i]`: a count the
    /// kernel loops over (DeltaNet's kept lengths). Checked before launch.
    pub at_most: Option<usize>,
}

impl BufferDef {
    /// Elements at the given run-time sizes.
    pub fn elements(&self, sizes: &[u64]) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.eval(sizes)?))
    }

    /// Bytes at the given run-time sizes.
    pub fn bytes(&self, sizes: &[u64]) -> Option<u64> {
        self.elements(sizes)?.checked_mul(self.dtype.size() as u64)
    }

    /// Shape at the given run-time sizes.
    pub fn shape_at(&self, sizes: &[u64]) -> Option<Vec<u64>> {
        self.shape.iter().map(|d| d.eval(sizes)).collect()
    }

    /// Elements when every dimension is fixed.
    pub fn fixed_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.as_fixed()?))
    }

    /// The bytes of one packed buffer of an array of them (the last dimension), `None` for an
    /// ordinary array or a last dimension that is not a constant.
    pub fn packed_bytes(&self) -> Option<u64> {
        if self.regions.is_empty() {
            return None;
        }
        self.shape.last()?.as_fixed()
    }

    /// The byte ranges the declared regions cover in a buffer of `len` bytes: each region of
    /// each packed buffer in it (`[S, bytes]` holds `len / bytes` of them), in order; empty
    /// for an ordinary array. Every byte outside them is a gap (the emulator poisons them).
    pub fn region_ranges(&self, len: u64) -> Vec<std::ops::Range<u64>> {
        let Some(stride) = self.packed_bytes().filter(|&b| b > 0) else { return Vec::new() };
        let mut out = Vec::with_capacity(self.regions.len() * (len / stride) as usize);
        for start in (0..len / stride).map(|i| i * stride) {
            out.extend(self.regions.iter().map(|r| start.saturating_add(r.offset)..start.saturating_add(r.offset).saturating_add(r.bytes)));
        }
        out
    }

    /// `[M, 6144]` with the given size names.
    pub fn shape_text(&self, names: &[&str]) -> String {
        format!("[{}]", self.shape.iter().map(|d| d.describe(names)).collect::<Vec<_>>().join(", "))
    }
}

/// What one launch costs, as expressions of the run-time sizes: the bytes it
/// moves between memory and the GPU, and the arithmetic it does, for a
/// roofline estimate and for reviewers (`kernelgen diff`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cost {
    /// Bytes read from device memory (each input byte the kernel reads, once).
    pub bytes_read: Dim,
    /// Bytes written to device memory.
    pub bytes_written: Dim,
    /// Floating-point operations (a fused multiply-add counts two), when the
    /// family says.
    pub flops: Option<Dim>,
}

/// Apple GPU limits every kernel must respect (MLX checks none of them before the pipeline
/// is built): the generator refuses a kernel over one, the emulator a launch.
pub mod limits {
    /// Threads in one threadgroup, at most.
    pub const MAX_THREADS_PER_THREADGROUP: u64 = 1024;
    /// Threadgroup memory a kernel may declare, in bytes, at most.
    pub const MAX_THREADGROUP_MEMORY_BYTES: u64 = 32 * 1024;
    /// Buffers a kernel may bind (Metal's buffer argument table), at most.
    pub const MAX_BUFFERS: usize = 31;

    /// Threads per threadgroup above which a kernel may not launch everywhere.
    /// [`MAX_THREADS_PER_THREADGROUP`] is the device limit, but a pipeline's
    /// `maxTotalThreadsPerThreadgroup` depends on the registers the compiled kernel
    /// uses and is known only once the pipeline is built: a 1024-thread MLX kernel got
    /// 896 on an M2 Ultra (Blaizzy/mlx-vlm#1799: "Thread group size (1024) is greater
    /// than the maximum allowed threads per threadgroup (896)"), and register pressure
    /// capped MLX's d=512 `sdpa_vector` pipelines at 832 on an M1 Max
    /// (ml-explore/mlx#4018). 768 is below both observations, a multiple of the
    /// 32-thread SIMD-group and of 256, and what is left when a pipeline loses a
    /// quarter of the device limit. Unlike the limits above it is not refused: the
    /// manifest marks a kernel above it, and `kernelgen list` and `kernelgen diff` warn.
    pub const PORTABLE_THREADS_PER_THREADGROUP: u64 = 768;
}

/// How close a kernel's output must be to a reference's to pass verification.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Tolerance {
    /// The same value (integers, or a reference that follows the kernel's own
    /// order of operations); +0 and -0 are the same value.
    Exact,
    /// At most this many units in the last place of the output's dtype.
    Ulps(u32),
    /// `|got - want| <= abs + rel * |want|`, element by element.
    AbsRel {
        /// The absolute part of the bound.
        abs: f64,
        /// The part relative to `|want|`.
        rel: f64,
    },
}

impl Tolerance {
    /// Whether `got` is close enough to `want` (NaN only matches NaN).
    pub fn accepts(&self, got: f64, want: f64, ulp: f64) -> bool {
        if got.is_nan() || want.is_nan() {
            return got.is_nan() && want.is_nan();
        }
        match *self {
            Tolerance::Exact => got == want,
            Tolerance::Ulps(n) => got == want || (got - want).abs() <= f64::from(n) * ulp,
            Tolerance::AbsRel { abs, rel } => got == want || (got - want).abs() <= abs + rel * want.abs(),
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Exact => f.write_str("exact"),
            Tolerance::Ulps(n) => write!(f, "{n} ulp"),
            Tolerance::AbsRel { abs, rel } => write!(f, "abs {abs:e} + rel {rel:e}"),
        }
    }
}

/// A byte range of a kernel's source ([`KernelDef::metal`], [`CudaSource::source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TextRange {
    /// First byte (inclusive).
    pub start: u32,
    /// End (exclusive).
    pub end: u32,
}

/// Everything a backend needs to launch one generated kernel.
///
/// A `KernelDef` is trusted data: launches are safe because the launch checks
/// hold the arguments to this contract *and* the kernel was generated from
/// the same spec and verified against it (`kernelgen verify`, with guard
/// pages). A hand-written `KernelDef` is its author's responsibility.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelDef {
    /// kernelgen's name: `<geometry>_<family>_<axis values>[_<part>]`.
    pub name: Text,
    /// The family it belongs to (`expert`, `affine`, ...).
    pub family: Text,
    /// The spec it was generated from (`specs/experts.toml`, `kernels!(mine)`).
    pub spec: Text,
    /// The function name MLX gives the kernel (`custom_kernel_<name>_<types>`).
    pub mlx_name: Text,
    /// The full source exactly as MLX assembles it (the checked-in `.metal`).
    pub metal: Text,
    /// Where in `metal` the header (helpers MLX places before the kernel) and
    /// the body are: the two strings handed to `MetalKernel::new`.
    pub header: TextRange,
    /// Where in `metal` the body is.
    pub body: TextRange,
    /// Path of the `.metal` file, relative to the project root.
    pub metal_path: Text,
    /// The kernel's inputs, in argument order (buffer indices `0..`).
    pub inputs: List<BufferDef>,
    /// The kernel's outputs, after the inputs in argument order.
    pub outputs: List<BufferDef>,
    /// Run-time sizes, named as in the spec (e.g. `["M"]`); they never recompile.
    pub sizes: List<Text>,
    /// Threads in the grid (MLX's `grid` counts threads, not threadgroups).
    pub grid: [Dim; 3],
    /// Threads in one threadgroup.
    pub threadgroup: [u32; 3],
    /// Threadgroup memory the kernel declares, in bytes.
    pub threadgroup_memory_bytes: u32,
    /// What one launch moves and computes.
    pub cost: Cost,
    /// The kernel's CUDA body, for MLX's CUDA backend; `None` for a Metal-only kernel (its
    /// family has no CUDA template).
    pub cuda: Option<CudaSource>,
}

/// A kernel's CUDA source: what MLX's `cuda_kernel` (mlx-c's `mlx_fast_cuda_kernel_new(name,
/// input_names, output_names, source, header, ensure_row_contiguous, shared_memory)`) takes
/// beside the [`KernelDef`]'s name and buffers, and the full text MLX assembles from it. The
/// launch configuration (grid in threads, output shapes and dtypes, no template arguments, no
/// init value) is the `KernelDef`'s, as on Metal; only the block may differ from the Metal
/// threadgroup ([`CudaSource::threadgroup`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaSource {
    /// The function MLX defines, `custom_kernel_<name>`, in namespace `mlx::core::cu`.
    pub mlx_name: Text,
    /// The full source exactly as MLX assembles it (the checked-in `.cu`, byte for byte).
    pub source: Text,
    /// Where in `source` the header is (MLX's `header`: kernelgen's first line, naming the
    /// spec and the template, then the template's header section).
    pub header: TextRange,
    /// Where in `source` the body is (MLX's `source`).
    pub body: TextRange,
    /// Path of the `.cu` file, relative to the project root.
    pub path: Text,
    /// Threads in one block (MLX's `threadgroup` on CUDA): the family's `cuda_threadgroup`,
    /// by default [`KernelDef::threadgroup`]. The grid, in threads, is the kernel's.
    pub threadgroup: [u32; 3],
    /// Dynamic shared memory to reserve at launch (MLX's `shared_memory`), in bytes: 0 for
    /// generated kernels, whose `__shared__` arrays are static (sized by constants), so nvrtc
    /// reserves them and the launch reserves nothing.
    pub shared_memory_bytes: u32,
    /// Static `__shared__` memory the body declares, in bytes: what `kernelgen verify` holds
    /// the emulator's run of it to (the Metal body's is [`KernelDef::threadgroup_memory_bytes`];
    /// a CUDA body may stage what its Metal body reads from device memory).
    pub static_shared_memory_bytes: u32,
}

impl CudaSource {
    /// CUDA's limits on a launch's blocks along x, y and z (the grid divided by the block,
    /// rounded up, as MLX's `cuda_kernel` divides it): checked at generation for a fixed grid
    /// and by the MLX backend at each launch.
    pub const MAX_GRID_BLOCKS: [u64; 3] = [(1 << 31) - 1, 65535, 65535];

    /// The header MLX places before the kernel's namespace.
    pub fn header(&self) -> &str {
        &self.source[self.header.start as usize..self.header.end as usize]
    }

    /// The body MLX wraps in the signature it writes.
    pub fn body(&self) -> &str {
        &self.source[self.body.start as usize..self.body.end as usize]
    }
}

impl KernelDef {
    /// Generated kernels index every input as row-contiguous: a backend builds them with MLX's
    /// `ensure_row_contiguous`, which copies a strided input first (Metal and CUDA alike).
    pub const ENSURE_ROW_CONTIGUOUS: bool = true;

    /// Threads in one threadgroup (the product of [`KernelDef::threadgroup`]).
    pub fn threads_per_threadgroup(&self) -> u32 {
        self.threadgroup.iter().product()
    }

    /// The header MLX places before the kernel.
    pub fn header(&self) -> &str {
        &self.metal[self.header.start as usize..self.header.end as usize]
    }

    /// The kernel body MLX wraps in the signature it writes.
    pub fn body(&self) -> &str {
        &self.metal[self.body.start as usize..self.body.end as usize]
    }

    /// Grid extents at the given run-time sizes; `None` on overflow.
    pub fn grid_at(&self, sizes: &[u64]) -> Option<[u64; 3]> {
        Some([self.grid[0].eval(sizes)?, self.grid[1].eval(sizes)?, self.grid[2].eval(sizes)?])
    }

    /// The run-time size names, for [`Dim::describe`].
    pub fn size_names(&self) -> Vec<&str> {
        self.sizes.iter().map(|s| s.as_ref()).collect()
    }

    /// The inputs' names, in argument order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|b| b.name.as_ref()).collect()
    }

    /// The outputs' names, in argument order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|b| b.name.as_ref()).collect()
    }

    /// The inputs the caller passes as backend arrays, in contract order
    /// (neither size values nor host integers).
    pub fn data_inputs(&self) -> impl Iterator<Item = &BufferDef> {
        self.inputs.iter().filter(|b| b.source == Source::Data)
    }

    /// The inputs the caller passes as host integers, in contract order.
    pub fn host_inputs(&self) -> impl Iterator<Item = &BufferDef> {
        self.inputs.iter().filter(|b| b.source == Source::HostInts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(ops: Vec<Op>) -> Dim {
        Dim::Expr(Cow::Owned(ops))
    }

    /// MLX's two type tables (`get_type_string` for Metal, `dtype_to_cuda_type` for CUDA).
    #[test]
    fn dtypes_are_spelled_as_mlx_spells_them() {
        let metal: Vec<&str> = Dtype::ALL.iter().map(|d| d.metal_name()).collect();
        let cuda: Vec<&str> = Dtype::ALL.iter().map(|d| d.cuda_name()).collect();
        assert_eq!(metal, ["float", "float16_t", "bfloat16_t", "int8_t", "uint8_t", "uint16_t", "int32_t", "uint32_t", "bool"]);
        assert_eq!(cuda, ["float", "__half", "__nv_bfloat16", "int8_t", "uint8_t", "uint16_t", "int32_t", "uint32_t", "bool"]);
    }

    #[test]
    fn expressions_evaluate_and_describe() {
        let names = ["B", "T"];
        let d = dim(vec![Op::Const(4), Op::Size(0), Op::Mul]);
        assert_eq!(d.eval(&[3, 5]), Some(12));
        assert_eq!(d.describe(&names), "4*B");
        assert_eq!(d.linear_in_one_size(), Some((0, 4)));
        let e = dim(vec![Op::Size(0), Op::Size(1), Op::Add, Op::Const(2), Op::Mul]);
        assert_eq!(e.eval(&[3, 5]), Some(16));
        assert_eq!(e.describe(&names), "(B + T)*2");
        assert_eq!(e.linear_in_one_size(), None);
        let c = dim(vec![Op::Size(1), Op::Const(64), Op::CeilDiv]);
        assert_eq!(c.eval(&[0, 65]), Some(2));
        assert_eq!(c.describe(&names), "ceil_div(T, 64)");
        assert_eq!(dim(vec![Op::Size(0), Op::Size(1), Op::Sub]).eval(&[1, 2]), None);
        assert_eq!(dim(vec![Op::Size(0), Op::Const(0), Op::Div]).eval(&[1]), None);
        assert_eq!(dim(vec![Op::Const(u64::MAX), Op::Size(0), Op::Mul]).eval(&[2]), None);
        assert_eq!(dim(vec![Op::Size(2)]).eval(&[1]), None);
        assert_eq!(dim(vec![Op::Add]).eval(&[]), None);
        assert_eq!(Dim::Fixed(7).describe(&names), "7");
        assert_eq!(Dim::scaled(1, 1), Dim::size(1));
        assert_eq!(Dim::product(3, &[]), Dim::Fixed(3));
        assert_eq!(Dim::product(32, &[0, 1]).describe(&names), "32*B*T");
        assert_eq!(Dim::product(1, &[0, 1]).describe(&names), "B*T");
        assert_eq!(Dim::product(32, &[0, 1]).eval(&[2, 3]), Some(192));
    }

    #[test]
    fn parse_reads_describe_and_reports_what_is_wrong() {
        let names = ["B", "T"];
        let at = |text: &str, sizes: &[u64]| Dim::parse(text, &names).unwrap_or_else(|e| panic!("{e}")).eval(sizes);
        assert_eq!(Dim::parse("12599296", &names), Ok(Dim::Fixed(12599296)));
        assert_eq!(Dim::parse("(7)", &names), Ok(Dim::Fixed(7)));
        assert_eq!(Dim::parse("4*B", &names), Ok(dim(vec![Op::Const(4), Op::Size(0), Op::Mul])));
        assert_eq!(Dim::parse(" ceil_div( T ,64 )", &names), Ok(dim(vec![Op::Size(1), Op::Const(64), Op::CeilDiv])));
        assert_eq!(at("2 + 3*4", &[]), Some(14));
        assert_eq!(at("12288*B + 12599296", &[2]), Some(12288 * 2 + 12599296));
        assert_eq!(at("10 - 4 - 3", &[]), Some(3));
        assert_eq!(at("1 - 2", &[]), None);
        assert_eq!(at("4/0", &[]), None);
        assert_eq!(at("18446744073709551615*2", &[]), None);
        let err = |text: &str| Dim::parse(text, &names).unwrap_err();
        assert_eq!(err("").message, "unexpected end");
        assert_eq!(err("2 +").at, 3);
        assert_eq!(err("sqrt(4, 2)").message, "unknown function `sqrt` (the functions: ceil_div, min, max)");
        assert_eq!(err("M*2").to_string(), "`M*2` at byte 0: unknown size `M` (the sizes: B, T)");
        assert_eq!(err("(1").message, "expected `)`");
        assert_eq!(err("1 2").message, "unexpected text after the expression");
        assert_eq!(err("99999999999999999999").message, "constant out of range");
        assert_eq!(err("min(1)").message, "expected `,`");
        // A hostile text nested past the limit is an error, not a stack overflow.
        let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(err(&deep).message, format!("nested more than {MAX_DIM_NESTING} deep"));
        let deep_calls = format!("{}1{}", "min(1, ".repeat(100_000), ")".repeat(100_000));
        assert!(err(&deep_calls).message.starts_with("nested more than"));
    }

    #[test]
    fn a_sum_on_the_right_of_a_sum_keeps_its_parentheses() {
        // B + (T - 3) is undefined for T < 3; (B + T) - 3 is not: describe must tell them apart.
        let right = dim(vec![Op::Size(0), Op::Size(1), Op::Const(3), Op::Sub, Op::Add]);
        assert_eq!(right.describe(&["B", "T"]), "B + (T - 3)");
        assert_eq!(Dim::parse("B + (T - 3)", &["B", "T"]).unwrap().eval(&[5, 1]), None);
        assert_eq!(Dim::parse("B + T - 3", &["B", "T"]).unwrap().eval(&[5, 1]), Some(3));
    }

    /// A well-formed expression over `sizes` run-time sizes, up to `depth` operators deep.
    fn expression(sizes: usize, depth: u32) -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
        use proptest::prelude::*;
        let leaf = prop_oneof![(0u64..=u64::MAX).prop_map(|c| vec![Op::Const(c)]), (0..sizes).prop_map(|i| vec![Op::Size(i)])];
        leaf.prop_recursive(depth, 64, 2, |inner| {
            let op = prop_oneof![Just(Op::Add), Just(Op::Sub), Just(Op::Mul), Just(Op::Div), Just(Op::CeilDiv), Just(Op::Min), Just(Op::Max)];
            (inner.clone(), inner, op).prop_map(|(mut a, b, op)| {
                a.extend(b);
                a.push(op);
                a
            })
        })
    }

    proptest::proptest! {
        /// parse is the exact inverse of describe: every well-formed dimension (a constant
        /// as `Dim::Fixed`, the generator's form) comes back equal, and so evaluates alike.
        #[test]
        fn parse_inverts_describe(ops in expression(4, 6), sizes in proptest::collection::vec(0u64..100, 4)) {
            // Size names that look like the functions and like each other.
            let names = ["M", "min", "Hv", "ceil_div_x"];
            let d = match ops.as_slice() {
                [Op::Const(c)] => Dim::Fixed(*c),
                _ => dim(ops),
            };
            let text = d.describe(&names);
            let back = Dim::parse(&text, &names);
            proptest::prop_assert_eq!(back.as_ref(), Ok(&d), "{}", text);
            proptest::prop_assert_eq!(back.unwrap().eval(&sizes), d.eval(&sizes));
        }
    }

    /// The regions of an array of packed buffers repeat in each buffer of it.
    #[test]
    fn regions_repeat_in_each_packed_buffer_of_an_array() {
        let region = |name: &'static str, offset, bytes| Region { name: Cow::Borrowed(name), offset, bytes, align: 4, format: Format::Bytes, shape: Cow::Borrowed(&[]) };
        let one = BufferDef {
            name: Cow::Borrowed("slot"),
            dtype: Dtype::U8,
            shape: Cow::Owned(vec![Dim::Fixed(64)]),
            source: Source::Data,
            regions: Cow::Owned(vec![region("a", 0, 8), region("b", 32, 16)]),
            align: 4,
            at_most: None,
        };
        assert_eq!(one.packed_bytes(), Some(64));
        assert_eq!(one.region_ranges(64), vec![0..8, 32..48]);
        let array = BufferDef { shape: Cow::Owned(vec![Dim::size(0), Dim::Fixed(64)]), ..one.clone() };
        assert_eq!(array.region_ranges(3 * 64), vec![0..8, 32..48, 64..72, 96..112, 128..136, 160..176]);
        assert_eq!(array.region_ranges(0), vec![]);
        let plain = BufferDef { regions: Cow::Borrowed(&[]), ..one };
        assert_eq!((plain.packed_bytes(), plain.region_ranges(64)), (None, vec![]));
    }

    #[test]
    fn borrowed_and_owned_definitions_compare_equal() {
        static SHAPE: &[Dim] = &[Dim::expr(&[Op::Size(0)]), Dim::Fixed(8)];
        let owned: List<Dim> = Cow::Owned(vec![Dim::size(0), Dim::Fixed(8)]);
        assert_eq!(Cow::Borrowed(SHAPE), owned);
    }
}
