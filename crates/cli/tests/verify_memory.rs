//! Verifying the 5120x248320 affine head (its weights alone are 635 MB) peaks under 1 GiB:
//! the weights are drawn once, into the input array, which the references read in place and
//! the emulator binds without a copy.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn verifying_the_vocabulary_head_peaks_under_one_gib() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgen"))
        .current_dir(&root)
        .args(["verify", "--filter", "head_affine_q4_bf16"])
        .output()
        .expect("kernelgen runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
    // the largest resident set of any child this test process waited for (the only one)
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    let peak_mib = usage.ru_maxrss as f64 / 1024.0;
    assert!(peak_mib < 1024.0, "verify of the head peaked at {peak_mib:.0} MiB");
    assert!(peak_mib > 600.0, "the weights are resident: {peak_mib:.0} MiB");
}
