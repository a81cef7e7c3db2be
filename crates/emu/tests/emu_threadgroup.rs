//! Threadgroup memory's bounds (each array flush with a guard, canaries on its other side,
//! checked at each barrier) and the threadgroup-memory check (races and reads of what no thread
//! wrote, every access seen), each report naming the array, the line and the thread.

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = include_str!("emu/threadgroup.metal");
const FILE: &str = "threadgroup.metal";

fn program() -> Program {
    load(SRC, FILE)
}

fn at(marker: &str) -> Option<(String, u32)> {
    Some((FILE.to_string(), line_of(SRC, marker)))
}

fn run(p: &Program, d: Dispatch<'_>, bufs: &mut [&mut DeviceBuffer]) -> Result<DispatchStats, EmuError> {
    p.run(&d.workers(1), bufs)
}

const RACES: Option<MemoryCheck> = Some(MemoryCheck::Races);

#[test]
fn a_read_one_past_the_end_faults_naming_the_array() {
    let p = program();
    for check in [None, RACES] {
        let mut out = DeviceBuffer::zeroed(64 * 4);
        let e = run(&p, Dispatch::new("read_past_end", [64, 1, 1], [64, 1, 1]).memory_check(check), &mut [&mut out]).unwrap_err();
        match &e {
            EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
                let declared = format!("declared at {FILE}:{}", line_of(SRC, "@a-decl"));
                assert!(what.contains("invalid read") && what.contains("byte 256 of threadgroup array `a`, past its end (256 bytes") && what.contains(&declared), "{e}");
                assert_eq!(*metal_line, at("@read-past-end"), "{e}");
                assert_eq!(*thread_position_in_grid, [63, 0, 0], "{e}");
            }
            other => panic!("expected a fault ({check:?}), got {other}"),
        }
    }
}

#[test]
fn a_read_before_the_start_faults_in_a_start_placed_run() {
    let p = program();
    let d = Dispatch::new("read_before_start", [64, 1, 1], [64, 1, 1]);
    // end-placed, the bytes before the array are canaries: the read is not seen...
    let mut out = DeviceBuffer::zeroed(64 * 4);
    run(&p, d.placement(Placement::End), &mut [&mut out]).unwrap();
    // ...start-placed (and in the default, which runs both), it faults; the check sees it in any
    for (placement, check) in [(Placement::Start, None), (Placement::Both, None), (Placement::End, RACES)] {
        let mut out = DeviceBuffer::zeroed(64 * 4);
        let e = run(&p, d.placement(placement).memory_check(check), &mut [&mut out]).unwrap_err();
        match &e {
            EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
                assert!(what.contains("4 bytes before the start of threadgroup array `a`"), "{placement:?} {check:?}: {e}");
                assert_eq!(*metal_line, at("@read-before-start"), "{e}");
                assert_eq!(*thread_position_in_grid, [0, 0, 0], "{e}");
            }
            other => panic!("expected a fault ({placement:?}, {check:?}), got {other}"),
        }
    }
}

#[test]
fn a_write_into_the_slack_is_found_at_the_next_barrier() {
    let p = program();
    let d = Dispatch::new("write_into_slack", [65, 1, 1], [65, 1, 1]);
    for placement in [Placement::End, Placement::Start] {
        let mut out = DeviceBuffer::zeroed(65 * 4);
        let e = run(&p, d.placement(placement), &mut [&mut out]).unwrap_err();
        match &e {
            EmuError::Corruption { what, metal_line, .. } => {
                assert!(what.contains("byte 260 of threadgroup array `b`, past its end (260 bytes"), "{e}");
                assert!(what.contains("found at the threadgroup_barrier"), "{e}");
                assert_eq!(*metal_line, at("@slack-barrier"), "the barrier where it was found: {e}");
            }
            other => panic!("expected corruption ({placement:?}), got {other}"),
        }
    }
    // the check names the writer and its line
    let mut out = DeviceBuffer::zeroed(65 * 4);
    let e = run(&p, d.memory_check(RACES), &mut [&mut out]).unwrap_err();
    match &e {
        EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
            assert!(what.contains("invalid write") && what.contains("byte 260 of threadgroup array `b`"), "{e}");
            assert_eq!(*metal_line, at("@slack-write"), "{e}");
            assert_eq!(*thread_position_in_grid, [64, 0, 0], "{e}");
        }
        other => panic!("expected a fault, got {other}"),
    }
}

fn rounds_input() -> DeviceBuffer {
    let mut rng = Rng(7);
    f32_buf(&(0..256).map(|_| rng.f32()).collect::<Vec<f32>>())
}

