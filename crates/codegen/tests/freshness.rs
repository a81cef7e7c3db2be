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
