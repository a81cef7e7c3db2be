use super::*;
use std::os::unix::fs::MetadataExt;

fn tree(files: &[(&str, &str)]) -> Tree {
    files.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn old_tree() -> Tree {
    tree(&[("manifest.json", "{1}\n"), ("metal/a/k1.metal", "// k1 v1\n"), ("metal/a/k2.metal", "// k2\n"), ("rust/a.rs", "// a\n"), ("rust/mod.rs", "// mod\n")])
}

fn new_tree() -> Tree {
    tree(&[("manifest.json", "{2}\n"), ("metal/a/k1.metal", "// k1 v2\n"), ("metal/b/k3.metal", "// k3\n"), ("rust/a.rs", "// a\n"), ("rust/b.rs", "// b\n"), ("rust/mod.rs", "// mod 2\n")])
}

/// Everything under `dir` (hidden files included), as a tree; links and
/// empty folders show up as such, so a mixed or polluted tree never equals
/// a clean one.
fn on_disk(dir: &Path) -> Tree {
    let found = scan(dir);
    let mut t: Tree = found.files.iter().map(|(rel, p)| (rel.clone(), fs::read_to_string(p).unwrap())).collect();
    for l in found.links {
        t.insert(l, "<link>".into());
    }
    for d in found.empty_dirs {
        t.insert(d, "<empty dir>".into());
    }
    t
}

/// The names beside `dir` in its parent, other than `dir` itself.
fn beside(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| *n != dir.file_name().unwrap().to_string_lossy())
        .collect();
    v.sort();
    v
}

#[test]
fn writes_checks_and_rewrites_nothing_when_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    let w = write(&out, &old_tree()).unwrap();
    assert!(w.warnings.is_empty());
    assert_eq!(w.changes.len(), old_tree().len() + 1, "every file and the marker are new");
    assert_eq!(on_disk(&out), with_marker(&old_tree()));
    assert!(fs::read_to_string(out.join(OWNED)).unwrap().starts_with("kernelgen-owned 1\n"));
    assert_eq!(check(&out, &old_tree()).unwrap(), vec![]);
    let inode = fs::metadata(&out).unwrap().ino();
    assert!(write(&out, &old_tree()).unwrap().changes.is_empty());
    assert_eq!(fs::metadata(&out).unwrap().ino(), inode, "nothing changed, nothing switched");
    assert_eq!(beside(&out), Vec::<String>::new(), "no lock, staging or old tree left beside");
}

#[test]
fn switches_the_whole_tree_and_keeps_unchanged_files() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    let same = fs::metadata(out.join("rust/a.rs")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let w = write(&out, &new_tree()).unwrap();
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    assert_eq!(on_disk(&out), with_marker(&new_tree()));
    assert!(w.changes.contains(&Difference::Orphaned("metal/a/k2.metal".into())));
    assert!(w.changes.contains(&Difference::Stale("metal/a/k1.metal".into())));
    assert!(!w.changes.iter().any(|c| matches!(c, Difference::Stale(p) if p == "rust/a.rs")));
    let after = fs::metadata(out.join("rust/a.rs")).unwrap();
    assert_eq!((after.ino(), after.modified().unwrap()), (same.ino(), same.modified().unwrap()), "an unchanged file is the same file");
    assert_eq!(beside(&out), Vec::<String>::new());
}

#[test]
fn a_foreign_manifest_never_makes_a_directory_kernelgens() {
    // The reproduction: a web app with its own manifest.json.
    let root = tempfile::tempdir().unwrap();
    let app = root.path().join("w");
    fs::create_dir_all(app.join("src")).unwrap();
    fs::write(app.join("src/app.js"), "x").unwrap();
    fs::write(app.join("manifest.json"), "{\"name\":\"app\"}").unwrap();
    let before = on_disk(&app);
    let e = write(&app, &old_tree()).unwrap_err();
    assert!(e.message.contains("has no .kernelgen-owned") && e.message.contains("manifest.json does not make"), "{e}");
    assert_eq!(on_disk(&app), before);
    assert_eq!(beside(&app), Vec::<String>::new(), "refused before taking the lock");
    // check says so, without listing the app's files as orphans.
    let diffs = check(&app, &old_tree()).unwrap();
    assert_eq!(diffs[0], Difference::NotOwned);
    assert!(!diffs.iter().any(|d| matches!(d, Difference::Foreign(_) | Difference::Orphaned(_))), "{diffs:?}");
    // An empty directory is adopted.
    let empty = root.path().join("empty");
    fs::create_dir(&empty).unwrap();
    write(&empty, &old_tree()).unwrap();
    assert_eq!(on_disk(&empty), with_marker(&old_tree()));
}

