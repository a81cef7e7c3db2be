//! Spec diagnostics: every problem names the file, line, column and field,
//! says what is wrong and what would be right. All problems of a run are
//! collected and reported together.

use crate::spec::{Span, SpecSource};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, Chars, Config};
use std::fmt;
use std::sync::Arc;

/// One problem in one spec.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub source: Arc<SpecSource>,
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

    /// One line: `file:line:col: field: message`.
    pub fn headline(&self) -> String {
        let (line, col) = self.line_col();
        format!("{}:{line}:{col}: {}: {}", self.source.display, self.field, self.message)
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, col)
}

/// Every problem found in a run, in file order.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        // The same problem reached through several variants is reported once.
        if !self
            .0
            .iter()
            .any(|o| o.span == d.span && o.message == d.message && Arc::ptr_eq(&o.source, &d.source))
        {
            self.0.push(d);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn extend(&mut self, other: Diagnostics) {
        for d in other.0 {
            self.push(d);
        }
    }

    /// Plain ASCII rendering with source excerpts, as the CLI prints it.
    pub fn render(&self) -> String {
        let mut files = SimpleFiles::new();
        let config = Config { chars: Chars::ascii(), ..Config::default() };
        let mut out = String::new();
        for d in &self.0 {
            let id = files.add(d.source.display.clone(), d.source.text.clone());
            let mut cs = CsDiagnostic::error()
                .with_message(format!("{}: {}", d.field, d.message))
                .with_labels(vec![Label::primary(id, d.span.clone())]);
            if let Some(help) = &d.help {
                cs = cs.with_notes(vec![format!("help: {help}")]);
            }
            match term::emit_into_string(&config, &files, &cs) {
                Ok(text) => out.push_str(&text),
                Err(_) => {
                    out.push_str(&d.headline());
                    out.push('\n');
                }
            }
        }
        let n = self.0.len();
        out.push_str(&format!(
            "error: {n} problem{} in the specs; nothing was written\n",
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Collects problems for one spec file.
pub struct Reporter {
    pub source: Arc<SpecSource>,
    pub diagnostics: Diagnostics,
}

impl Reporter {
    pub fn new(source: Arc<SpecSource>) -> Self {
        Reporter { source, diagnostics: Diagnostics::default() }
    }

    pub fn error(&mut self, span: Span, field: impl Into<String>, message: impl Into<String>, help: Option<String>) {
        self.diagnostics.push(Diagnostic {
            source: self.source.clone(),
            span,
            field: field.into(),
            message: message.into(),
            help,
        });
    }
}
