//! Reading a spanned TOML tree against a schema, for specs ([`crate::validate`]) and family
//! files ([`crate::family::file`]) alike. A [`Table`] cursor carries the table's field path
//! (`kernel[0].input[1]`) and the file's [`Reporter`]: its getters report a value of the wrong
//! kind at the value, a missing key at the table, and [`Table::finish`] reports every key the
//! schema does not have, with the keys it does and the nearest one ([`suggest`], the one
//! "did you mean" of the generator).

use crate::diag::Reporter;
use crate::spec::{Entry, Node, Span, Value};

/// `prefix.key`, or `key` at the top.
pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") }
}

/// The keys of a table, as help text: `` `a`, `b`, `c` ``.
pub fn key_list<'k>(keys: impl IntoIterator<Item = &'k str>) -> String {
    keys.into_iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
}

/// One table of the tree, read against the keys its schema allows.
pub struct Table<'a> {
    r: &'a Reporter,
    path: String,
    span: Span,
    entries: &'a [Entry],
    keys: Vec<&'a str>,
    /// Where the reporter stood when the table was opened: its unknown keys are shown there,
    /// before the problems found inside it (the order the file reads in).
    mark: usize,
    /// Whether the unknown keys were reported (or the table allows every key).
    finished: bool,
}

/// A table a reader leaves without [`Table::finish`] (an early return) reports its unknown keys
/// as it goes: no path through a reader lets a misspelled key pass. (Where it reports makes no
/// difference: they are shown where the table was opened.)
impl Drop for Table<'_> {
    fn drop(&mut self) {
        self.report_unknown();
    }
}

impl<'a> Table<'a> {
    /// `node` as the table at `path` whose keys are `keys`; a node that is not a table is
    /// reported (and reads as an empty table).
    pub fn new(r: &'a Reporter, node: &'a Node, path: impl Into<String>, keys: &[&'a str]) -> Self {
        Table::expecting(r, node, path, keys, "a table")
    }

    /// [`Table::new`], saying what the table holds where it is not one (`"a table of sizes"`).
    pub fn expecting(r: &'a Reporter, node: &'a Node, path: impl Into<String>, keys: &[&'a str], what: &str) -> Self {
        let path = path.into();
        let entries = match node.as_table() {
            Some(entries) => entries,
            None => {
                r.error(node.span.clone(), path.clone(), format!("expected {what}, found {}", node.value.kind()), None);
                &[]
            }
        };
        Table { r, path, span: node.span.clone(), entries, keys: keys.to_vec(), mark: r.mark(), finished: false }
    }

    /// A table whose keys are names the user chooses (`[let]`, `[geometry]`): every key is
    /// allowed; read it with [`Table::entries`].
    pub fn open(r: &'a Reporter, node: &'a Node, path: impl Into<String>) -> Self {
        Table::open_expecting(r, node, path, "a table")
    }

    /// [`Table::open`], saying what the table holds where it is not one.
    pub fn open_expecting(r: &'a Reporter, node: &'a Node, path: impl Into<String>, what: &str) -> Self {
        let mut t = Table::expecting(r, node, path, &[], what);
        t.keys = t.entries.iter().map(|e| e.key.as_str()).collect();
        t.finished = true;
        t
    }

    /// The table, with problems about it as a whole (a missing key) reported at `span`: the
    /// start of the file for its top-level table, rather than under the whole text.
    pub fn reported_at(mut self, span: Span) -> Self {
        self.span = span;
        self
    }

    /// The table's field path (`""` at the top of a file).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the table is written.
    pub fn span(&self) -> Span {
        self.span.clone()
    }

    /// The reporter problems go to.
    pub fn reporter(&self) -> &'a Reporter {
        self.r
    }

    /// Every entry, in the order written.
    pub fn entries(&self) -> &'a [Entry] {
        self.entries
    }

