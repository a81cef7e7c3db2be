//! Planted bugs the emulator must catch, each with a report naming the kernel, the
//! .metal line and the GPU thread where promised.

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = include_str!("emu/bugs.metal");
const FILE: &str = "bugs.metal";

fn program() -> Program {
    load(SRC, FILE)
}

#[test]
fn read_one_past_the_end_hits_the_guard_page() {
    let p = program();
    let mut x = f32_buf(&[1.0; 100]);
    let mut y = DeviceBuffer::zeroed(128 * 4);
    let e = p.dispatch("read_past_end", &mut [&mut x, &mut y], [128, 1, 1], [64, 1, 1]).unwrap_err();
    let msg = e.to_string();
    match &e {
        EmuError::Fault { kernel, metal_line, thread_position_in_grid, threadgroup_position_in_grid, what } => {
            assert_eq!(kernel, "read_past_end");
            assert_eq!(metal_line.as_ref().unwrap(), &(FILE.to_string(), line_of(SRC, "@past-end")), "{msg}");
            assert_eq!(*thread_position_in_grid, [100, 0, 0], "the first thread past the end, in forward order");
            assert_eq!(*threadgroup_position_in_grid, [1, 0, 0]);
            assert!(what.contains("buffer(0) `x`") && what.contains("past the end of the 400-byte buffer"), "{what}");
            assert!(what.contains("invalid read"), "{what}");
        }
        other => panic!("expected a fault, got {other}"),
    }
    assert!(msg.contains("read_past_end") && msg.contains(&format!("{FILE}:{}", line_of(SRC, "@past-end"))), "{msg}");
    assert!(msg.contains("(100, 0, 0)") && msg.contains("(1, 0, 0)"), "{msg}");
    // the emulator is usable again after a fault
    let mut x = f32_buf(&[1.0; 128]);
    p.dispatch("read_past_end", &mut [&mut x, &mut y], [128, 1, 1], [64, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![2.0; 128]);
}

#[test]
fn a_missing_barrier_shows_as_poison_or_order_dependence() {
    let p = program();
    let x: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
    let mut results = Vec::new();
    for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(3)] {
        let mut xb = f32_buf(&x);
        let mut out = DeviceBuffer::zeroed(4);
        p.run(&Dispatch::new("missing_barrier", [256, 1, 1], [256, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap();
        results.push(f32s(&out)[0]);
    }
    let correct: f32 = x.iter().sum();
    let caught = results.iter().any(|r| r.is_nan()) || results.iter().any(|r| r.to_bits() != results[0].to_bits());
    assert!(caught, "results {results:?} should differ between run orders or show poison (correct: {correct})");
    assert!(results[0].is_nan(), "forward order reads partial sums nobody has written yet: {results:?}");
}

#[test]
fn uninitialised_threadgroup_read_is_poison() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(128 * 4);
    p.dispatch("uninit_tg", &mut [&mut out], [128, 1, 1], [128, 1, 1]).unwrap();
    let o = f32s(&out);
    assert!(o[..64].iter().enumerate().all(|(i, &v)| v == i as f32));
    assert!(o[64..].iter().all(|v| v.is_nan()), "unwritten threadgroup memory must read as NaN");
}

#[test]
fn a_dispatch_chooses_the_threadgroup_poison_byte() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(128 * 4);
    p.run(&Dispatch::new("uninit_tg", [128, 1, 1], [128, 1, 1]).threadgroup_poison(0), &mut [&mut out]).unwrap();
    let o = f32s(&out);
    assert!(o[..64].iter().enumerate().all(|(i, &v)| v == i as f32));
    assert!(o[64..].iter().all(|v| v.to_bits() == 0), "unwritten threadgroup memory holds the dispatch's byte, 0");
}

#[test]
fn a_read_across_regions_of_a_packed_buffer_hits_the_poisoned_gap() {
    let p = program();
    // gate rows: 4 rows of 4096 bytes at 0..16384; a page-sized gap; scales after it
    let mut slot = DeviceBuffer::zeroed_aligned(6 * 4096, 16384);
    slot.set_regions(&[0..4 * 4096, 5 * 4096..6 * 4096]);
    assert!(slot.as_bytes()[4 * 4096..5 * 4096].iter().all(|&b| b == 0xFF), "gaps hold poison");
    let mut out = DeviceBuffer::zeroed(16);
    let e = p.dispatch("slot_overrun", &mut [&mut slot, &mut out], [4, 1, 1], [4, 1, 1]).unwrap_err();
    match &e {
        EmuError::Fault { kernel, what, metal_line, thread_position_in_grid, .. } => {
            assert_eq!(kernel, "slot_overrun");
            assert!(what.contains("poisoned gap 16384..20480 between declared regions 0..16384 and 20480..24576"), "{what}");
            assert_eq!(metal_line.as_ref().unwrap().1, line_of(SRC, "@overrun"), "{e}");
            assert_eq!(*thread_position_in_grid, [3, 0, 0], "row 3 runs into the gap");
        }
        other => panic!("expected a fault, got {other}"),
    }
    // without regions the same read is silently inside the buffer
    slot.set_regions(&[]);
    p.dispatch("slot_overrun", &mut [&mut slot, &mut out], [4, 1, 1], [4, 1, 1]).unwrap();
}

#[test]
fn a_write_past_a_threadgroup_array_corrupts_its_redzone() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(40 * 4);
    let e = p.dispatch("tg_overflow", &mut [&mut out], [40, 1, 1], [40, 1, 1]).unwrap_err();
    match &e {
        EmuError::Corruption { kernel, what, metal_line, threadgroup_position_in_grid } => {
            assert_eq!(kernel, "tg_overflow");
            assert!(what.contains("threadgroup array `a`"), "{what}");
            assert_eq!(metal_line.as_ref().unwrap().1, line_of(SRC, "@tg-decl"));
            assert_eq!(*threadgroup_position_in_grid, [0, 0, 0]);
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn threads_at_different_barriers() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(64 * 4);
    let e = p.dispatch("barrier_mismatch", &mut [&mut out], [64, 1, 1], [64, 1, 1]).unwrap_err();
    let msg = e.to_string();
    match &e {
        EmuError::Barrier { kernel, first, second, .. } => {
            assert_eq!(kernel, "barrier_mismatch");
            let lines = [first.metal_line.as_ref().unwrap().1, second.metal_line.as_ref().unwrap().1];
            assert_eq!(lines, [line_of(SRC, "@barrier-a"), line_of(SRC, "@barrier-b")], "{msg}");
            assert_eq!(first.thread_position_in_grid, [0, 0, 0]);
            assert_eq!(second.thread_position_in_grid, [40, 0, 0]);
        }
        other => panic!("expected a barrier error, got {other}"),
    }
    assert!(msg.contains("threadgroup_barrier"), "{msg}");
}

#[test]
fn lanes_at_different_collectives() {
    let p = program();
    let mut x = f32_buf(&[1.0; 32]);
    let mut out = DeviceBuffer::zeroed(128);
    let e = p.dispatch("divergent_collective", &mut [&mut x, &mut out], [32, 1, 1], [32, 1, 1]).unwrap_err();
    match &e {
        EmuError::Divergence { kernel, simdgroup, first, second, .. } => {
            assert_eq!(kernel, "divergent_collective");
            assert_eq!(*simdgroup, 0);
            assert_eq!((first.at.as_str(), first.metal_line.as_ref().unwrap().1), ("simd_sum", line_of(SRC, "@div-a")));
            assert_eq!((second.at.as_str(), second.metal_line.as_ref().unwrap().1), ("simd_max", line_of(SRC, "@div-b")));
        }
        other => panic!("expected divergence, got {other}"),
    }
}

#[test]
fn integer_division_by_zero_is_a_fault() {
    let p = program();
    let d: Vec<u32> = (0..8).map(|i| if i == 5 { 0 } else { 3 }).collect();
    let mut db = u32_buf(&d);
    let mut out = DeviceBuffer::zeroed(32);
    let e = p.dispatch("div_zero", &mut [&mut db, &mut out], [8, 1, 1], [8, 1, 1]).unwrap_err();
    match &e {
        EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
            assert!(what.contains("division by zero"), "{what}");
            assert_eq!(metal_line.as_ref().unwrap().1, line_of(SRC, "@div-zero"));
            assert_eq!(*thread_position_in_grid, [5, 0, 0]);
        }
        other => panic!("expected a fault, got {other}"),
    }
}

#[test]
fn a_thread_stack_overflow_is_a_fault() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(16);
    let e = p.dispatch("stack_hog", &mut [&mut out], [4, 1, 1], [4, 1, 1]).unwrap_err();
    match &e {
        EmuError::Fault { kernel, what, .. } => {
            assert_eq!(kernel, "stack_hog");
            assert!(what.contains("stack overflow"), "{what}");
        }
        other => panic!("expected a fault, got {other}"),
    }
}

