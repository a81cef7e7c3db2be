//! Stage 5, the only one that touches the file system: make the output
//! directory hold exactly the rendered tree, or report how it differs.
//!
//! **Ownership.** A directory is kernelgen's when it holds the marker
//! [`OWNED`] (`.kernelgen-owned`, see [`owned`]), which lists every file
//! kernelgen wrote there. `write` refuses a non-empty directory without it
//! (before looking further, so `--out /` or `--out ~` costs nothing), and
//! refuses to replace a tree holding anything the marker does not list, or
//! any symbolic link, FIFO or other non-file: it deletes only files it wrote
//! and never follows a link inside its output.
//!
//! **The switch.** `write` builds the complete new tree beside the old one,
//! in `<parent>/.<name>.kernelgen-tmp-<pid>-<n>` (the same file system, so
//! files can be linked and directories exchanged), then exchanges the two
//! directories with one `rename` (`sys::exchange`), then removes the old
//! tree (now under the temporary name) file by listed file. Killed or failing
//! at any moment before the exchange, the old tree is untouched; after it,
//! the new tree is complete. What an interrupted run leaves beside the
//! output is removed by the next one, under the lock, when it can prove the
//! leftover is kernelgen's (see `provably_owned`: the marker is written first,
//! under a temporary name and then renamed, so a leftover holds a complete
//! marker listing all of it, or the start of one and nothing else); anything
//! else beside the output is left alone, with a warning. Files whose contents do not change are
//! hard links to the old ones (or, where the file system has no hard links,
//! copies with the old modification time), so their inode and mtime stay:
//! nothing that watches mtimes (cargo's fingerprints of the launcher
//! sources, make, editors) sees a change that is not one, and a run that
//! changes nothing writes nothing. Runs on the same directory serialize on
//! a lock (`sys::Lock`) beside it.
//!
//! Process death and I/O errors are covered (the kill tests stop a debug build at
//! each step through `KERNELGEN_TEST_KILL_AT`); a power loss is not (files are
//! not fsynced, as cargo does not fsync its outputs).

pub mod owned;
mod sys;

pub use owned::{with_marker, OWNED};

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Relative path (with `/`) to file contents.
pub type Tree = BTreeMap<String, String>;

/// How the output directory differs from the tree `generate` would write.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Difference {
    /// The directory has files but no marker: kernelgen did not write it, so
    /// it was not searched for orphans (only the files the specs generate
    /// were compared).
    NotOwned,
    /// On disk but with other contents than `generate` would write.
    Stale(String),
    /// Not on disk.
    Missing(String),
    /// Written by kernelgen (listed in the marker), but no spec generates it
    /// any more: `generate` deletes it.
    Orphaned(String),
    /// A file kernelgen did not write: `generate` refuses to delete it.
    Foreign(String),
    /// A symbolic link: kernelgen never follows one in its output.
    Link(String),
    /// A FIFO, socket or device where only files and folders belong.
    Special(String),
    /// A folder that holds nothing.
    EmptyDir(String),
    /// Could not be read (the message says why).
    Unreadable(String, String),
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Stale(p) => write!(f, "stale:    {p} (differs from what the specs and templates generate)"),
            Difference::Missing(p) => write!(f, "missing:  {p}"),
            Difference::Orphaned(p) => write!(f, "orphaned: {p} (no spec generates it)"),
            Difference::Foreign(p) => write!(f, "foreign:  {p} (not written by kernelgen, so generate will not delete it: move it out)"),
            Difference::Link(p) => write!(f, "link:     {p} (a symbolic link; kernelgen never follows links in its output: remove it)"),
            Difference::Special(p) => write!(f, "special:  {p} (not a regular file: remove it)"),
            Difference::EmptyDir(p) => write!(f, "empty:    {p}/ (an empty folder; generate removes it)"),
            Difference::Unreadable(p, why) => write!(f, "unreadable: {p} ({why})"),
            Difference::NotOwned => write!(
                f,
                "not owned: the directory has no {OWNED}, so kernelgen did not write it; generate refuses it (only the files the specs generate were compared)"
            ),
        }
    }
}

#[derive(Debug)]
/// Why the output tree could not be written or read.
pub struct EmitError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for EmitError {}