/// The case: a write-after-read race that every run order hides, found by the check.
#[test]
fn a_race_hidden_by_collectives_is_found_by_the_check() {
    let p = program();
    let d = Dispatch::new("reused_each_round", [64, 1, 1], [64, 1, 1]);
    let mut results = Vec::new();
    for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(1), RunOrder::Shuffle(2)] {
        let (mut x, mut out) = (rounds_input(), DeviceBuffer::zeroed(64 * 4));
        run(&p, d.order(order), &mut [&mut x, &mut out]).unwrap();
        results.push(out.as_bytes().to_vec());
    }
    assert!(results.iter().all(|r| *r == results[0]), "the race is hidden in every run order");
    let (mut x, mut out) = (rounds_input(), DeviceBuffer::zeroed(64 * 4));
    let e = run(&p, d.memory_check(RACES), &mut [&mut x, &mut out]).unwrap_err();
    let text = e.to_string();
    match &e {
        EmuError::Race { at: element, same_simdgroup, first, second, .. } => {
            assert_eq!((element.array.as_str(), element.element), ("partial", 0), "{text}");
            assert_eq!(element.declared, at("@partial-decl").unwrap(), "{text}");
            assert!(!first.write && second.write, "a write after a read: {text}");
            assert_eq!(first.metal_line, at("@partial-read"), "{text}");
            assert_eq!(second.metal_line, at("@partial-write"), "{text}");
            assert_eq!(second.thread_position_in_grid, [0, 0, 0], "lane 0 of SIMD-group 0 writes the next round's sum: {text}");
            assert!(first.thread_position_in_grid[0] >= 32 && !same_simdgroup, "a thread of the other SIMD-group read it: {text}");
        }
        other => panic!("expected a race, got {other}"),
    }
    assert!(text.contains("data race on element 0 of threadgroup array `partial`") && text.contains("threadgroup_barrier(mem_flags::mem_threadgroup)"), "{text}");

    // with the second barrier there is none, and the check's run gives the plain run's bits
    let fixed = Dispatch::new("reused_each_round_fixed", [64, 1, 1], [64, 1, 1]);
    let (mut x, mut plain) = (rounds_input(), DeviceBuffer::zeroed(64 * 4));
    run(&p, fixed, &mut [&mut x, &mut plain]).unwrap();
    let (mut x, mut checked) = (rounds_input(), DeviceBuffer::zeroed(64 * 4));
    run(&p, fixed.memory_check(RACES), &mut [&mut x, &mut checked]).unwrap();
    assert_eq!(plain.as_bytes(), checked.as_bytes());
    assert_eq!(plain.as_bytes(), &results[0][..], "the racy kernel's result, where nothing raced");
}

#[test]
fn a_missing_barrier_is_a_race_naming_both_lines() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(64 * 4);
    let e = run(&p, Dispatch::new("no_barrier", [64, 1, 1], [64, 1, 1]).memory_check(RACES), &mut [&mut out]).unwrap_err();
    match &e {
        EmuError::Race { at: element, first, second, .. } => {
            assert_eq!((element.array.as_str(), element.element, element.byte), ("s", 1, 4), "{e}");
            assert_eq!((first.write, first.metal_line.clone(), first.thread_position_in_grid), (false, at("@s-read"), [0, 0, 0]), "{e}");
            assert_eq!((second.write, second.metal_line.clone(), second.thread_position_in_grid), (true, at("@s-write"), [1, 0, 0]), "{e}");
        }
        other => panic!("expected a race, got {other}"),
    }
}

#[test]
fn barriers_order_threadgroup_memory_only_with_mem_threadgroup() {
    let p = program();
    let exchange = |ordered: u32| {
        let (mut out, mut flag) = (DeviceBuffer::zeroed(32 * 4), u32_buf(&[ordered]));
        let r = run(&p, Dispatch::new("simd_exchange", [32, 1, 1], [32, 1, 1]).memory_check(RACES), &mut [&mut out, &mut flag]);
        (r, f32s(&out))
    };
    let (r, out) = exchange(1);
    r.unwrap();
    assert_eq!(out, (0..32).map(|i| (31 - i) as f32 * 2.0).collect::<Vec<f32>>());
    match exchange(0).0.unwrap_err() {
        EmuError::Race { same_simdgroup, first, second, .. } => {
            assert!(same_simdgroup);
            assert_eq!((first.metal_line, second.metal_line), (at("@simd-write"), at("@simd-read")));
        }
        other => panic!("a simdgroup barrier with mem_none orders nothing: {other}"),
    }
    let mut out = DeviceBuffer::zeroed(64 * 4);
    let e = run(&p, Dispatch::new("execution_barrier_only", [64, 1, 1], [64, 1, 1]).memory_check(RACES), &mut [&mut out]).unwrap_err();
    assert!(matches!(e, EmuError::Race { same_simdgroup: false, .. }), "a threadgroup barrier with mem_device only: {e}");
}

