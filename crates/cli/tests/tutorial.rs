//! `docs/tutorial.md`, run. The tutorial's files are fenced blocks preceded by
//! `<!-- file: PATH -->` (write it) or `<!-- append: PATH -->` (add a blank
//! line and the block to it); its commands are ```sh blocks, run in order with
//! `sh -e` (one preceded by `<!-- skip: why -->` is not run, one preceded by
//! `<!-- verify -->` is a `kernelgen verify` step, see
//! [`VERIFY_RUNS_USER_FAMILIES`]).
//!
//! One source of truth: the files the tutorial writes must be exactly
//! `examples/softcap_argmax/` (minus its Cargo.lock), which `make test` also
//! builds and tests in place. The run happens in an empty temporary directory
//! outside the repository, with `kernelgen` (this crate's binary) and `cargo`
//! on the PATH. Two things differ from a reader's run, both for the crate step
//! only: the crate's path dependencies (`../..`, kernelgen's repository as seen
//! from `examples/softcap_argmax/`) are rewritten to the repository's absolute
//! path, and the example's Cargo.lock is copied in so the build resolves the
//! same versions offline; the build shares this build's target directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `kernelgen verify` runs families defined by family files (with and
/// without a reference): it does, so every `<!-- verify -->` step must pass
/// all nine kernels. (Set to false, the steps are checked to stop at "no
/// verifier for family", verify's answer before family files had verifiers.)
const VERIFY_RUNS_USER_FAMILIES: bool = true;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn example() -> PathBuf {
    root().join("examples/softcap_argmax")
}

#[derive(Debug)]
enum Step {
    /// Write (or, with `append`, extend) a file.
    File { path: String, text: String, append: bool },
    /// Run a shell block; `verify` marks a `kernelgen verify` step.
    Sh { script: String, verify: bool, line: usize },
}

/// The steps of a tutorial, in order.
fn steps(markdown: &str) -> Vec<Step> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut marker: Option<(usize, &str)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(m) = line.strip_prefix("<!-- ").and_then(|l| l.strip_suffix(" -->")) {
            assert!(marker.is_none(), "docs/tutorial.md:{}: two markers in a row", i + 1);
            marker = Some((i + 1, m));
            i += 1;
            continue;
        }
        if let Some(lang) = line.strip_prefix("```") {
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end] != "```" {
                end += 1;
            }
            assert!(end < lines.len(), "docs/tutorial.md:{}: a code block is not closed", i + 1);
            let text: String = lines[start..end].iter().map(|l| format!("{l}\n")).collect();
            match marker.take() {
                Some((_, m)) if m.starts_with("file: ") || m.starts_with("append: ") => {
                    let (kind, path) = m.split_once(": ").unwrap();
                    out.push(Step::File { path: path.to_string(), text, append: kind == "append" });
                }
                Some((_, m)) if m.starts_with("skip: ") => {}
                Some((_, "verify")) => {
                    assert_eq!(lang, "sh", "docs/tutorial.md:{}: a verify step is a sh block", i + 1);
                    out.push(Step::Sh { script: text, verify: true, line: i + 1 });
                }
                Some((at, m)) => panic!("docs/tutorial.md:{at}: unknown marker `{m}`"),
                None if lang == "sh" => out.push(Step::Sh { script: text, verify: false, line: i + 1 }),
                None => {}
            }
            i = end + 1;
            continue;
        }
        if let Some((at, m)) = marker {
            if !line.trim().is_empty() {
                panic!("docs/tutorial.md:{at}: marker `{m}` is not followed by a code block");
            }
        }
        i += 1;
    }
    assert!(marker.is_none(), "a marker at the end of docs/tutorial.md");
    out
}

fn tutorial() -> Vec<Step> {
    steps(&fs::read_to_string(root().join("docs/tutorial.md")).unwrap())
}

/// The files the tutorial writes, as it leaves them.
fn tutorial_files(steps: &[Step]) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for s in steps {
        if let Step::File { path, text, append } = s {
            if *append {
                let f: &mut String = files.get_mut(path).unwrap_or_else(|| panic!("docs/tutorial.md appends to {path} before writing it"));
                f.push('\n');
                f.push_str(text);
            } else {
                assert!(files.insert(path.clone(), text.clone()).is_none(), "docs/tutorial.md writes {path} twice");
            }
        }
    }
    files
}

/// The example's files (what a user writes), relative to its folder.
fn example_files() -> BTreeMap<String, String> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "target" && name != "__pycache__" {
                    walk(&p, base, out);
                }
            } else if name != "Cargo.lock" {
                out.insert(p.strip_prefix(base).unwrap().to_string_lossy().into_owned(), fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&example(), &example(), &mut out);
    out
}

