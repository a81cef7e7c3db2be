//! Threadgroups on several worker threads: the same bits as one worker in every run order,
//! device atomics that are atomic across workers, the first fault in assignment order
//! reported whatever the workers, and the worker count from the environment.

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = include_str!("emu/parallel.metal");
const FILE: &str = "parallel.metal";

const ORDERS: [RunOrder; 4] = [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(1), RunOrder::Shuffle(0xfeed)];

#[test]
fn device_atomics_are_atomic_across_workers() {
    let p = load(SRC, FILE);
    for workers in [2, 3, 8] {
        let mut count = u32_buf(&[0, 1 << 31]);
        let mut facc = DeviceBuffer::zeroed(4);
        let mut lo = DeviceBuffer::zeroed(4);
        // 512 threadgroups of 32 threads, 64 additions each
        let stats = p.run(&Dispatch::new("hammer", [16384, 1, 1], [32, 1, 1]).order(RunOrder::Forward).workers(workers), &mut [&mut count, &mut facc, &mut lo]).unwrap();
        assert_eq!(stats.workers, workers.min(512));
        assert_eq!(u32s(&count), [16384 * 64, (1 << 31) - 16384 * 64], "workers {workers}");
        assert_eq!(f32s(&facc), [(16384 * 64) as f32], "1.0 additions are exact up to 2^24 (workers {workers})");
        assert_eq!(i32::from_le_bytes(lo.as_bytes().try_into().unwrap()), -(16384 * 64 - 1), "workers {workers}");
    }
}

#[test]
fn parallel_results_are_the_serial_bits_in_every_order() {
    let p = load(SRC, FILE);
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..256 * 300).map(|_| rng.f32()).collect();
    for order in ORDERS {
        let run = |workers: usize| {
            let mut xb = f32_buf(&x);
            let mut out = DeviceBuffer::zeroed(300 * 4);
            p.run(&Dispatch::new("reduce_slices", [256 * 300, 1, 1], [256, 1, 1]).order(order).workers(workers), &mut [&mut xb, &mut out]).unwrap();
            out.as_bytes().to_vec()
        };
        let serial = run(1);
        for workers in [2, 3, 5] {
            assert_eq!(run(workers), serial, "{order:?} with {workers} workers");
        }
    }
}

/// The report without absolute addresses (buffers are mapped anew for every run).
fn without_addresses(e: &EmuError) -> String {
    let s = e.to_string();
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        rest = rest[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
        out.push_str("0x?");
    }
    out.push_str(rest);
    out
}

#[test]
fn the_first_fault_in_assignment_order_wins_whatever_the_workers() {
    let p = load(SRC, FILE);
    // 64 threadgroups of 64 threads; x covers threadgroups 0..20 and half of 20
    let n = 20 * 64 + 32;
    for order in ORDERS {
        let run = |workers: usize| {
            let mut x = f32_buf(&vec![1.0; n]);
            let mut y = DeviceBuffer::zeroed(64 * 64 * 4);
            p.run(&Dispatch::new("fault_from", [64 * 64, 1, 1], [64, 1, 1]).order(order).workers(workers), &mut [&mut x, &mut y]).unwrap_err()
        };
        let serial = run(1);
        match (&serial, order) {
            (EmuError::Fault { thread_position_in_grid, threadgroup_position_in_grid, metal_line, .. }, RunOrder::Forward) => {
                assert_eq!(*threadgroup_position_in_grid, [20, 0, 0]);
                assert_eq!(*thread_position_in_grid, [n as u32, 0, 0]);
                assert_eq!(metal_line.as_ref().unwrap().1, line_of(SRC, "@fault-from"));
            }
            (EmuError::Fault { threadgroup_position_in_grid, thread_position_in_grid, .. }, RunOrder::Reverse) => {
                assert_eq!(*threadgroup_position_in_grid, [63, 0, 0]);
                assert_eq!(*thread_position_in_grid, [64 * 64 - 1, 0, 0]);
            }
            (EmuError::Fault { .. }, _) => {}
            (other, _) => panic!("expected a fault, got {other}"),
        }
        for workers in [2, 4, 7] {
            for _ in 0..5 {
                assert_eq!(without_addresses(&run(workers)), without_addresses(&serial), "{order:?} with {workers} workers");
            }
        }
    }
}

#[test]
fn the_worker_count_comes_from_the_environment() {
    const VAR: &str = "KERNELGEN_EMU_WORKERS";
    if std::env::var_os("KGEMU_TEST_WORKERS_CHILD").is_some() {
        let p = load(SRC, FILE);
        let mut x = f32_buf(&vec![1.0; 64 * 64]);
        let mut y = DeviceBuffer::zeroed(64 * 64 * 4);
        let stats = p.dispatch("fault_from", &mut [&mut x, &mut y], [64 * 64, 1, 1], [64, 1, 1]).unwrap();
        println!("WORKERS={}", stats.workers);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (value, want) in [("3", 3usize), ("1", 1)] {
        let out = std::process::Command::new(&exe)
            .args([common::test_path(module_path!(), "the_worker_count_comes_from_the_environment").as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env("KGEMU_TEST_WORKERS_CHILD", "1")
            .env(VAR, value)
            .output()
            .expect("spawn the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(&format!("WORKERS={want}")), "{VAR}={value}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    // the default is every core; an explicit count overrides it
    let p = load(SRC, FILE);
    let mut x = f32_buf(&vec![1.0; 64 * 64]);
    let mut y = DeviceBuffer::zeroed(64 * 64 * 4);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if std::env::var_os(VAR).is_none() {
        let stats = p.dispatch("fault_from", &mut [&mut x, &mut y], [64 * 64, 1, 1], [64, 1, 1]).unwrap();
        assert_eq!(stats.workers, cores.min(64));
    }
    let stats = p.run(&Dispatch::new("fault_from", [64 * 64, 1, 1], [64, 1, 1]).order(RunOrder::Forward).workers(5), &mut [&mut x, &mut y]).unwrap();
    assert_eq!(stats.workers, 5);
}
