//! The sanitizer lane: kernels built with AddressSanitizer and UBSan.
//!
//! An ASan-instrumented object can only be loaded into a process that has the ASan
//! runtime preloaded, so every test here re-runs itself in a child process of this test
//! binary with `kernelgen_emu::sanitizer_env()` (LD_PRELOAD of g++'s libasan and libubsan,
//! ASAN_OPTIONS, UBSAN_OPTIONS). `cargo test -p kernelgen-emu --test integration
//! emu_sanitize::` runs the whole lane; no flag or `--ignored` is needed.

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = include_str!("emu/sanitize.metal");
const FILE: &str = "sanitize.metal";

/// Run `body` in a sanitized child process (this same test, re-run with the sanitizer
/// environment), or directly when this process already is that child.
fn sanitized(test: &str, body: impl FnOnce()) {
    if sanitizer_active() {
        body();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([common::test_path(module_path!(), test).as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .envs(sanitizer_env())
        .output()
        .expect("spawn the sanitized child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "sanitized child for {test} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

fn program() -> Program {
    let emu = Emulator::new(EmuOptions { sanitize: true, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    emu.load(SRC, FILE).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn sanitize_needs_the_preloaded_runtime() {
    if sanitizer_active() {
        return;
    }
    let e = Emulator::new(EmuOptions { sanitize: true, ..Default::default() }).err().expect("refused");
    assert!(matches!(e, EmuError::Sanitizer { .. }) && e.to_string().contains("sanitizer_env"), "{e}");
}

#[test]
fn sanitize_clean_kernel_runs() {
    sanitized("sanitize_clean_kernel_runs", || {
        let p = program();
        let x: Vec<f32> = (0..128).map(|i| i as f32).collect();
        let mut xb = f32_buf(&x);
        let mut out = DeviceBuffer::zeroed(128 * 4);
        for order in [RunOrder::Forward, RunOrder::Reverse] {
            p.run(&Dispatch::new("clean", [128, 1, 1], [64, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap_or_else(|e| panic!("{e}"));
        }
        let o = f32s(&out);
        let want0: f32 = (1..33).map(|v| v as f32).sum();
        assert_eq!(o[0], want0);
    });
}

#[test]
fn sanitize_write_past_threadgroup_array() {
    sanitized("sanitize_write_past_threadgroup_array", || {
        let p = program();
        let mut out = DeviceBuffer::zeroed(40 * 4);
        let e = p.dispatch("tg_overflow", &mut [&mut out], [40, 1, 1], [40, 1, 1]).unwrap_err();
        println!("{e}");
        match &e {
            EmuError::Fault { kernel, what, metal_line, thread_position_in_grid, .. } => {
                assert_eq!(kernel, "tg_overflow");
                assert!(what.contains("byte 128 of threadgroup array `a`, past its end"), "{what}");
                assert!(what.contains("invalid write"), "{what}");
                assert_eq!(metal_line.as_ref().unwrap(), &(FILE.to_string(), line_of(SRC, "@tg-write")), "{e}");
                assert_eq!(*thread_position_in_grid, [32, 0, 0]);
            }
            other => panic!("expected a fault, got {other}"),
        }
    });
}

#[test]
fn sanitize_misaligned_uint32_load() {
    sanitized("sanitize_misaligned_uint32_load", || {
        let p = program();
        let mut bytes = DeviceBuffer::zeroed(64);
        let mut out = DeviceBuffer::zeroed(16);
        let e = p.dispatch("misaligned", &mut [&mut bytes, &mut out], [4, 1, 1], [4, 1, 1]).unwrap_err();
        println!("{e}");
        match &e {
            EmuError::Fault { kernel, what, metal_line, thread_position_in_grid, .. } => {
                assert_eq!(kernel, "misaligned");
                assert!(what.contains("UndefinedBehaviorSanitizer: misaligned access of 'const uint32_t'") && what.contains("needs 4-byte alignment") && what.contains("buffer(0) `bytes` at offset 1"), "{what}");
                assert_eq!(metal_line.as_ref().unwrap(), &(FILE.to_string(), line_of(SRC, "@misaligned")), "{e}");
                assert_eq!(*thread_position_in_grid, [0, 0, 0]);
            }
            other => panic!("expected a fault, got {other}"),
        }
    });
}

#[test]
fn sanitize_read_into_a_small_gap_between_regions() {
    sanitized("sanitize_read_into_a_small_gap_between_regions", || {
        let p = program();
        // regions of 24 floats and 16 floats with an 8-float gap between them
        let mut slot = DeviceBuffer::zeroed(48 * 4);
        slot.set_regions(&[0..96, 128..192]);
        let mut out = DeviceBuffer::zeroed(48 * 4);
        let e = p.dispatch("gap_read", &mut [&mut slot, &mut out], [48, 1, 1], [48, 1, 1]).unwrap_err();
        println!("{e}");
        match &e {
            EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
                assert!(what.contains("poisoned gap 96..128 between declared regions 0..96 and 128..192"), "{what}");
                assert_eq!(metal_line.as_ref().unwrap().1, line_of(SRC, "@gap-read"));
                assert_eq!(*thread_position_in_grid, [24, 0, 0]);
            }
            other => panic!("expected a fault, got {other}"),
        }
    });
}

#[test]
fn sanitize_read_past_end_within_alignment_slack() {
    sanitized("sanitize_read_past_end_within_alignment_slack", || {
        let p = program();
        // 10 floats with a 16-byte aligned start: 8 bytes of slack before the guard page
        let mut x = DeviceBuffer::zeroed_aligned(40, 16);
        let mut out = DeviceBuffer::zeroed(44);
        let e = p.dispatch("gap_read", &mut [&mut x, &mut out], [11, 1, 1], [11, 1, 1]).unwrap_err();
        println!("{e}");
        match &e {
            EmuError::Fault { what, thread_position_in_grid, .. } => {
                assert!(what.contains("past the end of the 40-byte buffer"), "{what}");
                assert_eq!(*thread_position_in_grid, [10, 0, 0]);
            }
            other => panic!("expected a fault, got {other}"),
        }
    });
}

/// `reexec_with_sanitizer_if_needed` re-executes the binary with the sanitizer
/// environment: checked in a child (so the re-exec replaces only the child).
#[test]
fn reexec_enters_sanitize_mode() {
    const STAGE: &str = "KGEMU_TEST_REEXEC_STAGE";
    if std::env::var_os(STAGE).is_some() {
        // the child: re-exec itself unless already sanitized, then prove it is
        reexec_with_sanitizer_if_needed().expect("re-exec");
        assert!(sanitizer_active());
        println!("REEXEC-SANITIZED");
        return;
    }
    if sanitizer_active() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([common::test_path(module_path!(), "reexec_enters_sanitize_mode").as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(STAGE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("REEXEC-SANITIZED"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}
