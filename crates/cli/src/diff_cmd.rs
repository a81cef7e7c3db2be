//! `kernelgen diff`: what the specs and templates generate now against a
//! committed revision of the generated tree (read with `git ls-tree` and
//! `git cat-file`, no git library) or another folder, for a reviewer. The
//! comparison itself is `kernelgen_review`.

use crate::codegen_cmds::run_pipeline;
use crate::error::Error;
use crate::out::outln;
use crate::{warn_unknown_sizes, CostArgs, SpecArgs};
use kernelgen_review::{self as review, compare, render, view::KernelView, Tree};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
}

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The git revision whose generated tree is the old side (default HEAD).
    #[arg(value_name = "REV")]
    pub rev: Option<String>,
    /// Compare with this folder (a generated tree) instead of a revision.
    #[arg(long, value_name = "DIR", conflicts_with = "rev")]
    pub against: Option<PathBuf>,
    /// text for a terminal, markdown for a pull-request comment.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    #[command(flatten)]
    pub cost: CostArgs,
    #[command(flatten)]
    pub specs: SpecArgs,
    /// Where the generated tree lives in the repository (the path read at REV).
    #[arg(long, value_name = "DIR", default_value = "generated")]
    pub out: PathBuf,
}

/// Exit 0 when the trees are the same, 1 when anything differs, 2 on errors.
pub fn diff(args: &DiffArgs) -> Result<ExitCode, Error> {
    if args.cost.print_gpu_help() {
        return Ok(ExitCode::SUCCESS);
    }
    let (gpu, sizes) = args.cost.resolve()?;
    let old = match &args.against {
        Some(dir) => read_dir_tree(dir)?,
        None => read_revision(args.rev.as_deref().unwrap_or("HEAD"), &args.out)?,
    };
    let generated = run_pipeline(&args.specs)?;
    let new = Tree { label: "the specs now".into(), files: generated.files };
    let opts = compare::Options { gpu, sizes, context: 3 };
    let r = review::review(&old, &new, &opts).map_err(Error::Review)?;
    let kernels: Vec<&KernelView> = r.added.iter().chain(r.changed.iter().map(|p| &p.new)).chain(r.renamed.iter().map(|p| &p.new)).collect();
    if !r.identical && !kernels.is_empty() {
        warn_unknown_sizes(&opts.sizes, &kernels);
    }
    let text = match args.format {
        Format::Text => render::text(&r),
        Format::Markdown => render::markdown(&r),
    };
    outln!("{}", text.trim_end());
    Ok(if r.identical { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, Error> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().map_err(|e| Error::io("cannot run git", e))?;
    if !out.status.success() {
        return Err(Error::Git { command: args.join(" "), stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(out.stdout)
}

/// `a/./b/../c` -> `a/c`, without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The generated tree at `rev`: every file under the output directory's
/// path in that commit.
fn read_revision(rev: &str, out: &Path) -> Result<Tree, Error> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("the working directory", e))?;
    let abs = lexical(&cwd.join(out));
    // The output directory may not exist now (it is what is compared with):
    // resolve its nearest existing ancestor.
    let existing = abs.ancestors().find(|p| p.is_dir()).ok_or_else(|| Error::msg(format!("{}: no such directory", abs.display())))?;
    let rest = abs.strip_prefix(existing).expect("an ancestor").to_path_buf();
    let existing = std::fs::canonicalize(existing).map_err(|e| Error::io(existing.display(), e))?;
    let top = git(&existing, &["rev-parse", "--show-toplevel"])
        .map_err(|e| e.with_hint("(kernelgen diff REV reads the generated tree from git; outside a repository use --against DIR)"))?;
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim());
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    let rel = existing.join(rest);
    let rel = rel.strip_prefix(&top).map_err(|_| Error::msg(format!("{} is not inside the repository at {}", rel.display(), top.display())))?;
    let rel = rel.to_string_lossy().replace('\\', "/");
    if rel.is_empty() {
        return Err(Error::msg("--out names the repository's root; give the generated folder inside it"));
    }
    let commit = git(&top, &["rev-parse", "--verify", "--quiet", "--end-of-options", &format!("{rev}^{{commit}}")])
        .map_err(|_| Error::msg(format!("`{rev}` is not a commit of the repository at {}", top.display())))?;
    let commit = String::from_utf8_lossy(&commit).trim().to_string();
    let listing = git(&top, &["ls-tree", "-r", "-z", "--full-name", &commit, "--", &format!("{rel}/")])?;
    let prefix = format!("{rel}/");
    let mut blobs: Vec<(String, String)> = Vec::new();
    for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let Some((meta, path)) = entry.split_once('\t') else { continue };
        let mut fields = meta.split(' ');
        let (_mode, kind, oid) = (fields.next(), fields.next(), fields.next());
        let (Some("blob"), Some(oid), Some(rel_path)) = (kind, oid, path.strip_prefix(&prefix)) else { continue };
        if rel_path != ".kernelgen-owned" {
            blobs.push((rel_path.to_string(), oid.to_string()));
        }
    }
    let short = commit.get(..10).unwrap_or(&commit);
    let label = if rev == short || commit.starts_with(rev) { short.to_string() } else { format!("{rev} ({short})") };
    if blobs.is_empty() {
        return Err(Error::msg(format!("{label} has no files under {rel}/: nothing to compare with (use another REV, or --against DIR)")));
    }
    let texts = cat_blobs(&top, &blobs.iter().map(|(_, o)| o.as_str()).collect::<Vec<_>>())?;
    let files = blobs.into_iter().map(|(p, _)| p).zip(texts).collect();
    Ok(Tree { label, files })
}

/// The contents of blobs, through one `git cat-file --batch`.
fn cat_blobs(top: &Path, oids: &[&str]) -> Result<Vec<String>, Error> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(top)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("cannot run git", e))?;
    let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
    let mut stdin = child.stdin.take().expect("piped");
    // Written from another thread: git answers while it reads.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut bytes = Vec::new();
    child.stdout.take().expect("piped").read_to_end(&mut bytes).map_err(|e| Error::io("reading git cat-file", e))?;
    let _ = writer.join();
    let status = child.wait().map_err(|e| Error::io("git cat-file", e))?;
    if !status.success() {
        return Err(Error::msg("git cat-file --batch failed"));
    }
    let mut out = Vec::with_capacity(oids.len());
    let mut at = 0;
    for oid in oids {
        let nl = bytes[at..].iter().position(|b| *b == b'\n').map(|p| at + p).ok_or_else(|| Error::msg("git cat-file: truncated output"))?;
        let header = String::from_utf8_lossy(&bytes[at..nl]).to_string();
        let size: usize = match header.split(' ').collect::<Vec<_>>().as_slice() {
            [_, "blob", size] => size.parse().map_err(|_| Error::msg(format!("git cat-file: bad header `{header}`")))?,
            _ => return Err(Error::msg(format!("git cat-file: object {oid}: `{header}`"))),
        };
        let start = nl + 1;
        let end = start + size;
        let body = bytes.get(start..end).ok_or_else(|| Error::msg("git cat-file: truncated output"))?;
        out.push(String::from_utf8_lossy(body).into_owned());
        at = end + 1;
    }
    Ok(out)
}

/// A folder's files (a generated tree elsewhere). Symbolic links are not
/// followed; kernelgen's marker is not part of the tree.
fn read_dir_tree(dir: &Path) -> Result<Tree, Error> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<(), Error> {
        let io = |p: &Path, e: std::io::Error| Error::io(p.display(), e);
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
                if rel == ".kernelgen-owned" {
                    continue;
                }
                let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
                out.insert(rel, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        Ok(())
    }
    if !dir.is_dir() {
        return Err(Error::msg(format!("--against {}: not a directory", dir.display())));
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files)?;
    Ok(Tree { label: dir.display().to_string(), files })
}
