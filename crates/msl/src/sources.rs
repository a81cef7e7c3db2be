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
use crate::rewrite::{Rewritten, rewrite, vector_aliases};

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

/// `#include "x"` / `#include <x>` targets of a source, with the quote style.
pub fn includes(src: &str) -> Vec<(String, bool)> {
    tokenize(src)
        .into_iter()
        .filter(|t| t.kind == Kind::Directive)
        .filter_map(|t| {
            let rest = t.text.trim_start_matches('#').trim_start();
            let rest = rest.strip_prefix("include")?.trim();
            if let Some(r) = rest.strip_prefix('"') {
                Some((r.split('"').next()?.to_string(), true))
            } else if let Some(r) = rest.strip_prefix('<') {
                Some((r.split('>').next()?.to_string(), false))
            } else {
                None
            }
        })
        .collect()
}

/// Every header the source includes, directly or not, that exists on disk (Metal's own
/// headers excepted), with its content: found as clang will (quoted: next to the includer
/// first), each once.
pub fn closure(source: &str, main_dir: Option<&Path>, dirs: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut queue: Vec<(String, Option<PathBuf>)> = vec![(source.to_string(), main_dir.map(Path::to_path_buf))];
    let mut seen = std::collections::HashSet::new();
    while let Some((text, dir)) = queue.pop() {
        for (name, quoted) in includes(&text) {
            if !quoted && is_metal_header(&name) {
                continue;
            }
            let mut candidates: Vec<PathBuf> = Vec::new();
            if quoted && let Some(d) = &dir {
                candidates.push(d.join(&name));
            }
            candidates.extend(dirs.iter().map(|d| d.join(&name)));
            let Some(real) = candidates.iter().find(|c| c.is_file()).and_then(|c| fs::canonicalize(c).ok()) else {
                continue;
            };
            if !seen.insert(real.clone()) {
                continue;
            }
            let Ok(content) = fs::read_to_string(&real) else { continue };
            queue.push((content.clone(), real.parent().map(Path::to_path_buf)));
            out.push((real, content));
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
        let headers = closure(source, main_dir.as_deref(), &dirs);
        // Vector aliases are collected over every file first: a header may use another's.
        let mut aliases = vector_aliases(source);
        for (_, c) in &headers {
            aliases.extend(vector_aliases(c));
        }
        ws.add(&main_path, source, file_name.to_string(), &aliases)?;
        for (real, content) in headers {
            let m = mirror(&root, &real);
            ws.add(&m, &content, real.display().to_string(), &aliases)?;
        }
        Ok(ws)
    }

    fn add(&mut self, path: &Path, text: &str, display: String, aliases: &[String]) -> Result<(), Error> {
        let rewritten = rewrite(text, aliases);
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
}
