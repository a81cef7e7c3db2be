//! What README.md's "Depending on it" tells a user's crate, checked on the example crates (crates
//! of a user's, outside kernelgen's workspace): the build profile they need, and how to build the
//! emulator's documentation from them.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The packages kernelgen's own build profile (`.cargo/config.toml`) optimizes, of kernelgen's.
fn optimized_here() -> Vec<String> {
    let config = std::fs::read_to_string(root().join(".cargo/config.toml")).unwrap();
    let mut names = Vec::new();
    let mut lines = config.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.trim().strip_prefix("[profile.dev.package.").and_then(|l| l.strip_suffix(']')) else { continue };
        if name.starts_with("kernelgen-") && lines.next().is_some_and(|l| l.trim() == "opt-level = 3") {
            names.push(name.to_string());
        }
    }
    names
}

/// Every package of a crate's build on this machine. Not `--offline`: on a fresh cargo home the
/// example's own dependencies may not be downloaded yet (make test builds the examples later).
fn packages(manifest: &std::path::Path) -> Vec<String> {
    let rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())).arg("-vV").output().unwrap();
    let host = String::from_utf8_lossy(&rustc.stdout).lines().find_map(|l| l.strip_prefix("host: ").map(str::to_owned)).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo).args(["metadata", "--locked", "--format-version", "1", "--filter-platform", &host, "--manifest-path"]).arg(manifest).output().unwrap();
    assert!(out.status.success(), "cargo metadata {}: {}", manifest.display(), String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect()
}

/// kernelgen's configuration optimizes the emulator, its Metal check and the references, but it
/// does not reach a user's crate: each example crate optimizes those it builds in its own
/// manifest, as README.md says a user's crate must (and README.md's manifest shows the lines).
#[test]
fn the_example_crates_optimize_what_kernelgen_optimizes() {
    let optimized = optimized_here();
    assert!(optimized.contains(&"kernelgen-emu".to_string()), "{optimized:?}");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for name in ["kernelgen-emu", "kernelgen-msl"] {
        assert!(readme.contains(&format!("[profile.dev.package.{name}]\nopt-level = 3\n")), "README.md does not show the profile of {name}");
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let built = packages(&manifest);
        for name in optimized.iter().filter(|n| built.contains(n)) {
            assert!(text.contains(&format!("[profile.dev.package.{name}]\nopt-level = 3\n")), "{}: {name} is built at opt-level 0 (add [profile.dev.package.{name}] opt-level = 3)", manifest.display());
            checked += 1;
        }
    }
    assert!(checked >= 4, "the example crates build the emulator: {checked} profiles checked");
}

/// README.md's command for the emulator's documentation works from a crate where the emulator is
/// a dev-dependency (plain `cargo doc -p kernelgen-emu` panics there: rust-lang/cargo#11105).
#[test]
#[ignore = "slow (documents the emulator and checks its dependencies): `make test-slow`, in .ci/run"]
fn the_readme_documents_the_emulator_from_a_users_crate() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let command = readme.split('`').find(|s| s.starts_with("cargo doc -p kernelgen-emu")).expect("README.md gives a `cargo doc -p kernelgen-emu ...` command");
    let args: Vec<&str> = command.split_whitespace().skip(1).filter(|a| *a != "--open").collect();
    // <target>/debug/kernelgen: the documentation builds into the same target directory
    let target = PathBuf::from(env!("CARGO_BIN_EXE_kernelgen")).parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(&args)
        .args(["--no-deps", "--offline", "--manifest-path"])
        .arg(root().join("examples/downstream/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(target.join("doc/kernelgen_emu/index.html").exists());
}
