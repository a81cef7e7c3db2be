//! The ownership marker: `.kernelgen-owned` at the top of every output
//! directory kernelgen writes. Its first line is `kernelgen-owned <format>`,
//! then comment lines, then every file kernelgen wrote there, one relative
//! path (with `/`) a line, sorted. A directory is kernelgen's if and only if
//! it holds this file (an empty directory may be adopted); `generate` deletes
//! only the files it lists. The text depends only on the generated tree, so
//! it is as deterministic as the rest of it and can be checked in.

use super::Tree;
use std::collections::BTreeSet;

/// The marker's file name.
pub const OWNED: &str = ".kernelgen-owned";

/// The marker's name while it is written: renamed to [`OWNED`] once complete, so a
/// `.kernelgen-owned` is never cut short.
pub const PARTIAL: &str = ".kernelgen-owned.partial";

/// The marker format this kernelgen writes and reads.
pub const FORMAT: u32 = 1;

const MAGIC: &str = "kernelgen-owned";

/// The marker text for a tree: every file of `tree` but the marker itself.
pub fn marker_text(tree: &Tree) -> String {
    let mut text = format!(
        "{MAGIC} {FORMAT}\n\
         # This directory is written by `kernelgen generate`, which replaces it as a whole and deletes\n\
         # only the files listed below. Do not edit it, and keep other files out of it.\n"
    );
    for rel in tree.keys().filter(|rel| *rel != OWNED) {
        text.push_str(rel);
        text.push('\n');
    }
    text
}

/// `tree` with its marker.
pub fn with_marker(tree: &Tree) -> Tree {
    let mut full = tree.clone();
    full.insert(OWNED.to_string(), marker_text(tree));
    full
}

/// Whether `text` is the start of a marker this kernelgen writes (what a writer stopped
/// midway leaves): it agrees with the marker's header as far as either goes.
pub fn is_start_of_marker(text: &str) -> bool {
    let head = marker_text(&Tree::new());
    let n = head.len().min(text.len());
    text.as_bytes()[..n] == head.as_bytes()[..n]
}

/// The files a marker lists, or why it is not a marker this kernelgen reads.
pub fn parse(text: &str) -> Result<BTreeSet<String>, String> {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let format = first
        .strip_prefix(MAGIC)
        .and_then(|rest| rest.strip_prefix(' '))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .ok_or_else(|| format!("its first line is not `{MAGIC} <format>`"))?;
    if format != FORMAT {
        return Err(format!(
            "it has format {format}; this kernelgen reads format {FORMAT}{}",
            if format > FORMAT { " (a newer kernelgen wrote it: update kernelgen)" } else { "" }
        ));
    }
    let mut files = BTreeSet::new();
    for (n, line) in lines.enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !is_safe_relative(line) {
            return Err(format!("line {}: `{}` is not a relative path inside the directory", n + 2, line.escape_debug()));
        }
        files.insert(line.to_string());
    }
    Ok(files)
}

/// A `/`-separated path of plain components: nothing absolute, no `.` or
/// `..`, no backslash or NUL, so joining it to a directory stays inside.
pub fn is_safe_relative(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.contains(['\\', '\0'])
        && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_cannot_read() {
        let tree: Tree = [("manifest.json", "{}"), ("metal/a/k.metal", "x"), ("rust/a.rs", "y")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let text = marker_text(&tree);
        assert!(text.starts_with("kernelgen-owned 1\n#"));
        let listed = parse(&text).unwrap();
        assert_eq!(listed.iter().map(String::as_str).collect::<Vec<_>>(), ["manifest.json", "metal/a/k.metal", "rust/a.rs"]);
        assert_eq!(marker_text(&with_marker(&tree)), text, "the marker does not list itself");
        assert!(parse("{\"name\": \"app\"}").unwrap_err().contains("first line"));
        assert!(parse("kernelgen-owned 2\n").unwrap_err().contains("newer kernelgen"));
        for bad in ["../x", "/etc/passwd", "a/../../b", "a//b", "a\\b", "./a"] {
            assert!(parse(&format!("kernelgen-owned 1\n{bad}\n")).is_err(), "{bad}");
        }
    }
}
