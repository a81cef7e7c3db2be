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

/// `[verify]`'s two reference forms and two input forms read into their own variants: any
/// `rust:<identifier>` (kernelgen-verify knows the names), a Python file and function, a range
/// and a set of values.
#[test]
fn verify_sections_read_references_and_value_sets() {
    use kernelgen_codegen::family::{InputValues, ReferenceDef};
    let base = std::fs::read_to_string("tests/bad_families/no_template/rowsum.toml").unwrap();
    let read = |verify: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rowsum.toml"), format!("{base}\n[verify]\n{verify}\n")).unwrap();
        std::fs::write(dir.path().join("rowsum.metal.tera"), "  // {{ kernel }}\n  y[0] = x[0];\n").unwrap();
        let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{verify}: {e}"));
        families.find("rowsum").expect("read").verify.clone()
    };
    let v = read("reference = \"rust:my_model2\"\ninputs = { x = { values = [0, 1.5, -2] } }");
    assert_eq!(v.reference.map(|r| r.value), Some(ReferenceDef::Rust("my_model2".into())));
    assert_eq!(v.inputs, vec![("x".to_string(), InputValues::Set(vec![0.0, 1.5, -2.0]))]);
    let v = read("reference = \"refs/rows.py:reference\"\ninputs = { x = { min = -4, max = 4.5 } }");
    assert_eq!(v.reference.map(|r| r.value), Some(ReferenceDef::Python { file: "refs/rows.py".into(), function: "reference".into() }));
    assert_eq!(v.inputs, vec![("x".to_string(), InputValues::Range { min: -4.0, max: 4.5 })]);
}

/// Values a family computes for a geometry that no kernel can have are errors naming the
/// family file's line and the geometry, never clamped to a legal value (a threadgroup of
/// -32 became 0) nor a panic (`N * N` threads overflowed the product of the extents).
#[test]
fn planned_values_out_of_range_are_errors() {
    let base = std::fs::read_to_string("tests/bad_families/no_template/rowsum.toml").unwrap();
    let generated = |family: &str, n: u64| -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rowsum.toml"), family).unwrap();
        std::fs::write(dir.path().join("rowsum.metal.tera"), "  // {{ kernel }}\n  y[0] = x[0];\n").unwrap();
        let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{family}: {e}"));
        let spec = kernelgen_codegen::spec::SpecSource {
            display: "specs/rows.toml".into(),
            origin: "specs/rows.toml".into(),
            stem: "rows".into(),
            text: format!("family = \"rowsum\"\n[geometry.g]\nN = {n}\n"),
        };
        match kernelgen_codegen::Config::new().generate(kernelgen_codegen::Input { specs: vec![spec], families }) {
            Ok(_) => panic!("{family}: generated"),
            Err(e) => e.to_string(),
        }
    };
    // extents of 32 bits each: their product is counted in full, not overflowed
    let text = generated(&base.replace("threadgroup = [\"THREADS\", 1, 1]", "threadgroup = [\"N * 1048575\", \"N * 1048575\", \"N * 1048575\"]"), 4096);
    assert!(text.contains("needs 79227935840889332563968000000 threads per threadgroup, above the limit of 1024"), "{text}");
    let cases = [
        ("threadgroup = [\"THREADS\", 1, 1]", "threadgroup = [-32, 1, 1]", 4, "threadgroup (", "this is -32, and must be 1 to 4294967295"),
        ("threadgroup = [\"THREADS\", 1, 1]", "threadgroup = [0, 1, 1]", 4, "threadgroup (", "this is 0, and must be 1 to 4294967295"),
        ("threadgroup = [\"THREADS\", 1, 1]", "threadgroup = [\"N * 1048576\", \"N * 1048576\", 1]", 4096, "threadgroup (", "this is 4294967296, and must be 1 to 4294967295"),
        ("doc = \"one threadgroup per row\"", "threadgroup_memory = \"0 - N\"", 8, "threadgroup_memory (", "this is -8, and must be at least 0"),
    ];
    for (from, to, n, what, message) in cases {
        assert!(base.contains(from), "{from}");
        let text = generated(&base.replace(from, to), n);
        let line = base.replace(from, to).lines().position(|l| l.starts_with(to.split(" =").next().unwrap())).unwrap() + 1;
        assert!(text.contains(what) && text.contains(&format!("rowsum.toml:{line}:")), "{to}: {text}");
        assert!(text.contains(message) && text.contains("specs/rows.toml:2:"), "{to}: {text}");
    }    // an axis value that names no dtype, used as one: the dtypes are listed
    let text = generated(&base.replace("values = [\"f32\", \"f16\"]\ndefault = [\"f32\"]", "values = [\"f32\", \"uint32\"]\ndefault = [\"uint32\"]"), 8);
    assert!(text.contains("`uint32` is not a dtype (the dtypes are `f32`, `f16`, `bf16`, `i8`, `u8`, `u16`, `i32`, `u32`, `bool`)"), "{text}");
}

/// A template that fails to render, or writes what a kernel may not hold, is reported at its own
/// file, line and column (not at a line of what it wrote), for the kernel it was rendering; an
/// unknown variable is named, with the nearest variable the template receives.
#[test]
fn template_errors_point_into_the_template() {
    let base = std::fs::read_to_string("tests/bad_families/no_template/rowsum.toml").unwrap();
    let rendered = |template: &str| -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rowsum.toml"), &base).unwrap();
        std::fs::write(dir.path().join("rowsum.metal.tera"), template).unwrap();
        let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
        let spec = kernelgen_codegen::spec::SpecSource {
            display: "specs/rows.toml".into(),
            origin: "specs/rows.toml".into(),
            stem: "rows".into(),
            text: "family = \"rowsum\"\n[geometry.g]\nN = 64\n".into(),
        };
        let error = kernelgen_codegen::Config::new().generate(kernelgen_codegen::Input { specs: vec![spec], families }).err().expect("the template fails");
        error.to_string().replace(&dir.path().display().to_string(), "<dir>")
    };
    // ten lines of template text before the problem, which the output folds to one
    let lead = "  // {{ kernel }}\n\n\n\n\n\n\n\n\n  y[0] = x[0];\n";
    for (problem, at, want) in [
        ("  y[0] = x[0] * {{ THREADZ }};\n", "11:20", "rendering kernel `g_rowsum_f32`: `THREADZ` is not defined; did you mean `THREADS`?"),
        ("{% for i in range(end=2) %}\n  y[{{ i }}] = 0.5;\n{% endfor %}\n", "12:16", "rendering kernel `g_rowsum_f32`: float literal `0.5` has no `f` suffix: write `0.5f`"),
        ("  y[0] = {{ N / 2.5 }};\n", "11:10", "float literal `25.6` has no `f` suffix"),
        ("  {% if N > 8 %}{{ throw(message=\"N is too large\") }}{% endif %}\n", "11:17", "Function call 'throw' failed: N is too large"),
        ("  y[0] = {{ zzz }};\n", "11:13", "`zzz` is not defined"),
    ] {
        let text = rendered(&format!("{lead}{problem}"));
        assert!(text.contains(want) && text.contains(&format!("<dir>/rowsum.metal.tera:{at}\n")), "{problem}: {text}");
    }
    // with no near name, the names it receives
    let text = rendered(&format!("{lead}  y[0] = {{{{ zzz }}}};\n"));
    assert!(text.contains("help: the template receives `N`, `T`, `THREADS`, `dtype`, `kernel`, `section`"), "{text}");
}
