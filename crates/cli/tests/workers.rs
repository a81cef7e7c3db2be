//! `--workers N` on the emulator commands: any positive count verifies the same, 0 is a
//! usage error.

use std::path::PathBuf;
use std::process::Command;

fn kernelgen(args: &[&str]) -> (i32, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(root).args(args).output().expect("kernelgen runs");
    (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn verify_takes_a_worker_count() {
    for n in ["1", "3"] {
        let (code, text) = kernelgen(&["verify", "--filter", "tiny_expert_q4_bf16_*", "--workers", n]);
        assert_eq!(code, 0, "--workers {n}: {text}");
        // four kernels (gate_up, down and their grouped forms), each with its Metal and its CUDA body
        assert!(text.contains("8 passed, 0 failed"), "{text}");
    }
    let (code, text) = kernelgen(&["verify", "--workers", "0"]);
    assert_eq!(code, 2, "{text}");
    for cmd in ["run", "emu"] {
        let (_, help) = kernelgen(&[cmd, "--help"]);
        assert!(help.contains("--workers <N>"), "{cmd}: {help}");
    }
}
