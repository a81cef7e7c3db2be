//! The files of one check: the main source and every header it includes (found the way clang
//! will find them), each rewritten (see rewrite.rs) into a scratch tree that mirrors absolute
//! paths, so quoted includes still resolve relative to the including file.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::lex::{Kind, tokenize};
use crate::prelude::is_metal_header;
use crate::private_dir::PrivateDir;
use crate::rewrite::{Rewritten, VectorAliases, rewrite, vector_aliases};

pub struct SourceFile {
    /// What problems name: the caller's file name, or the header's real path.
    pub display: String,
    pub original: String,
    pub rewritten: Rewritten,
}

pub struct Workspace {
    pub root: PathBuf,
    pub main_path: PathBuf,
    /// `-I` flags pointing into the mirror.
    pub include_flags: Vec<PathBuf>,
    /// Keyed by the path clang will print (inside the mirror).
    pub files: HashMap<PathBuf, SourceFile>,
    /// Include directives refused whether or not a conditional skips them (the emulator's
    /// g++ may take a branch clang does not): a file outside the allowed folders, a computed
    /// include, `#include_next`, `#import`, `#embed`.
    pub refused: Vec<crate::Problem>,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // KGMSL_DEBUG=1 keeps the rewritten tree for inspection.
        if std::env::var_os("KGMSL_DEBUG").is_none() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

fn mirror(root: &Path, real: &Path) -> PathBuf {
    let rel: PathBuf = real
        .components()
        .filter(|c| !matches!(c, std::path::Component::RootDir | std::path::Component::Prefix(_)))
        .collect();
    root.join("abs").join(rel)
}

/// What an include-like directive names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Quoted(String),
    Angle(String),
    /// A macro naming the header (`#include HEADER`).
    Computed,
}

/// One `#include`, `#include_next`, `#import` or `#embed` directive of a source.
#[derive(Clone, Debug)]
pub struct Directive {
    /// The directive's name (`include`, `include_next`, `import`, `embed`).
    pub name: String,
    pub target: Target,
    /// Its first line and column, and its last line (line splices continue it).
    pub line: u32,
    pub col: u32,
    pub last_line: u32,
}

/// The include-like directives of a source, read as clang reads them: line splices removed,
/// comments as spaces (`#/**/include`, `#inc\<newline>lude` are includes too).
pub fn directives(src: &str) -> Vec<Directive> {
    tokenize(src)
        .into_iter()
        .filter(|t| t.kind == Kind::Directive)
        .filter_map(|t| {
            let text = logical_line(&t.text);
            let rest = text.strip_prefix('#')?.trim_start();
            let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            let name = &rest[..name_len];
            if !matches!(name, "include" | "include_next" | "import" | "embed") {
                return None;
            }
            let arg = rest[name_len..].trim_start();
            let target = if let Some(r) = arg.strip_prefix('"') {
                r.find('"').map(|e| Target::Quoted(r[..e].to_string()))
            } else if let Some(r) = arg.strip_prefix('<') {
                r.find('>').map(|e| Target::Angle(r[..e].to_string()))
            } else {
                None
            };
            let last_line = t.line + t.text.matches('\n').count() as u32;
            Some(Directive { name: name.to_string(), target: target.unwrap_or(Target::Computed), line: t.line, col: t.col, last_line })
        })
        .collect()
}

/// A directive's text as the preprocessor reads it: line splices removed, comments spaces.
pub fn logical_line(text: &str) -> String {
    without_comments(&text.replace("\\\r\n", "").replace("\\\n", ""))
}

/// `text` with each `/* ... */` comment a space.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        out.push(' ');
        rest = rest[i + 2..].find("*/").map_or("", |e| &rest[i + 2 + e + 2..]);
    }
    out.push_str(rest);
    out
}

/// `#include "x"` / `#include <x>` targets of a source, with the quote style.
pub fn includes(src: &str) -> Vec<(String, bool)> {
    directives(src)
        .into_iter()
        .filter(|d| d.name == "include")
        .filter_map(|d| match d.target {
            Target::Quoted(n) => Some((n, true)),
            Target::Angle(n) => Some((n, false)),
            Target::Computed => None,
        })
        .collect()
}

/// Where an include leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// One of Metal's headers: the prelude.
    Metal,
    /// A header in the source's folder or an include folder (canonical path).
    Header(PathBuf),
    NotFound,
    /// A file outside the source's folder and the include folders (an absolute path, `..`
    /// climbing out, a symbolic link out): never read.
    Outside,
    /// A path through a symbolic link: a compiler resolves the file's own quoted includes from
    /// the link's folder, this check from the file's, so the two would read different files.
    Linked,
}