#[test]
fn the_tutorial_writes_exactly_the_example() {
    let written = tutorial_files(&tutorial());
    let example = example_files();
    let only = |a: &BTreeMap<String, String>, b: &BTreeMap<String, String>| a.keys().filter(|k| !b.contains_key(*k)).cloned().collect::<Vec<_>>();
    assert!(
        written.keys().eq(example.keys()),
        "docs/tutorial.md and examples/softcap_argmax/ hold different files: only in the tutorial {:?}, only in the example {:?}",
        only(&written, &example),
        only(&example, &written)
    );
    for (path, text) in &written {
        if let Some(line) = text.lines().zip(example[path].lines()).position(|(a, b)| a != b) {
            panic!("docs/tutorial.md's {path} differs from examples/softcap_argmax/{path} at line {}: change both", line + 1);
        }
        assert_eq!(text, &example[path], "docs/tutorial.md's {path} differs from examples/softcap_argmax/{path} (line count or final newline)");
    }
}

/// The directory holding `bin`, first on a PATH.
fn path_with(bins: &[&Path]) -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = bins.iter().filter_map(|b| b.parent().map(Path::to_path_buf)).collect();
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).unwrap()
}

#[test]
#[ignore = "slow (builds and tests the tutorial's crate): `make test-slow`, in .ci/run"]
fn the_tutorial_runs_in_an_empty_directory() {
    let python = Command::new("python3").args(["-c", "import numpy"]).output();
    assert!(python.is_ok_and(|o| o.status.success()), "the tutorial needs python3 with numpy (`make deps` installs it)");

    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    assert!(!work.starts_with(root()), "the tutorial must run outside the repository");
    let kernelgen = PathBuf::from(env!("CARGO_BIN_EXE_kernelgen"));
    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // <target>/debug/kernelgen: the crate step builds into the same target directory.
    let target = kernelgen.parent().and_then(Path::parent).unwrap().to_path_buf();
    let path = path_with(&[&kernelgen, &cargo]);

    let steps = tutorial();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut ran = 0;
    for step in &steps {
        match step {
            Step::File { path, text, append } => {
                let file = work.join(path);
                fs::create_dir_all(file.parent().unwrap()).unwrap();
                let entry = files.entry(path.clone()).or_default();
                if *append {
                    entry.push('\n');
                }
                entry.push_str(text);
                fs::write(&file, entry.as_bytes()).unwrap();
            }
            Step::Sh { script, verify, line } => {
                if script.contains("cargo ") {
                    let manifest = work.join("Cargo.toml");
                    let text = fs::read_to_string(&manifest).unwrap().replace("path = \"../..", &format!("path = \"{}", root().display()));
                    fs::write(&manifest, text).unwrap();
                    fs::copy(example().join("Cargo.lock"), work.join("Cargo.lock")).unwrap();
                }
                let o = Command::new("sh").args(["-e", "-c", script]).current_dir(work).env("PATH", &path).env("CARGO_TARGET_DIR", &target).output().unwrap();
                let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
                ran += 1;
                if *verify && !VERIFY_RUNS_USER_FAMILIES {
                    assert_eq!(o.status.code(), Some(1), "docs/tutorial.md:{line}: {script}\n{text}");
                    assert!(
                        text.contains("no verifier for family `softcap_argmax`"),
                        "docs/tutorial.md:{line}: verify no longer stops at \"no verifier for family\": if it now runs user families, set VERIFY_RUNS_USER_FAMILIES in {}\n{text}",
                        file!()
                    );
                    continue;
                }
                assert!(o.status.success(), "docs/tutorial.md:{line}: {script}\n{text}");
                if *verify {
                    assert!(text.contains("verify: 9 passed, 0 failed"), "docs/tutorial.md:{line}: {script}\n{text}");
                }
                if script.contains("cargo test") {
                    let passed: usize = text.match_indices("test result: ok. ").filter_map(|(at, m)| text[at + m.len()..].split(' ').next()?.parse::<usize>().ok()).sum();
                    assert!(passed > 0, "docs/tutorial.md:{line}: the crate's tests did not run\n{text}");
                }
                eprintln!("docs/tutorial.md:{line}: ok\n{text}");
            }
        }
    }
    assert!(ran >= 5, "the tutorial's sh steps were not found ({ran})");

    // What the steps left: the kernels, fresh, and the outputs of `kernelgen run`.
    let metal = work.join("generated/metal/softcap_argmax");
    let mut kernels: Vec<String> = fs::read_dir(&metal).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    kernels.sort();
    assert_eq!(kernels.len(), 9, "{kernels:?}");
    for k in &kernels {
        let text = fs::read_to_string(metal.join(k)).unwrap();
        assert!(text.is_ascii() && text.contains("[[kernel]] void custom_kernel_"), "{k}");
    }
    assert!(work.join("out/token.npy").is_file() && work.join("out/value.npy").is_file());
}
