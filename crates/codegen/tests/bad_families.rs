//! The message for every family file in the bad-family corpus (one folder per
//! case: a family file and, but for one case, its template), one snapshot
//! each: file, line, column and field for every problem, all at once.

use kernelgen_codegen::read_families;
use std::path::PathBuf;

#[test]
fn bad_family_files_are_reported() {
    insta::glob!("bad_families/*/rowsum.toml", |path| {
        let case = path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        let dir = PathBuf::from(format!("tests/bad_families/{case}"));
        match read_families(&[dir]) {
            Ok(_) => panic!("{case}: the family file was accepted"),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(&format!("tests/bad_families/{case}/rowsum.")), "{case}: names no file:\n{text}");
                insta::assert_snapshot!(text);
            }
        }
    });
}

/// The corpus's base family (every case is one edit of it) is accepted.
#[test]
fn the_base_family_reads() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("tests/bad_families/no_template/rowsum.toml").unwrap();
    std::fs::write(dir.path().join("rowsum.toml"), text).unwrap();
    std::fs::write(dir.path().join("rowsum.metal.tera"), "  // {{ kernel }}\n  y[0] = x[0];\n").unwrap();
    let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
    assert!(families.find("rowsum").is_some());
}