#[test]
fn atomics_and_pointers_into_threadgroup_memory_are_checked_without_false_races() {
    let p = program();
    let mut out = DeviceBuffer::zeroed(64 * 4);
    run(&p, Dispatch::new("atomic_count", [64, 1, 1], [64, 1, 1]).memory_check(RACES), &mut [&mut out]).unwrap();
    assert_eq!(u32s(&out), vec![64; 64]);
    let x: Vec<f32> = (0..128).map(|i| i as f32).collect();
    let (mut xb, mut out) = (f32_buf(&x), DeviceBuffer::zeroed(64 * 4));
    run(&p, Dispatch::new("through_pointers", [64, 1, 1], [64, 1, 1]).memory_check(RACES), &mut [&mut xb, &mut out]).unwrap();
    let want: Vec<f32> = (0..64).map(|i| x[(i + 1) % 64] + x[64 + (i + 63) % 64]).collect();
    assert_eq!(f32s(&out), want);
}

#[test]
fn a_read_of_what_no_thread_wrote_is_reported_on_request() {
    let p = program();
    let d = Dispatch::new("reads_unwritten", [64, 1, 1], [64, 1, 1]);
    let mut out = DeviceBuffer::zeroed(64 * 4);
    run(&p, d.memory_check(RACES), &mut [&mut out]).unwrap();
    assert!(f32s(&out)[63].is_nan(), "poison");
    let e = run(&p, d.memory_check(Some(MemoryCheck::UninitializedReads)), &mut [&mut out]).unwrap_err();
    let text = e.to_string();
    match &e {
        EmuError::UninitializedRead { at: element, read, .. } => {
            assert_eq!((element.array.as_str(), element.element), ("u", 64), "{text}");
            assert_eq!(element.declared, at("@u-decl").unwrap());
            assert_eq!((read.thread_position_in_grid, read.metal_line.clone()), ([63, 0, 0], at("@u-read")), "{text}");
        }
        other => panic!("expected an uninitialized read, got {other}"),
    }
    assert!(text.contains("which no thread of its threadgroup (0, 0, 0) has written"), "{text}");
}

/// `[[threadgroup(i)]]` kernel parameters (ggml's and candle's reductions): the dispatch gives
/// each index its size, and each is a threadgroup array as the declared ones are.
const PARAMS: &str = "#include <metal_stdlib>\nusing namespace metal;\n\
kernel void tg_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],\n\
                   threadgroup float* shared [[threadgroup(0)]], threadgroup uint& count [[threadgroup(1)]],\n\
                   uint t [[thread_index_in_threadgroup]], uint g [[threadgroup_position_in_grid]],\n\
                   uint n [[threads_per_threadgroup]]) {\n\
  if (t == 0) count = 0;\n\
  shared[t] = x[g * n + t];\n\
  threadgroup_barrier(mem_flags::mem_threadgroup);\n\
  atomic_fetch_add_explicit((threadgroup atomic_uint*)&count, 1u, memory_order_relaxed);\n\
  threadgroup_barrier(mem_flags::mem_threadgroup);\n\
  if (t == 0) {\n\
    float s = 0.0f;\n\
    for (uint i = 0; i < n; ++i) s += shared[i];\n\
    out[g] = s + float(count) * 1000.0f;\n\
  }\n\
}\n\
kernel void tg_past_end(device float* out [[buffer(0)]], threadgroup float* shared [[threadgroup(0)]],\n\
                        uint t [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]]) {\n\
  shared[t] = 1.0f;\n\
  threadgroup_barrier(mem_flags::mem_threadgroup);\n\
  out[t] = shared[t + 1]; // @param-past-end\n\
}\n\
kernel void tg_no_barrier(device float* out [[buffer(0)]], threadgroup float* shared [[threadgroup(0)]],\n\
                          uint t [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]]) {\n\
  shared[t] = float(t); // @param-write\n\
  out[t] = shared[(t + 1) % n]; // @param-read\n\
}\n";

