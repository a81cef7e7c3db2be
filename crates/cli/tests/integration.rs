//! The command's tests: every file in this folder is a module of one test binary (`--test
//! integration`), so that they link once and their tests run side by side on every core; a new
//! file is declared here (the last test checks that none is missing).

mod catalog;
mod cli;
mod cost;
mod diff;
mod fuzz;
mod kill;
mod lint;
mod safety;
mod tutorial;
mod verify_families;
mod verify_memory;
mod verify_random;
mod workers;

/// Every `.rs` file beside this one is a module above (cargo no longer finds test files by
/// itself: `autotests = false`).
#[test]
fn every_test_file_is_a_module() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let declared = include_str!("integration.rs");
    for entry in std::fs::read_dir(&here).expect("the tests folder") {
        let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "integration") {
            assert!(declared.contains(&format!("\nmod {stem};\n")), "tests/{name} is not declared in tests/integration.rs");
        }
    }
}