    /// The field path of `key` in this table.
    pub fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The entry for `key`, if the table has it.
    pub fn entry(&self, key: &str) -> Option<&'a Entry> {
        // (a reader asking for a key its schema does not list is a bug; an open table has every key)
        debug_assert!(self.finished || self.keys.contains(&key), "`{key}` is not a key of the schema of `{}`", self.path);
        self.entries.iter().find(|e| e.key == key)
    }

    /// The value of `key`, if the table has it.
    pub fn get(&self, key: &str) -> Option<&'a Node> {
        self.entry(key).map(|e| &e.node)
    }

    /// Where `key`'s value is written, or the table where it is not.
    pub fn span_of(&self, key: &str) -> Span {
        self.get(key).map_or_else(|| self.span.clone(), |n| n.span.clone())
    }

    /// Reports a problem with `key` (at its value, or at the table where it is not written).
    pub fn error(&self, key: &str, message: impl Into<String>, help: Option<String>) {
        self.r.error(self.span_of(key), self.field(key), message, help);
    }

    /// Reports `key` missing: `missing `key` (what)`, and how to add it.
    pub fn missing(&self, key: &str, what: &str) {
        self.r.error(self.span.clone(), self.field(key), format!("missing `{key}` ({what})"), Some(format!("add `{key} = ...`")));
    }

    /// The string at `key`; `None` if it is not there, or is not a string (reported).
    pub fn str(&self, key: &str) -> Option<&'a str> {
        string(self.r, self.get(key)?, &self.field(key))
    }

    /// The string at `key`, which must be there (`what` says what it is).
    pub fn required_str(&self, key: &str, what: &str) -> Option<&'a str> {
        if self.get(key).is_none() {
            self.missing(key, what);
            return None;
        }
        self.str(key)
    }

    /// The boolean at `key`, or `default` when it is not there (or is not a boolean: reported).
    pub fn bool(&self, key: &str, default: bool) -> bool {
        match self.get(key) {
            None => default,
            Some(Node { value: Value::Bool(b), .. }) => *b,
            Some(other) => {
                self.error(key, format!("expected true or false, found {}", other.value.kind()), None);
                default
            }
        }
    }

    /// The table at `key` whose keys are `keys`; `None` if it is not there.
    pub fn table(&self, key: &str, keys: &[&'a str]) -> Option<Table<'a>> {
        Some(Table::new(self.r, self.get(key)?, self.field(key), keys))
    }

    /// The table at `key` whose keys the user chooses ([`Table::open`]); `None` if it is not there.
    pub fn open_table(&self, key: &str) -> Option<Table<'a>> {
        Some(Table::open(self.r, self.get(key)?, self.field(key)))
    }

    /// The array at `key`; `None` if it is not there, or is not an array (reported, `what`
    /// naming what was expected: "`[[check]]` tables").
    pub fn array(&self, key: &str, what: &str) -> Option<&'a [Node]> {
        let node = self.get(key)?;
        let items = node.as_array();
        if items.is_none() {
            self.error(key, format!("expected {what}, found {}", node.value.kind()), None);
        }
        items
    }

    /// Reports every key the schema does not have: at the key, with the keys it has and the
    /// nearest one; shown before the problems found inside the table since it was opened.
    pub fn finish(mut self) {
        self.report_unknown();
    }

    fn report_unknown(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let unknown = self.entries.iter().filter(|e| !self.keys.contains(&e.key.as_str()));
        for (i, e) in unknown.enumerate() {
            let help = if self.keys.is_empty() {
                "this table takes no keys".to_string()
            } else {
                format!("expected one of: {}{}", key_list(self.keys.iter().copied()), suggest(&e.key, self.keys.iter().copied()))
            };
            self.r.error_at(self.mark + i, e.key_span.clone(), join(&self.path, &e.key), format!("unknown key `{}`", e.key), Some(help));
        }
    }
}

/// `node` as a string; one of another kind is reported at `field`.
pub fn string<'a>(r: &Reporter, node: &'a Node, field: &str) -> Option<&'a str> {
    let s = node.as_str();
    if s.is_none() {
        r.error(node.span.clone(), field, format!("expected a string, found {}", node.value.kind()), None);
    }
    s
}

/// `"; did you mean `x`?"` when one of `candidates` is close to `name`, else nothing.
///
/// Close is an edit distance (insertions, deletions, substitutions and swaps of two neighbours,
/// ignoring case) of at most a third of the longer name, and at least one (rustc's measure): `summery` ->
/// `summary`, `gird` -> `grid`, `expret` -> `expert`. A name of one character is only close to
/// itself in the other case (`n` -> `N`): any other one-letter name is one edit away (`k` ->
/// `E`), which says nothing. Among equally close names, one that starts as `name` does wins,
/// then the one with fewer case changes, then the first in `candidates`.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates).map(|c| format!("; did you mean `{c}`?")).unwrap_or_default()
}

