//! Snapshots of what the generator writes for a small fixture spec, and of
//! the message for every spec in the bad-spec corpus (one snapshot each).

use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{generate, Error};

fn source(display: &str, text: String) -> SpecSource {
    let stem = std::path::Path::new(display).file_stem().unwrap().to_string_lossy().into_owned();
    SpecSource { display: display.to_string(), origin: format!("specs/{stem}.toml"), stem, text }
}

/// Every spec under `tests/fixtures/` (one small instance of each family),
/// generated on its own: the list of files, then each file.
#[test]
fn fixture_spec_renders() {
    let mut fixtures: Vec<std::path::PathBuf> = std::fs::read_dir("tests/fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    fixtures.sort();
    assert!(!fixtures.is_empty());
    for path in fixtures {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let generated = generate(vec![source(&format!("tests/fixtures/{stem}.toml"), text)]).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = generated.files.keys().map(String::as_str).collect();
        insta::assert_debug_snapshot!(format!("{stem}_files"), names);
        for (file, text) in &generated.files {
            insta::assert_snapshot!(format!("{stem}__{}", file.replace('/', "__")), text);
        }
    }
}

#[test]
fn bad_specs_are_reported() {
    insta::glob!("bad_specs/*.toml", |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        match generate(vec![source(&format!("bad_specs/{name}"), text)]) {
            Ok(_) => panic!("bad_specs/{name} generated without an error"),
            Err(Error::Spec(d)) => {
                assert!(!d.is_empty());
                insta::assert_snapshot!(d.render());
            }
            Err(other) => panic!("bad_specs/{name}: expected a spec error, got {other}"),
        }
    });
}
