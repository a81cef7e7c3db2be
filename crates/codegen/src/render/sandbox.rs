//! Family templates are untrusted input (a pull request may carry one), so they render in a
//! sandbox:
//!
//! - nothing reads the host or varies between runs: tera registers `get_env` even without its
//!   `builtins` feature (and `now`, `get_random` with it); here each is an error, and a
//!   template naming one is refused when its family file is read, at the line;
//! - a template is one file: `extends`, `include`, `import`, macros (which may call themselves
//!   without end) and blocks are refused, with the reason, at the line;
//! - what could grow without bound is limited, each limit an error that names it. Before
//!   tera parses (its parser and evaluator recurse): a tag is at most [`MAX_TAG_BYTES`], blocks
//!   nest at most [`MAX_NESTING`] deep. While rendering: `range` gives at most [`MAX_RANGE`]
//!   values (`step_by = 0` looped for ever); `replace`, `indent`, `join` and `split` refuse a
//!   result past [`MAX_VALUE_BYTES`]; every value an expression computes is at most
//!   [`MAX_VALUE_BYTES`] and is counted, with each loop iteration, against [`MAX_WORK`] (the
//!   parsed template is instrumented: a checking filter after every filter and on every value
//!   that can grow, a counting filter on every loop's container); a render writes at most
//!   [`MAX_OUTPUT_BYTES`].
//!
//! tera's errors at render time say nothing of where in the template they happened, and what a
//! template wrote has no line of the template. [`trace`] renders a failed (or suspect) kernel
//! again with a marker before every node, each naming where its node starts in the template's
//! text: the last marker reached is where a render failed, and the markers' positions in the
//! output say where each piece of it came from ([`Trace::origin`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::LazyLock;
use tera::ast::{Expr, ExprVal, FunctionCall, Node, WS};
use tera::{Context, Tera, Value};

/// The longest tag (`{{ ... }}`, `{% ... %}`), in bytes: tera parses and evaluates a tag's
/// expression recursively (a 400-term sum overflowed a 2 MiB stack).
pub const MAX_TAG_BYTES: usize = 256;
/// The deepest nesting of blocks (`if`, `for`, `filter`): tera's parser recurses into each.
pub const MAX_NESTING: usize = 32;
/// The most values `range` gives (an array of them is within [`MAX_VALUE_BYTES`]).
pub const MAX_RANGE: u64 = 1 << 14;
/// The largest value (a string, an array) a template expression may compute, in bytes.
pub const MAX_VALUE_BYTES: u64 = 256 << 10;
/// The most work one render may do: the bytes of every value computed, plus a charge per loop
/// iteration (its body's size).
pub const MAX_WORK: u64 = 64 << 20;
/// The most a render may write (one kernel's header or body), in bytes.
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;

/// The charge of one node of a loop's body, per iteration (text is charged by its bytes).
const NODE_WORK: u64 = 64;
/// The filter checking a value against [`MAX_VALUE_BYTES`] and counting it as work.
const LIMIT: &str = "__kernelgen_limit";
/// The filter counting a loop's iterations as work (`cost`: per iteration).
const LOOP: &str = "__kernelgen_loop";
/// The functions a template may call.
const FUNCTIONS: &[&str] = &["range", "throw"];
/// The functions that read the host or vary between runs.
const HOST_FUNCTIONS: &[&str] = &["get_env", "now", "get_random"];
const HOST_FUNCTION_ERROR: &str = "templates cannot read the environment, the clock or random numbers: a kernel's source follows from its spec alone";

/// A problem found in a template before it renders: where (a byte offset of its text), what,
/// and what to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Byte offset in the template's text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
    /// What would be right.
    pub help: Option<String>,
}

impl Problem {
    fn new(offset: usize, message: impl Into<String>, help: impl Into<String>) -> Self {
        Problem { offset, message: message.into(), help: Some(help.into()) }
    }
}

thread_local! {
    /// The work of the render running on this thread (tera renders on the caller's thread).
    static WORK: Cell<u64> = const { Cell::new(0) };
    /// The bytes the render running on this thread has written so far.
    static WRITTEN: Cell<usize> = const { Cell::new(0) };
    /// Where in the template the last marker reached stands ([`trace`]).
    static REACHED: Cell<Option<usize>> = const { Cell::new(None) };
    /// Each marker reached outside a `{% filter %}` body: the bytes written before it, where it
    /// stands in the template, and whether its node is text (written as it stands there).
    static PIECES: RefCell<Vec<Piece>> = const { RefCell::new(Vec::new()) };
}

fn charge(work: u64) -> tera::Result<()> {
    let total = WORK.with(|w| {
        let t = w.get().saturating_add(work);
        w.set(t);
        t
    });
    if total > MAX_WORK {
        return Err(tera::Error::msg(format!(
            "the template did more than {} MiB of work rendering this kernel (a loop or a value that grows without end?)",
            MAX_WORK >> 20
        )));
    }
    Ok(())
}

/// Bytes a value holds, roughly (what it costs to make and to copy).
fn size(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Array(a) => a.iter().map(|x| 8 + size(x)).sum(),
        Value::Object(o) => o.iter().map(|(k, x)| 8 + k.len() as u64 + size(x)).sum(),
        _ => 8,
    }
}

fn too_large(what: &str, bytes: u64) -> tera::Error {
    tera::Error::msg(format!("{what} would be {bytes} bytes, above the limit of {} KiB for one template value", MAX_VALUE_BYTES >> 10))
}

fn limit(value: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    let bytes = size(value);
    if bytes > MAX_VALUE_BYTES {
        return Err(too_large("a value", bytes));
    }
    charge(bytes)?;
    Ok(value.clone())
}

fn count_loop(value: &Value, args: &HashMap<String, Value>) -> tera::Result<Value> {
    let iterations = match value {
        Value::Array(a) => a.len() as u64,
        Value::Object(o) => o.len() as u64,
        Value::String(s) => s.chars().count() as u64,
        _ => 0,
    };
    let cost = args.get("cost").and_then(Value::as_u64).unwrap_or(NODE_WORK);
    charge(iterations.saturating_mul(cost))?;
    limit(value, args)
}