/// The candidate [`suggest`] would name.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let folded = name.to_lowercase();
    let short = name.chars().count() <= 1;
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .enumerate()
        .filter_map(|(i, c)| {
            let distance = edit_distance(&folded, &c.to_lowercase());
            let longer = name.chars().count().max(c.chars().count());
            let close = if short { distance == 0 } else { distance <= (longer / 3).max(1) };
            let prefix = folded.chars().zip(c.to_lowercase().chars()).take_while(|(a, b)| a == b).count();
            close.then(|| ((distance, std::cmp::Reverse(prefix.min(1)), edit_distance(name, c), i), c))
        })
        .min_by_key(|(key, _)| *key)
        .map(|(_, c)| c)
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// two neighbouring characters, each one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // rows i - 2, i - 1 and i of the table
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j - 1] + cost).min(prev[j] + 1).min(cur[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(name: &str, candidates: &[&str]) -> Option<String> {
        closest(name, candidates.iter().copied()).map(str::to_string)
    }

    #[test]
    fn suggestions_are_close_relative_to_length() {
        for (name, candidates, want) in [
            ("summery", &["family", "summary", "template"][..], Some("summary")),
            ("gird", &["part", "grid", "threadgroup"], Some("grid")),
            ("dtpye", &["dtype", "shape"], Some("dtype")),
            ("expret", &["expert", "affine", "delta"], Some("expert")),
            ("metal_typ", &["metal_type", "min", "max"], Some("metal_type")),
            ("f1", &["bf16", "f16", "f32"], Some("f16")),
            ("q3", &["q4", "q8"], Some("q4")),
            ("Dx", &["D", "T"], Some("D")),
            ("threads", &["THREADS", "V"], Some("THREADS")),
            // one letter: only the same letter in the other case
            ("k", &["E", "T", "V"], None),
            ("M", &["N", "R"], None),
            ("n", &["E", "N"], Some("N")),
            // far apart for their length
            ("uint32", &["u32", "i32", "f32"], None),
            // two edits in three letters: another dtype, not a typo of one
            ("f64", &["bf16", "f16", "f32"], None),
            ("hidden", &["intermediate", "slot"], None),
        ] {
            assert_eq!(mean(name, candidates).as_deref(), want, "{name} among {candidates:?}");
        }
    }

    #[test]
    fn a_name_that_starts_alike_wins_a_tie() {
        // `cap` and `tap` are both one edit from `cbp`; `cap` starts as it does
        assert_eq!(mean("cbp", &["tap", "cap"]).as_deref(), Some("cap"));
        assert_eq!(mean("xap", &["cap", "tap"]).as_deref(), Some("cap"), "no prefix: the first listed");
    }

    fn reporter(text: &str) -> (Reporter, Node) {
        let source = std::sync::Arc::new(crate::spec::SpecSource { display: "f.toml".into(), origin: String::new(), stem: String::new(), text: text.into() });
        (Reporter::new(source), crate::spec::toml::parse(text).unwrap())
    }

    #[test]
    fn a_table_reads_typed_values_and_reports_what_does_not_fit() {
        let (r, root) = reporter("name = 3\nflag = true\nsumary = \"x\"\n[inner]\nk = 1\nkk = 2\n");
        let top = Table::new(&r, &root, "", &["name", "flag", "summary", "inner"]);
        assert_eq!((top.str("name"), top.bool("flag", false), top.required_str("summary", "one line")), (None, true, None));
        let inner = top.table("inner", &["k"]).unwrap();
        assert_eq!(inner.get("k").and_then(Node::as_int), Some(1));
        inner.finish();
        top.finish();
        let shown: Vec<String> = r.into_diagnostics().0.iter().map(|d| format!("{}: {}{}", d.field, d.message, d.help.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())).collect();
        assert_eq!(
            shown,
            [
                // the table's unknown keys first, where it starts, as the file reads
                "sumary: unknown key `sumary` (expected one of: `name`, `flag`, `summary`, `inner`; did you mean `summary`?)",
                "name: expected a string, found an integer",
                "summary: missing `summary` (one line) (add `summary = ...`)",
                "inner.kk: unknown key `kk` (expected one of: `k`; did you mean `k`?)",
            ]
        );
    }

    #[test]
    fn a_table_left_without_finish_still_reports_its_unknown_keys() {
        let (r, root) = reporter("a = 1\nb = 2\n");
        // a reader that returns early, before its finish()
        let read = |r: &Reporter| -> Option<i64> {
            let t = Table::new(r, &root, "", &["a"]);
            let a = t.get("a")?.as_int()?;
            (a > 1).then_some(())?;
            t.finish();
            Some(a)
        };
        assert_eq!(read(&r), None);
        assert_eq!(r.into_diagnostics().0.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one_edit() {
        assert_eq!(edit_distance("gird", "grid"), 1);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
