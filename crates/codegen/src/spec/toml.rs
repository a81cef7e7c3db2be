//! TOML front end: a spec file's text to a spanned [`Node`] tree.

use super::tree::{Entry, Node, Span, Value};
use toml_edit::{Item, Table};

/// Parses TOML text; a syntax error comes back with its span.
pub fn parse(text: &str) -> Result<Node, (String, Span)> {
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        (e.message().trim().to_string(), span)
    })?;
    Ok(table(doc.as_table(), 0..text.len()))
}

fn table(t: &Table, fallback: Span) -> Node {
    let span = t.span().unwrap_or(fallback);
    let entries = t
        .iter()
        .filter_map(|(name, _)| t.get_key_value(name))
        .map(|(key, item)| {
            let key_span = key.span().unwrap_or_else(|| span.clone());
            Entry {
                key: key.get().to_string(),
                node: item_node(item, key_span.clone()),
                key_span,
            }
        })
        .collect();
    Node { value: Value::Table(entries), span }
}

fn item_node(item: &Item, fallback: Span) -> Node {
    match item {
        Item::Table(t) => table(t, fallback),
        Item::ArrayOfTables(a) => Node {
            span: a.span().unwrap_or(fallback.clone()),
            value: Value::Array(a.iter().map(|t| table(t, fallback.clone())).collect()),
        },
        Item::Value(v) => value_node(v, fallback),
        Item::None => Node { value: Value::Table(Vec::new()), span: fallback },
    }
}

fn value_node(v: &toml_edit::Value, fallback: Span) -> Node {
    use toml_edit::Value as V;
    let span = v.span().unwrap_or(fallback.clone());
    let value = match v {
        V::Integer(i) => Value::Int(*i.value()),
        V::Float(f) => Value::Float(*f.value()),
        V::Boolean(b) => Value::Bool(*b.value()),
        V::String(s) => Value::Str(s.value().clone()),
        // Dates have no meaning in a spec; they surface as strings so the
        // validator reports them as the wrong kind of value.
        V::Datetime(d) => Value::Str(d.value().to_string()),
        V::Array(a) => Value::Array(a.iter().map(|v| value_node(v, fallback.clone())).collect()),
        V::InlineTable(t) => Value::Table(
            t.iter()
                .filter_map(|(name, _)| t.get_key_value(name))
                .map(|(key, v)| {
                    let key_span = key.span().unwrap_or_else(|| span.clone());
                    Entry {
                        key: key.get().to_string(),
                        node: match v {
                            Item::Value(v) => value_node(v, key_span.clone()),
                            other => item_node(other, key_span.clone()),
                        },
                        key_span,
                    }
                })
                .collect(),
        ),
    };
    Node { value, span }
}
