//! The spanned tree every spec front end produces (TOML today, Rust tokens
//! in the proc-macro): what the user wrote, nothing checked yet.

use std::ops::Range;

/// Byte range in the spec's source text.
pub type Span = Range<usize>;

#[derive(Clone, Debug, PartialEq)]
/// A value with where it was written.
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where it was written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
/// A value of the spec tree.
pub enum Value {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Node>),
    /// A table, entries in the order written.
    Table(Vec<Entry>),
}

#[derive(Clone, Debug, PartialEq)]
/// One `key = value` of a table.
pub struct Entry {
    /// The key.
    pub key: String,
    /// Where the key was written.
    pub key_span: Span,
    /// The value.
    pub node: Node,
}

impl Value {
    /// How the value is called in messages ("an integer", "a table", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

impl Node {
    /// The entries, if this is a table.
    pub fn as_table(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Table(entries) => Some(entries),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self.value {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The entry for `key` in a table node.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.as_table()?.iter().find(|e| e.key == key)
    }
}
