//! Every access outside a buffer, however far, is a fault that names the buffer and the
//! offset: near and far, past the end and before the start (uint indices that wrapped around,
//! negative int indices), reads and writes, in normal and in sanitize mode.
//!
//! Just before the start too: the bytes between the start of the data's first page and the
//! data (the *head*, when the data is flush with the guard after it) are caught by a second
//! run with the data flush with the guard before it (`Placement::Both`, the default); under
//! sanitize both sides are ASan-poisoned.

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

/// Just before the start and just past the end, reads and writes: every access faults,
/// naming the buffer and the offset, whatever the buffer's length (its data rarely fills its
/// pages: each dispatch also runs with the data flush with the guard before it).
#[test]
fn every_access_just_outside_a_buffer_faults() {
    let p = program(false);
    for kernel in ["read_signed", "write_signed"] {
        for len in [8usize, 4, 1000, 1025] {
            for index in [-1i32, -9, -100, -1023, len as i32, len as i32 + 1, len as i32 + 100] {
                let e = dispatch(&p, kernel, len, index as u32).err().unwrap_or_else(|| panic!("{kernel} x[{index}] of {len} floats ran"));
                assert_fault(&e, kernel, kernel.starts_with("write"), 4 * index as i64, 4 * len);
            }
            // in bounds: runs
            let ok = dispatch(&p, kernel, len, len as u32 - 1).unwrap_or_else(|e| panic!("{kernel} x[{}] of {len} floats: {e}", len - 1));
            assert!(!kernel.starts_with("read") || f32s(&ok) == vec![0.0; 4], "{kernel}: {:?}", f32s(&ok));
        }
    }
}