fn err(path: &Path, message: impl Into<String>) -> EmitError {
    EmitError { path: path.to_path_buf(), message: message.into() }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> EmitError + '_ {
    move |e| err(path, e.to_string())
}

/// What `write` did.
#[derive(Debug, Default)]
pub struct Written {
    /// How the old tree differed from the new one (empty: nothing was written).
    pub changes: Vec<Difference>,
    /// What could not be cleaned up after the switch (the new tree is in
    /// place regardless): paths left beside the output directory.
    pub warnings: Vec<String>,
}

/// Test-only fault injection: fail the n-th file-system step of this thread.
pub(crate) mod fail {
    #[cfg(test)]
    thread_local! {
        static PLAN: std::cell::Cell<(Option<usize>, usize, bool)> = const { std::cell::Cell::new((None, 0, false)) };
    }

    /// Fails with an injected error if this is the planned step.
    #[cfg(test)]
    pub fn point(what: &str) -> std::io::Result<()> {
        PLAN.with(|p| {
            let (at, n, hit) = p.get();
            p.set((at, n + 1, hit || at == Some(n)));
            if at == Some(n) { Err(std::io::Error::other(format!("injected failure at step {n} ({what})"))) } else { Ok(()) }
        })
    }

    /// The variable that stops a debug build at one step: `<step>` or `<step>#<n>` (the
    /// n-th time the step is reached, from 0; `*` is any step).
    #[cfg(all(not(test), debug_assertions, unix))]
    pub const KILL_AT: &str = "KERNELGEN_TEST_KILL_AT";

    /// Outside the unit tests, a debug build kills itself (SIGKILL, as a user's kill
    /// would) at the step [`KILL_AT`] names: the kill tests' deterministic points.
    /// A release build reads nothing.
    #[cfg(all(not(test), debug_assertions, unix))]
    pub fn point(what: &str) -> std::io::Result<()> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static PLAN: std::sync::OnceLock<Option<(String, usize)>> = std::sync::OnceLock::new();
        static REACHED: AtomicUsize = AtomicUsize::new(0);
        let plan = PLAN.get_or_init(|| {
            let v = std::env::var(KILL_AT).ok()?;
            let (step, n) = v.split_once('#').unwrap_or((&v, "0"));
            Some((step.to_string(), n.parse().ok()?))
        });
        if let Some((step, n)) = plan {
            if (step == what || step == "*") && REACHED.fetch_add(1, Ordering::Relaxed) == *n {
                // SAFETY: signals this process, which ends here.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
        }
        Ok(())
    }

    #[cfg(all(not(test), not(all(debug_assertions, unix))))]
    #[inline(always)]
    pub fn point(_: &str) -> std::io::Result<()> {
        Ok(())
    }

    /// Plans a failure at step `at` (None: no failure) and resets the count.
    #[cfg(test)]
    pub fn plan(at: Option<usize>) {
        PLAN.with(|p| p.set((at, 0, false)));
    }

    /// Whether the planned failure happened.
    #[cfg(test)]
    pub fn hit() -> bool {
        PLAN.with(|p| p.get().2)
    }
}

/// Whose directory `dir` is, looking no further than its marker.
enum Ownership {
    /// It does not exist.
    Absent,
    /// It exists and is empty: it may be adopted.
    Empty,
    /// It has files but no marker.
    NotOwned,
    /// kernelgen's: the files its marker lists.
    Owned(BTreeSet<String>),
}

fn kind_of(m: &fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a file"
    } else {
        "a FIFO, socket or device"
    }
}

/// The largest marker read (the bundled one is 5 KB).
const MAX_MARKER_BYTES: u64 = 16 << 20;

