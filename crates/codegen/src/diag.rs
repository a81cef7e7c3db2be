//! Spec diagnostics: every problem names the file, line, column and field,
//! says what is wrong and what would be right. All problems of a run are
//! collected and reported together.

use crate::spec::{Span, SpecSource};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, Chars, Config};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One problem in one spec.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// The spec (or family file) it is in.
    pub source: Arc<SpecSource>,
    /// Byte range of the offending text in the source.
    pub span: Span,
    /// The field in dotted form, e.g. `geometry.tiny.hidden`.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What would be right.
    pub help: Option<String>,
}

impl Diagnostic {
    /// 1-based line and column of the span's start.
    pub fn line_col(&self) -> (usize, usize) {
        line_col(&self.source.text, self.span.start)
    }

    /// The problem with its source excerpt, as [`Diagnostics::render`] shows each.
    pub fn render(&self) -> String {
        let mut files: SimpleFiles<&str, &str> = SimpleFiles::new();
        let id = files.add(self.source.display.as_str(), self.source.text.as_str());
        let mut out = String::new();
        self.render_into(&files, id, &mut out);
        out
    }

    fn render_into(&self, files: &SimpleFiles<&str, &str>, id: usize, out: &mut String) {
        if excerpt_too_long(self) {
            // A line of 60 KB would be printed whole for each problem on it.
            let (line, col) = self.line_col();
            out.push_str(&format!("error: {}: {}\n  --> {}:{line}:{col}\n", self.field, self.message, self.source.display));
            if let Some(help) = &self.help {
                out.push_str(&format!("  = help: {help}\n"));
            }
            out.push('\n');
            return;
        }
        let mut cs = CsDiagnostic::error().with_message(format!("{}: {}", self.field, self.message)).with_labels(vec![Label::primary(id, self.span.clone())]);
        if let Some(help) = &self.help {
            cs = cs.with_notes(vec![format!("help: {help}")]);
        }
        let config = Config { chars: Chars::ascii(), ..Config::default() };
        match term::emit_into_string(&config, files, &cs) {
            Ok(text) => out.push_str(&text),
            Err(_) => {
                out.push_str(&self.headline());
                out.push('\n');
            }
        }
    }

    /// One line: `file:line:col: field: message`.
    pub fn headline(&self) -> String {
        let (line, col) = self.line_col();
        format!("{}:{line}:{col}: {}: {}", self.source.display, self.field, self.message)
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    // Bytes, so an offset inside a character cannot panic; columns count bytes.
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = before.iter().rposition(|b| *b == b'\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, col)
}

/// At most this many problems are shown per spec file; the rest are counted
/// and the message says how many were left out. (A spec with 10000 copies of
/// one mistake is one mistake to fix; showing them all would take minutes.)
pub const MAX_SHOWN_PER_FILE: usize = 50;

/// Every problem found in a run, in file order: the first
/// [`MAX_SHOWN_PER_FILE`] of each file in `.0`, and a count of the others.
/// Each source is shared (an `Arc`), never copied per problem.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>, Tally);

/// What [`Diagnostics`] needs beyond the shown problems.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Every distinct problem seen (source, span, hash of the message), shown or not.
    seen: HashSet<(usize, usize, usize, u64)>,
    /// Per source: how many problems it has (shown or not), and the source.
    per_file: Vec<(Arc<SpecSource>, usize)>,
}

fn key(d: &Diagnostic) -> (usize, usize, usize, u64) {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    d.message.hash(&mut h);
    (Arc::as_ptr(&d.source) as usize, d.span.start, d.span.end, h.finish())
}

impl Diagnostics {
    /// Adds a problem; the same problem at the same place is kept once, and only the first few of a file are shown.
    pub fn push(&mut self, d: Diagnostic) {
        self.insert(usize::MAX, d);
    }