/// With `Placement::End` alone (one run, the data flush with the guard after it), the head
/// before unaligned data reads as poison, and a write there is corruption naming the buffer
/// and the negative offset.
#[test]
fn with_the_end_placement_alone_the_head_is_poison_and_checked() {
    let emu = Emulator::new(EmuOptions { placement: Placement::End, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    let p = emu.load(SRC, FILE).unwrap_or_else(|e| panic!("{e}"));
    // a read of x[-1] of 4 floats: inside the data's page, poison (NaN), not a fault
    let out = dispatch(&p, "read_signed", 4, -1i32 as u32).unwrap();
    assert!(f32s(&out)[3].is_nan(), "the head reads as poison: {:?}", f32s(&out));
    // a write there is corruption, with the buffer and the negative offset
    let e = dispatch(&p, "write_signed", 4, -1i32 as u32).expect_err("the write to x[-1] is reported");
    match &e {
        EmuError::Corruption { kernel, what, threadgroup_position_in_grid, .. } => {
            assert_eq!(kernel, "write_signed");
            assert_eq!(*threadgroup_position_in_grid, [0, 0, 0]);
            assert!(what.contains("byte -4 of buffer(0) `x` was written") && what.contains("before the start of the data"), "{e}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

/// With `Placement::Start` alone the slack after the end is: a read returns poison, a write
/// is corruption; every access before the start faults.
#[test]
fn with_the_start_placement_alone_the_slack_is_poison_and_checked() {
    let emu = Emulator::new(EmuOptions { placement: Placement::Start, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    let p = emu.load(SRC, FILE).unwrap_or_else(|e| panic!("{e}"));
    let out = dispatch(&p, "read_signed", 4, 4).unwrap();
    assert!(f32s(&out)[3].is_nan(), "the slack reads as poison: {:?}", f32s(&out));
    let e = dispatch(&p, "write_signed", 4, 5).expect_err("the write to x[5] is reported");
    assert!(matches!(&e, EmuError::Corruption { what, .. } if what.contains("byte 20 of buffer(0) `x` was written") && what.contains("slack")), "{e}");
    for kernel in ["read_signed", "write_signed"] {
        let e = dispatch(&p, kernel, 4, -1i32 as u32).err().unwrap_or_else(|| panic!("{kernel} x[-1] ran"));
        assert_fault(&e, kernel, kernel.starts_with("write"), -4, 16);
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

/// Thread 3 accesses `x[index(address of x)]` of a one-page buffer (no head: its data starts
/// and ends on a page boundary, so the dispatch runs once, on this very buffer) with a 64-bit
/// index; the address it accesses comes back with the error.
fn dispatch_wild(p: &Program, kernel: &str, index: impl FnOnce(usize) -> i64) -> (usize, EmuError) {
    let mut x = DeviceBuffer::zeroed(4096);
    let base = x.as_bytes().as_ptr() as usize;
    let index = index(base);
    let mut at = DeviceBuffer::from_bytes(&[0i64, 1, 2, index].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    let mut out = DeviceBuffer::zeroed(16);
    let r = if kernel.starts_with("write") {
        p.dispatch(kernel, &mut [&mut x, &mut at], [4, 1, 1], [4, 1, 1])
    } else {
        p.dispatch(kernel, &mut [&mut x, &mut at, &mut out], [4, 1, 1], [4, 1, 1])
    };
    let e = r.err().unwrap_or_else(|| panic!("{kernel} x[{index}] ran"));
    (base.wrapping_add((index as usize).wrapping_mul(4)), e)
}

/// The fault's description, checked to be thread 3's at the kernel's line and to name the
/// access as the kernel wrote it.
fn wild_fault(e: EmuError, kernel: &str) -> String {
    match e {
        EmuError::Fault { kernel: k, what, metal_line, thread_position_in_grid, .. } => {
            assert_eq!((k.as_str(), thread_position_in_grid), (kernel, [3, 0, 0]), "{what}");
            let marker = format!("@{}", kernel.replace('_', "-"));
            assert_eq!(metal_line.map(|l| l.1), Some(line_of(SRC, &marker)), "{what}");
            let kind = if kernel.starts_with("write") { "invalid write at " } else { "invalid read at " };
            assert!(what.starts_with(kind), "expected `{kind}`: {what}");
            what
        }
        other => panic!("expected a fault of {kernel}, got: {other}"),
    }
}

/// A 64-bit index past the canonical addresses (the processor raises a general-protection
/// fault, which carries no address) is a read or a write as the kernel wrote it, at the
/// address it computed, "a non-canonical address": not a read of a null pointer.
#[test]
fn a_wild_index_past_the_canonical_addresses_is_reported_as_such() {
    let p = program(false);
    for kernel in ["write_wild", "read_wild"] {
        // 2^47 bytes past the data, past every user-space address; 2^48 bytes before it,
        // below the kernel's addresses (2^47 bytes before it is a canonical kernel address)
        for index in [1i64 << 45, -(1i64 << 46), i64::MAX / 4] {
            let (addr, e) = dispatch_wild(&p, kernel, |_| index);
            let what = wild_fault(e, kernel);
            assert!(what.contains(&format!("at {addr:#x}, a non-canonical address (far outside any buffer)")), "{kernel} x[{index}]: {what}");
            assert!(!what.contains("null pointer"), "{kernel} x[{index}]: {what}");
        }
    }
}

/// A 64-bit index onto a page that is mapped but not accessible, far from every buffer: a
/// page fault, its address and kind from the processor.
#[test]
fn a_wild_index_onto_an_inaccessible_page_is_reported_with_its_address() {
    let p = program(false);
    // a page of this process's own, inaccessible: nothing else can be mapped there
    let page = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    assert_ne!(page, libc::MAP_FAILED);
    let target = page as usize + 8;
    for kernel in ["write_wild", "read_wild"] {
        let (addr, e) = dispatch_wild(&p, kernel, |base| (target as i64 - base as i64) / 4);
        assert_eq!(addr, target);
        let what = wild_fault(e, kernel);
        assert!(what.contains(&format!("at {target:#x}, memory outside every buffer")), "{kernel}: {what}");
    }
    unsafe { libc::munmap(page, 4096) };
}