fn ownership(dir: &Path) -> Result<Ownership, EmitError> {
    let meta = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ownership::Absent),
        Err(e) => return Err(err(dir, e.to_string())),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        return Err(err(dir, "the output directory is a symbolic link; kernelgen never follows links in its output: name the directory it points to"));
    }
    if !meta.is_dir() {
        return Err(err(dir, format!("the output path is {}, not a directory", kind_of(&meta))));
    }
    let marker = dir.join(OWNED);
    match fs::symlink_metadata(&marker) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let empty = fs::read_dir(dir).map_err(io_err(dir))?.next().is_none();
            Ok(if empty { Ownership::Empty } else { Ownership::NotOwned })
        }
        Err(e) => Err(err(&marker, e.to_string())),
        Ok(m) if !m.is_file() => Err(err(&marker, format!("the ownership marker is {}, not a file", kind_of(&m)))),
        Ok(_) => {
            fail::point("read marker").map_err(io_err(&marker))?;
            let text = read_marker(&marker).map_err(io_err(&marker))?;
            let listed = owned::parse(&text).map_err(|why| err(&marker, format!("not a kernelgen ownership marker: {why}")))?;
            Ok(Ownership::Owned(listed))
        }
    }
}

/// Everything under a directory, by kind; symbolic links are not followed.
#[derive(Default)]
struct Scan {
    files: BTreeMap<String, PathBuf>,
    links: Vec<String>,
    special: Vec<String>,
    empty_dirs: Vec<String>,
    /// Every directory below the top, deepest last.
    dirs: Vec<PathBuf>,
    unreadable: Vec<(String, String)>,
}

fn scan(dir: &Path) -> Scan {
    let mut out = Scan::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rel_of = |p: &Path| p.strip_prefix(dir).expect("walk stays under dir").to_string_lossy().replace('\\', "/");
        let entries = match fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) => {
                out.unreadable.push((rel_of(&d), e.to_string()));
                continue;
            }
        };
        let mut any = false;
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    out.unreadable.push((rel_of(&d), e.to_string()));
                    continue;
                }
            };
            any = true;
            let path = entry.path();
            let rel = rel_of(&path);
            match entry.file_type() {
                Err(e) => out.unreadable.push((rel, e.to_string())),
                Ok(t) if t.is_symlink() => out.links.push(rel),
                Ok(t) if t.is_dir() => {
                    out.dirs.push(path.clone());
                    stack.push(path);
                }
                Ok(t) if t.is_file() => {
                    out.files.insert(rel, path);
                }
                Ok(_) => out.special.push(rel),
            }
        }
        if !any && d != dir {
            out.empty_dirs.push(rel_of(&d));
        }
    }
    out
}

/// Whether the file at `path` holds exactly `text`; `Err` if it cannot be read.
fn same_contents(path: &Path, text: &str) -> io::Result<bool> {
    fail::point("read")?;
    let meta = fs::symlink_metadata(path)?;
    if meta.len() != text.len() as u64 {
        return Ok(false);
    }
    Ok(fs::read(path)? == text.as_bytes())
}

/// What differs between `dir` and `tree`. Never writes. An unreadable file,
/// a link or an empty folder is a difference, not an error; a directory
/// kernelgen does not own is not searched beyond the files `tree` names.
pub fn check(dir: &Path, tree: &Tree) -> Result<Vec<Difference>, EmitError> {
    let tree = with_marker(tree);
    let mut diffs = Vec::new();
    match ownership(dir)? {
        Ownership::Absent | Ownership::Empty => diffs.extend(tree.keys().map(|rel| Difference::Missing(rel.clone()))),
        Ownership::NotOwned => {
            diffs.push(Difference::NotOwned);
            for (rel, text) in &tree {
                let path = dir.join(rel);
                diffs.extend(compare(rel, &path, text));
            }
        }
        Ownership::Owned(listed) => {
            let found = scan(dir);
            for (rel, text) in &tree {
                match found.files.get(rel) {
                    Some(path) => diffs.extend(compare(rel, path, text)),
                    None if found.links.contains(rel) || found.special.contains(rel) => {}
                    None => diffs.push(Difference::Missing(rel.clone())),
                }
            }
            for rel in found.files.keys().filter(|rel| !tree.contains_key(*rel)) {
                diffs.push(if listed.contains(rel) { Difference::Orphaned(rel.clone()) } else { Difference::Foreign(rel.clone()) });
            }
            diffs.extend(found.links.into_iter().map(Difference::Link));
            diffs.extend(found.special.into_iter().map(Difference::Special));
            diffs.extend(found.empty_dirs.into_iter().map(Difference::EmptyDir));
            diffs.extend(found.unreadable.into_iter().map(|(rel, why)| Difference::Unreadable(rel, why)));
        }
    }
    diffs.sort();
    Ok(diffs)
}

