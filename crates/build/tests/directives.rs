//! What a build script using kernelgen-build prints: only `cargo:` directives kernelgen
//! means, whatever the names of the files in the spec and family folders. A name with a
//! newline once printed `cargo:rustc-link-arg=...` of its own, which cargo obeyed.

use super::{write, TINY};
use std::path::Path;
use std::process::Command;

const SPECS: &str = "KERNELGEN_BUILD_TEST_SPECS";
const FAMILIES: &str = "KERNELGEN_BUILD_TEST_FAMILIES";

/// Not a test on its own: the child process of [`compile_in_child`] (it does nothing
/// unless that sets its variables), printing to stdout what a build script would.
#[test]
fn child() {
    let Some(specs) = std::env::var_os(SPECS) else { return };
    let out = Path::new(&specs).parent().unwrap().join("out");
    let config = kernelgen_build::Config::new().specs(&specs).out_dir(out);
    let config = std::env::var_os(FAMILIES).into_iter().fold(config, |c, f| c.families(f));
    match config.compile() {
        Ok(()) => println!("compile: ok"),
        Err(e) => eprintln!("{e}"),
    }
}

/// `compile()` run in a child process, as a build script would: its stdout (what cargo
/// reads as directives) and stderr.
fn compile_in_child(specs: &Path, families: Option<&Path>) -> (String, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "directives::child", "--nocapture", "--test-threads=1", "--quiet"]).env(SPECS, specs);
    if let Some(f) = families {
        c.env(FAMILIES, f);
    }
    let o = c.output().unwrap();
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The `cargo:` lines of `stdout`.
fn directives(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("cargo:")).collect()
}

#[test]
fn a_file_name_cannot_inject_a_directive() {
    for (i, name) in ["x\ncargo:rustc-link-arg=-Wl,--version\n.toml", "sub\rdir/x.toml", "a\u{1b}[2Jb.toml", "tab\t.toml"].iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let specs = dir.path().join("kernels");
        write(&specs, "tiny.toml", TINY);
        write(&specs, name, TINY);
        let (stdout, stderr) = compile_in_child(&specs, None);
        assert_eq!(directives(&stdout), Vec::<&str>::new(), "{i}: {name:?}: nothing may be printed before the refusal:\n{stdout}");
        let escaped = name.split('/').next().unwrap().escape_debug().to_string();
        assert!(stderr.contains(&escaped) && stderr.contains("control character"), "{i}: the error names {escaped}:\n{stderr}");
        assert!(!dir.path().join("out").exists(), "{i}: nothing generated");
    }
}

#[test]
fn a_family_folder_is_checked_too_and_clean_folders_are_watched() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("kernels");
    write(&specs, "tiny.toml", TINY);
    let families = dir.path().join("mine");
    write(&families, "x\ncargo:warning=hi.toml", "");
    let (stdout, stderr) = compile_in_child(&specs, Some(&families));
    assert_eq!(directives(&stdout), Vec::<&str>::new(), "{stdout}");
    assert!(stderr.contains("x\\ncargo:warning=hi.toml"), "{stderr}");
    // Without it, every path is watched and the build succeeds.
    std::fs::remove_dir_all(&families).unwrap();
    let (stdout, stderr) = compile_in_child(&specs, None);
    assert!(stdout.contains("compile: ok"), "{stdout}{stderr}");
    let watched = format!("cargo:rerun-if-changed={}", specs.join("tiny.toml").display());
    assert!(directives(&stdout).contains(&watched.as_str()), "{stdout}");
    assert!(directives(&stdout).iter().all(|l| l.starts_with("cargo:rerun-if-changed=")), "{stdout}");
}

/// A link to a folder inside the spec folder is not followed while listing what cargo
/// watches (a link to the parent would list paths until they grew too long).
#[cfg(unix)]
#[test]
fn a_link_loop_in_a_spec_folder_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("kernels");
    write(&specs, "tiny.toml", TINY);
    std::os::unix::fs::symlink("..", specs.join("loop")).unwrap();
    let (stdout, stderr) = compile_in_child(&specs, None);
    assert!(directives(&stdout).len() <= 3, "{} lines", directives(&stdout).len());
    assert!(stderr.contains("loop: a symbolic link to a directory"), "{stderr}");
}