#[test]
fn files_kernelgen_did_not_write_are_never_deleted() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    fs::write(out.join("metal/notes.txt"), "mine").unwrap();
    let e = write(&out, &new_tree()).unwrap_err();
    assert!(e.message.contains("kernelgen did not write") && e.message.contains("metal/notes.txt"), "{e}");
    assert_eq!(fs::read_to_string(out.join("metal/notes.txt")).unwrap(), "mine");
    assert_eq!(fs::read_to_string(out.join("manifest.json")).unwrap(), "{1}\n", "the old tree is untouched");
    assert!(check(&out, &old_tree()).unwrap().contains(&Difference::Foreign("metal/notes.txt".into())));
    // A tampered marker is no way around it: it is part of the tree.
    let diffs = check(&out, &new_tree()).unwrap();
    assert!(diffs.contains(&Difference::Stale(OWNED.into())), "{diffs:?}");
}

#[test]
fn symbolic_links_inside_the_output_are_refused_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    let elsewhere = root.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    write(&out, &old_tree()).unwrap();
    fs::remove_dir_all(out.join("metal/a")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("metal/a")).unwrap();
    let e = write(&out, &new_tree()).unwrap_err();
    assert!(e.message.contains("metal/a is a symbolic link"), "{e}");
    assert!(fs::symlink_metadata(out.join("metal/a")).unwrap().file_type().is_symlink(), "the link is left");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through it");
    assert!(check(&out, &old_tree()).unwrap().contains(&Difference::Link("metal/a".into())));
    // The output directory itself may not be a link either.
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let e = write(&link, &old_tree()).unwrap_err();
    assert!(e.message.contains("is a symbolic link"), "{e}");
    assert!(check(&link, &old_tree()).is_err());
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn the_root_directory_is_refused_at_once() {
    let start = std::time::Instant::now();
    let e = write(Path::new("/"), &old_tree()).unwrap_err();
    assert!(e.message.contains("root directory"), "{e}");
    let d = check(Path::new("/"), &old_tree()).unwrap();
    assert_eq!(d[0], Difference::NotOwned);
    assert!(start.elapsed() < std::time::Duration::from_secs(2), "nothing walked");
}

#[test]
fn check_reports_empty_folders_unreadable_files_and_special_files() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    fs::create_dir_all(out.join("metal/nothing/here")).unwrap();
    let fifo = std::ffi::CString::new(out.join("rust/pipe").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    fail::plan(Some(2)); // the reads of check: marker, then each file in order
    let diffs = check(&out, &old_tree()).unwrap();
    assert!(fail::hit());
    fail::plan(None);
    assert!(diffs.contains(&Difference::EmptyDir("metal/nothing/here".into())), "{diffs:?}");
    assert!(diffs.contains(&Difference::Special("rust/pipe".into())), "{diffs:?}");
    assert!(diffs.iter().any(|d| matches!(d, Difference::Unreadable(_, why) if why.contains("injected"))), "{diffs:?}");
    // generate refuses the FIFO, and removes the empty folders once it is gone.
    assert!(write(&out, &old_tree()).unwrap_err().message.contains("rust/pipe is not a regular file"));
    fs::remove_file(out.join("rust/pipe")).unwrap();
    let w = write(&out, &old_tree()).unwrap();
    assert_eq!(w.changes, vec![Difference::EmptyDir("metal/nothing/here".into())]);
    assert_eq!(on_disk(&out), with_marker(&old_tree()));
    assert_eq!(check(&out, &old_tree()).unwrap(), vec![]);
}

/// An I/O error at any step leaves the old tree exactly as it was, or (past
/// the switch) the new tree complete; what it leaves beside the output, the
/// next run removes.
#[test]
fn an_io_error_at_any_step_leaves_the_old_or_the_new_tree() {
    let mut step = 0;
    let mut after_switch = 0;
    loop {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("gen");
        write(&out, &old_tree()).unwrap();
        fail::plan(Some(step));
        let result = write(&out, &new_tree());
        let hit = fail::hit();
        fail::plan(None);
        if !hit {
            assert!(result.is_ok());
            assert!(step > 10, "only {step} steps");
            break;
        }
        match result {
            Err(e) => {
                assert!(e.message.contains("injected"), "step {step}: {e}");
                assert_eq!(on_disk(&out), with_marker(&old_tree()), "step {step}: {e}");
                assert_eq!(beside(&out), Vec::<String>::new(), "step {step}: the new tree is cleaned up");
            }
            Ok(w) => {
                // Past the switch (a failed clean-up is a warning), or a read
                // of an old file that failed and counted as stale.
                after_switch += usize::from(!w.warnings.is_empty());
                assert_eq!(on_disk(&out), with_marker(&new_tree()), "step {step}");
                let w = write(&out, &new_tree()).unwrap();
                assert!(w.changes.is_empty() && w.warnings.is_empty(), "step {step}: {w:?}");
                assert_eq!(beside(&out), Vec::<String>::new(), "step {step}: the next run cleans up");
            }
        }
        step += 1;
    }
    assert!(after_switch > 0);
}

#[test]
fn concurrent_writers_serialize() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    let trees = [old_tree(), new_tree()];
    std::thread::scope(|s| {
        for i in 0..8 {
            let (out, t) = (&out, &trees[i % 2]);
            s.spawn(move || {
                for _ in 0..10 {
                    write(out, t).unwrap();
                }
            });
        }
    });
    let last = on_disk(&out);
    assert!(last == with_marker(&old_tree()) || last == with_marker(&new_tree()));
    assert_eq!(beside(&out), Vec::<String>::new());
}