/// One expected file at `path`, compared without following a link.
fn compare(rel: &str, path: &Path, text: &str) -> Option<Difference> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some(Difference::Missing(rel.into())),
        Err(e) => Some(Difference::Unreadable(rel.into(), e.to_string())),
        Ok(m) if m.file_type().is_symlink() => Some(Difference::Link(rel.into())),
        Ok(m) if !m.is_file() => Some(if m.is_dir() { Difference::Stale(rel.into()) } else { Difference::Special(rel.into()) }),
        Ok(_) => match same_contents(path, text) {
            Ok(true) => None,
            Ok(false) => Some(Difference::Stale(rel.into())),
            Err(e) => Some(Difference::Unreadable(rel.into(), e.to_string())),
        },
    }
}

/// The output directory, resolved: an absolute path, its parent and name.
struct Target {
    path: PathBuf,
    parent: PathBuf,
    name: OsString,
}

impl Target {
    fn resolve(dir: &Path) -> Result<Target, EmitError> {
        let path = match dir.file_name() {
            Some(name) => {
                let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                fs::create_dir_all(parent).map_err(io_err(parent))?;
                fs::canonicalize(parent).map_err(io_err(parent))?.join(name)
            }
            // `.`, `..`, `/`: the directory itself, resolved.
            None => fs::canonicalize(dir).map_err(io_err(dir))?,
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(err(&path, "refusing to write to the root directory: kernelgen replaces its output directory as a whole"));
        };
        Ok(Target { parent: parent.to_path_buf(), name: name.to_os_string(), path: path.clone() })
    }

    /// `<parent>/.<name><suffix>`.
    fn beside(&self, suffix: &str) -> PathBuf {
        let mut n = OsString::from(".");
        n.push(&self.name);
        n.push(suffix);
        self.parent.join(n)
    }

    fn tmp_prefix(&self) -> OsString {
        let mut n = OsString::from(".");
        n.push(&self.name);
        n.push(".kernelgen-tmp-");
        n
    }

    /// A fresh, empty directory beside the output, made here.
    fn make_tmp(&self) -> Result<PathBuf, EmitError> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        for n in 0u32.. {
            let path = self.beside(&format!(".kernelgen-tmp-{}-{nanos}-{n}", std::process::id()));
            match fail::point("mkdir tmp").and_then(|()| fs::create_dir(&path)) {
                Ok(()) => return Ok(path),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => continue,
                Err(e) => {
                    return Err(err(
                        &path,
                        format!("{e} (kernelgen builds the new tree beside the output directory, so {} must be writable)", self.parent.display()),
                    ))
                }
            }
        }
        unreachable!("the loop returns")
    }
}

/// The old tree, as `write` found it (under the lock).
struct OldTree {
    /// Its files, every one listed in its marker.
    files: BTreeMap<String, PathBuf>,
    empty_dirs: Vec<String>,
    permissions: Option<fs::Permissions>,
}

fn refuse_not_owned(dir: &Path) -> EmitError {
    err(
        dir,
        format!(
            "refusing to write: the directory is not empty and has no {OWNED}, so kernelgen did not create it \
             (a manifest.json does not make a directory kernelgen's). Name a new or empty directory with --out; \
             if an older kernelgen wrote this one, delete it and run generate again"
        ),
    )
}

