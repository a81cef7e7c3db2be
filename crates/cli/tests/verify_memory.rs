//! Verifying the 5120x248320 affine head (its weights alone are 635 MB) peaks under 1 GiB:
//! the weights are drawn once, into the input array, which the references read in place and
//! the emulator binds without a copy.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
#[ignore = "slow (verifies the head a second time, `make test` verifies it once): `make test-slow`, in .ci/run"]
fn verifying_the_vocabulary_head_peaks_under_one_gib() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
        .current_dir(&root)
        .args(["verify", "--filter", "head_affine_q4_bf16"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kernelgen runs");
    let mut stderr = child.stderr.take().expect("stderr");
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut text = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut text).expect("stdout");
    text += &err.join().expect("stderr");
    // the child's own peak resident set (other tests of this binary run children too)
    let (mut status, mut usage): (libc::c_int, libc::rusage) = (0, unsafe { std::mem::zeroed() });
    assert_eq!(unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) }, child.id() as libc::pid_t);
    // its Metal body and its CUDA body, one after the other (a large kernel's jobs run alone)
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 && text.contains("2 passed, 0 failed"), "{text}");
    let peak_mib = usage.ru_maxrss as f64 / 1024.0;
    assert!(peak_mib < 1024.0, "verify of the head peaked at {peak_mib:.0} MiB");
    assert!(peak_mib > 600.0, "the weights are resident: {peak_mib:.0} MiB");
}