    /// [`Diagnostics::push`], shown before the problem shown `index`-th (after all of them if
    /// there are fewer): a reader reports a table's unknown keys once it has read the table,
    /// before the problems inside it, as the file reads.
    pub fn insert(&mut self, index: usize, d: Diagnostic) {
        // The same problem reached through several variants is reported once.
        if !self.1.seen.insert(key(&d)) {
            return;
        }
        let count = match self.1.per_file.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &d.source)) {
            Some((_, n)) => n,
            None => {
                self.1.per_file.push((d.source.clone(), 0));
                &mut self.1.per_file.last_mut().expect("just pushed").1
            }
        };
        *count += 1;
        if *count <= MAX_SHOWN_PER_FILE {
            self.0.insert(index.min(self.0.len()), d);
        }
    }

    /// How many problems are shown: where a problem reported later with [`Diagnostics::insert`]
    /// at this index goes.
    pub fn shown(&self) -> usize {
        self.0.len()
    }

    /// No problem at all (shown or not).
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// How many distinct problems were found, shown or not.
    pub fn count(&self) -> usize {
        self.1.per_file.iter().map(|(_, n)| n).sum()
    }

    /// The files with problems that are not shown, and how many each.
    pub fn omitted(&self) -> impl Iterator<Item = (&SpecSource, usize)> {
        self.1.per_file.iter().filter(|(_, n)| *n > MAX_SHOWN_PER_FILE).map(|(s, n)| (&**s, n - MAX_SHOWN_PER_FILE))
    }

    /// Adds every problem of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        for d in other.0 {
            self.push(d);
        }
        // Problems `other` counted but did not keep: counted here too (they
        // are distinct from each other; they cannot be compared with ours).
        for (source, n) in other.1.per_file {
            let hidden = n.saturating_sub(MAX_SHOWN_PER_FILE);
            if hidden == 0 {
                continue;
            }
            match self.1.per_file.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &source)) {
                Some((_, m)) => *m += hidden,
                None => self.1.per_file.push((source, hidden)),
            }
        }
    }

    /// Plain ASCII rendering with source excerpts, as the CLI prints it.
    pub fn render(&self) -> String {
        // One entry per source file, borrowed, whatever the number of problems.
        let mut files: SimpleFiles<&str, &str> = SimpleFiles::new();
        let mut ids: Vec<(*const SpecSource, usize)> = Vec::new();
        let mut out = String::new();
        for d in &self.0 {
            let ptr = Arc::as_ptr(&d.source);
            let id = match ids.iter().find(|(p, _)| *p == ptr) {
                Some((_, id)) => *id,
                None => {
                    let id = files.add(d.source.display.as_str(), d.source.text.as_str());
                    ids.push((ptr, id));
                    id
                }
            };
            d.render_into(&files, id, &mut out);
        }
        for (source, n) in self.omitted() {
            out.push_str(&format!(
                "error: {}: {n} more problem{} not shown (at most {MAX_SHOWN_PER_FILE} are shown per file)\n\n",
                source.display,
                if n == 1 { " is" } else { "s are" }
            ));
        }
        let n = self.count();
        out.push_str(&format!(
            "error: {n} problem{} in the specs; nothing was written\n",
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

/// The longest source line shown as an excerpt under a problem.
const MAX_EXCERPT_LINE: usize = 240;

/// Whether the lines a problem's span covers are too long to show.
fn excerpt_too_long(d: &Diagnostic) -> bool {
    let text = d.source.text.as_bytes();
    let start = d.span.start.min(text.len());
    let end = d.span.end.clamp(start, text.len());
    if !d.source.text.is_char_boundary(start) || !d.source.text.is_char_boundary(end) {
        return true;
    }
    let from = text[..start].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let to = text[end..].iter().position(|b| *b == b'\n').map_or(text.len(), |i| end + i);
    to - from > MAX_EXCERPT_LINE
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Collects the problems of one file. Shared (`&Reporter`) by every [`crate::schema::Table`]
/// cursor reading the file, as rustc's diagnostic context is: problems are pushed through a
/// shared reference.
pub struct Reporter {
    /// The file.
    pub source: Arc<SpecSource>,
    diagnostics: RefCell<Diagnostics>,
}

impl Reporter {
    /// A reporter for `source`, with no problem yet.
    pub fn new(source: Arc<SpecSource>) -> Self {
        Reporter { source, diagnostics: RefCell::default() }
    }

    /// Reports an error at `span` of the file.
    pub fn error(&self, span: Span, field: impl Into<String>, message: impl Into<String>, help: Option<String>) {
        self.push(Diagnostic { source: self.source.clone(), span, field: field.into(), message: message.into(), help });
    }

    /// Reports a problem (in this file or another: a family file's template).
    pub fn push(&self, d: Diagnostic) {
        self.diagnostics.borrow_mut().push(d);
    }

    /// Where a problem reported now would be shown: a later [`Reporter::error_at`] with this
    /// mark is shown there, before what was reported in between.
    pub fn mark(&self) -> usize {
        self.diagnostics.borrow().shown()
    }

    /// [`Reporter::error`], shown at `mark` (from [`Reporter::mark`]).
    pub fn error_at(&self, mark: usize, span: Span, field: impl Into<String>, message: impl Into<String>, help: Option<String>) {
        let d = Diagnostic { source: self.source.clone(), span, field: field.into(), message: message.into(), help };
        self.diagnostics.borrow_mut().insert(mark, d);
    }

    /// Reports every problem of `other`.
    pub fn extend(&self, other: Diagnostics) {
        self.diagnostics.borrow_mut().extend(other);
    }

    /// How many distinct problems were reported so far.
    pub fn count(&self) -> usize {
        self.diagnostics.borrow().count()
    }

    /// Every problem reported.
    pub fn into_diagnostics(self) -> Diagnostics {
        self.diagnostics.into_inner()
    }
}