#[test]
fn threadgroup_parameters_take_the_dispatchs_sizes() {
    let p = load(PARAMS, "params.metal");
    let x: Vec<f32> = (0..128).map(|i| i as f32 * 0.5).collect();
    let mut xb = f32_buf(&x);
    let mut out = DeviceBuffer::zeroed(4 * 4);
    let d = Dispatch::new("tg_sum", [128, 1, 1], [32, 1, 1])
        .threadgroup_memory(0, 32 * 4)
        .threadgroup_memory(1, 16);
    for check in [None, RACES] {
        run(&p, d.memory_check(check), &mut [&mut xb, &mut out]).unwrap();
        for (g, got) in f32s(&out).into_iter().enumerate() {
            let want: f32 = x[g * 32..g * 32 + 32].iter().sum::<f32>() + 32_000.0;
            assert_eq!(got, want, "threadgroup {g} ({check:?})");
        }
    }
    // the launch names a size for exactly the indices the kernel declares, as Metal takes them
    let launch = |d: Dispatch<'_>| match run(
        &p,
        d,
        &mut [&mut f32_buf(&x), &mut DeviceBuffer::zeroed(16)],
    ) {
        Err(e @ EmuError::Launch { .. }) => e.to_string(),
        other => panic!("expected a launch error, got {:?}", other.map(|_| ())),
    };
    let base = Dispatch::new("tg_sum", [128, 1, 1], [32, 1, 1]);
    let m = launch(base.threadgroup_memory(0, 128));
    assert!(
        m.contains("`count` [[threadgroup(1)]] needs a size")
            && m.contains("--threadgroup-memory 1=BYTES"),
        "{m}"
    );
    let m = launch(
        base.threadgroup_memory(0, 128)
            .threadgroup_memory(1, 16)
            .threadgroup_memory(2, 16),
    );
    assert!(
        m.contains("index 2, which the kernel does not declare"),
        "{m}"
    );
    let m = launch(
        base.threadgroup_memory(0, 128)
            .threadgroup_memory(1, 16)
            .threadgroup_memory(40, 16),
    );
    assert!(
        m.contains("index 40, which the kernel does not declare"),
        "{m}"
    );
    let m = launch(base.threadgroup_memory(0, 100).threadgroup_memory(1, 16));
    assert!(
        m.contains("`shared` [[threadgroup(0)]]: 100 bytes; Metal takes a positive multiple of 16"),
        "{m}"
    );
    // the total stays within Apple's 32 KiB
    match run(
        &p,
        base.threadgroup_memory(0, 32768).threadgroup_memory(1, 16),
        &mut [&mut f32_buf(&x), &mut DeviceBuffer::zeroed(16)],
    ) {
        Err(e) => assert!(
            e.to_string()
                .contains("threadgroup memory exceeds Apple's 32 KiB"),
            "{e}"
        ),
        Ok(_) => panic!("32 KiB and 16 bytes of threadgroup memory ran"),
    }
}

#[test]
fn threadgroup_parameters_are_guarded_and_race_checked() {
    let p = load(PARAMS, "params.metal");
    let line = |m: &str| Some(("params.metal".to_string(), line_of(PARAMS, m)));
    for check in [None, RACES] {
        let mut out = DeviceBuffer::zeroed(32 * 4);
        let d = Dispatch::new("tg_past_end", [32, 1, 1], [32, 1, 1])
            .threadgroup_memory(0, 32 * 4)
            .memory_check(check);
        match run(&p, d, &mut [&mut out]).unwrap_err() {
            EmuError::Fault {
                what,
                metal_line,
                thread_position_in_grid,
                ..
            } => {
                assert!(
                    what.contains(
                        "byte 128 of threadgroup array `shared`, past its end (128 bytes"
                    ),
                    "{what}"
                );
                assert_eq!(metal_line, line("@param-past-end"), "{what}");
                assert_eq!(thread_position_in_grid, [31, 0, 0]);
            }
            e => panic!("expected a fault ({check:?}), got {e}"),
        }
    }
    let mut out = DeviceBuffer::zeroed(32 * 4);
    let d = Dispatch::new("tg_no_barrier", [32, 1, 1], [32, 1, 1])
        .threadgroup_memory(0, 32 * 4)
        .memory_check(RACES);
    match run(&p, d, &mut [&mut out]).unwrap_err() {
        e @ EmuError::Race { .. } => {
            let m = e.to_string();
            assert!(m.contains("`shared`"), "{m}");
            for marker in ["@param-write", "@param-read"] {
                assert!(
                    m.contains(&format!("params.metal:{}", line_of(PARAMS, marker))),
                    "{marker}: {m}"
                );
            }
        }
        e => panic!("expected a race, got {e}"),
    }
}