/// tera's own filters and functions, which the sandbox's call after checking their arguments.
static BUILTIN: LazyLock<Tera> = LazyLock::new(Tera::default);

fn builtin_filter(name: &str, value: &Value, args: &HashMap<String, Value>) -> tera::Result<Value> {
    BUILTIN.get_filter(name)?.filter(value, args)
}

fn str_arg<'a>(args: &'a HashMap<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// `replace`, `indent`, `join` and `split`, refusing a result past the limit before making it
/// (each multiplies: `replace(from="", to=...)` puts `to` between every two characters).
fn bounded_filter(name: &'static str) -> impl tera::Filter {
    move |value: &Value, args: &HashMap<String, Value>| -> tera::Result<Value> {
        let text = value.as_str().unwrap_or_default();
        let bytes = match name {
            "replace" => match (str_arg(args, "from"), str_arg(args, "to")) {
                (Some(from), Some(to)) => {
                    let n = if from.is_empty() { text.chars().count() + 1 } else { text.matches(from).count() } as u64;
                    (text.len() as u64).saturating_add(n.saturating_mul(to.len() as u64))
                }
                _ => 0,
            },
            "indent" => {
                let prefix = str_arg(args, "prefix").map_or(4, str::len) as u64;
                (text.len() as u64).saturating_add((text.matches('\n').count() as u64 + 1).saturating_mul(prefix))
            }
            "join" => {
                let sep = str_arg(args, "sep").map_or(0, str::len) as u64;
                let n = value.as_array().map_or(0, Vec::len) as u64;
                size(value).saturating_add(n.saturating_mul(sep))
            }
            // each piece costs far more than its bytes: count them
            _ => {
                let n = match str_arg(args, "pat") {
                    Some("") => text.chars().count() as u64 + 2,
                    Some(pat) => text.matches(pat).count() as u64 + 1,
                    None => 0,
                };
                size(value).saturating_add(n.saturating_mul(64))
            }
        };
        if bytes > MAX_VALUE_BYTES {
            return Err(too_large(&format!("the result of `{name}`"), bytes));
        }
        builtin_filter(name, value, args)
    }
}

/// `range`, at most [`MAX_RANGE`] values, and never `step_by = 0` (tera's looped for ever).
fn range(args: &HashMap<String, Value>) -> tera::Result<Value> {
    let arg = |name: &str, default: Option<u64>| args.get(name).map_or(default, Value::as_u64);
    if let (Some(start), Some(end), Some(step)) = (arg("start", Some(0)), arg("end", None), arg("step_by", Some(1))) {
        if step == 0 {
            return Err(tera::Error::msg("`range` with step_by = 0 would never end"));
        }
        let count = end.saturating_sub(start).div_ceil(step);
        if count > MAX_RANGE {
            return Err(tera::Error::msg(format!("`range` of {count} values, above the limit of {MAX_RANGE}")));
        }
    }
    BUILTIN.get_function("range")?.call(args)
}

/// The engine family templates render in: tera's filters and functions, sandboxed.
static ENGINE: LazyLock<Tera> = LazyLock::new(|| {
    let mut tera = Tera::default();
    // MSL and Rust are not HTML.
    tera.autoescape_on(vec![]);
    for name in HOST_FUNCTIONS {
        tera.register_function(name, |_: &HashMap<String, Value>| -> tera::Result<Value> { Err(tera::Error::msg(HOST_FUNCTION_ERROR)) });
    }
    tera.register_function("range", range);
    for name in ["replace", "indent", "join", "split"] {
        tera.register_filter(name, bounded_filter(name));
    }
    tera.register_filter(LIMIT, limit);
    tera.register_filter(LOOP, count_loop);
    tera
});

/// A fresh engine: family templates go in with [`add`].
pub fn engine() -> Tera {
    ENGINE.clone()
}

/// Checks a family template: the limits on tags and nesting, tera's syntax, and the sandbox's
/// rules on what it may use. The parsed template, or the first problem.
pub fn check(text: &str) -> Result<tera::Template, Problem> {
    let tags = scan(text)?;
    let template = tera::Template::new("template", None, text).map_err(|e| parse_problem(&e, text))?;
    let mut found = None;
    for n in &template.ast {
        rules(n, &mut found);
    }
    match found {
        None => Ok(template),
        Some(Found { name, message, help }) => Err(Problem::new(locate(text, &tags, &name), message, help)),
    }
}

/// Adds a family template that [`check`] gave to `tera` as `key`, instrumented with the limits.
pub fn add(tera: &mut Tera, key: &str, mut template: tera::Template) -> tera::Result<()> {
    template.name = key.to_string();
    instrument(&mut template.ast);
    // (what `add_raw_template` does after parsing)
    tera.templates.insert(key.to_string(), template);
    tera.build_inheritance_chains()
}

/// Renders template `key` within the limits.
pub fn render(tera: &Tera, key: &str, context: &Context) -> tera::Result<String> {
    struct Bounded(Vec<u8>, bool);
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + buf.len() > MAX_OUTPUT_BYTES {
                self.1 = true;
                return Err(std::io::Error::other("too much output"));
            }
            self.0.extend_from_slice(buf);
            WRITTEN.with(|w| w.set(self.0.len()));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    WORK.with(|w| w.set(0));
    WRITTEN.with(|w| w.set(0));
    let mut out = Bounded(Vec::new(), false);
    let result = tera.render_to(key, context, &mut out);
    if out.1 {
        return Err(tera::Error::msg(format!("the template wrote more than {} MiB for this kernel", MAX_OUTPUT_BYTES >> 20)));
    }
    result?;
    String::from_utf8(out.0).map_err(|_| tera::Error::msg("the template wrote text that is not UTF-8"))
}

