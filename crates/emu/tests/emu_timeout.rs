//! The time limit of a dispatch: a kernel that never ends (an endless loop, a spin on
//! threadgroup memory no other thread changes while it spins) is stopped at the limit and
//! reported with the threadgroups it was running, and the emulator runs the next dispatch.

use crate::common;

use common::*;
use kernelgen_emu::*;
use std::time::{Duration, Instant};

const SRC: &str = include_str!("emu/timeout.metal");
const FILE: &str = "timeout.metal";
const LIMIT: Duration = Duration::from_secs(1);

fn program(limit: Option<Duration>) -> Program {
    let emu = Emulator::new(EmuOptions { timeout: limit, ..EmuOptions::default() }).unwrap_or_else(|e| panic!("{e}"));
    emu.load(SRC, FILE).unwrap_or_else(|e| panic!("{e}"))
}

/// `kernel` over `threadgroups` threadgroups of 64 threads on `workers` workers, on a thread
/// of its own: its result and how long it took, or a panic when it has not returned long
/// after the limit (a watchdog that failed would otherwise hang the tests).
fn dispatch(p: &Program, kernel: &str, threadgroups: u32, workers: usize) -> (Result<DispatchStats, EmuError>, Duration, Vec<u32>) {
    let (p, kernel) = (p.clone(), kernel.to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut x = DeviceBuffer::zeroed(threadgroups as usize * 64 * 4);
        let start = Instant::now();
        let r = p.run(&Dispatch::new(&kernel, [threadgroups * 64, 1, 1], [64, 1, 1]).order(RunOrder::Forward).workers(workers), &mut [&mut x]);
        let _ = tx.send((r, start.elapsed(), u32s(&x)));
    });
    rx.recv_timeout(LIMIT * 10 + Duration::from_secs(30)).expect("the dispatch returned")
}

/// The timeout error, checked to name the kernel, the limit and exactly `running`.
fn assert_timeout(r: Result<DispatchStats, EmuError>, took: Duration, kernel: &str, running: &[[u32; 3]]) {
    let e = r.err().unwrap_or_else(|| panic!("{kernel} ended"));
    let msg = e.to_string();
    match &e {
        EmuError::Timeout { kernel: k, limit, threadgroups, .. } => {
            assert_eq!((k.as_str(), *limit), (kernel, LIMIT), "{msg}");
            let mut got = threadgroups.clone();
            got.sort();
            assert_eq!(got, running, "{msg}");
        }
        other => panic!("{kernel}: expected a timeout, got {other}"),
    }
    assert!(msg.contains(&format!("kernel `{kernel}`")) && msg.contains("time limit of 1 s"), "{msg}");
    // stopped at the limit (with room for a loaded machine), not when the test gave up
    assert!(took >= LIMIT && took < LIMIT + Duration::from_secs(8), "{kernel} took {took:?}");
}

/// A dispatch's own time limit replaces the emulator's (here the default, 60 s).
#[test]
fn a_dispatch_sets_its_own_time_limit() {
    let p = program(None);
    let mut x = DeviceBuffer::zeroed(64 * 4);
    let start = Instant::now();
    let r = p.run(&Dispatch::new("forever", [64, 1, 1], [64, 1, 1]).workers(1).timeout(LIMIT), &mut [&mut x]);
    assert_timeout(r, start.elapsed(), "forever", &[[0, 0, 0]]);
}

/// An endless loop and a barrier-free spin, on one worker and on several: stopped at the
/// limit in every threadgroup a worker was running, and the next dispatch runs.
#[test]
fn a_kernel_that_never_ends_is_stopped_at_the_time_limit() {
    let p = program(Some(LIMIT));
    for kernel in ["forever", "spin"] {
        for workers in [1, 3] {
            let (r, took, _) = dispatch(&p, kernel, 4, workers);
            let running: Vec<[u32; 3]> = (0..workers as u32).map(|g| [g, 0, 0]).collect();
            assert_timeout(r, took, kernel, &running);
            let (r, _, x) = dispatch(&p, "ends", 4, workers);
            r.unwrap_or_else(|e| panic!("after {kernel}: {e}"));
            assert_eq!(x, (0..256).collect::<Vec<u32>>());
        }
    }
}

/// Only the threadgroup that never ends is named, the others having finished; a long list
/// of them is cut short.
#[test]
fn the_report_names_the_threadgroups_still_running() {
    let p = program(Some(LIMIT));
    let (r, took, _) = dispatch(&p, "forever_in_one", 4, 2);
    assert_timeout(r, took, "forever_in_one", &[[1, 0, 0]]);
    let (r, took, _) = dispatch(&p, "forever", 12, 12);
    let msg = r.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("(0, 0, 0), (1, 0, 0)") && msg.contains("and 4 more"), "{msg}");
    assert_timeout(r, took, "forever", &(0..12).map(|g| [g, 0, 0]).collect::<Vec<_>>());
}

/// The limit comes from the options, else the process's default: `set_default_timeout`,
/// else `$KERNELGEN_EMU_TIMEOUT` (seconds), else 60 s.
#[test]
fn the_time_limit_comes_from_the_environment() {
    const CHILD: &str = "KGEMU_TEST_TIMEOUT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let from_env = Duration::from_millis(500);
        assert_eq!(default_timeout(), from_env);
        let p = program(None);
        let (r, took, _) = dispatch(&p, "forever", 1, 1);
        assert!(matches!(r, Err(EmuError::Timeout { limit, .. }) if limit == from_env), "{took:?}");
        assert!(took >= from_env && took < from_env + Duration::from_secs(8), "{took:?}");
        set_default_timeout(LIMIT);
        let (r, took, _) = dispatch(&p, "forever", 1, 1);
        assert_timeout(r, took, "forever", &[[0, 0, 0]]);
        return;
    }
    common::run_in_child(module_path!(), "the_time_limit_comes_from_the_environment", &[(CHILD, "1"), ("KERNELGEN_EMU_TIMEOUT", "0.5")]);
    if std::env::var_os("KERNELGEN_EMU_TIMEOUT").is_none() {
        assert_eq!(default_timeout(), Duration::from_secs(60));
    }
}