#[test]
fn threadgroup_memory_over_32_kib_is_refused() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(64);
    let e = p.dispatch("tg_too_big", &mut [&mut out], [16, 1, 1], [16, 1, 1]).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Launch { .. }), "{msg}");
    assert!(msg.contains("32 KiB") && msg.contains("`huge`") && msg.contains(&format!("bugs.metal:{}", line_of(SRC, "@tg-huge"))), "{msg}");
}

#[test]
fn a_write_into_a_small_gap_is_corruption() {
    let p = program();
    let mut slot = DeviceBuffer::zeroed(48 * 4);
    slot.set_regions(&[0..96, 128..192]);
    // with one worker the report names the threadgroup that wrote
    let e = p.run(&Dispatch::new("write_gap", [48, 1, 1], [16, 1, 1]).order(RunOrder::Forward).workers(1), &mut [&mut slot]).unwrap_err();
    match &e {
        EmuError::Corruption { kernel, what, threadgroup_position_in_grid, .. } => {
            assert_eq!(kernel, "write_gap");
            assert!(what.contains("byte 96 of buffer(0) `slot`") && what.contains("poisoned gap 96..128"), "{what}");
            assert_eq!(*threadgroup_position_in_grid, [1, 0, 0], "threads 16..32 write offsets 64..128");
        }
        other => panic!("expected corruption, got {other}"),
    }
    // with several it is reported as reliably, after the writer or a threadgroup beside it
    for _ in 0..20 {
        let e = p.run(&Dispatch::new("write_gap", [48, 1, 1], [16, 1, 1]).order(RunOrder::Forward).workers(3), &mut [&mut slot]).unwrap_err();
        match &e {
            EmuError::Corruption { what, threadgroup_position_in_grid, .. } => {
                assert!(what.contains("byte 96 of buffer(0) `slot`") && what.contains("poisoned gap 96..128"), "{what}");
                assert!(threadgroup_position_in_grid[0] <= 2, "{e}");
                assert!(what.contains("one worker names the writer"), "{what}");
            }
            other => panic!("expected corruption, got {other}"),
        }
    }
}

#[test]
fn faults_and_clean_dispatches_on_several_threads_at_once() {
    let p = program();
    std::thread::scope(|sc| {
        for t in 0..4 {
            let p = p.clone();
            sc.spawn(move || {
                for _ in 0..25 {
                    let mut x = f32_buf(&[1.5; 100]);
                    let mut y = DeviceBuffer::zeroed(128 * 4);
                    if t % 2 == 0 {
                        let e = p.dispatch("read_past_end", &mut [&mut x, &mut y], [128, 1, 1], [64, 1, 1]).unwrap_err();
                        assert!(matches!(e, EmuError::Fault { thread_position_in_grid: [100, 0, 0], .. }), "{e}");
                    } else {
                        p.dispatch("read_past_end", &mut [&mut x, &mut y], [100, 1, 1], [64, 1, 1]).unwrap();
                        assert!(f32s(&y)[..100].iter().all(|&v| v == 3.0));
                    }
                }
            });
        }
    });
}