// ------------------------------------------------------------------ where in the template

/// A piece of a traced render's output: the bytes written before it, where its node starts in
/// the template, and whether that node is text (written as it stands in the template).
#[derive(Clone, Copy, Debug)]
struct Piece {
    written: usize,
    at: usize,
    text: bool,
}

/// A render of a template again, with markers ([`trace`]).
pub struct Trace {
    /// What it rendered, or why it failed.
    pub result: tera::Result<String>,
    /// Where in the template's text the last node reached starts: where a failed render failed.
    pub reached: Option<usize>,
    pieces: Vec<Piece>,
}

impl Trace {
    /// Where in the template's text the output's bytes `offset..offset + len` come from: those
    /// bytes of the template for its text, else the tag (`{{ ... }}`) that wrote them.
    pub fn origin(&self, text: &str, offset: usize, len: usize) -> Option<std::ops::Range<usize>> {
        let i = self.pieces.iter().rposition(|p| p.written <= offset)?;
        let piece = self.pieces[i];
        if piece.text {
            // (within the piece: the bytes after it come from elsewhere)
            let written = self.pieces.get(i + 1).map_or(usize::MAX, |next| next.written);
            let at = piece.at + (offset - piece.written);
            return Some(at..at + len.min(written - offset));
        }
        Some(tag_at(text, piece.at))
    }
}

/// The marker filter: records where its node stands ([`Trace`]).
const MARK: &str = "__kernelgen_mark";

fn mark_filter(_: &Value, args: &HashMap<String, Value>) -> tera::Result<Value> {
    let arg = |name: &str| args.get(name).and_then(Value::as_u64).unwrap_or(0);
    let at = usize::try_from(arg("at")).unwrap_or(usize::MAX);
    REACHED.with(|r| r.set(Some(at)));
    if arg("map") == 1 {
        let piece = Piece { written: WRITTEN.with(Cell::get), at, text: arg("text") == 1 };
        PIECES.with(|p| p.borrow_mut().push(piece));
    }
    Ok(Value::String(String::new()))
}

/// Renders `template` (as [`check`] gave it; `text` is its source) with `context` again, within
/// the limits, a marker before each node. `None` if the parsed template and its text do not line
/// up (then nothing can be said of where).
pub fn trace(template: &tera::Template, text: &str, context: &Context) -> Option<Trace> {
    let starts = node_starts(&template.ast, text)?;
    let mut marked = template.clone();
    instrument(&mut marked.ast);
    insert_marks(&mut marked.ast, &mut starts.into_iter(), true)?;
    let mut tera = engine();
    tera.register_filter(MARK, mark_filter);
    add(&mut tera, "trace", marked).ok()?;
    REACHED.with(|r| r.set(None));
    PIECES.with(|p| p.borrow_mut().clear());
    let result = render(&tera, "trace", context);
    Some(Trace { result, reached: REACHED.with(Cell::get), pieces: PIECES.with(|p| std::mem::take(&mut *p.borrow_mut())) })
}

/// Where each node of `nodes` starts in `text`, in pre-order (a node, then the nodes of its
/// bodies), and whether it is text; `None` where the nodes and the text's tags do not line up.
fn node_starts(nodes: &[Node], text: &str) -> Option<Vec<(usize, bool)>> {
    let tags = scan(text).ok()?;
    let mut c = Cursor { text, tags: &tags, next: 0, pos: 0, starts: Vec::new() };
    c.nodes(nodes)?;
    (c.next == tags.len()).then_some(c.starts)
}

/// Walks a template's text along its parsed nodes.
struct Cursor<'t> {
    text: &'t str,
    tags: &'t [Tag],
    /// The next tag.
    next: usize,
    /// Where the text not yet matched to a node starts.
    pos: usize,
    starts: Vec<(usize, bool)>,
}

impl Cursor<'_> {
    fn nodes(&mut self, nodes: &[Node]) -> Option<()> {
        for n in nodes {
            match n {
                Node::Text(t) => {
                    let at = self.text(t)?;
                    self.starts.push((at, true));
                }
                Node::Comment(..) => {
                    let at = self.pos + self.text[self.pos..].find("{#")?;
                    self.pos = at + 2 + self.text[at + 2..].find("#}")? + 2;
                    self.starts.push((at, false));
                }
                Node::Raw(_, t, _) => {
                    self.tag(Some("raw"))?;
                    let at = self.text(t)?;
                    let end = self.text[self.pos..].find("endraw")? + self.pos;
                    self.pos = end + self.text[end..].find("%}")? + 2;
                    self.starts.push((at, true));
                }
                Node::VariableBlock(..) => {
                    let at = self.tag(None)?;
                    self.starts.push((at, false));
                }
                Node::Set(_, set) => {
                    let at = self.tag(Some(if set.global { "set_global" } else { "set" }))?;
                    self.starts.push((at, false));
                }
                Node::Break(_) | Node::Continue(_) => {
                    let at = self.tag(Some(if matches!(n, Node::Break(_)) { "break" } else { "continue" }))?;
                    self.starts.push((at, false));
                }
                Node::If(i, _) => {
                    let mut bodies: Vec<(&str, &[Node])> = i.conditions.iter().map(|(_, _, body)| ("elif", body.as_slice())).collect();
                    bodies.extend(i.otherwise.iter().map(|(_, body)| ("else", body.as_slice())));
                    self.block("if", &bodies, "endif")?;
                }
                Node::Forloop(_, f, _) => {
                    let mut bodies = vec![("", f.body.as_slice())];
                    bodies.extend(f.empty_body.iter().map(|body| ("else", body.as_slice())));
                    self.block("for", &bodies, "endfor")?;
                }
                Node::FilterSection(_, f, _) => self.block("filter", &[("", &f.body)], "endfilter")?,
                // (refused by `check`)
                _ => return None,
            }
        }
        Some(())
    }

    /// A block: its opening tag, each body after its own tag (`elif`, `else`; the first after the
    /// opening one), then its closing tag.
    fn block(&mut self, open: &str, bodies: &[(&str, &[Node])], close: &str) -> Option<()> {
        let at = self.tag(Some(open))?;
        self.starts.push((at, false));
        for (i, (tag, body)) in bodies.iter().enumerate() {
            if i > 0 {
                self.tag(Some(tag))?;
            }
            self.nodes(body)?;
        }
        self.tag(Some(close)).map(|_| ())
    }

    /// The next tag, which must be `{% keyword ... %}` (`{{ ... }}` for `None`): where it starts.
    fn tag(&mut self, keyword: Option<&str>) -> Option<usize> {
        let t = self.tags.get(self.next)?;
        let found = match keyword {
            None => self.text[t.start..].starts_with("{{"),
            Some(k) => self.text[t.start..].starts_with("{%") && tag_keyword(&self.text[t.start..t.end]) == k,
        };
        found.then(|| {
            self.next += 1;
            self.pos = t.end;
            t.start
        })
    }

    /// Where text node `t` stands: after what was matched, before the next tag.
    fn text(&mut self, t: &str) -> Option<usize> {
        let limit = self.tags.get(self.next).map_or(self.text.len(), |tag| tag.start);
        let at = self.pos + self.text.get(self.pos..limit)?.find(t)?;
        self.pos = at + t.len();
        Some(at)
    }
}

