//! Every access outside a buffer, however far, is a fault that names the buffer and the
//! offset: near and far, past the end and before the start (uint indices that wrapped around,
//! negative int indices), reads and writes, in normal and in sanitize mode.
//!
//! The one documented exception is the *head*: the bytes between the start of the data's
//! first page and the data (less than a page, none when the length is a multiple of the
//! page size). Pages cannot protect it, so in normal mode a read there returns poison and a
//! write there is reported as corruption after the threadgroup (buffer and negative offset);
//! under sanitize both are faults.

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = include_str!("emu/bounds.metal");
const FILE: &str = "bounds.metal";

fn program(sanitize: bool) -> Program {
    let emu = Emulator::new(EmuOptions { sanitize, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    emu.load(SRC, FILE).unwrap_or_else(|e| panic!("{e}"))
}

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

/// Thread 3 accesses element `index` of a buffer of `len` floats (threads 0..3 stay inside).
fn dispatch(p: &Program, kernel: &str, len: usize, index: u32) -> Result<DeviceBuffer, EmuError> {
    let mut x = DeviceBuffer::zeroed(len * 4);
    let mut at = u32_buf(&[0, 1, 2, index]);
    let mut out = DeviceBuffer::zeroed(16);
    let writes = kernel.starts_with("write");
    let r = if writes {
        p.dispatch(kernel, &mut [&mut x, &mut at], [4, 1, 1], [4, 1, 1])
    } else {
        p.dispatch(kernel, &mut [&mut x, &mut at, &mut out], [4, 1, 1], [4, 1, 1])
    };
    r.map(|_| if writes { x } else { out })
}

/// The access of thread 3 faults, naming buffer `x`, the byte offset and the line.
fn assert_fault(e: &EmuError, kernel: &str, write: bool, offset: i64, len: usize) {
    let msg = e.to_string();
    match e {
        EmuError::Fault { kernel: k, what, metal_line, thread_position_in_grid, threadgroup_position_in_grid } => {
            assert_eq!(k, kernel);
            assert_eq!(*thread_position_in_grid, [3, 0, 0], "{msg}");
            assert_eq!(*threadgroup_position_in_grid, [0, 0, 0], "{msg}");
            let marker = format!("@{}", kernel.replace('_', "-"));
            assert_eq!(metal_line.as_ref().map(|l| l.1), Some(line_of(SRC, &marker)), "{msg}");
            assert!(what.contains("buffer(0) `x`"), "names the buffer: {msg}");
            let place = if offset < 0 {
                format!("offset {offset}, before the start of the {len}-byte buffer")
            } else {
                format!("offset {offset}, past the end of the {len}-byte buffer")
            };
            assert!(what.contains(&place), "expected `{place}`: {msg}");
            let kind = if write { "write" } else { "read" };
            assert!(what.contains(kind), "a {kind}: {msg}");
        }
        other => panic!("expected a fault of {kernel} at offset {offset}, got: {other}"),
    }
}

/// Every access past the end, from one element to the largest uint index.
fn past_the_end(sanitize: bool) {
    let p = program(sanitize);
    for kernel in ["read_at", "write_at"] {
        for index in [4u32, 5, 1024, 2048, 1 << 20, 1 << 28, 0x7fff_ffff, 0xffff_fffe, 0xffff_ffff] {
            let e = dispatch(&p, kernel, 4, index).err().unwrap_or_else(|| panic!("{kernel} x[{index}] of 4 floats ran"));
            assert_fault(&e, kernel, kernel.starts_with("write"), 4 * index as i64, 16);
        }
    }
    // 16-byte elements: a uint index reaches 64 GiB
    for index in [1u32, 4096, 0xffff_ffff] {
        let mut x = DeviceBuffer::zeroed(16);
        let mut at = u32_buf(&[0, 0, 0, index]);
        let mut out = DeviceBuffer::zeroed(64);
        let e = p.dispatch("read_at4", &mut [&mut x, &mut at, &mut out], [4, 1, 1], [4, 1, 1]).unwrap_err();
        assert_fault(&e, "read_at4", false, 16 * index as i64, 16);
    }
    // in bounds: runs, and the emulator is usable after the faults
    let out = dispatch(&p, "read_at", 4, 3).unwrap();
    assert_eq!(f32s(&out), vec![0.0; 4]);
}

/// Negative indices beyond the head: one page and more before the start, down to the most
/// negative int; and a[-1] of a buffer whose length is a multiple of the page size.
fn before_the_start(sanitize: bool) {
    let p = program(sanitize);
    for kernel in ["read_signed", "write_signed"] {
        for index in [-1025i32, -4096, -(1 << 20), i32::MIN] {
            let e = dispatch(&p, kernel, 4, index as u32).err().unwrap_or_else(|| panic!("{kernel} x[{index}] ran"));
            // the data is 16 bytes at the end of its page: the element sits 4 * index bytes before
            assert_fault(&e, kernel, kernel.starts_with("write"), 4 * index as i64, 16);
        }
        let e = dispatch(&p, kernel, 1024, -1i32 as u32).err().unwrap_or_else(|| panic!("{kernel} x[-1] of a page ran"));
        assert_fault(&e, kernel, kernel.starts_with("write"), -4, 4096);
    }
}

#[test]
fn every_access_past_the_end_faults() {
    past_the_end(false);
}

#[test]
fn every_access_before_the_start_faults() {
    before_the_start(false);
}

#[test]
fn the_head_before_unaligned_data_is_poison_and_checked() {
    let p = program(false);
    // a read of x[-1] of 4 floats: inside the data's page, poison (NaN), not a fault
    let out = dispatch(&p, "read_signed", 4, -1i32 as u32).unwrap();
    assert!(f32s(&out)[3].is_nan(), "the head reads as poison: {:?}", f32s(&out));
    // a write there is corruption, with the buffer and the negative offset
    let e = dispatch(&p, "write_signed", 4, -1i32 as u32).err().expect("the write to x[-1] is reported");
    match &e {
        EmuError::Corruption { kernel, what, threadgroup_position_in_grid, .. } => {
            assert_eq!(kernel, "write_signed");
            assert_eq!(*threadgroup_position_in_grid, [0, 0, 0]);
            assert!(what.contains("byte -4 of buffer(0) `x` was written") && what.contains("before the start of the data"), "{e}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn sanitize_every_access_past_the_end_faults() {
    sanitized("sanitize_every_access_past_the_end_faults", || past_the_end(true));
}

#[test]
fn sanitize_every_access_before_the_start_faults() {
    sanitized("sanitize_every_access_before_the_start_faults", || {
        before_the_start(true);
        // under sanitize the head is poisoned for ASan too: x[-1] of 4 floats faults
        let p = program(true);
        for kernel in ["read_signed", "write_signed"] {
            let e = dispatch(&p, kernel, 4, -1i32 as u32).err().unwrap_or_else(|| panic!("{kernel} x[-1] ran"));
            assert_fault(&e, kernel, kernel.starts_with("write"), -4, 16);
        }
    });
}