/// Reads the old tree and refuses it unless every entry is a file kernelgen wrote.
fn inspect(target: &Target) -> Result<Option<OldTree>, EmitError> {
    let dir = &target.path;
    let listed = match ownership(dir)? {
        Ownership::Absent => return Ok(None),
        Ownership::NotOwned => return Err(refuse_not_owned(dir)),
        Ownership::Empty => BTreeSet::new(),
        Ownership::Owned(listed) => listed,
    };
    let found = scan(dir);
    let shown = |v: &[String]| {
        let mut s = v.iter().take(10).map(|r| dir.join(r).display().to_string()).collect::<Vec<_>>().join(", ");
        if v.len() > 10 {
            s.push_str(&format!(" and {} more", v.len() - 10));
        }
        s
    };
    if let Some((rel, why)) = found.unreadable.first() {
        return Err(err(&dir.join(rel), format!("cannot read it ({why}), so kernelgen cannot tell what it would delete")));
    }
    if !found.links.is_empty() {
        return Err(err(
            dir,
            format!("refusing to write: {} {} a symbolic link; kernelgen never follows links in its output directory: remove it", shown(&found.links), if found.links.len() == 1 { "is" } else { "are" }),
        ));
    }
    if !found.special.is_empty() {
        return Err(err(dir, format!("refusing to write: {} {} not a regular file: remove it", shown(&found.special), if found.special.len() == 1 { "is" } else { "are" })));
    }
    let foreign: Vec<String> = found.files.keys().filter(|rel| *rel != OWNED && !listed.contains(*rel)).cloned().collect();
    if !foreign.is_empty() {
        return Err(err(
            dir,
            format!(
                "refusing to write: kernelgen did not write {} (not listed in {OWNED}), and replacing the directory would delete it; move it out of the output directory",
                shown(&foreign)
            ),
        ));
    }
    let permissions = fs::symlink_metadata(dir).ok().map(|m| m.permissions());
    Ok(Some(OldTree { files: found.files, empty_dirs: found.empty_dirs, permissions }))
}

/// How `tree` differs from the old tree; an unreadable old file counts as stale.
fn changes(old: Option<&OldTree>, tree: &Tree) -> (Vec<Difference>, BTreeSet<String>) {
    let mut changes = Vec::new();
    let mut unchanged = BTreeSet::new();
    let empty = BTreeMap::new();
    let files = old.map_or(&empty, |o| &o.files);
    for (rel, text) in tree {
        match files.get(rel) {
            None => changes.push(Difference::Missing(rel.clone())),
            Some(path) => match same_contents(path, text) {
                Ok(true) => {
                    unchanged.insert(rel.clone());
                }
                _ => changes.push(Difference::Stale(rel.clone())),
            },
        }
    }
    changes.extend(files.keys().filter(|rel| !tree.contains_key(*rel)).map(|rel| Difference::Orphaned(rel.clone())));
    if let Some(o) = old {
        changes.extend(o.empty_dirs.iter().map(|rel| Difference::EmptyDir(rel.clone())));
    }
    changes.sort();
    (changes, unchanged)
}

/// Writes `tree` into the fresh directory `tmp`: the marker first (so an
/// interrupted build is removable as kernelgen's), then every file, linked
/// from the old tree where unchanged.
fn build(tmp: &Path, tree: &Tree, old: Option<&OldTree>, unchanged: &BTreeSet<String>) -> Result<(), EmitError> {
    write_marker(tmp, &tree[OWNED])?;
    for rel in tree.keys().map(String::as_str).filter(|rel| *rel != OWNED) {
        if !owned::is_safe_relative(rel) {
            return Err(err(tmp, format!("refusing to write `{}`: not a relative path inside the output directory (a kernelgen bug)", rel.escape_debug())));
        }
        let path = tmp.join(rel);
        if let Some(parent) = path.parent() {
            if parent != tmp {
                fail::point("mkdir").and_then(|()| fs::create_dir_all(parent)).map_err(io_err(parent))?;
            }
        }
        match old.and_then(|o| o.files.get(rel)).filter(|_| unchanged.contains(rel)) {
            Some(from) => link_or_copy(from, &path).map_err(io_err(&path))?,
            None => {
                fail::point("write").map_err(io_err(&path))?;
                let mut f = fs::File::create_new(&path).map_err(io_err(&path))?;
                f.write_all(tree[rel].as_bytes()).map_err(io_err(&path))?;
            }
        }
    }
    if let Some(p) = old.and_then(|o| o.permissions.clone()) {
        fail::point("chmod").and_then(|()| fs::set_permissions(tmp, p)).map_err(io_err(tmp))?;
    }
    Ok(())
}

/// Writes the marker into `tmp` under a temporary name, then renames it: a run stopped
/// at any moment leaves a complete `.kernelgen-owned` or none (and then at most the
/// start of one under [`owned::PARTIAL`], which the next run recognizes).
fn write_marker(tmp: &Path, text: &str) -> Result<(), EmitError> {
    let partial = tmp.join(owned::PARTIAL);
    fail::point("marker create").map_err(io_err(&partial))?;
    let mut f = fs::File::create_new(&partial).map_err(io_err(&partial))?;
    fail::point("marker write").map_err(io_err(&partial))?;
    f.write_all(text.as_bytes()).map_err(io_err(&partial))?;
    drop(f);
    fail::point("marker rename").and_then(|()| fs::rename(&partial, tmp.join(OWNED))).map_err(io_err(&partial))
}