/// The keyword of a `{% ... %}` tag's text (`if`, `endfor`, `set_global`).
fn tag_keyword(tag: &str) -> &str {
    let inner = tag.get(2..tag.len().saturating_sub(2)).unwrap_or("").trim_start_matches('-').trim_start();
    inner.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("")
}

/// A marker for a node starting at `at` (text: written as it stands); `map`: recorded as a
/// piece of the output (not inside a `{% filter %}`, whose body is rendered apart and filtered).
fn marker(at: usize, text: bool, map: bool) -> Node {
    let mut e = Expr::new(ExprVal::String(String::new()));
    let at = i64::try_from(at).unwrap_or(i64::MAX);
    e.filters = vec![call(MARK, vec![("at", at), ("text", i64::from(text)), ("map", i64::from(map))])];
    Node::VariableBlock(WS::default(), e)
}

/// Puts a marker before every node (in the order [`node_starts`] gave their starts).
fn insert_marks(nodes: &mut Vec<Node>, starts: &mut impl Iterator<Item = (usize, bool)>, map: bool) -> Option<()> {
    for mut n in std::mem::take(nodes) {
        let (at, text) = starts.next()?;
        match &mut n {
            Node::If(i, _) => {
                for (_, _, body) in &mut i.conditions {
                    insert_marks(body, starts, map)?;
                }
                if let Some((_, body)) = &mut i.otherwise {
                    insert_marks(body, starts, map)?;
                }
            }
            Node::Forloop(_, f, _) => {
                insert_marks(&mut f.body, starts, map)?;
                if let Some(body) = &mut f.empty_body {
                    insert_marks(body, starts, map)?;
                }
            }
            Node::FilterSection(_, f, _) => insert_marks(&mut f.body, starts, false)?,
            _ => {}
        }
        if !matches!(n, Node::Comment(..)) {
            nodes.push(marker(at, text, map));
        }
        nodes.push(n);
    }
    Some(())
}

/// Whether a tag of `text` reads the variable `name`.
pub fn reads(text: &str, name: &str) -> bool {
    scan(text).unwrap_or_default().iter().any(|t| variable_in(text, t, name).is_some())
}

/// A template that tests for the header section (compares `section` with `"header"`) in a family
/// that renders none: the test never holds, so the header would be dropped without a word. The
/// problem at the test; `family_file` names the family file.
pub fn header_not_rendered(text: &str, family_file: &str) -> Option<Problem> {
    let tags = scan(text).ok()?;
    let tests_header = |t: &&Tag| variable_in(text, t, "section").is_some() && ["\"header\"", "'header'"].iter().any(|h| text[t.start..t.end].contains(h));
    let tag = tags.iter().find(tests_header)?;
    Some(Problem::new(
        tag.start,
        "the template has a header section, but the family file does not set `header = true`: it is rendered for the body only, so the header would be dropped",
        format!("add `header = true` to {family_file} (a top-level key, beside `family`)"),
    ))
}

/// The tag of `text` that starts at `at` (the first byte only, if none does).
pub fn tag_at(text: &str, at: usize) -> std::ops::Range<usize> {
    let tags = scan(text).unwrap_or_default();
    tags.iter().find(|t| t.start == at).map_or(at..at + 1, |t| t.start..t.end)
}

/// The variable a render failed on, from tera's message ("Variable `x.y` not found in context").
pub fn missing_variable(message: &str) -> Option<&str> {
    let rest = message.split_once("Variable `")?.1;
    rest.split_once("` not found in context").map(|(name, _)| name)
}

/// Where `name` is written as a variable (not inside a string, not after a `.`) in the first tag
/// at or after `from` that has it, else in any tag; with its length.
pub fn locate_variable(text: &str, from: usize, name: &str) -> Option<(usize, usize)> {
    let tags = scan(text).ok()?;
    let first = tags.iter().position(|t| t.end > from).unwrap_or(0);
    tags[first..].iter().chain(&tags[..first]).find_map(|t| variable_in(text, t, name)).map(|at| (at, name.len()))
}

fn variable_in(text: &str, t: &Tag, name: &str) -> Option<usize> {
    let tag = &text.as_bytes()[t.start..t.end];
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut quote = None;
    for i in 0..tag.len() {
        match (quote, tag[i]) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c @ (b'"' | b'\'' | b'`')) => quote = Some(c),
            (None, _) => {
                let before = i.checked_sub(1).map(|j| tag[j]);
                let after = tag.get(i + name.len()).copied();
                if tag[i..].starts_with(name.as_bytes()) && !before.is_some_and(|b| word(b) || b == b'.') && !after.is_some_and(word) {
                    return Some(t.start + i);
                }
            }
        }
    }
    None
}

