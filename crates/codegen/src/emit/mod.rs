//! Stage 5, the only one that touches the file system: write the rendered
//! tree under the output directory, or compare it with what is there.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Relative path (with `/`) to file contents.
pub type Tree = BTreeMap<String, String>;

/// The file that marks a directory as kernelgen's output.
pub const MARKER: &str = "manifest.json";
const STAGING: &str = ".kernelgen-staging";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Difference {
    /// On disk but with other contents than `generate` would write.
    Stale(String),
    /// Not on disk.
    Missing(String),
    /// On disk but `generate` would not write it.
    Orphaned(String),
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Stale(p) => write!(f, "stale:    {p} (differs from what the specs and templates generate)"),
            Difference::Missing(p) => write!(f, "missing:  {p}"),
            Difference::Orphaned(p) => write!(f, "orphaned: {p} (no spec generates it)"),
        }
    }
}

#[derive(Debug)]
pub struct EmitError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for EmitError {}

fn io_err(path: &Path) -> impl Fn(io::Error) -> EmitError + '_ {
    move |e| EmitError { path: path.to_path_buf(), message: e.to_string() }
}

/// Every file under `dir`, relative, with `/` separators (the staging
/// directory of an interrupted run excluded).
fn files_under(dir: &Path) -> Result<BTreeMap<String, PathBuf>, EmitError> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).map_err(io_err(&d))? {
            let entry = entry.map_err(io_err(&d))?;
            let path = entry.path();
            let rel = path.strip_prefix(dir).expect("walk stays under dir").to_string_lossy().replace('\\', "/");
            if rel == STAGING {
                continue;
            }
            if entry.file_type().map_err(io_err(&path))?.is_dir() {
                stack.push(path);
            } else {
                out.insert(rel, path);
            }
        }
    }
    Ok(out)
}

/// What differs between `dir` and `tree`. Never writes.
pub fn check(dir: &Path, tree: &Tree) -> Result<Vec<Difference>, EmitError> {
    differences(&files_under(dir)?, tree)
}

/// What differs between the files found on disk and `tree`.
fn differences(on_disk: &BTreeMap<String, PathBuf>, tree: &Tree) -> Result<Vec<Difference>, EmitError> {
    let mut diffs = Vec::new();
    for (rel, text) in tree {
        match on_disk.get(rel) {
            None => diffs.push(Difference::Missing(rel.clone())),
            Some(path) => {
                if fs::read(path).map_err(io_err(path))? != text.as_bytes() {
                    diffs.push(Difference::Stale(rel.clone()));
                }
            }
        }
    }
    diffs.extend(on_disk.keys().filter(|rel| !tree.contains_key(*rel)).map(|rel| Difference::Orphaned(rel.clone())));
    diffs.sort();
    Ok(diffs)
}

/// Makes `dir` hold exactly `tree`. Everything is staged under `dir` first;
/// only then are files moved into place (unchanged files are left alone, so
/// their timestamps do not trigger rebuilds) and orphans removed. Refuses a
/// non-empty directory that kernelgen did not write.
pub fn write(dir: &Path, tree: &Tree) -> Result<Vec<Difference>, EmitError> {
    let on_disk = files_under(dir)?;
    if !on_disk.is_empty() && !on_disk.contains_key(MARKER) {
        return Err(EmitError {
            path: dir.to_path_buf(),
            message: format!("refusing to write: the directory is not empty and has no {MARKER}, so kernelgen did not create it"),
        });
    }
    let changes = differences(&on_disk, tree)?;
    if changes.is_empty() {
        return Ok(changes);
    }
    let staging = dir.join(STAGING);
    let result = stage_and_move(dir, &staging, tree, &changes);
    let _ = fs::remove_dir_all(&staging);
    result?;
    remove_empty_dirs(dir);
    Ok(changes)
}

fn stage_and_move(dir: &Path, staging: &Path, tree: &Tree, changes: &[Difference]) -> Result<(), EmitError> {
    if staging.exists() {
        fs::remove_dir_all(staging).map_err(io_err(staging))?;
    }
    for change in changes {
        if let Difference::Stale(rel) | Difference::Missing(rel) = change {
            let path = staging.join(rel);
            fs::create_dir_all(path.parent().expect("files have a parent")).map_err(io_err(&path))?;
            fs::write(&path, &tree[rel]).map_err(io_err(&path))?;
        }
    }
    for change in changes {
        match change {
            Difference::Stale(rel) | Difference::Missing(rel) => {
                let target = dir.join(rel);
                fs::create_dir_all(target.parent().expect("files have a parent")).map_err(io_err(&target))?;
                fs::rename(staging.join(rel), &target).map_err(io_err(&target))?;
            }
            Difference::Orphaned(rel) => {
                let target = dir.join(rel);
                fs::remove_file(&target).map_err(io_err(&target))?;
            }
        }
    }
    Ok(())
}

fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&entry.path());
                // Fails, harmlessly, when the directory is not empty.
                let _ = fs::remove_dir(entry.path());
            }
        }
    }
}