/// A hard link to `from` at `to`, or a copy with `from`'s modification time.
fn link_or_copy(from: &Path, to: &Path) -> io::Result<()> {
    fail::point("link")?;
    if fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    let modified = fs::symlink_metadata(from)?.modified()?;
    let mut src = fs::File::open(from)?;
    let mut dst = fs::File::create_new(to)?;
    io::copy(&mut src, &mut dst)?;
    dst.set_modified(modified)
}

/// Removes a tree kernelgen wrote, if it can prove it did, and nothing of it otherwise
/// (see [`provably_owned`]): the files its marker lists, then the marker, then the folders
/// left empty, deepest first. Never follows a link.
fn remove_owned(dir: &Path) -> Result<(), String> {
    let found = match provably_owned(dir)? {
        None => return Ok(()),
        Some(found) => found,
    };
    let remove = |p: &Path| fail::point("remove").and_then(|()| fs::remove_file(p));
    let mut first_error: Option<String> = None;
    let markers = [OWNED, owned::PARTIAL];
    for (rel, path) in found.files.iter().filter(|(rel, _)| !markers.contains(&rel.as_str())) {
        if let Err(e) = remove(path) {
            first_error.get_or_insert(format!("{}: {e}", dir.join(rel).display()));
        }
    }
    // The marker goes last, and only when every file it lists is gone, so
    // the next run can finish what this one could not.
    if first_error.is_none() {
        for path in markers.iter().filter_map(|m| found.files.get(*m)) {
            if let Err(e) = remove(path) {
                first_error.get_or_insert(format!("{}: {e}", path.display()));
            }
        }
    }
    let mut dirs = found.dirs;
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs.iter().map(PathBuf::as_path).chain([dir]) {
        if let Err(e) = fail::point("rmdir").and_then(|()| fs::remove_dir(d)) {
            first_error.get_or_insert(format!("{}: {e}", d.display()));
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) => Err(format!("{} is left behind ({e}); the next generate removes it", dir.display())),
    }
}

/// What is under `dir` if kernelgen provably wrote all of it, `None` if `dir` is gone.
/// The proof, since anyone can make a folder with a temporary tree's name: `dir` is a
/// directory (not a link) of this user, and everything under it is a folder or a regular
/// file of this user, every file listed by its complete marker, or the tree is what a run
/// stopped while writing its marker leaves (the marker is written first, under a
/// temporary name, then renamed): that marker alone, holding the start of a marker. A
/// tree that fails the proof is left as it is, all of it.
fn provably_owned(dir: &Path) -> Result<Option<Scan>, String> {
    let by_hand = |why: &str| format!("{} is left behind: {why}; remove it by hand", dir.display());
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Ok(m) if m.is_dir() && owned_by_me(&m) => {}
        _ => return Err(by_hand("not a directory of this user that kernelgen made; left alone")),
    }
    let found = scan(dir);
    if !(found.links.is_empty() && found.special.is_empty() && found.unreadable.is_empty()) {
        return Err(by_hand("it holds what kernelgen did not write there"));
    }
    let mine = found.files.values().chain(&found.dirs).all(|p| fs::symlink_metadata(p).is_ok_and(|m| owned_by_me(&m)));
    if !mine {
        return Err(by_hand("it holds what another user wrote"));
    }
    let read = |rel: &str| -> Result<Option<String>, String> {
        found.files.get(rel).map(|p| read_marker(p).map_err(|e| by_hand(&format!("its {rel} does not read ({e})")))).transpose()
    };
    let only_a_marker = found.files.len() == 1 && found.dirs.is_empty();
    let listed = match (read(OWNED)?, read(owned::PARTIAL)?) {
        (Some(text), None) => match owned::parse(&text) {
            Ok(listed) => listed,
            // An older kernelgen wrote its marker in place: a run stopped there left it short.
            Err(_) if only_a_marker && owned::is_start_of_marker(&text) => BTreeSet::new(),
            Err(why) => return Err(by_hand(&format!("its {OWNED} does not read ({why})"))),
        },
        (None, Some(text)) if only_a_marker && owned::is_start_of_marker(&text) => BTreeSet::new(),
        (None, None) => BTreeSet::new(),
        _ => return Err(by_hand("it holds what kernelgen did not write there")),
    };
    if found.files.keys().any(|rel| rel != OWNED && rel != owned::PARTIAL && !listed.contains(rel)) {
        return Err(by_hand("it holds what kernelgen did not write there"));
    }
    Ok(Some(found))
}

