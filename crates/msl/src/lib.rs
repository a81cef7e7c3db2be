//! A strict Metal Shading Language front-end check that runs on Linux.
//!
//! kernelgen's emulator compiles MSL as plain C++, which accepts much that Apple's Metal
//! compiler rejects. This crate parses a `.metal` source with clang as C++ for OpenCL 2021
//! against its own address-space-aware declarations of the Metal standard library (so
//! `device`, `constant`, `threadgroup` and `thread` are real qualifiers), then applies Metal's
//! rules that clang does not know (MSL 1.5 language restrictions, kernel signatures,
//! attribute types, function constants). Every problem is reported, at its line and column
//! in the original file.
//!
//! ```no_run
//! use kernelgen_msl::{Checker, Options};
//! let checker = Checker::new(Options::default())?;
//! match checker.check("[[kernel]] void k(device float* x [[buffer(0)]]) { x[0] = 1; }", "k.metal", &[]) {
//!     Ok(()) => println!("ok"),
//!     Err(problems) => problems.iter().for_each(|p| eprintln!("{p}")),
//! }
//! # Ok::<(), kernelgen_msl::Error>(())
//! ```
//!
//! **How it works.** One check is one `clang -fsyntax-only` run (about 0.1 s) over the
//! source and its headers, rewritten into a scratch tree (see `rewrite`), with the prelude
//! precompiled once per cache directory; then a walk over clang's JSON AST and over the
//! tokens. **Caching:** [`Checker::content_key`] names a result by everything it depends on;
//! with [`Options::cache_results`], results are also kept on disk under that key.
//!
//! README.md beside Cargo.toml lists every rule, how it is implemented and the limits.

mod ast;
mod cache;
mod clang;
mod diag;
mod json;
pub mod lex;
mod prelude;
pub mod private_dir;
mod rewrite;
mod rules;
mod sources;
pub mod vocab;

/// The names Metal's `#include <...>` accepts (`metal_stdlib`, `metal_limits`, ...): the check's
/// prelude answers each, and the emulator's stand-in too.
pub use prelude::METAL_HEADERS;

use std::fmt;
use std::path::PathBuf;

/// Bumped whenever the prelude, the rewrites or the rules change what a check reports (cached
/// results also depend on the text of this crate's sources, so a changed rule never reads a
/// stale result).
pub const CHECKER_VERSION: &str = "kernelgen-msl 0.1.0 rules 20";

/// This crate's code, part of every content key.
const CODE: [&str; 13] = [
    include_str!("lib.rs"),
    include_str!("ast.rs"),
    include_str!("cache.rs"),
    include_str!("clang.rs"),
    include_str!("diag.rs"),
    include_str!("json.rs"),
    include_str!("lex.rs"),
    include_str!("prelude.rs"),
    include_str!("private_dir.rs"),
    include_str!("rewrite.rs"),
    include_str!("rules.rs"),
    include_str!("sources.rs"),
    include_str!("vocab.rs"),
];

/// The Metal version modelled by default: 3.1 (macOS 14), the first with native `bfloat`,
/// which MLX 0.29.4 and later require.
pub const DEFAULT_METAL_VERSION: u32 = 310;

#[derive(Clone, Debug)]
pub struct Options {
    /// clang to use; else `$KERNELGEN_MSL_CLANG`; else `clang`, `clang-19` ... `clang-14` on PATH.
    pub clang: Option<PathBuf>,
    /// `__METAL_VERSION__` (310 = Metal 3.1). Lambdas are rejected below 400.
    pub metal_version: u32,
    /// Where the precompiled prelude, the scratch trees of running checks and (with
    /// `cache_results`) results live: a folder of the current user's that no one else can
    /// write (see [`private_dir`]). Default: `msl` in the user's cache
    /// ([`private_dir::default_root`]: `$XDG_CACHE_HOME/kernelgen`, else `~/.cache/kernelgen`).
    pub cache_dir: Option<PathBuf>,
    /// Keep each result on disk under its [`Checker::content_key`] and reuse it.
    pub cache_results: bool,
    /// What to do with `[[function_constant(n)]]` (default: declare them, as Metal does).
    pub function_constants: FunctionConstants,
    /// How long clang may take over one source before the check fails (default 300 s: a
    /// generated kernel takes a tenth of a second; a pathological template could take forever).
    pub timeout: std::time::Duration,
}