#[test]
fn a_path_outside_the_tree_is_refused_before_anything_is_made() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    let mut bad = new_tree();
    bad.insert("metal/a/../../../x.metal".into(), "// x\n".into());
    let e = write(&out, &bad).unwrap_err();
    assert!(e.message.contains("not a relative path inside the output directory"), "{e}");
    assert_eq!(on_disk(&out), with_marker(&old_tree()));
    // no temporary tree beside the output (its marker would list the path, and not read)
    assert_eq!(beside(&out), Vec::<String>::new());
}

#[test]
fn a_leftover_the_next_run_cannot_remove_says_so() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    // what a killed run leaves: a temporary tree with its marker, and a link someone added
    let left = root.path().join(".gen.kernelgen-tmp-1-2-3");
    fs::create_dir_all(left.join("metal")).unwrap();
    fs::write(left.join(OWNED), "kernelgen-owned 1\nmetal/k.metal\n").unwrap();
    fs::write(left.join("metal/k.metal"), "// k\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", left.join("metal/link")).unwrap();
    let w = write(&out, &new_tree()).unwrap();
    assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
    assert!(w.warnings[0].contains("holds what kernelgen did not write there; remove it by hand"), "{:?}", w.warnings);
    assert!(fs::symlink_metadata(left.join("metal/link")).is_ok(), "the link is left alone");
    // a tree holding anything kernelgen did not write proves nothing: all of it stays
    assert!(left.join("metal/k.metal").exists() && left.join(OWNED).exists());
    // once the link is gone, the next run removes the rest
    fs::remove_file(left.join("metal/link")).unwrap();
    let w = write(&out, &new_tree()).unwrap();
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    assert_eq!(beside(&out), Vec::<String>::new());
}

/// A leftover temporary tree whose marker was cut short (an interrupted run: the
/// marker is written first, so nothing else is in it) is removed by the next run, without
/// a warning: the empty `.kernelgen-owned` an older kernelgen left, and the partial
/// marker of this one.
#[test]
fn a_leftover_with_a_partial_marker_is_removed() {
    for (name, text) in [(OWNED, ""), (OWNED, "kernelgen-own"), (owned::PARTIAL, ""), (owned::PARTIAL, "kernelgen-owned 1\n# This dir")] {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("gen");
        write(&out, &old_tree()).unwrap();
        let left = root.path().join(".gen.kernelgen-tmp-1-2-3");
        fs::create_dir(&left).unwrap();
        fs::write(left.join(name), text).unwrap();
        let w = write(&out, &new_tree()).unwrap();
        assert!(w.warnings.is_empty(), "{name} {text:?}: {:?}", w.warnings);
        assert_eq!(beside(&out), Vec::<String>::new(), "{name} {text:?}");
        assert_eq!(on_disk(&out), with_marker(&new_tree()));
    }
}

/// A folder named like a temporary tree proves nothing by its name: one whose marker is
/// not the start of a marker, or that holds anything beside its marker, is left alone.
#[test]
fn a_leftover_that_is_not_provably_kernelgens_is_left_alone() {
    for files in [
        &[(owned::PARTIAL, "#!/bin/sh\n")][..],
        &[(OWNED, ""), ("metal/k.metal", "// k\n")],
        &[(owned::PARTIAL, ""), ("notes.txt", "mine")],
        &[("notes.txt", "mine")],
    ] {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("gen");
        write(&out, &old_tree()).unwrap();
        let left = root.path().join(".gen.kernelgen-tmp-x");
        for (rel, text) in files {
            fs::create_dir_all(left.join(rel).parent().unwrap()).unwrap();
            fs::write(left.join(rel), text).unwrap();
        }
        let w = write(&out, &new_tree()).unwrap();
        assert_eq!(w.warnings.len(), 1, "{files:?}: {:?}", w.warnings);
        assert!(w.warnings[0].contains("remove it by hand"), "{:?}", w.warnings);
        for (rel, text) in files {
            assert_eq!(fs::read_to_string(left.join(rel)).unwrap(), *text, "{files:?}: {rel} was touched");
        }
    }
}

/// A forged leftover whose marker lists a path through a symbolic link: the file the
/// link reaches, outside the leftover, is never deleted (nor anything in the leftover).
#[test]
fn a_forged_leftover_never_deletes_through_a_link() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("gen");
    write(&out, &old_tree()).unwrap();
    let victim = root.path().join("home");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("precious"), "keep").unwrap();
    let left = root.path().join(".gen.kernelgen-tmp-evil");
    fs::create_dir(&left).unwrap();
    std::os::unix::fs::symlink(&victim, left.join("sub")).unwrap();
    fs::write(left.join(OWNED), "kernelgen-owned 1\nsub/precious\n").unwrap();
    let w = write(&out, &new_tree()).unwrap();
    assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "keep", "deleted through the link");
    assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
    assert!(fs::symlink_metadata(left.join(OWNED)).is_ok(), "the forged leftover is left as it is");
}