/// Where `#include "name"` (`quoted`) or `<name>` in a file of the folder `includer` leads,
/// found as clang finds it (quoted: next to the includer first; then the include folders) and
/// allowed only under `roots` (the source's folder and the include folders, canonical).
pub fn resolve(name: &str, quoted: bool, includer: Option<&Path>, dirs: &[PathBuf], roots: &[PathBuf]) -> Resolved {
    if !quoted && is_metal_header(name) {
        return Resolved::Metal;
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if quoted && let Some(d) = includer {
        candidates.push(d.join(name));
    }
    candidates.extend(dirs.iter().map(|d| d.join(name)));
    let Some(first) = candidates.iter().find(|c| c.is_file()) else { return Resolved::NotFound };
    match fs::canonicalize(first) {
        Ok(real) if !roots.iter().any(|r| real.starts_with(r)) => Resolved::Outside,
        Ok(real) if real != lexically_normal(first) => Resolved::Linked,
        Ok(real) => Resolved::Header(real),
        Err(_) => Resolved::NotFound,
    }
}

/// `path` with `.` and `..` taken out as text (what it names when no component is a link).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The folders a source may include from: its own (when its name has one) and the include
/// folders, canonical.
pub fn roots(main_dir: Option<&Path>, dirs: &[PathBuf]) -> Vec<PathBuf> {
    main_dir.map(Path::to_path_buf).into_iter().chain(dirs.iter().cloned()).collect()
}

/// The most source text one check reads: the source and every header it includes. MLX's
/// largest kernel with all its headers is about 1 MB; clang's AST of a few MB of simple
/// statements passes the dump's cap (`MAX_AST_BYTES`).
pub const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// Why a source of `bytes` (with its headers) is not checked.
pub fn too_large(bytes: u64) -> String {
    format!(
        "it is {:.1} MiB with its headers, above the {} MiB of source text the check reads; split it",
        bytes as f64 / (1 << 20) as f64,
        MAX_SOURCE_BYTES >> 20
    )
}

/// The headers a source includes.
pub struct Closure {
    /// Every header it includes, directly or not, within the allowed folders (Metal's own
    /// excepted), with its content, each once.
    pub headers: Vec<(PathBuf, String)>,
    /// The bytes of the source and of every such header (the ones left unread past
    /// [`MAX_SOURCE_BYTES`] included).
    pub bytes: u64,
}

/// The headers `source` includes, found as [`resolve`] finds them; none is read once the text
/// read passes [`MAX_SOURCE_BYTES`].
pub fn closure(source: &str, main_dir: Option<&Path>, dirs: &[PathBuf]) -> Closure {
    let roots = roots(main_dir, dirs);
    let mut out = Closure { headers: Vec::new(), bytes: source.len() as u64 };
    let mut queue: Vec<(String, Option<PathBuf>)> = vec![(source.to_string(), main_dir.map(Path::to_path_buf))];
    let mut seen = std::collections::HashSet::new();
    while let Some((text, dir)) = queue.pop() {
        for (name, quoted) in includes(&text) {
            let Resolved::Header(real) = resolve(&name, quoted, dir.as_deref(), dirs, &roots) else { continue };
            if !seen.insert(real.clone()) {
                continue;
            }
            out.bytes += fs::metadata(&real).map_or(0, |m| m.len());
            if out.bytes > MAX_SOURCE_BYTES {
                continue;
            }
            let Ok(content) = fs::read_to_string(&real) else { continue };
            queue.push((content.clone(), real.parent().map(Path::to_path_buf)));
            out.headers.push((real, content));
        }
    }
    out
}

/// The include directories that exist, canonical.
pub fn canonical_dirs(include_dirs: &[PathBuf]) -> Vec<PathBuf> {
    include_dirs.iter().filter_map(|d| fs::canonicalize(d).ok()).collect()
}

/// The canonical directory of the main file, when its name has one that exists.
pub fn main_dir(file_name: &str) -> Option<PathBuf> {
    Path::new(file_name).parent().filter(|p| !p.as_os_str().is_empty()).and_then(|p| fs::canonicalize(p).ok())
}

/// The problem with `#include <name>` of a header that is neither Metal's nor in the include
/// folders.
pub fn foreign_include_message(name: &str) -> String {
    format!("the C++ standard library is not available in MSL (section 1.5): #include <{name}> is not a Metal header")
}

/// Whether an angle include names a header that is neither Metal's nor found in the dirs.
pub fn is_foreign_angle_include(name: &str, dirs: &[PathBuf]) -> bool {
    !is_metal_header(name) && !dirs.iter().any(|d| d.join(name).is_file())
}

impl Workspace {
    pub fn create(scratch: &PrivateDir, source: &str, file_name: &str, include_dirs: &[PathBuf]) -> Result<Workspace, Error> {
        let io = |p: &Path, e: std::io::Error| Error::Io(format!("{}: {e}", p.display()));
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = scratch.subdir(format!("check-{}-{n}", std::process::id())).map_err(Error::Io)?;
        let mut ws = Workspace {
            root: root.clone(),
            main_path: PathBuf::new(),
            include_flags: Vec::new(),
            files: HashMap::new(),
            refused: Vec::new(),
        };

        let dirs = canonical_dirs(include_dirs);
        for d in &dirs {
            let m = mirror(&root, d);
            fs::create_dir_all(&m).map_err(|e| io(&m, e))?;
            ws.include_flags.push(m);
        }
        // The main file sits in its own directory's mirror when that directory exists, so its
        // quoted includes resolve as they would next to the real file.
        let base = Path::new(file_name).file_name().map(PathBuf::from).unwrap_or_else(|| "input.metal".into());
        let main_dir = main_dir(file_name);
        let main_path = match &main_dir {
            Some(d) => mirror(&root, d).join(&base),
            None => root.join("main").join(&base),
        };
        ws.main_path = main_path.clone();
        let closure = closure(source, main_dir.as_deref(), &dirs);
        if closure.bytes > MAX_SOURCE_BYTES {
            return Err(Error::Limit(too_large(closure.bytes)));
        }
        let headers = closure.headers;
        // Vector aliases are collected over every file first: a header may use another's.
        let mut aliases = vector_aliases(source);
        for (_, c) in &headers {
            aliases.extend(vector_aliases(c));
        }
        let mirrored: HashMap<PathBuf, PathBuf> = headers.iter().map(|(real, _)| (real.clone(), mirror(&root, real))).collect();
        let includes = Includes { dirs: &dirs, roots: roots(main_dir.as_deref(), &dirs), mirrored: &mirrored };
        ws.add(&main_path, source, file_name.to_string(), &aliases, &includes, main_dir.as_deref())?;
        for (real, content) in &headers {
            ws.add(&mirrored[real], content, real.display().to_string(), &aliases, &includes, real.parent())?;
        }
        Ok(ws)
    }

    /// Adds a file at `path` in the scratch tree: rewritten, and with every include directive
    /// replaced by one clang cannot resolve elsewhere than this check did (see [`Includes`]).
    fn add(
        &mut self,
        path: &Path,
        text: &str,
        display: String,
        aliases: &VectorAliases,
        includes: &Includes,
        includer: Option<&Path>,
    ) -> Result<(), Error> {
        let mut rewritten = rewrite(text, aliases);
        rewritten.text = includes.vet(text, &rewritten.text, includer, &display, &mut self.refused);
        if let Some(p) = path.parent() {
            fs::create_dir_all(p).map_err(|e| Error::Io(format!("{}: {e}", p.display())))?;
        }
        fs::write(path, &rewritten.text).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        self.files.insert(path.to_path_buf(), SourceFile { display, original: text.to_string(), rewritten });
        Ok(())
    }

    /// A location clang printed, mapped back to (file as the caller knows it, line, col).
    /// None for locations outside the user's files (the prelude, `<built-in>`).
    pub fn original(&self, file: &str, line: u32, col: u32) -> Option<(String, u32, u32)> {
        let f = self.files.get(Path::new(file))?;
        Some((f.display.clone(), line, f.rewritten.original_col(line, col)))
    }

    /// Whether a location clang printed is a brace rewrite 1 made of a vector constructor's
    /// parenthesis.
    pub fn constructor_brace(&self, file: &str, line: u32, col: u32) -> bool {
        self.files
            .get(Path::new(file))
            .is_some_and(|f| f.rewritten.constructor_braces.contains(&(line, f.rewritten.original_col(line, col))))
    }

    pub fn file(&self, path: &str) -> Option<&SourceFile> {
        self.files.get(Path::new(path))
    }

    /// `message` without the scratch tree's paths: a mirrored file's path is its real one.
    pub fn unmirrored(&self, message: &str) -> String {
        let root = self.root.display().to_string();
        message.replace(&format!("{root}/abs/"), "/").replace(&format!("{root}/main/"), "").replace(&root, "")
    }
}

/// How a check's files include one another. clang never resolves a name a source wrote: every
/// include directive is replaced by one naming the mirrored header this check resolved (an
/// absolute path in the scratch tree), by a Metal header's own, or by an `#error` saying why it
/// is not followed (outside the source's folder and the include folders, not found, or a form
/// the check does not follow), so no file outside those folders is read, and nothing is found
/// in the scratch tree or the cache around it.
struct Includes<'a> {
    dirs: &'a [PathBuf],
    roots: Vec<PathBuf>,
    mirrored: &'a HashMap<PathBuf, PathBuf>,
}