/// Function constants (MSL 5.8) are values chosen when a pipeline is built. `Declare` (the
/// default) parses them as Metal does: a program-scope constant of unknown value (kernelgen's
/// emulator runs them with the values a load gives, and refuses to compile a read of one
/// without a value). `Reject` reports each declaration, for code that must not depend on
/// pipeline-time values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionConstants {
    Reject,
    Declare,
}

/// A predefined macro of a check: `-DNAME` (`None`) or `-DNAME=VALUE`.
pub type Define = (String, Option<String>);

impl Default for Options {
    fn default() -> Self {
        Options {
            clang: None,
            metal_version: DEFAULT_METAL_VERSION,
            cache_dir: None,
            cache_results: false,
            function_constants: FunctionConstants::Declare,
            timeout: std::time::Duration::from_secs(300),
        }
    }
}

/// One problem, as Metal would report it, or the check's own limit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Problem {
    /// The caller's file name for the checked source, or a header's path.
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    pub kind: ProblemKind,
}

/// Whose a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// The source's: Metal (or kernelgen's policy on what a source may include) rejects it here.
    Metal,
    /// The checker's: it could not check this source (one of its limits: the source's size,
    /// the AST's size or depth, the time clang may take; or clang could not run). Nothing is
    /// known about the source, and the result is not cached.
    NotChecked,
}

impl Problem {
    /// Whether this is a limit of the check rather than a problem of the source.
    pub fn is_not_checked(&self) -> bool {
        self.kind == ProblemKind::NotChecked
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ProblemKind::Metal => write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.message),
            ProblemKind::NotChecked => write!(f, "{}: the Metal check cannot check this file: {}", self.file, self.message),
        }
    }
}

/// Why a check could not run at all (as opposed to problems in the source).
#[derive(Debug)]
pub enum Error {
    /// No usable clang: the message says what was tried and how to install one.
    ClangNotFound(String),
    /// The prelude did not precompile (a bug of this crate; clang's output attached).
    Prelude(String),
    /// clang's output could not be understood.
    Clang(String),
    Io(String),
    /// A limit of the check (the source's size, the AST's size or depth, the time clang may
    /// take): the source could not be checked, which says nothing about it.
    Limit(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ClangNotFound(m) => write!(f, "MSL check: {m}"),
            Error::Prelude(m) => write!(f, "MSL check: the Metal prelude does not compile:\n{m}"),
            Error::Clang(m) => write!(f, "MSL check: {m}"),
            Error::Io(m) => write!(f, "MSL check: {m}"),
            Error::Limit(m) => write!(f, "the Metal check cannot check this source: {m}"),
        }
    }
}

impl std::error::Error for Error {}

pub struct Checker {
    clang: clang::Clang,
    prelude: prelude::Prelude,
    opts: Options,
    cache: private_dir::PrivateDir,
    /// Where results are kept (with [`Options::cache_results`]), each under a keyed name.
    results: Option<PathBuf>,
    /// Hash of [`CHECKER_VERSION`] and the crate's code.
    code_key: String,
}

impl Checker {
    pub fn new(opts: Options) -> Result<Checker, Error> {
        let clang = clang::Clang::find(opts.clang.as_deref())?;
        let root = match &opts.cache_dir {
            Some(d) => d.clone(),
            None => private_dir::default_root().map_err(Error::Io)?.join("msl"),
        };
        let cache = private_dir::PrivateDir::open(&root).map_err(Error::Io)?;
        let results = if opts.cache_results { Some(cache.subdir("results").map_err(Error::Io)?) } else { None };
        let prelude = prelude::Prelude::prepare(&clang, &cache, opts.metal_version)?;
        let mut code: Vec<&str> = vec![CHECKER_VERSION];
        code.extend(CODE);
        let code_key = cache::hash_hex(&code);
        Ok(Checker { clang, prelude, opts, cache, results, code_key })
    }

    /// The clang in use: the path it runs.
    pub fn clang_path(&self) -> &std::path::Path {
        &self.clang.path
    }

    /// The clang in use (`--version`'s first line).
    pub fn clang_version(&self) -> &str {
        &self.clang.version
    }

    /// A key naming the result of `check` for these inputs: the checker version, the clang,
    /// the Metal version, the file name, the source and every header it includes.
    pub fn content_key(&self, source: &str, file_name: &str, include_dirs: &[PathBuf]) -> String {
        self.content_key_with(source, file_name, include_dirs, &[])
    }

