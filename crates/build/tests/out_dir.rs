//! `Config::out_dir`: the generated `kernels.rs` includes the modules written beside it,
//! wherever that is.

use super::{root, write, TINY};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Every `include!("...")` and `include_str!("...")` path in `text`.
fn included(text: &str, mac: &str) -> Vec<String> {
    let open = format!("{mac}!(\"");
    text.match_indices(&open).map(|(at, _)| text[at + open.len()..].split('"').next().unwrap().to_string()).collect()
}

#[test]
fn kernels_rs_includes_the_files_written_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kernels/tiny.toml", TINY);
    let out = dir.path().join("custom/place");
    kernelgen_build::Config::new().specs(dir.path().join("kernels")).out_dir(&out).compile().unwrap();
    let kernels = fs::read_to_string(out.join("kernels.rs")).unwrap();
    assert!(!kernels.contains("OUT_DIR"), "kernels.rs names OUT_DIR, not the folder it was written to:\n{kernels}");
    let modules = included(&kernels, "include");
    assert_eq!(modules, ["rust/tiny.rs"], "{kernels}");
    // Each path is relative to the file holding the macro, as rustc resolves it.
    for module in &modules {
        let file = out.join(module);
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!text.contains("//!"), "{module}: include! takes no inner doc comments");
        let sources = included(&text, "include_str");
        assert!(!sources.is_empty(), "{module}");
        for metal in sources {
            assert!(file.parent().unwrap().join(&metal).is_file(), "{module} includes {metal}, which is not there");
        }
    }
    assert!(!dir.path().join("kernelgen").exists() && !out.join("rust/mod.rs").exists());
}

/// A crate whose build script writes to a folder of its choosing compiles the
/// launchers from there (the fast test above checks the paths; this one, rustc).
#[test]
#[ignore = "slow (builds a crate with kernelgen-build): `make test-slow`"]
fn a_crate_builds_with_a_custom_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path();
    let root = root();
    write(
        krate,
        "Cargo.toml",
        &format!(
            "[package]\nname = \"custom-out-dir\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[workspace]\n\n\
             [dependencies]\nkernelgen = {{ path = {:?}, default-features = false, features = [\"macros\"] }}\n\n\
             [build-dependencies]\nkernelgen-build = {{ path = {:?} }}\n",
            root.display().to_string(),
            root.join("crates/build").display().to_string(),
        ),
    );
    write(krate, "kernels/tiny.toml", TINY);
    write(
        krate,
        "build.rs",
        "fn main() {\n    let out = std::path::Path::new(&std::env::var_os(\"OUT_DIR\").unwrap()).join(\"elsewhere\");\n    \
         if let Err(e) = kernelgen_build::Config::new().specs(\"kernels\").out_dir(out).compile() {\n        \
         eprintln!(\"{e}\");\n        std::process::exit(1);\n    }\n}\n",
    );
    write(
        krate,
        "src/lib.rs",
        "pub mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/elsewhere/kernels.rs\"));\n}\n\n\
         pub fn kernel_count() -> usize {\n    kernels::CATALOG.len()\n}\n",
    );
    // The example crate's lock resolves the same versions offline.
    fs::copy(root.join("examples/softcap_argmax/Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo).args(["build", "--offline", "--quiet"]).current_dir(krate).env("CARGO_TARGET_DIR", target_dir()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// This build's target directory (`<target>/debug/deps/integration-*`), shared so the
/// dependencies are not built again.
fn target_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).map(Path::to_path_buf).unwrap()
}
