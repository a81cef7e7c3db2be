//! The reproductions of issue 10, run against the built binary: what a hostile
//! or careless user can do to `generate`, `check`, `list`, `run` and `emu`.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kernelgen(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir).args(args).output().expect("kernelgen runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

const TINY: &str = "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n";

/// Every file under `dir` with its contents (hidden ones included).
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), if m.is_file() { fs::read(&p).unwrap() } else { b"<special>".to_vec() }));
            }
        }
    }
    out.sort();
    out
}

/// A project with one small spec, generated once.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("specs")).unwrap();
    fs::write(dir.path().join("specs/tiny.toml"), TINY).unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

#[test]
fn a_foreign_manifest_json_does_not_make_a_folder_kernelgens() {
    // mkdir -p /tmp/w/src; echo x >/tmp/w/src/app.js; echo '{"name":"app"}' >/tmp/w/manifest.json
    let dir = project();
    let w = dir.path().join("w");
    fs::create_dir_all(w.join("src")).unwrap();
    fs::write(w.join("src/app.js"), "x\n").unwrap();
    fs::write(w.join("manifest.json"), "{\"name\":\"app\"}\n").unwrap();
    let before = tree(&w);
    let o = kernelgen(dir.path(), &["generate", "--out", "w"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has no .kernelgen-owned"), "{}", text(&o));
    assert_eq!(tree(&w), before, "nothing deleted, nothing written");
    let o = kernelgen(dir.path(), &["check", "--out", "w"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not owned") && !text(&o).contains("app.js"), "{}", text(&o));
}

#[test]
fn a_symlinked_folder_inside_the_output_is_refused() {
    let dir = project();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let metal = dir.path().join("generated/metal/tiny");
    fs::remove_dir_all(&metal).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &metal).unwrap();
    fs::write(dir.path().join("specs/tiny.toml"), TINY.replace("256", "512")).unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("metal/tiny is a symbolic link"), "{}", text(&o));
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the link");
    assert!(fs::symlink_metadata(&metal).unwrap().file_type().is_symlink(), "and the link is not removed");
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("link:     metal/tiny"), "{}", text(&o));
}

const EVIL: &str = "x\nkernel void evil(device float* a [[buffer(0)]]) { a[0] = 1.0f; }\n#define Z ";

#[test]
fn a_folder_name_cannot_inject_a_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("specs").join(EVIL);
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("tiny.toml"), TINY).unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kernelgen(dir.path(), &["check"]).status.code(), Some(0));
    let files = tree(&dir.path().join("generated"));
    let metal: Vec<&(String, Vec<u8>)> = files.iter().filter(|(p, _)| p.ends_with(".metal")).collect();
    // gate_up, down and their grouped forms
    assert_eq!(metal.len(), 4);
    for (path, bytes) in metal {
        let t = String::from_utf8(bytes.clone()).unwrap();
        assert!(t.lines().next().unwrap().contains("specs/x\\u{a}kernel void evil("), "{path}");
        assert_eq!(t.lines().filter(|l| l.contains("evil")).count(), 1, "{path}: only the first-line comment names it");
        assert!(!t.lines().any(|l| l.starts_with("#define Z")), "{path}");
    }
    // The emulator finds the one kernel the file declares, not `evil`.
    if Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let file = dir.path().join("generated/metal/tiny/tiny_expert_q4_bf16_r4_down.metal");
        let o = kernelgen(dir.path(), &["emu", file.to_str().unwrap(), "--kernel", "evil", "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", "o"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("no kernel `evil`") && text(&o).contains("kernels: custom_kernel_tiny_expert"), "{}", text(&o));
    }
}

#[test]
fn invalid_rust_is_rejected_with_a_location_before_anything_is_written() {
    for (file, body, want) in [
        ("fn.toml", TINY.to_string(), "fn.toml:1:1: (file name)"),
        ("type.toml", TINY.to_string(), "type.toml:1:1: (file name)"),
        ("self.toml", TINY.to_string(), "self.toml:1:1: (file name)"),
        ("mod.toml", TINY.to_string(), "mod.toml:1:1: (file name)"),
        ("v.toml", format!("{TINY}[geometry.v2]\nhidden = 256\nintermediate = 128\n[geometry.v_2]\nhidden = 256\nintermediate = 128\n"), "v.toml:10:11: geometry.v_2"),
        ("w.toml", format!("{TINY}[geometry.w]\nhidden = 256\nintermediate = 128\n[geometry.w_]\nhidden = 256\nintermediate = 128\n"), "w.toml:10:11: geometry.w_"),
    ] {
        let dir = project();
        let before = tree(&dir.path().join("generated"));
        fs::write(dir.path().join("specs").join(file), body).unwrap();
        let o = kernelgen(dir.path(), &["generate"]);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", text(&o));
        let located: Vec<String> = String::from_utf8_lossy(&o.stderr).lines().filter(|l| l.contains("-->")).map(|l| l.to_string()).collect();
        let headline = format!("{}\n{}", String::from_utf8_lossy(&o.stderr), located.join("\n"));
        let (loc, field) = want.split_once(": ").unwrap();
        assert!(headline.contains(loc) && headline.contains(field), "{file}: {headline}");
        assert_eq!(tree(&dir.path().join("generated")), before, "{file}");
    }
}