/// The names a template defines for itself (`{% set %}`, loop variables), for "did you mean".
pub fn defined_names(nodes: &[Node], out: &mut Vec<String>) {
    for n in nodes {
        match n {
            Node::Set(_, s) => out.push(s.key.clone()),
            Node::Forloop(_, f, _) => {
                out.push(f.value.clone());
                out.extend(f.key.clone());
                defined_names(&f.body, out);
                f.empty_body.iter().for_each(|b| defined_names(b, out));
            }
            Node::If(i, _) => {
                i.conditions.iter().for_each(|(_, _, b)| defined_names(b, out));
                i.otherwise.iter().for_each(|(_, b)| defined_names(b, out));
            }
            Node::FilterSection(_, f, _) => defined_names(&f.body, out),
            _ => {}
        }
    }
}

// ------------------------------------------------------------------ before parsing

/// A tag of the template: its byte range.
struct Tag {
    start: usize,
    end: usize,
}

/// The template's tags, each within [`MAX_TAG_BYTES`], blocks nested at most [`MAX_NESTING`]
/// deep, and none that reaches another template. An unclosed tag ends the scan (tera's parser
/// reports it).
fn scan(text: &str) -> Result<Vec<Tag>, Problem> {
    let b = text.as_bytes();
    let mut tags = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(at) = text[i..].find('{').map(|o| i + o) {
        let close = match b.get(at + 1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            Some(b'#') => "#}",
            _ => {
                i = at + 1;
                continue;
            }
        };
        let Some(end) = tag_end(text, at + 2, close) else { break };
        i = end;
        if close == "#}" {
            continue;
        }
        if end - at > MAX_TAG_BYTES {
            return Err(Problem::new(
                at,
                format!("this tag is {} bytes, above the limit of {MAX_TAG_BYTES}", end - at),
                "compute long expressions in the family file's [let], or in steps with {% set %}",
            ));
        }
        let keyword = (close == "%}").then(|| tag_keyword(&text[at..end]));
        if let Some(k) = keyword {
            if let Some((message, help)) = refused_tag(k) {
                return Err(Problem::new(at, message, help));
            }
            match k {
                "if" | "for" | "filter" => depth += 1,
                "endif" | "endfor" | "endfilter" => depth = depth.saturating_sub(1),
                // its text is not parsed: skip to the end
                "raw" => match text[end..].find("endraw").and_then(|o| text[end + o..].find("%}").map(|c| end + o + c + 2)) {
                    Some(after) => i = after,
                    None => break,
                },
                _ => {}
            }
            if depth > MAX_NESTING {
                return Err(Problem::new(at, format!("blocks nest more than {MAX_NESTING} deep here"), "move the innermost blocks' conditions into the family file's [let]"));
            }
        }
        tags.push(Tag { start: at, end });
    }
    Ok(tags)
}

/// Where the tag whose contents start at `from` ends (after `close`), skipping string literals.
fn tag_end(text: &str, from: usize, close: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'' | b'`') if close != "#}" => i = text[i + 1..].find(q as char).map(|o| i + 1 + o + 1)?,
            _ if text[i..].starts_with(close) => return Some(i + 2),
            _ => i += 1,
        }
    }
    None
}

/// Why a tag that names another template, or defines what may recurse, is refused.
fn refused_tag(keyword: &str) -> Option<(String, &'static str)> {
    let single = "write the text in this template, or compute values in the family file's [let]";
    match keyword {
        "extends" | "include" | "import" => Some((format!("`{{% {keyword} %}}` reads another template: family templates are single files (extends, include and import are not supported)"), single)),
        "macro" => Some(("macros are not supported in family templates (a macro may call itself without end)".into(), "write the text in place, in a {% for %} loop if it repeats")),
        "block" => Some(("`{% block %}` belongs to template inheritance, which family templates do not use".into(), single)),
        _ => None,
    }
}

/// tera's parse error, at its line and column in the template.
fn parse_problem(e: &tera::Error, text: &str) -> Problem {
    let mut message = e.to_string();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(c) = cur {
        message = c.to_string();
        cur = c.source();
    }
    // tera's parse error reads "--> line:col", a code excerpt, then "= what was expected"
    let at = message.split_once("--> ").and_then(|(_, rest)| {
        let (line, rest) = rest.split_once(':')?;
        let col: String = rest.chars().take_while(char::is_ascii_digit).collect();
        Some((line.trim().parse::<usize>().ok()?, col.parse::<usize>().ok()?))
    });
    let expected = message.rsplit_once("= ").map_or(message.trim(), |(_, e)| e.trim()).to_string();
    let offset = at.map_or(0, |(line, col)| {
        let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
        (start + col.saturating_sub(1)).min(text.len())
    });
    Problem::new(offset, format!("the template does not parse: {expected}"), "tera's syntax: {{ expression }}, {% if ... %}...{% endif %}, {% for x in list %}...{% endfor %}")
}

// ------------------------------------------------------------------ after parsing

/// A rule the parsed template breaks: the name to find it by, what, and what to do.
struct Found {
    name: String,
    message: String,
    help: String,
}

