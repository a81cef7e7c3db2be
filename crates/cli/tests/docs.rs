//! The documentation's references resolve: every relative markdown link of every `.md` file
//! (README.md, docs/, the crates' and lanes' READMEs) names a file or folder of the
//! repository, and a heading there when it has a `#fragment`; every repository path written in
//! a code span of README.md, docs/ and the crates' READMEs exists; every `make <target>` a reader is told to run is a target of the
//! Makefile (or a lane's `.mk` it includes). The tutorial's code is tested by `tutorial.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// Every `.md` file of the repository but generated and build output.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a folder") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "generated" {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The lines of a markdown text outside fenced code blocks, with their numbers, and the
/// lines inside them.
fn split_fences(text: &str) -> (Vec<(usize, &str)>, Vec<(usize, &str)>) {
    let (mut prose, mut code) = (Vec::new(), Vec::new());
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            code.push((i + 1, line));
        } else {
            prose.push((i + 1, line));
        }
    }
    (prose, code)
}

/// The code spans of a line (text between single backticks).
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// A line without its code spans, so that `[i](x)` in code is not a link.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The targets of inline links `[text](target)` in a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        out.push(rest[..end].trim().to_string());
        rest = &rest[end..];
    }
    out
}

/// GitHub's anchor of a heading: lowercase; letters, digits, `-`, `_` and spaces kept, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (a repeated heading gets `-1`, `-2`... as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in split_fences(text).0 {
        let Some(heading) = line.strip_prefix('#') else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let mut name = base.clone();
        let mut n = 0;
        while out.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        out.insert(name);
    }
    out
}

/// Every target the Makefile and the lanes' `.mk` files define.
fn make_targets(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for file in ["Makefile", "mlx/mlx.mk", "apple/apple.mk"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for line in text.lines() {
            let Some((names, rest)) = line.split_once(':') else { continue };
            if rest.starts_with('=') || names.starts_with(['.', '\t', '#', ' ']) || names.contains(['=', '$', '?', '+']) {
                continue;
            }
            out.extend(names.split_whitespace().map(str::to_string));
        }
    }
    out
}

/// The target a `make ...` command names: its first word that is not an option (`make -f x.mk t`: `t`).
fn make_target(command: &str) -> Option<&str> {
    let mut words = command.strip_prefix("make ")?.split_whitespace();
    while let Some(w) = words.next() {
        if w == "-f" || w == "-C" {
            words.next();
        } else if !w.starts_with('-') && !w.contains('=') {
            return Some(w);
        }
    }
    None
}

/// The folders and files at the repository's top, whose names start the paths checked.
const TOP: &[&str] = &["crates/", "docs/", "src/", "specs/", "generated/", "examples/", "tests/", "mlx/", "apple/", ".cargo/", ".ci/"];

/// Whether a code span is a path of this repository to check: under one of [`TOP`] (or,
/// in a crate's README, its own `src/` or `tests/`), with no placeholder or pattern in it.
fn is_repo_path(span: &str) -> bool {
    TOP.iter().any(|t| span.starts_with(t)) && !span.contains(['<', '>', '*', '{', '}', ' ', '$', '…', '(', ':']) && !span.contains("...")
}

/// Whether a file's code spans name paths of this repository: README.md, docs/ (but the
/// tutorial, whose paths are the reader's own crate's) and the crates' READMEs (from the
/// crate's folder or the repository's). Elsewhere they may name another tree's files (a
/// wheel's, mlx-sys's).
fn names_repo_paths(rel: &str) -> bool {
    rel == "README.md" || (rel.starts_with("docs/") && rel != "docs/tutorial.md") || (rel.starts_with("crates/") && rel.ends_with("/README.md"))
}