/// What becomes of an include directive.
enum Vetted {
    /// It stays (a Metal header).
    Keep,
    /// Replaced by this line (the mirrored header's include, or an `#error` clang reports where
    /// the directive is live, as Metal would).
    Line(String),
    /// Blanked; a problem wherever it is (a foreign `<header>` is the section 1.5 rule's: none).
    Refused(Option<String>),
}

impl Includes<'_> {
    /// `rewritten` (the rewrite of `original`, line for line) with its include directives
    /// replaced; `includer` is the real folder of the file, `file` its name in problems.
    fn vet(&self, original: &str, rewritten: &str, includer: Option<&Path>, file: &str, refused: &mut Vec<crate::Problem>) -> String {
        let mut lines: Vec<String> = rewritten.split('\n').map(str::to_string).collect();
        for d in directives(original) {
            let replacement = match self.vetted(&d, includer) {
                Vetted::Keep => continue,
                Vetted::Line(l) => l,
                Vetted::Refused(message) => {
                    if let Some(message) = message {
                        let kind = crate::ProblemKind::Metal;
                        refused.push(crate::Problem { file: file.to_string(), line: d.line, col: d.col, message, kind });
                    }
                    String::new()
                }
            };
            for l in d.line..=d.last_line {
                if let Some(line) = lines.get_mut(l as usize - 1) {
                    line.clear();
                }
            }
            if let Some(first) = lines.get_mut(d.line as usize - 1) {
                *first = replacement;
            }
        }
        lines.join("\n")
    }

    fn vetted(&self, d: &Directive, includer: Option<&Path>) -> Vetted {
        let refuse = |m: String| Vetted::Refused(Some(m));
        if d.name != "include" {
            return refuse(format!(
                "#{} is not supported by kernelgen's Metal check: write #include \"file\" or #include <file>",
                d.name
            ));
        }
        let (name, quoted) = match &d.target {
            Target::Quoted(n) => (n, true),
            Target::Angle(n) => (n, false),
            Target::Computed => {
                return refuse(
                    "a computed #include (a macro naming the header) is not supported by kernelgen's Metal check: write the file's name".into(),
                );
            }
        };
        let shown = if quoted { format!("\"{name}\"") } else { format!("<{name}>") };
        match resolve(name, quoted, includer, self.dirs, &self.roots) {
            Resolved::Metal => Vetted::Keep,
            Resolved::Header(real) => match self.mirrored.get(&real).map(|m| m.display().to_string()) {
                Some(m) if !m.contains(['"', '\n', '\r']) => Vetted::Line(format!("#include \"{m}\"")),
                Some(_) => refuse(format!("#include {shown}: a header whose path holds a quote cannot be checked")),
                None => refuse(format!("#include {shown}: the header is not UTF-8 text, or past the check's limit on source text")),
            },
            // reported where the directive is live, as Metal would (ggml-common.h includes
            // <stdint.h> in its C and CUDA branches only)
            Resolved::NotFound if !quoted => Vetted::Line(format!("#error {}", foreign_include_message(name))),
            Resolved::NotFound => {
                Vetted::Line(format!("#error '{name}' file not found in the source's folder or the include folders (-I)"))
            }
            Resolved::Linked => refuse(format!(
                "#include {shown} goes through a symbolic link: the Metal check follows none (a compiler would read \
                 the file's own includes from the link's folder, not the file's)"
            )),
            Resolved::Outside => refuse(format!(
                "#include {shown} is outside the source's folder and the include folders (-I): the Metal check reads headers from those alone"
            )),
        }
    }
}