fn rules(n: &Node, found: &mut Option<Found>) {
    if found.is_some() {
        return;
    }
    let (name, message) = match n {
        Node::VariableBlock(_, e) => return expr_rules(e, found),
        Node::Set(_, s) => return expr_rules(&s.value, found),
        Node::FilterSection(_, f, _) => {
            call_rules(&f.filter, true, found);
            f.body.iter().for_each(|n| rules(n, found));
            return;
        }
        Node::Forloop(_, f, _) => {
            expr_rules(&f.container, found);
            f.body.iter().chain(f.empty_body.iter().flatten()).for_each(|n| rules(n, found));
            return;
        }
        Node::If(i, _) => {
            for (_, e, body) in &i.conditions {
                expr_rules(e, found);
                body.iter().for_each(|n| rules(n, found));
            }
            i.otherwise.iter().flat_map(|(_, b)| b).for_each(|n| rules(n, found));
            return;
        }
        Node::Text(_) | Node::Raw(..) | Node::Break(_) | Node::Continue(_) | Node::Comment(..) => return,
        Node::Super => ("super", "`super()` belongs to template inheritance, which family templates do not use"),
        // (the scan refused their tags first, at their lines)
        Node::Extends(..) | Node::Include(..) | Node::ImportMacro(..) | Node::MacroDefinition(..) | Node::Block(..) => ("", "the template reaches another template, or defines a macro or a block"),
    };
    *found = Some(Found { name: name.into(), message: message.into(), help: "family templates are single files: write the text in this template".into() });
}

fn expr_rules(e: &Expr, found: &mut Option<Found>) {
    for_each_call(e, &mut |call, is_filter| call_rules(call, is_filter, found));
    let mut macro_call = None;
    visit(e, &mut |x| {
        if let ExprVal::MacroCall(m) = &x.val {
            macro_call.get_or_insert_with(|| m.name.clone());
        }
    });
    if let (None, Some(name)) = (&found, macro_call) {
        *found = Some(Found { name, message: "macros are not supported in family templates (a macro may call itself without end)".into(), help: "write the text in place, in a {% for %} loop if it repeats".into() });
    }
}

fn call_rules(call: &FunctionCall, is_filter: bool, found: &mut Option<Found>) {
    if found.is_some() {
        return;
    }
    let name = call.name.as_str();
    let refuse = |message: String, help: String| Some(Found { name: name.into(), message, help });
    *found = if is_filter {
        // (`default` and `safe` are tera's own, applied by its renderer)
        if ENGINE.get_filter(name).is_ok() || name == "default" || name == "safe" { None } else { refuse(format!("unknown filter `{name}`"), "see tera's built-in filters".into()) }
    } else if HOST_FUNCTIONS.contains(&name) {
        refuse(format!("`{name}()`: {HOST_FUNCTION_ERROR}"), "put what the kernel needs in the spec (a geometry field) or the family file ([let])".into())
    } else if !FUNCTIONS.contains(&name) {
        refuse(format!("unknown function `{name}`"), format!("templates may call {}", FUNCTIONS.iter().map(|f| format!("`{f}()`")).collect::<Vec<_>>().join(" and ")))
    } else {
        None
    };
    if found.is_none() {
        call.args.values().for_each(|a| expr_rules(a, found));
    }
}

/// Every filter and function call of `e` and its sub-expressions (`true`: a filter).
fn for_each_call(e: &Expr, f: &mut impl FnMut(&FunctionCall, bool)) {
    visit(e, &mut |x| {
        if let ExprVal::FunctionCall(c) = &x.val {
            f(c, false);
        }
        if let ExprVal::StringConcat(c) = &x.val {
            for v in &c.values {
                if let ExprVal::FunctionCall(c) = v {
                    f(c, false);
                }
            }
        }
        x.filters.iter().for_each(|c| f(c, true));
    });
}

/// `e` and its sub-expressions (not those in call arguments).
fn visit(e: &Expr, f: &mut impl FnMut(&Expr)) {
    f(e);
    match &e.val {
        ExprVal::Math(m) => {
            visit(&m.lhs, f);
            visit(&m.rhs, f);
        }
        ExprVal::Logic(l) => {
            visit(&l.lhs, f);
            visit(&l.rhs, f);
        }
        ExprVal::In(i) => {
            visit(&i.lhs, f);
            visit(&i.rhs, f);
        }
        ExprVal::Test(t) => t.args.iter().for_each(|a| visit(a, f)),
        ExprVal::Array(items) => items.iter().for_each(|a| visit(a, f)),
        _ => {}
    }
}

/// Where `name` is first written as a word in a tag (the start of the template if nowhere).
fn locate(text: &str, tags: &[Tag], name: &str) -> usize {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    for t in tags {
        let tag = &text[t.start..t.end];
        for (i, _) in tag.match_indices(name).filter(|_| !name.is_empty()) {
            let before = i.checked_sub(1).map(|j| tag.as_bytes()[j]);
            let after = tag.as_bytes().get(i + name.len()).copied();
            if !before.is_some_and(word) && !after.is_some_and(word) {
                return t.start + i;
            }
        }
    }
    0
}

// ------------------------------------------------------------------ instrumenting

fn call(name: &str, args: Vec<(&str, i64)>) -> FunctionCall {
    FunctionCall { name: name.into(), args: args.into_iter().map(|(k, v)| (k.to_string(), Expr::new(ExprVal::Int(v)))).collect() }
}

/// What one iteration of a loop over `body` is charged: its text's bytes and [`NODE_WORK`] a node.
fn body_work(body: &[Node]) -> u64 {
    body.iter()
        .map(|n| match n {
            Node::Text(t) | Node::Raw(_, t, _) => t.len() as u64,
            Node::FilterSection(_, f, _) => NODE_WORK + body_work(&f.body),
            Node::Forloop(_, f, _) => NODE_WORK + body_work(&f.body) + f.empty_body.as_deref().map_or(0, body_work),
            Node::If(i, _) => NODE_WORK + i.conditions.iter().map(|(_, _, b)| NODE_WORK + body_work(b)).sum::<u64>() + i.otherwise.as_ref().map_or(0, |(_, b)| body_work(b)),
            _ => NODE_WORK,
        })
        .sum()
}

