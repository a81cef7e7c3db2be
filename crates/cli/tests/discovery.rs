//! Where the specs and family files of a run are found: `families/` beside the spec
//! folder as given (a linked folder too), the folders searched named when a family is
//! unknown, and family files met in a spec folder.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn kernelgen(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir).args(args).output().expect("kernelgen runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// The family `rowsum` (a family file and its template) in `dir/rel`.
fn rowsum_family(dir: &Path, rel: &str) {
    let family = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../codegen/tests/bad_families/no_template/rowsum.toml")).unwrap();
    write(dir, &format!("{rel}/rowsum.toml"), &family);
    write(dir, &format!("{rel}/rowsum.metal.tera"), "  // {{ kernel }}\n  y[0] = x[0];\n");
}

const ROWS: &str = "family = \"rowsum\"\n[geometry.g]\nN = 64\n";

#[cfg(unix)]
#[test]
fn a_linked_spec_folder_finds_the_families_beside_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    rowsum_family(&project, "families");
    write(dir.path(), "elsewhere/specs/rows.toml", ROWS);
    std::os::unix::fs::symlink(dir.path().join("elsewhere/specs"), project.join("specs")).unwrap();
    let o = kernelgen(&project, &["list", "--specs", "specs"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("g_rowsum_f32"), "{}", text(&o));
}

#[test]
fn an_unknown_family_names_the_folders_searched() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernels/specs/rows.toml", ROWS);
    fs::create_dir_all(dir.path().join("mine")).unwrap();
    let o = kernelgen(dir.path(), &["list", "--specs", "kernels/specs", "--families", "mine"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("unknown family \"rowsum\""), "{t}");
    assert!(t.contains("family files were looked for in mine and kernels/families (not there)"), "{t}");
}

/// `kernels/families/` inside the folder given to `--specs`: each family file is one error
/// saying what it is and where family files go, not a list of unknown spec keys.
#[test]
fn a_family_file_in_a_spec_folder_is_one_error_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernels/rows.toml", ROWS);
    rowsum_family(dir.path(), "kernels/families");
    let o = kernelgen(dir.path(), &["list", "--specs", "kernels"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(!t.contains("unknown key"), "{t}");
    assert_eq!(t.matches("--> kernels/families/rowsum.toml").count(), 1, "one problem in the family file:\n{t}");
    assert!(t.contains("error: (file): this is a family file (it has `summary`), not a spec\n  --> kernels/families/rowsum.toml:1:1"), "{t}");
    assert!(
        t.contains("help: move family files out of the spec folder: into `families/` beside it, or into a folder named with --families (`Config::families` in a build script); family files were looked for in families (not there)"),
        "{t}"
    );
}

/// The same layout with its family folder named: the folder holds families, not specs.
#[test]
fn a_family_folder_inside_the_spec_folder_is_read_as_families_when_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernels/rows.toml", ROWS);
    rowsum_family(dir.path(), "kernels/families");
    let o = kernelgen(dir.path(), &["list", "--specs", "kernels", "--families", "kernels/families"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("g_rowsum_f32") && text(&o).contains("1 kernels"), "{}", text(&o));
}
