//! What `kernelgen emu` does with a kernel a pull request could bring: every access outside
//! a buffer, however near, is an error naming the buffer and the offset; a kernel that never
//! ends is stopped at the time limit (`--timeout SECS` on `emu`, `run` and `verify`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `kernelgen emu` of `source` (a one-kernel file) over one output buffer of 8 floats, in
/// one threadgroup of 8 threads: (exit code, stdout and stderr).
fn emu_on_8_floats(dir: &Path, source: &str, extra: &[&str]) -> (i32, String) {
    let file = dir.join("k.metal");
    std::fs::write(&file, source).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
        .current_dir(dir)
        .args(["emu", file.to_str().unwrap(), "--grid", "8,1,1", "--threadgroup", "8,1,1", "--output", "0=float32:8", "--out", "o"])
        .args(extra)
        .output()
        .expect("kernelgen runs");
    (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// `a[int(i) - k]` (read, or written) of an 8-float buffer: near the start, inside the
/// page the data starts on, it faulted only from `- 1100` on; and `a[i + 1]` past the end.
#[test]
fn every_access_just_outside_a_buffer_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for k in [1, 9, 100] {
        for (access, body) in [("read", format!("a[i] = a[int(i) - {k}];")), ("write", format!("a[int(i) - {k}] = 1.0f;"))] {
            let source = format!("[[kernel]] void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ {body} }}\n");
            let (code, text) = emu_on_8_floats(dir.path(), &source, &[]);
            assert_eq!(code, 2, "{access} a[i - {k}]: {text}");
            let place = format!("invalid {access} at 0x");
            let offset = format!("buffer(0) `a` at offset -{}, before the start of the 32-byte buffer", 4 * k);
            assert!(text.contains(&place) && text.contains(&offset) && text.contains("k.metal:1"), "{access} a[i - {k}]: {text}");
            assert!(!dir.path().join("o").exists(), "no output written");
        }
    }
    let source = "[[kernel]] void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) { a[i] = a[i + 1]; }\n";
    let (code, text) = emu_on_8_floats(dir.path(), source, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("invalid read") && text.contains("buffer(0) `a` at offset 32, past the end of the 32-byte buffer"), "{text}");
    // in bounds: runs
    let source = "[[kernel]] void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) { a[i] = float(i); }\n";
    let (code, text) = emu_on_8_floats(dir.path(), source, &[]);
    assert_eq!(code, 0, "{text}");
}

/// An endless loop is stopped at `--timeout`, with an error naming the kernel and the
/// threadgroup it was running; a limit that is not a positive number of seconds is a usage
/// error; `run` and `verify` take the option too.
#[test]
fn a_kernel_that_never_ends_is_stopped_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let source = "[[kernel]] void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) { while (true) {} }\n";
    let start = Instant::now();
    let (code, text) = emu_on_8_floats(dir.path(), source, &["--timeout", "1"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("kernel `k` ran past the time limit of 1 s and was stopped: threadgroup (0, 0, 0) was still running"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(!dir.path().join("o").exists(), "no output written");
    for bad in ["0", "-1", "soon", "1e9"] {
        let (code, text) = emu_on_8_floats(dir.path(), source, &[&format!("--timeout={bad}")]);
        assert_eq!(code, 2, "--timeout {bad}: {text}");
        assert!(text.contains("is not a time limit"), "--timeout {bad}: {text}");
    }
    for cmd in ["run", "verify", "emu"] {
        let o = Command::new(env!("CARGO_BIN_EXE_kernelgen")).args([cmd, "--help"]).output().expect("kernelgen runs");
        assert!(String::from_utf8_lossy(&o.stdout).contains("--timeout <SECS>"), "{cmd} --help");
    }
}