    /// [`Checker::content_key`] of [`Checker::check_with`]: the defines are part of the key.
    pub fn content_key_with(&self, source: &str, file_name: &str, include_dirs: &[PathBuf], defines: &[Define]) -> String {
        let dirs = sources::canonical_dirs(include_dirs);
        let headers = sources::closure(source, sources::main_dir(file_name).as_deref(), &dirs).headers;
        let mut parts: Vec<String> = vec![
            self.code_key.clone(),
            prelude::HEADER.into(),
            prelude::TENSOR_HEADER.into(),
            prelude::MPP_HEADER.into(),
            self.clang.version.clone(),
            self.opts.metal_version.to_string(),
            format!("{:?}", self.opts.function_constants),
            file_name.into(),
            source.into(),
        ];
        parts.extend(dirs.iter().map(|d| d.display().to_string()));
        parts.push(format!("{} defines", defines.len()));
        parts.extend(defines.iter().map(define_flag));
        for (p, c) in headers {
            parts.push(p.display().to_string());
            parts.push(c);
        }
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        cache::hash_hex(&refs)
    }

    /// Check one `.metal` source. `file_name` names it in problems (and, when its directory
    /// exists, quoted includes resolve next to it); `include_dirs` are `-I` directories.
    pub fn check(&self, source: &str, file_name: &str, include_dirs: &[PathBuf]) -> Result<(), Vec<Problem>> {
        self.check_with(source, file_name, include_dirs, &[])
    }

