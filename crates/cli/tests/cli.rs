//! The `kernelgen` command end to end: exit codes, what `check` names, the
//! atomicity of `generate`, and determinism across working directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kernelgen(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir).args(args).output().expect("kernelgen runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A scratch project with a copy of the bundled specs, generated once.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("specs")).unwrap();
    for entry in fs::read_dir(root().join("specs")).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, dir.path().join("specs").join(path.file_name().unwrap())).unwrap();
    }
    let o = kernelgen(dir.path(), &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

fn first_metal(dir: &Path) -> PathBuf {
    let metal = dir.join("generated/metal");
    let spec_dir = fs::read_dir(&metal).unwrap().next().unwrap().unwrap().path();
    let mut files: Vec<PathBuf> = fs::read_dir(spec_dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.remove(0)
}

#[test]
fn check_passes_after_generate() {
    let dir = scratch();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn check_names_an_edited_file() {
    let dir = scratch();
    let file = first_metal(dir.path());
    fs::write(&file, fs::read_to_string(&file).unwrap().replace("0.0f", "1.0f")).unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(text(&o).contains("stale") && text(&o).contains(&name), "{}", text(&o));
    // check never writes: the edit is still there.
    assert!(fs::read_to_string(&file).unwrap().contains("1.0f"));
}

#[test]
fn check_names_a_deleted_file() {
    let dir = scratch();
    fs::remove_file(dir.path().join("generated/manifest.json")).unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("missing:  manifest.json"), "{}", text(&o));
}

#[test]
fn check_names_a_foreign_file_and_generate_never_deletes_it() {
    let dir = scratch();
    fs::write(dir.path().join("generated/metal/stray.metal"), "// stray\n").unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("foreign:  metal/stray.metal"), "{}", text(&o));
    // kernelgen did not write it: generate refuses to replace the tree, and says why.
    let o = kernelgen(dir.path(), &["generate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("kernelgen did not write") && text(&o).contains("stray.metal"), "{}", text(&o));
    assert_eq!(fs::read_to_string(dir.path().join("generated/metal/stray.metal")).unwrap(), "// stray\n");
    fs::remove_file(dir.path().join("generated/metal/stray.metal")).unwrap();
    assert_eq!(kernelgen(dir.path(), &["check"]).status.code(), Some(0));
}

#[test]
fn generate_removes_the_files_of_a_removed_spec() {
    let dir = scratch();
    fs::remove_file(dir.path().join("specs/experts.toml")).unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("orphaned: rust/experts.rs"), "{}", text(&o));
    let o = kernelgen(dir.path(), &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!dir.path().join("generated/rust/experts.rs").exists() && !dir.path().join("generated/metal/experts").exists());
    assert_eq!(kernelgen(dir.path(), &["check"]).status.code(), Some(0));
}

#[test]
fn bad_spec_exits_2_names_file_line_and_field_and_writes_nothing() {
    let dir = scratch();
    let before = fs::read_to_string(dir.path().join("generated/manifest.json")).unwrap();
    fs::write(dir.path().join("specs/zz_bad.toml"), "family = \"expert\"\n[geometry.bad]\nhidden = 100\nintermediate = 64\n").unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("specs/zz_bad.toml:3:10") && t.contains("geometry.bad.hidden"), "{t}");
    assert_eq!(fs::read_to_string(dir.path().join("generated/manifest.json")).unwrap(), before);
    assert!(!dir.path().join("generated/metal/zz_bad").exists());
    // a syntax error too
    fs::write(dir.path().join("specs/zz_bad.toml"), "family = [\n").unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("zz_bad.toml:"), "{}", text(&o));
}

#[test]
fn usage_errors_exit_2_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let o = kernelgen(dir.path(), &["generate", "--nope"]);
    assert_eq!(o.status.code(), Some(2));
    let o = kernelgen(dir.path(), &["generate", "--specs", "does/not/exist"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("error: --specs does/not/exist: No such file"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"));
    fs::create_dir(dir.path().join("specs")).unwrap();
    let o = kernelgen(dir.path(), &["check", "--families", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("error: --families nope: No such file"), "{}", text(&o));
}

/// Hidden files in a spec folder are no specs: an editor's lock beside a spec (Emacs's
/// `.#x.toml`, a link to nowhere) stopped generate.
#[cfg(unix)]
#[test]
fn hidden_files_in_a_spec_folder_are_skipped() {
    let dir = scratch();
    std::os::unix::fs::symlink("user@host.1234:1700000000", dir.path().join("specs/.#expert.toml")).unwrap();
    fs::write(dir.path().join("specs/.draft.toml"), "not a spec").unwrap();
    let o = kernelgen(dir.path(), &["check"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn generate_refuses_a_foreign_directory() {
    let dir = scratch();
    let foreign = dir.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let o = kernelgen(dir.path(), &["generate", "--out", "foreign"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(fs::read_dir(&foreign).unwrap().count(), 1);
}

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn generate_is_deterministic_across_working_directories() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let specs = root().join("specs");
    let out_b = b.path().join("out");
    let o1 = kernelgen(a.path(), &["generate", "--specs", specs.to_str().unwrap(), "--out", "gen"]);
    let o2 = kernelgen(&root().join("crates"), &["generate", "--specs", "../specs", "--out", out_b.to_str().unwrap()]);
    assert!(o1.status.success() && o2.status.success(), "{}{}", text(&o1), text(&o2));
    let (ta, tb) = (tree(&a.path().join("gen")), tree(&out_b));
    assert!(!ta.is_empty());
    assert_eq!(ta, tb);
    // and equal to the checked-in tree
    assert_eq!(ta, tree(&root().join("generated")));
}

#[test]
fn list_shows_every_kernel() {
    let o = kernelgen(&root(), &["list"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("glm52_expert_q4_bf16_r4_gate_up") && t.contains("THREADS/TG"), "{t}");
    // a CUDA body in blocks of its own shows both: glm52's 4-row threadgroups, 8-row CUDA blocks
    let row = t.lines().find(|l| l.starts_with("glm52_expert_q4_bf16_r4_down ")).expect("the row");
    assert!(row.contains("128 (cuda 256)"), "{row}");
}