#[test]
fn a_huge_or_root_output_directory_fails_at_once() {
    let dir = project();
    for out in ["/", "/usr", "."] {
        let start = Instant::now();
        let o = kernelgen(dir.path(), &["generate", "--out", out]);
        assert_eq!(o.status.code(), Some(2), "{out}: {}", text(&o));
        assert!(start.elapsed() < Duration::from_secs(5), "{out}: {:?}", start.elapsed());
        let o = kernelgen(dir.path(), &["check", "--out", out]);
        assert_eq!(o.status.code(), Some(1), "{out}: {}", text(&o));
        assert!(start.elapsed() < Duration::from_secs(10), "{out}: {:?}", start.elapsed());
    }
    assert!(!Path::new("/.kernelgen-owned").exists() && !Path::new("/.usr.kernelgen-lock").exists());
}

/// `kernelgen list | head -1`: a closed stdout ends the printing quietly.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = project();
    for args in [&["list"][..], &["check"], &["generate"], &["--help"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
            .current_dir(dir.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // closed before the first line is written
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
    }
}

#[test]
fn spec_files_that_are_not_specs_are_refused_at_once() {
    let dir = project();
    let start = Instant::now();
    let o = kernelgen(dir.path(), &["generate", "--specs", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a regular file"), "{}", text(&o));
    let fifo = dir.path().join("specs/pipe.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("pipe.toml: not a regular file"), "{}", text(&o));
    assert!(start.elapsed() < Duration::from_secs(10));
    fs::remove_file(&fifo).unwrap();
    fs::write(dir.path().join("specs/latin1.toml"), b"family = \"expert\"\ndescription = \"caf\xe9\"\n").unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("latin1.toml:2:19") && text(&o).contains("not UTF-8"), "{}", text(&o));
}

#[test]
fn output_does_not_depend_on_the_order_of_specs() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("a")).unwrap();
    fs::create_dir_all(dir.path().join("b")).unwrap();
    fs::write(dir.path().join("a/one.toml"), TINY).unwrap();
    fs::write(dir.path().join("b/two.toml"), TINY.replace("tiny", "small")).unwrap();
    let o1 = kernelgen(dir.path(), &["generate", "--specs", "a/one.toml", "--specs", "b", "--out", "g1"]);
    let o2 = kernelgen(dir.path(), &["generate", "--specs", "b", "--specs", "a/one.toml", "--out", "g2"]);
    assert!(o1.status.success() && o2.status.success(), "{}{}", text(&o1), text(&o2));
    assert_eq!(tree(&dir.path().join("g1")), tree(&dir.path().join("g2")));
}

#[test]
fn excluding_every_variant_is_an_error_with_a_location() {
    let dir = project();
    fs::write(dir.path().join("specs/none.toml"), TINY.replace("[axes]", "exclude = [{ quant = \"q4\" }]\n[axes]")).unwrap();
    let o = kernelgen(dir.path(), &["generate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("none.toml:2:1") && text(&o).contains("generate no kernel"), "{}", text(&o));
}

#[test]
fn check_reports_special_files_and_empty_folders() {
    let dir = project();
    fs::create_dir_all(dir.path().join("generated/metal/empty")).unwrap();
    let fifo = dir.path().join("generated/rust/tiny.rs");
    fs::remove_file(&fifo).unwrap();
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = kernelgen(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("special:  rust/tiny.rs") && text(&o).contains("empty:    metal/empty/"), "{}", text(&o));
}

#[test]
fn run_refuses_a_repeated_size_and_an_unusable_out_before_running() {
    let dir = project();
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let o = kernelgen(dir.path(), &["run", "tiny_expert_q4_bf16_r4_gate_up", "--size", "M=2", "--size", "M=3", "--out", "o"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--size M is given twice (M=2 and M=3)"), "{}", text(&o));
    let o = kernelgen(dir.path(), &["run", "tiny_expert_q4_bf16_r4_gate_up", "--out", "file"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--out file: exists and is not a directory"), "{}", text(&o));
}

#[test]
fn emu_refuses_impossible_output_sizes() {
    let dir = project();
    let file = dir.path().join("generated/metal/tiny/tiny_expert_q4_bf16_r4_down.metal");
    for (shape, want) in [("float32:1000000000000", "of memory available"), ("float32:4294967296,4294967296", "which no buffer can hold")] {
        let o = kernelgen(
            dir.path(),
            &["emu", file.to_str().unwrap(), "--grid", "1,1,1", "--threadgroup", "1,1,1", "--output", &format!("1={shape}"), "--out", "o"],
        );
        assert_eq!(o.status.code(), Some(2), "{shape}: {}", text(&o));
        assert!(text(&o).contains(want) && !text(&o).contains("panicked") && !text(&o).contains("memory allocation"), "{shape}: {}", text(&o));
        assert!(!dir.path().join("o").exists(), "no .npy written");
    }
}

/// A Python file outside the family file's folder that leaves a mark when it runs.
fn outside_python(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mark = dir.join("it-ran");
    let file = dir.join("outside.py");
    fs::write(&file, format!("open({:?}, 'w').write('ran')\ndef reference(x, R, params):\n    return {{'out': x}}\n", mark.to_str().unwrap())).unwrap();
    (file, mark)
}

#[test]
fn a_reference_outside_the_family_folder_is_refused() {
    let probe = tempfile::tempdir().unwrap();
    let (absolute, _) = outside_python(probe.path());
    for path in ["../outside.py", "refs/../../outside.py", absolute.to_str().unwrap(), "./refs/planted.py", "refs//planted.py", "refs\\planted.py", ".hidden.py"] {
        let dir = crate::verify_families::project(&format!("[verify]\nreference = \"{}:reference\"\n", path.escape_default()));
        let (_, mark) = outside_python(dir.path());
        let o = kernelgen(dir.path(), &["generate", "--specs", "kernels"]);
        assert_eq!(o.status.code(), Some(2), "{path}: {}", text(&o));
        assert!(text(&o).contains("verify.reference") && text(&o).contains("planted.toml:") && text(&o).contains("inside the family file's folder"), "{path}: {}", text(&o));
        let (code, out) = crate::verify_families::verify(dir.path(), &["--filter", "*_none"]);
        assert_eq!(code, 2, "{path}: {out}");
        assert!(!mark.exists(), "{path}: the outside file ran");
    }
}

/// `verify` of a project whose reference is `reference`, after `link` made a symbolic link on
/// its way to a Python file outside (which must not run): the failure names `named`.
fn refused_through_a_link(reference: &str, link: impl Fn(&Path, &Path), named: &str) {
    let dir = crate::verify_families::project(&format!("[verify]\nreference = \"{reference}\"\n"));
    let (outside, mark) = outside_python(dir.path());
    link(dir.path(), &outside);
    let (code, out) = crate::verify_families::verify(dir.path(), &["--filter", "*_none"]);
    assert_eq!(code, 1, "{out}");
    let f = crate::verify_families::failure(&out, "none");
    assert!(f.contains(named) && f.contains("symbolic link"), "{f}");
    assert!(!mark.exists(), "{reference}: the file outside ran");
}

#[test]
fn a_reference_through_a_symbolic_link_is_refused() {
    // refs/link.py -> ../../outside.py
    refused_through_a_link("refs/link.py:reference", |dir, outside| std::os::unix::fs::symlink(outside, dir.join("families/refs/link.py")).unwrap(), "refs/link.py");
    // refs -> a folder outside, holding planted.py
    let folder = |dir: &Path, outside: &Path| {
        let elsewhere = dir.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::copy(outside, elsewhere.join("planted.py")).unwrap();
        fs::remove_dir_all(dir.join("families/refs")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("families/refs")).unwrap();
    };
    refused_through_a_link("refs/planted.py:reference", folder, "families/refs");
}

/// Spec files, family files and templates that are symbolic links are refused, naming the link:
/// a link could bring any file of the machine into generated/ and a review's markdown.
#[test]
fn symbolic_links_are_not_read_as_specs_family_files_or_templates() {
    let secret = tempfile::tempdir().unwrap();
    let secret_file = secret.path().join("secret.txt");
    fs::write(&secret_file, "  // the secret: 42\n  y[0] = x[0];\n").unwrap();
    let check = |dir: &Path, args: &[&str], link: &str| {
        let o = kernelgen(dir, args);
        assert_eq!(o.status.code(), Some(2), "{link}: {}", text(&o));
        assert!(text(&o).contains(link) && text(&o).contains("symbolic link"), "{link}: {}", text(&o));
        assert!(!text(&o).contains("the secret"), "{link}: {}", text(&o));
        assert!(!dir.join("generated").exists() || !tree(&dir.join("generated")).iter().any(|(_, b)| String::from_utf8_lossy(b).contains("the secret")), "{link}");
    };
    // the template
    let dir = crate::verify_families::project("");
    let template = dir.path().join("families/planted.metal.tera");
    fs::remove_file(&template).unwrap();
    std::os::unix::fs::symlink(&secret_file, &template).unwrap();
    check(dir.path(), &["generate", "--specs", "kernels"], "planted.metal.tera");
    // the family file
    let dir = crate::verify_families::project("");
    let family = dir.path().join("families/planted.toml");
    let moved = secret.path().join("planted.toml");
    fs::rename(&family, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &family).unwrap();
    check(dir.path(), &["generate", "--specs", "kernels"], "planted.toml");
    // a spec file in a --specs folder, and a spec file named directly
    let dir = project();
    let spec = secret.path().join("linked.toml");
    fs::write(&spec, TINY).unwrap();
    std::os::unix::fs::symlink(&spec, dir.path().join("specs/linked.toml")).unwrap();
    check(dir.path(), &["generate"], "linked.toml");
    check(dir.path(), &["generate", "--specs", "specs/linked.toml"], "linked.toml");
}
