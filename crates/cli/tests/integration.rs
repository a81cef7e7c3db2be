//! The command's tests: every file in this folder is a module of one test binary (`--test
//! integration`), so that they link once and their tests run side by side on every core; a new
//! file is declared here (the last test checks that none is missing, in every crate laid out so).

mod catalog;
mod cli;
mod cost;
mod depending;
mod diff;
mod discovery;
mod docs;
mod emu_untrusted;
mod fuzz;
mod kill;
mod lint;
mod safety;
mod tutorial;
mod verify_families;
mod verify_memory;
mod verify_random;
mod workers;

/// Every crate whose tests are one binary (a `tests/integration.rs`: the CLI's, the
/// emulator's, the Metal check's, the generator's) declares each `.rs` file beside it as a
/// module there: cargo no longer finds test files by itself (`autotests = false`).
#[test]
fn every_test_file_is_a_module() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut binaries = Vec::new();
    for krate in std::fs::read_dir(&crates).expect("the crates folder") {
        let tests = krate.expect("an entry").path().join("tests");
        let Ok(declared) = std::fs::read_to_string(tests.join("integration.rs")) else { continue };
        for entry in std::fs::read_dir(&tests).expect("a tests folder") {
            let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "integration") {
                let at = tests.display();
                assert!(declared.contains(&format!("\nmod {stem};\n")), "{at}/{name} is not declared in {at}/integration.rs");
            }
        }
        binaries.push(tests);
    }
    assert!(binaries.contains(&crates.join("cli/tests")), "this crate's own tests were not found under {}", crates.display());
}

/// Every package the build profile (`.cargo/config.toml`) names exists: cargo ignores a
/// profile override for an unknown package there without a word, so a renamed crate would
/// silently lose its `opt-level`.
#[test]
fn every_package_the_build_profile_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).expect(".cargo/config.toml");
    let named: Vec<&str> = config
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[profile.dev.package.")?.strip_suffix(']'))
        .map(|n| n.trim_matches('"'))
        .filter(|n| *n != "*")
        .collect();
    assert!(named.contains(&"kernelgen-emu"), "no package overrides found in .cargo/config.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Offline, and for this machine's platform only: the build downloaded its crates, not
    // those of other platforms (Windows' among them), which a fresh machine does not have.
    let rustc = std::process::Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())).arg("-vV").output().expect("rustc -vV");
    let host = String::from_utf8_lossy(&rustc.stdout).lines().find_map(|l| l.strip_prefix("host: ").map(str::to_owned)).expect("rustc -vV names its host");
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--offline", "--format-version", "1", "--filter-platform", &host, "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages: Vec<&str> = meta["packages"].as_array().expect("packages").iter().filter_map(|p| p["name"].as_str()).collect();
    for name in named {
        assert!(packages.contains(&name), ".cargo/config.toml: [profile.dev.package.{name}] names no package of the build");
    }
}