    /// [`Checker::check`] with predefined macros (`-D`). A define of `__METAL_VERSION__`
    /// replaces [`Options::metal_version`] for this check (the first check at a new version
    /// precompiles its prelude); one of `__METAL__` is ignored (it is always 1).
    pub fn check_with(
        &self,
        source: &str,
        file_name: &str,
        include_dirs: &[PathBuf],
        defines: &[Define],
    ) -> Result<(), Vec<Problem>> {
        // A source past the limit is not even tokenized (its headers are counted in `run`).
        if source.len() as u64 > sources::MAX_SOURCE_BYTES {
            let message = sources::too_large(source.len() as u64);
            return Err(vec![Problem { file: file_name.into(), line: 1, col: 1, message, kind: ProblemKind::NotChecked }]);
        }
        // KGMSL_DEBUG=1 (clang's own diagnostics) always runs clang. A result is found only under
        // the name this cache's secret gives its content key: a file planted under the key itself
        // (which anyone can compute) is never read.
        let cached = self.results.as_ref().filter(|_| std::env::var_os("KGMSL_DEBUG").is_none()).map(|dir| {
            let key = self.content_key_with(source, file_name, include_dirs, defines);
            dir.join(self.cache.keyed_name(&[key.as_bytes()]))
        });
        if let Some(p) = &cached
            && let Ok(text) = std::fs::read_to_string(p)
            && let Some(problems) = decode(&text)
        {
            return if problems.is_empty() { Ok(()) } else { Err(problems) };
        }
        // a check that could not run (clang stopped, an I/O error) is not a result to keep
        let (problems, ran) = match self.run(source, file_name, include_dirs, defines) {
            Ok(p) => (p, true),
            Err(e) => {
                let message = match e {
                    Error::Limit(m) => m,
                    e => e.to_string(),
                };
                (vec![Problem { file: file_name.into(), line: 1, col: 1, message, kind: ProblemKind::NotChecked }], false)
            }
        };
        if let Some(p) = cached.as_ref().filter(|_| ran) {
            let _ = cache::write_atomic(p, encode(&problems).as_bytes());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    fn run(&self, source: &str, file_name: &str, include_dirs: &[PathBuf], defines: &[Define]) -> Result<Vec<Problem>, Error> {
        let ws = sources::Workspace::create(&self.cache, source, file_name, include_dirs)?;
        let dirs = sources::canonical_dirs(include_dirs);
        let mut problems = ws.refused.clone();
        for f in ws.files.values() {
            let reject_fc = self.opts.function_constants == FunctionConstants::Reject;
            rules::tokens(&f.display, &f.original, reject_fc, &mut problems);
        }
        // A define of `__METAL_VERSION__` checks against that version (its own precompiled
        // prelude: a PCH fixes the macros it was built with); `__METAL__` is always defined.
        let mut version = self.opts.metal_version;
        for (name, value) in defines {
            if name == "__METAL_VERSION__" {
                match value.as_deref().map(str::trim).and_then(|v| v.parse::<u32>().ok()) {
                    Some(v) => version = v,
                    None => {
                        return Err(Error::Io(format!(
                            "-D __METAL_VERSION__={}: the Metal version must be an integer such as 310",
                            value.as_deref().unwrap_or("")
                        )));
                    }
                }
            }
        }
        let other;
        let prelude = if version == self.opts.metal_version {
            &self.prelude
        } else {
            other = prelude::Prelude::prepare(&self.clang, &self.cache, version)?;
            &other
        };
        let texts: Vec<(&str, &str)> = ws.files.values().map(|f| (f.display.as_str(), f.original.as_str())).collect();
        rules::conditionals(&texts, defines, &prelude.macros, prelude::gpp_macros(), &mut problems);
        let mut cmd = self.clang.command();
        cmd.args(clang::Clang::base_flags(version))
            .arg("-fsyntax-only")
            .arg("-isystem")
            .arg(&prelude.dir)
            .arg("-include-pch")
            .arg(&prelude.pch);
        for d in defines.iter().filter(|(n, _)| n != "__METAL_VERSION__" && n != "__METAL__") {
            cmd.arg(define_flag(d));
        }
        for d in &ws.include_flags {
            cmd.arg("-I").arg(d);
        }
        cmd.args(["-Xclang", "-ast-dump=json"]).arg(&ws.main_path);
        let mut compactor = json::Compactor::default();
        let out = clang::run_capped(&mut cmd, MAX_AST_BYTES, self.opts.timeout, |chunk, out| compactor.feed(chunk, out))
            .map_err(|e| Error::Io(format!("running {}: {e}", self.clang.path.display())))?;
        if out.timed_out {
            return Err(Error::Limit(format!(
                "clang did not finish checking {file_name} within {} s (Options::timeout) and was stopped",
                self.opts.timeout.as_secs_f64()
            )));
        }
        if out.over {
            return Err(Error::Limit(format!(
                "clang's AST dump of it passed {} MiB without its indentation and the keys no rule reads, the most the \
                 check keeps (the dump grows with the source and its template instantiations); split the file",
                MAX_AST_BYTES >> 20
            )));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        // KGMSL_DEBUG=1 shows clang's own diagnostics (for work on the prelude and rules).
        if std::env::var_os("KGMSL_DEBUG").is_some() {
            eprintln!("kernelgen-msl: clang's diagnostics for {file_name}:\n{stderr}");
        }
        let diags = diag::parse(&stderr);
        // A missing `<x>` outside Metal's headers is reported by the token rule (MSL 1.5); a
        // missing `"x"` stays clang's error.
        let angle: std::collections::HashSet<String> = ws
            .files
            .values()
            .flat_map(|f| sources::includes(&f.original))
            .filter(|(_, quoted)| !quoted)
            .map(|(n, _)| n)
            .collect();
        let foreign = |d: &diag::Diag| {
            d.message.ends_with("file not found")
                && d.message
                    .split('\'')
                    .nth(1)
                    .is_some_and(|n| angle.contains(n) && sources::is_foreign_angle_include(n, &dirs))
        };
        let kept: Vec<diag::Diag> = diags.into_iter().filter(|d| !foreign(d)).collect();
        let mut found = diag::problems(&kept, &ws);
        // Metal 4's tensor headers declare nothing below Metal 4 (as Apple's do): say why a
        // tensor name is unknown there.
        if version < 400 && angle.iter().any(|n| prelude::is_tensor_header(n)) {
            for p in &mut found {
                if ["'mpp'", "tensor", "execution_simdgroup", "extents"].iter().any(|w| p.message.contains(w)) {
                    p.message.push_str(&format!(
                        " (tensors and MetalPerformancePrimitives are Metal 4: __METAL_VERSION__ 400 or later; this check is at {version})"
                    ));
                }
            }
        }
        problems.extend(found);
        if out.stdout.is_empty() {
            if problems.is_empty() {
                return Err(Error::Clang(format!("clang produced no AST: {stderr}")));
            }
        } else {
            let json = String::from_utf8_lossy(&out.stdout);
            // The reader and the walk recurse once per level of the AST (and so does dropping
            // it): on a stack that holds json::MAX_DEPTH levels, whatever thread calls check.
            let found = deep_stack(|| {
                let ast = ast::parse(&json, &|f| ws.file(f).is_some()).map_err(|e| {
                    if e.contains(json::TOO_DEEP) {
                        Error::Limit(format!(
                            "this source is too deeply nested to check: clang's AST is {e} (an expression of tens of \
                             thousands of terms or nested calls); split the expression into statements"
                        ))
                    } else {
                        Error::Clang(e)
                    }
                })?;
                let mut found = Vec::new();
                self.apply_rules(&ws, &ast, version, &mut found);
                Ok(found)
            })??;
            problems.extend(found);
        }
        problems.sort();
        problems.dedup();
        Ok(problems)
    }

    fn apply_rules(&self, ws: &sources::Workspace, ast: &ast::Ast, metal_version: u32, problems: &mut Vec<Problem>) {
        let map = |l: &ast::Loc| ws.original(&l.file, l.line, l.col);
        // Functions in original coordinates, per file.
        let mut kernels = std::collections::HashSet::new();
        for (path, f) in &ws.files {
            let path = path.display().to_string();
            let mapped: Vec<ast::Function> = ast
                .functions
                .iter()
                .filter(|g| *g.loc.file == *path)
                .map(|g| {
                    let mut g = g.clone();
                    for l in [&mut g.loc, &mut g.begin, &mut g.end] {
                        if *l.file == *path {
                            l.col = f.rewritten.original_col(l.line, l.col);
                        }
                    }
                    for p in &mut g.params {
                        p.loc.col = f.rewritten.original_col(p.loc.line, p.loc.col);
                    }
                    g
                })
                .collect();
            let refs: Vec<&ast::Function> = mapped.iter().collect();
            kernels.extend(rules::kernels(&f.display, &f.original, &refs, problems));
            let globals: Vec<(u32, &str, &str)> = ast
                .facts
                .iter()
                .filter_map(|fact| match fact {
                    ast::Fact::GlobalVar(l, name, ty) if *l.file == *path => Some((l.line, name.as_str(), ty.as_str())),
                    _ => None,
                })
                .collect();
            rules::function_constant_types(&f.display, &f.original, &globals, problems);
            rules::deduced_thread_params(&f.display, &f.rewritten.deduced_thread_params, &refs, problems);
        }
        kernels.extend(ast.facts.iter().filter_map(|fact| match fact {
            ast::Fact::MacroKernel(id) => Some(id.clone()),
            _ => None,
        }));
        rules::ast(ast, &kernels, metal_version, &map, problems);
        let tokens = ws.files.values().map(|f| (f.display.clone(), lex::tokenize(&f.original))).collect();
        rules::pointer_types(ast, &kernels, &tokens, &map, problems);
    }
}

/// The most of clang's AST dump a check reads (the largest of MLX's headers print 55 MB).
const MAX_AST_BYTES: u64 = 1 << 30;

/// The stack of the thread that reads and walks clang's AST: room for json::MAX_DEPTH levels
/// of both (a debug build's frames included). Reserved, not touched, unless a dump is deep.
const AST_STACK: usize = 256 << 20;

/// Run `f` on a thread with [`AST_STACK`] of stack.
pub(crate) fn deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("kernelgen-msl-ast".into())
            .stack_size(AST_STACK)
            .spawn_scoped(s, f)
            .map_err(|e| Error::Io(format!("starting the thread that reads clang's AST: {e}")))?;
        h.join().map_err(|_| Error::Clang("the thread reading clang's AST panicked".into()))
    })
}

fn define_flag((name, value): &Define) -> String {
    match value {
        Some(v) => format!("-D{name}={v}"),
        None => format!("-D{name}"),
    }
}

// Cached results: one problem per line, tab-separated; the first line marks the format.
fn encode(problems: &[Problem]) -> String {
    let mut s = String::from("kgmsl-result 1\n");
    for p in problems {
        s.push_str(&format!("{}\t{}\t{}\t{}\n", p.file, p.line, p.col, p.message.replace(['\n', '\t'], " ")));
    }
    s
}

fn decode(text: &str) -> Option<Vec<Problem>> {
    let mut lines = text.lines();
    if lines.next()? != "kgmsl-result 1" {
        return None;
    }
    lines
        .map(|l| {
            let mut it = l.splitn(4, '\t');
            Some(Problem {
                file: it.next()?.to_string(),
                line: it.next()?.parse().ok()?,
                col: it.next()?.parse().ok()?,
                message: it.next()?.to_string(),
                kind: ProblemKind::Metal,
            })
        })
        .collect()
}
