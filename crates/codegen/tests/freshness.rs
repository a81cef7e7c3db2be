//! `generated/` must be exactly what the bundled specs and templates produce
//! (rust-analyzer's pattern): regenerate in memory and compare. Locally a
//! stale tree is rewritten and the test fails once (run it again and it
//! passes); on CI (`CI` set) it only fails, naming the command to run.

use kernelgen_codegen::{emit, generate, read_specs};
use std::path::PathBuf;

#[test]
fn generated_tree_is_fresh() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sources = read_specs(&[root.join("specs")]).expect("specs/ is readable");
    let generated = generate(sources).unwrap_or_else(|e| panic!("the bundled specs must generate:\n{e}"));
    let out = root.join("generated");
    let diffs = emit::check(&out, &generated.files).expect("generated/ is readable");
    if diffs.is_empty() {
        return;
    }
    let list: Vec<String> = diffs.iter().map(ToString::to_string).collect();
    if std::env::var_os("CI").is_some() {
        panic!("generated/ is stale:\n{}\nrun `make generate` and commit the result", list.join("\n"));
    }
    emit::write(&out, &generated.files).expect("generated/ is writable");
    panic!("generated/ was stale and has been updated; review and commit it, then run the tests again:\n{}", list.join("\n"));
}

/// A kernel's `.cu` is part of the tree like its `.metal`: listed in the ownership marker, and a
/// stale, missing or orphaned `.cu` is reported by the freshness check.
#[test]
fn cuda_files_are_owned_and_fresh_checked() {
    use kernelgen_codegen::{read_families, spec::SpecSource, Config, Input};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("generated");
    let input = || Input {
        specs: vec![SpecSource {
            display: "tests/fixtures/rowscale.toml".into(),
            origin: "specs/rowscale.toml".into(),
            stem: "rowscale".into(),
            text: std::fs::read_to_string("tests/fixtures/rowscale.toml").unwrap(),
        }],
        families: read_families(&["tests/fixtures/families".into()]).unwrap_or_else(|e| panic!("{e}")),
    };
    let generated = Config::new().generate(input()).unwrap_or_else(|e| panic!("{e}"));
    emit::write(&out, &generated.files).unwrap();
    let cu = "cuda/rowscale/fixture_rowscale_f32.cu";
    let marker = std::fs::read_to_string(out.join(".kernelgen-owned")).unwrap();
    assert!(marker.lines().any(|l| l == cu), "{marker}");
    assert!(emit::check(&out, &generated.files).unwrap().is_empty());
    std::fs::write(out.join(cu), "// edited\n").unwrap();
    assert_eq!(emit::check(&out, &generated.files).unwrap(), [emit::Difference::Stale(cu.into())]);
    std::fs::remove_file(out.join(cu)).unwrap();
    assert_eq!(emit::check(&out, &generated.files).unwrap(), [emit::Difference::Missing(cu.into())]);
    // a family without its CUDA template any more: the `.cu` files are orphans
    emit::write(&out, &generated.files).unwrap();
    let mut metal_only = generated.files.clone();
    metal_only.retain(|p, _| !p.starts_with("cuda/"));
    let diffs = emit::check(&out, &metal_only).unwrap();
    assert!(diffs.contains(&emit::Difference::Orphaned(cu.into())), "{diffs:?}");
}