fn instrument(nodes: &mut [Node]) {
    for n in nodes {
        match n {
            Node::VariableBlock(_, e) => instrument_expr(e, false),
            Node::Set(_, s) => instrument_expr(&mut s.value, false),
            Node::FilterSection(_, f, _) => {
                instrument_call(&mut f.filter);
                instrument(&mut f.body);
            }
            Node::Forloop(_, f, _) => {
                instrument_expr(&mut f.container, false);
                let work = NODE_WORK + body_work(&f.body);
                f.container.filters.push(call(LOOP, vec![("cost", i64::try_from(work).unwrap_or(i64::MAX))]));
                instrument(&mut f.body);
                if let Some(b) = &mut f.empty_body {
                    instrument(b);
                }
            }
            Node::If(i, _) => {
                for (_, e, body) in &mut i.conditions {
                    instrument_expr(e, false);
                    instrument(body);
                }
                if let Some((_, b)) = &mut i.otherwise {
                    instrument(b);
                }
            }
            _ => {}
        }
    }
}

fn instrument_call(c: &mut FunctionCall) {
    c.args.values_mut().for_each(|a| instrument_expr(a, false));
}

/// Adds the limit after every filter of `e`, and on `e` itself where its value can grow (a
/// name, a call, a concatenation, an array), but not on an operand of arithmetic or a
/// comparison (a number: tera reads those apart from their filters).
fn instrument_expr(e: &mut Expr, operand: bool) {
    match &mut e.val {
        ExprVal::Math(m) => {
            instrument_expr(&mut m.lhs, true);
            instrument_expr(&mut m.rhs, true);
        }
        ExprVal::Logic(l) => {
            instrument_expr(&mut l.lhs, true);
            instrument_expr(&mut l.rhs, true);
        }
        ExprVal::In(i) => {
            instrument_expr(&mut i.lhs, false);
            instrument_expr(&mut i.rhs, false);
        }
        ExprVal::Test(t) => t.args.iter_mut().for_each(|a| instrument_expr(a, false)),
        ExprVal::Array(items) => items.iter_mut().for_each(|a| instrument_expr(a, false)),
        ExprVal::FunctionCall(c) => instrument_call(c),
        ExprVal::StringConcat(c) => c.values.iter_mut().for_each(|v| {
            if let ExprVal::FunctionCall(c) = v {
                instrument_call(c);
            }
        }),
        _ => {}
    }
    let grows = matches!(e.val, ExprVal::Ident(_) | ExprVal::FunctionCall(_) | ExprVal::StringConcat(_) | ExprVal::Array(_));
    let mut filters = Vec::with_capacity(2 * e.filters.len() + 1);
    for mut f in e.filters.drain(..) {
        instrument_call(&mut f);
        filters.push(f);
        filters.push(call(LIMIT, Vec::new()));
    }
    if filters.is_empty() && grows && !operand {
        filters.push(call(LIMIT, Vec::new()));
    }
    e.filters = filters;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> Result<String, String> {
        let mut tera = engine();
        let template = check(text).map_err(|p| format!("{}: {}", p.offset, p.message))?;
        add(&mut tera, "t", template).map_err(|e| e.to_string())?;
        render(&tera, "t", &Context::new()).map_err(|e| {
            let mut m = e.to_string();
            let mut cur = std::error::Error::source(&e);
            while let Some(c) = cur {
                m = format!("{m}: {c}");
                cur = c.source();
            }
            m
        })
    }

    #[test]
    fn ordinary_templates_render_as_tera_renders_them() {
        let text = "{% set pad = \"  \" %}{% for i in range(end=3) %}{{ i }}{% if i > 0 and i != 1 %}!{% endif %}{% endfor %}\n\
                    {% filter indent(prefix=pad, first=true) %}a\nb{% endfilter %}|{{ \"x\" ~ 1 ~ 2.5 }}|{{ [1, 2] | join(sep=\",\") }}|{{ \"a-b\" | replace(from=\"-\", to=\"+\") | upper }}|{{ missing | default(value=7) }}|{{ 10 / 4 }}";
        let mut plain = Tera::default();
        plain.add_raw_template("t", text).unwrap();
        assert_eq!(rendered(text).unwrap(), plain.render("t", &Context::new()).unwrap());
    }

    fn traced(text: &str, context: &Context) -> Trace {
        trace(&check(text).expect("the template checks"), text, context).expect("its nodes line up with its text")
    }

    #[test]
    fn a_trace_says_where_a_render_failed() {
        let text = "a\n{% if x %}\n  {% set z = 1 %}{{ y }}\n{% endif %}";
        let mut ctx = Context::new();
        ctx.insert("x", &true);
        let t = traced(text, &ctx);
        let message = format!("{:?}", t.result.as_ref().expect_err("y is not defined"));
        assert_eq!(t.reached, text.find("{{ y"));
        assert_eq!(missing_variable(&message), Some("y"), "{message}");
        assert_eq!(locate_variable(text, t.reached.unwrap(), "y"), Some((text.find("y }}").unwrap(), 1)));
        // not in a string, not after a dot
        let text = "{{ \"y\" ~ a.y }}{{ y }}";
        assert_eq!(locate_variable(text, 0, "y"), Some((text.rfind('y').unwrap(), 1)));
    }

    #[test]
    fn a_trace_says_where_each_byte_of_the_output_comes_from() {
        let text = "{# c #}ab {{ v }}\n  x = 0.5;{% for i in [1, 2] %} {{ i }}{%- endfor %}\n{% filter upper %}w {{ v }}{% endfilter %}\n{% raw %}r 1.5{% endraw %}";
        let mut ctx = Context::new();
        ctx.insert("v", "vv");
        let t = traced(text, &ctx);
        let out = t.result.as_ref().unwrap().clone();
        assert_eq!(out, "ab vv\n  x = 0.5; 1 2\nW VV\nr 1.5");
        let from = |needle: &str| {
            let at = out.find(needle).unwrap();
            t.origin(text, at, needle.len()).map(|r| &text[r])
        };
        assert_eq!(from("0.5"), Some("0.5"), "template text maps byte for byte");
        assert_eq!(from("vv"), Some("{{ v }}"), "a value maps to its tag");
        assert_eq!(from(" 2"), Some(" "), "a loop's text maps to the loop's text");
        assert_eq!(from("W VV"), Some("{% filter upper %}"), "a filtered body maps to the filter");
        assert_eq!(from("1.5"), Some("1.5"), "raw text maps byte for byte");
    }

    #[test]
    fn the_bundled_templates_line_up_with_their_text() {
        for f in crate::family::bundled().unwrap() {
            assert!(node_starts(&f.parsed.ast, &f.template.1).is_some(), "{}", f.template.0);
        }
    }

    #[test]
    fn a_header_section_needs_a_family_that_renders_it() {
        let header = "{%- if section == \"header\" %}h{% else %}b{% endif %}";
        let p = header_not_rendered(header, "f.toml").expect("a header the family never renders");
        assert_eq!((p.offset, p.help.as_deref()), (0, Some("add `header = true` to f.toml (a top-level key, beside `family`)")));
        assert_eq!(header_not_rendered("b {{ kernel }} {{ 'header' }}", "f.toml"), None);
        assert!(reads(header, "section") && !reads("{{ 'section' }} {{ a.section }}", "section"));
    }

    #[test]
    fn growth_without_end_is_an_error() {
        for (text, want) in [
            ("{% for i in range(end=4000000000) %}x{% endfor %}", "`range` of 4000000000 values"),
            ("{% for i in range(end=3, step_by=0) %}x{% endfor %}", "step_by = 0"),
            ("{% for i in range(end=16000) %}{% for j in range(end=16000) %}x{% endfor %}{% endfor %}", "MiB of work"),
            ("{% set s = \"xxxxxxxx\" %}{% for i in range(end=64) %}{% set_global s = s ~ s %}{% endfor %}{{ s }}", "above the limit of 256 KiB"),
            ("{% set a = \"xxxxxxxx\" %}{% set b = a ~ a ~ a ~ a ~ a ~ a ~ a ~ a %}{% set c = b ~ b ~ b ~ b ~ b ~ b ~ b ~ b %}{% set d = c ~ c ~ c ~ c ~ c ~ c ~ c ~ c %}{% set e = d ~ d ~ d ~ d ~ d ~ d ~ d ~ d %}{% set f = e ~ e ~ e ~ e ~ e ~ e ~ e ~ e %}{% set g = f ~ f ~ f ~ f ~ f ~ f ~ f ~ f %}", "above the limit of 256 KiB"),
            ("{{ \"abcdefgh\" | replace(from=\"\", to=\"0123456789abcdef\") | replace(from=\"\", to=\"0123456789abcdef\") | replace(from=\"\", to=\"0123456789abcdef\") | replace(from=\"\", to=\"0123456789abcdef\") }}", "the result of `replace`"),
            ("{% for a in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}{% for b in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}{% for c in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}{% for d in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}{% for e in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}{% for f in [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16] %}.{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}", "MiB of work"),
        ] {
            let err = rendered(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    /// The worst a template may nest within the limits parses and renders on a 2 MiB stack (a
    /// test thread's) in a debug build.
    #[test]
    fn the_limits_keep_tera_within_a_small_stack() {
        let sum = format!("{{{{ 1{} }}}}", " +1".repeat((MAX_TAG_BYTES - 8) / 3));
        let parens = format!("{{{{ {}1{} }}}}", "(".repeat((MAX_TAG_BYTES - 8) / 2), ")".repeat((MAX_TAG_BYTES - 8) / 2));
        let and = format!("{{% if true{} %}}", " and 1".repeat((MAX_TAG_BYTES - 16) / 6));
        let text = format!("{}{sum}{parens}{and}x{{% endif %}}{}", "{% if true %}".repeat(MAX_NESTING - 1), "{% endif %}".repeat(MAX_NESTING - 1));
        let out = std::thread::Builder::new().stack_size(2 << 20).spawn(move || rendered(&text)).unwrap().join().expect("no stack overflow");
        assert_eq!(out.unwrap(), format!("{}1x", (MAX_TAG_BYTES - 8) / 3 + 1));
    }

    #[test]
    fn host_functions_and_other_templates_are_refused_before_rendering() {
        for (text, at, want) in [
            ("a\n{{ get_env(name=\"HOME\") }}", 5, "cannot read the environment"),
            ("{{ now() }}", 3, "cannot read the environment, the clock"),
            ("x {% if true %}{{ get_random(start=1, end=2) }}{% endif %}", 18, "random numbers"),
            ("{% extends \"base.tera\" %}", 0, "extends, include and import are not supported"),
            ("ab{% include \"x\" %}", 2, "single files"),
            ("{% import \"m.tera\" as m %}", 0, "single files"),
            ("{% macro f(n) %}{{ self::f(n=n) }}{% endmacro %}", 0, "macros are not supported"),
            ("{% block b %}x{% endblock %}", 0, "template inheritance"),
            ("{{ x | no_such_filter }}", 7, "unknown filter `no_such_filter`"),
            ("{{ read_file(path=\"/etc/passwd\") }}", 3, "unknown function `read_file`"),
        ] {
            let p = check(text).map(|_| ()).expect_err(text);
            assert_eq!((p.offset, p.message.contains(want)), (at, true), "{text}: {p:?}");
        }
        let long = format!("{{{{ (((((1))))) }}}}\n{{{{ 1{} }}}}", " + 1".repeat(70));
        assert_eq!(check(&long).map(|_| ()).unwrap_err().offset, 18, "the second tag is too long");
        let deep = "{% if true %}".repeat(MAX_NESTING + 1);
        assert!(check(&deep).unwrap_err().message.contains("nest more than 32"));
        // the engine refuses them too, if a template were to reach it unchecked
        let mut tera = engine();
        tera.add_raw_template("t", "{{ get_env(name=\"HOME\") }}").unwrap();
        assert!(format!("{:?}", render(&tera, "t", &Context::new()).unwrap_err()).contains("cannot read the environment"));
    }
}
