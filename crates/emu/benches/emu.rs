//! Emulator benchmarks: GPU threads emulated per second on an expert-style Q4 gate/up
//! kernel (M=1, hidden 2048, intermediate 768: grid [128, 192, 1], threadgroup [128, 1, 1],
//! 24,576 GPU threads), and .metal -> loaded object cold (fresh cache) and on a cache hit.
//! Peak RSS is printed at the end (VmHWM).
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench --bench emu` (one core is enough).

use divan::{Bencher, counter::ItemsCount};
use kernelgen_emu::{DeviceBuffer, EmuOptions, Emulator, Program};

const Q4: &str = include_str!("../tests/emu/q4_gate_up.metal");
const H: usize = 2048;
const I: usize = 768;
const SLOT: usize = 1579008;

fn main() {
    divan::main();
    if let Ok(s) = std::fs::read_to_string("/proc/self/status") {
        for l in s.lines().filter(|l| l.starts_with("VmHWM") || l.starts_with("VmPeak")) {
            println!("{l}");
        }
    }
}

/// A kernel's source as MSL: what the Metal check accepts (metal_stdlib, namespace metal).
macro_rules! msl {
    ($body:literal) => {
        concat!("#include <metal_stdlib>\nusing namespace metal;\n", $body)
    };
}

fn program() -> Program {
    let emu = Emulator::new(EmuOptions::default()).expect("emulator");
    emu.load(Q4, "q4_gate_up.metal").expect("load")
}

fn inputs() -> (DeviceBuffer, DeviceBuffer, DeviceBuffer) {
    let mut st = 0x1234_5678u32;
    let mut next = || {
        st ^= st << 13;
        st ^= st >> 17;
        st ^= st << 5;
        st
    };
    let x: Vec<u8> = (0..H).flat_map(|_| half::bf16::from_f32((next() % 2000) as f32 / 1000.0 - 1.0).to_le_bytes()).collect();
    let mut slot = vec![0u8; SLOT];
    for b in slot[..2 * I * H / 2].iter_mut() {
        *b = next() as u8;
    }
    for r in 0..2 * I {
        let s = 0.01f32 + (next() % 100) as f32 * 1e-4;
        slot[2 * I * H / 2 + r * 4..2 * I * H / 2 + r * 4 + 4].copy_from_slice(&s.to_le_bytes());
    }
    (DeviceBuffer::from_bytes(&x), DeviceBuffer::from_bytes_aligned(&slot, 16384), DeviceBuffer::zeroed(I * 2))
}

/// GPU threads per second: items = 24,576 threads per dispatch.
#[divan::bench(sample_count = 20)]
fn q4_gate_up_threads(b: Bencher) {
    let p = program();
    let (mut x, mut slot, mut out) = inputs();
    b.counter(ItemsCount::new(128usize * 192)).bench_local(|| {
        p.dispatch("q4_gate_up_bf16", &mut [&mut x, &mut slot, &mut out], [128, 192, 1], [128, 1, 1]).expect("dispatch")
    });
}

/// .metal -> loaded object with an empty cache (the precompiled shim already exists, as it
/// does after the first build in a target directory).
#[divan::bench(sample_count = 5)]
fn load_cold(b: Bencher) {
    let dir = std::env::temp_dir().join(format!("kgemu-bench-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let emu = Emulator::new(EmuOptions { cache_dir: Some(dir.clone()), ..Default::default() }).expect("emulator");
    let mut n = 0u64;
    b.bench_local(|| {
        n += 1;
        // a distinct source each time, so every iteration compiles
        let src = format!("{Q4}\n// variant {n}\n");
        let p = emu.load(&src, "q4_gate_up.metal").expect("load");
        assert!(p.was_compiled());
        p
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// .metal -> loaded object when the object is cached (no compile).
#[divan::bench(sample_count = 20)]
fn load_cache_hit(b: Bencher) {
    let emu = Emulator::new(EmuOptions::default()).expect("emulator");
    emu.load(Q4, "q4_gate_up.metal").expect("load");
    b.bench_local(|| {
        let p = emu.load(Q4, "q4_gate_up.metal").expect("load");
        assert!(!p.was_compiled());
        p
    });
}

/// Scheduling cost alone: the same grid, two simd_sum per thread and no other work.
#[divan::bench(sample_count = 20)]
fn scheduling_two_collectives(b: Bencher) {
    let emu = Emulator::new(EmuOptions::default()).expect("emulator");
    let p = emu.load(msl!("[[kernel]] void k(device float* o [[buffer(0)]], uint3 g [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) { float a = simd_sum(float(lane)); float c = simd_sum(a); if (lane == 0) o[g.y] = c; }"), "o.metal").unwrap();
    let mut out = DeviceBuffer::zeroed(192 * 4);
    b.counter(ItemsCount::new(128usize * 192)).bench_local(|| {
        p.dispatch("k", &mut [&mut out], [128, 192, 1], [128, 1, 1]).expect("dispatch")
    });
}
/// Fiber start/exit cost alone: the same grid, no collective.
#[divan::bench(sample_count = 20)]
fn scheduling_no_collective(b: Bencher) {
    let emu = Emulator::new(EmuOptions::default()).expect("emulator");
    let p = emu.load(msl!("[[kernel]] void k(device float* o [[buffer(0)]], uint3 g [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) { if (lane == 0) o[g.y] = 1.0f; }"), "o.metal").unwrap();
    let mut out = DeviceBuffer::zeroed(192 * 4);
    b.counter(ItemsCount::new(128usize * 192)).bench_local(|| {
        p.dispatch("k", &mut [&mut out], [128, 192, 1], [128, 1, 1]).expect("dispatch")
    });
}

/// Collectives alone, by threadgroup size: 16 `simd_sum` per thread, one worker.
#[divan::bench(args = [32, 128, 1024], sample_count = 30)]
fn collectives_by_threadgroup(b: Bencher, tg: u32) {
    let emu = Emulator::new(EmuOptions { workers: 1, ..EmuOptions::default() }).expect("emulator");
    let p = emu.load(msl!("[[kernel]] void k(device float* o [[buffer(0)]], uint3 g [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) { float a = float(lane); for (int i = 0; i < 16; ++i) a = simd_sum(a) * 0.5f; if (lane == 0) o[g.x / 32] = a; }"), "c.metal").unwrap();
    let mut out = DeviceBuffer::zeroed(32768 / 32 * 4);
    b.counter(ItemsCount::new(32768usize * 16)).bench_local(|| {
        p.dispatch("k", &mut [&mut out], [32768, 1, 1], [tg, 1, 1]).expect("dispatch")
    });
}