/// Every problem of one markdown file.
fn problems_of(root: &Path, file: &Path, text: &str, targets: &BTreeSet<String>) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap_or(file).display().to_string();
    let dir = file.parent().expect("a file's folder");
    let (prose, code) = split_fences(text);
    let mut problems = Vec::new();
    for &(n, line) in &prose {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if path.is_empty() { file.to_path_buf() } else { dir.join(path) };
            if !linked.exists() {
                problems.push(format!("{rel}:{n}: the link `{target}` names {}, which does not exist", linked.display()));
                continue;
            }
            if !fragment.is_empty() && linked.extension().is_some_and(|e| e == "md") {
                let heads = if path.is_empty() { anchors(text) } else { anchors(&std::fs::read_to_string(&linked).expect("a linked file")) };
                if !heads.contains(fragment) {
                    problems.push(format!("{rel}:{n}: the link `{target}`: no heading `#{fragment}` there"));
                }
            }
        }
        for span in code_spans(line) {
            if names_repo_paths(&rel) && is_repo_path(span) && !root.join(span).exists() && !dir.join(span).exists() {
                problems.push(format!("{rel}:{n}: the path `{span}` does not exist"));
            }
        }
    }
    let commands = prose
        .iter()
        .flat_map(|&(n, line)| code_spans(line).into_iter().map(move |s| (n, s)))
        .chain(code.iter().map(|&(n, line)| (n, line.trim())))
        .chain(prose.iter().filter(|(_, l)| l.starts_with("    ")).map(|&(n, l)| (n, l.trim())));
    for (n, command) in commands {
        if let Some(target) = make_target(command) {
            if !targets.contains(target) {
                problems.push(format!("{rel}:{n}: `make {target}`: no such target in the Makefile"));
            }
        }
    }
    problems
}

#[test]
fn every_link_path_and_make_target_in_the_docs_exists() {
    let root = root();
    let targets = make_targets(&root);
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    files.sort();
    for required in ["README.md", "docs/architecture.md", "docs/benchmarks.md", "docs/emulator.md", "docs/metal-check.md"] {
        assert!(files.contains(&root.join(required)), "{required} is missing");
    }
    let problems: Vec<String> = files.iter().flat_map(|f| problems_of(&root, f, &std::fs::read_to_string(f).unwrap(), &targets)).collect();
    assert!(problems.is_empty(), "{} broken references in the docs:\n{}", problems.len(), problems.join("\n"));
}

/// The check finds each kind of broken reference (and only those).
#[test]
fn the_check_reports_each_broken_reference() {
    let root = root();
    let targets = make_targets(&root);
    assert!(targets.contains("generate") && targets.contains("test-mlx") && targets.contains("check-apple"), "{targets:?}");
    let text = "# Top\n\n## `[axes.<name>]`\n\n\
        [ok](docs/tutorial.md), [ok](#top), [ok](#axesname), [ok](docs/family-files.md#expressions)\n\
        [bad](docs/nowhere.md) and [bad](#nowhere) and [bad](docs/tutorial.md#nowhere)\n\
        `crates/cli/src/main.rs` `crates/cli/src/nowhere.rs` `generated/metal/<spec>/<kernel>.metal`\n\
        Run `make generate`, `make -f mlx/mlx.mk test-mlx`, `make nowhere`; make the tree.\n\
        ```\nmake deps\nmake elsewhere\n```\n    make test-slow\n    make absent\n\
        `[i](not-a-link)`\n";
    let problems = problems_of(&root, &root.join("README.md"), text, &targets);
    let expected = [
        "README.md:6: the link `docs/nowhere.md` names",
        "README.md:6: the link `#nowhere`: no heading",
        "README.md:6: the link `docs/tutorial.md#nowhere`: no heading",
        "README.md:7: the path `crates/cli/src/nowhere.rs` does not exist",
        "README.md:8: `make nowhere`: no such target",
        "README.md:11: `make elsewhere`: no such target",
        "README.md:14: `make absent`: no such target",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (p, e) in problems.iter().zip(expected) {
        assert!(p.starts_with(e), "{p}\nexpected: {e}");
    }
}