#[cfg(unix)]
fn owned_by_me(m: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    m.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owned_by_me(_: &fs::Metadata) -> bool {
    true
}

/// A marker's text, at most [`MAX_MARKER_BYTES`] of it.
fn read_marker(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    fs::File::open(path)?.take(MAX_MARKER_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// Makes `dir` hold exactly `tree` (and its marker), switching the whole tree
/// at once; see the module documentation. On any error the old tree is as
/// it was. Refuses a directory kernelgen did not write, a tree with a file
/// kernelgen did not write, a symbolic link or a special file in it.
pub fn write(dir: &Path, tree: &Tree) -> Result<Written, EmitError> {
    let tree = with_marker(tree);
    let target = Target::resolve(dir)?;
    // Every path is checked before anything is made: a temporary tree whose marker lists a
    // path the marker's reader refuses could not be removed file by file.
    if let Some(rel) = tree.keys().find(|rel| !owned::is_safe_relative(rel)) {
        return Err(err(&target.path, format!("refusing to write `{}`: not a relative path inside the output directory (a kernelgen bug)", rel.escape_debug())));
    }
    // Refuse a foreign directory before touching anything beside it.
    if let Ownership::NotOwned = ownership(&target.path)? {
        return Err(refuse_not_owned(&target.path));
    }
    let lock_path = target.beside(".kernelgen-lock");
    let _lock = sys::Lock::acquire(&lock_path, || {
        eprintln!("kernelgen: waiting for another kernelgen writing {} (lock {})", target.path.display(), lock_path.display());
    })
    .map_err(|e| err(&lock_path, format!("cannot take the lock: {e} (the parent of the output directory must be writable)")))?;

    let mut written = Written { warnings: clean_leftovers(&target), ..Written::default() };
    let old = inspect(&target)?;
    let (changes, unchanged) = changes(old.as_ref(), &tree);
    if changes.is_empty() {
        return Ok(written);
    }
    let tmp = target.make_tmp()?;
    let built = build(&tmp, &tree, old.as_ref(), &unchanged);
    let switched = built.and_then(|()| match &old {
        Some(_) => sys::exchange(&tmp, &target.path, &target.beside(&format!(".kernelgen-tmp-{}-old", std::process::id())))
            .map_err(|e| err(&target.path, format!("cannot switch to the new tree: {e}"))),
        None => sys::rename_noreplace(&tmp, &target.path).map(|()| tmp.clone()).map_err(|e| err(&target.path, format!("cannot move the new tree into place: {e}"))),
    });
    let old_place = match switched {
        Ok(p) => p,
        Err(e) => {
            // Nothing of the old tree was touched; the new one goes.
            if let Err(left) = remove_owned(&tmp) {
                return Err(err(&e.path, format!("{}; also: {left}", e.message)));
            }
            return Err(e);
        }
    };
    // Committed: the new tree is in place. The old one is at `old_place`
    // (nothing there when there was none).
    if old.is_some() {
        if let Err(left) = remove_owned(&old_place) {
            written.warnings.push(left);
        }
    }
    written.changes = changes;
    Ok(written)
}

/// Removes what interrupted runs left beside the output directory.
fn clean_leftovers(target: &Target) -> Vec<String> {
    let prefix = target.tmp_prefix();
    let Ok(entries) = fs::read_dir(&target.parent) else { return Vec::new() };
    let mut warnings = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(prefix.as_encoded_bytes()) {
            continue;
        }
        if let Err(left) = remove_owned(&entry.path()) {
            warnings.push(left);
        }
    }
    warnings
}

#[cfg(all(test, unix))]
mod tests;
