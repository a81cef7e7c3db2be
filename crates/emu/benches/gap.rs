//! The gap to the limit: for one kernel of each family at a production geometry, the
//! emulator's time (a launch through `EmuBackend`, copies in and out included) against the
//! family's bit-exact replay model (`kernelgen-reference`: the kernel's arithmetic in the
//! kernel's order, run natively) on the same inputs, single-threaded and with every core;
//! GPU threads per second; and the process's peak RSS while the kernel's inputs, replay and
//! launch were alive. Each figure is the fastest of its runs: at least `KGEMU_BENCH_REPS`
//! rounds (default 3) of every figure's run in turn, and more while the kernel's
//! `KGEMU_BENCH_SECS` (default 3) last, so a small kernel's figures are the best of many.
//!
//! Single-threaded figures run on a thread pinned to one CPU (the replay models that split
//! rows over threads, affine's, then use one) with one emulator worker, and are the CPU time
//! the process spent, so other load on the machine barely moves them; the all-core figures
//! and the speed-up are wall-clock times, which need a quiet machine. The replay models of
//! the other families are single-threaded: their all-core figure is the ideal
//! `1-core time / cores` (marked `*`). Every launch's outputs are checked against the
//! replay's, bit for bit.
//!
//! Run: `cargo bench -p kernelgen-emu --bench gap [-- FILTER]` (part of `make bench`).

use std::time::{Duration, Instant};

use half::bf16;
use kernelgen::backend;
use kernelgen::contract::KernelDef;
use kernelgen::kernels::CATALOG;
use kernelgen_emu::host::HostArray;
use kernelgen_emu::{EmuBackend, EmuOptions};
use kernelgen_reference::{self as reference, SplitMix64};

/// One benchmark: its inputs, and its replay (outputs in contract order).
struct Case {
    kernel: &'static str,
    sizes: String,
    inputs: Vec<HostArray>,
    replay: Box<dyn Fn(&[HostArray]) -> Vec<HostArray> + Sync>,
    /// Whether the replay model uses every core by itself.
    parallel_replay: bool,
}

fn def(name: &str) -> &'static KernelDef {
    CATALOG.iter().copied().find(|d| d.name == name).unwrap_or_else(|| panic!("no kernel {name} in the catalog"))
}

fn bf16s(a: &HostArray) -> Vec<bf16> {
    a.data.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]])).collect()
}

fn f32s(a: &HostArray) -> Vec<f32> {
    a.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn random_bf16(rng: &mut SplitMix64, n: usize, scale: f32) -> Vec<bf16> {
    (0..n).map(|_| bf16::from_f32((rng.unit() * 2.0 - 1.0) as f32 * scale)).collect()
}

fn expert(name: &'static str, m: usize) -> Case {
    use reference::expert::{ExpertGeometry, ExpertWeights, Quant};
    let d = def(name);
    let down = def(&name.replace("gate_up", "down"));
    let region = |d: &KernelDef, r: &str| d.inputs[1].regions.iter().find(|x| x.name == r).unwrap().offset as usize;
    let (h, i) = (d.inputs[0].shape[1].as_fixed().expect("a fixed dimension") as usize, d.outputs[0].shape[1].as_fixed().expect("a fixed dimension") as usize);
    let g = ExpertGeometry {
        hidden: h,
        intermediate: i,
        gate_weights: region(d, "gate_weights"),
        up_weights: region(d, "up_weights"),
        down_weights: region(down, "down_weights"),
        gate_scales: region(d, "gate_scales"),
        up_scales: region(d, "up_scales"),
        down_scales: region(down, "down_scales"),
        slot_bytes: d.inputs[1].shape[0].as_fixed().expect("a fixed dimension") as usize,
    };
    let slot = ExpertWeights::random(Quant::Q4, h, i, 3).pack(Quant::Q4, &g);
    let x = random_bf16(&mut SplitMix64::new(4), m * h, 1.0);
    Case {
        kernel: name,
        sizes: format!("M={m}"),
        inputs: vec![HostArray::from_bf16(vec![m as u64, h as u64], &x), HostArray::from_u8(vec![slot.len() as u64], slot)],
        replay: Box::new(move |inp| {
            let mid = reference::expert::gate_up_replay(&bf16s(&inp[0]), &inp[1].data, &g, Quant::Q4, m, reference::expert::Lanes::Strided);
            vec![HostArray::from_bf16(vec![m as u64, i as u64], &mid)]
        }),
        parallel_replay: false,
    }
}

/// The bytes of an array as elements, in place (the array is 16-byte aligned guarded memory).
fn elements<T: Copy>(a: &HostArray) -> &[T] {
    // SAFETY: only instantiated with u32 and bf16, for which every bit pattern is valid.
    let (head, v, tail) = unsafe { a.data.align_to::<T>() };
    assert!(head.is_empty() && tail.is_empty() && cfg!(target_endian = "little"), "an aligned little-endian array");
    v
}

/// `values` as the bytes of a guarded array (bound in place by the emulator backend).
fn guarded_bf16(shape: Vec<u64>, values: &[bf16]) -> HostArray {
    let mut a = HostArray::guarded(kernelgen::Dtype::Bf16, shape);
    for (c, v) in a.data.chunks_exact_mut(2).zip(values) {
        c.copy_from_slice(&v.to_le_bytes());
    }
    a
}

fn affine(name: &'static str) -> Case {
    use reference::affine::{Bits, QuantizedView, affine_row_replay_view};
    let d = def(name);
    let (k, n) = (d.inputs[0].shape[1].as_fixed().expect("a fixed dimension") as usize, d.inputs[1].shape[0].as_fixed().expect("a fixed dimension") as usize);
    let words = d.inputs[1].shape[1].as_fixed().expect("a fixed dimension") as usize;
    let bits = if words * 32 == k * 4 { Bits::Four } else { Bits::Three };
    let mut rng = SplitMix64::new(5);
    let groups = k / 64;
    // the weights are drawn into the guarded input array; the replay reads them there
    let mut w = HostArray::guarded(kernelgen::Dtype::U32, vec![n as u64, words as u64]);
    for c in w.data.chunks_exact_mut(4) {
        c.copy_from_slice(&(rng.next_u64() as u32).to_le_bytes());
    }
    let levels = f64::from(bits.max_q());
    let scales: Vec<bf16> = (0..n * groups).map(|_| bf16::from_f32(((0.5 + rng.unit()) * 2.0 / levels) as f32)).collect();
    let biases = random_bf16(&mut rng, n * groups, 1.0);
    let x = random_bf16(&mut rng, k, 1.0);
    Case {
        kernel: name,
        sizes: "-".into(),
        inputs: vec![
            guarded_bf16(vec![1, k as u64], &x),
            w,
            guarded_bf16(vec![n as u64, groups as u64], &scales),
            guarded_bf16(vec![n as u64, groups as u64], &biases),
        ],
        replay: Box::new(move |inp| {
            let q = QuantizedView { n, k, bits, w: elements::<u32>(&inp[1]), scales: elements::<bf16>(&inp[2]), biases: elements::<bf16>(&inp[3]) };
            let y = affine_row_replay_view(elements::<bf16>(&inp[0]), &q);
            vec![HostArray::from_bf16(vec![1, n as u64], &y)]
        }),
        parallel_replay: true,
    }
}

fn delta(name: &'static str, b: usize, t: usize) -> Case {
    use reference::delta::{DeltaGeometry, DeltaInputs, delta_replay};
    let d = def(name);
    let dim = |i: usize, j: usize| d.inputs[i].shape[j].as_fixed().expect("a fixed dimension") as usize;
    let geom = DeltaGeometry { b, t, hk: dim(0, 2), hv: dim(2, 2), dk: dim(0, 3), dv: dim(2, 3) };
    let mut rng = SplitMix64::new(6);
    let scale = 1.7 / (geom.dk as f32).sqrt();
    let q = random_bf16(&mut rng, geom.qk_len(), scale);
    let k = random_bf16(&mut rng, geom.qk_len(), scale);
    let v = random_bf16(&mut rng, geom.v_len(), 1.0);
    let g: Vec<f32> = (0..geom.gate_len()).map(|_| (-(rng.unit() * 0.5 + 0.01)).exp() as f32).collect();
    let beta: Vec<bf16> = (0..geom.gate_len()).map(|_| bf16::from_f32((0.1 + 0.8 * rng.unit()) as f32)).collect();
    let state: Vec<f32> = (0..geom.state_len()).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    let (bb, tt, hk, hv, dk, dv) = (b as u64, t as u64, geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
    Case {
        kernel: name,
        sizes: format!("B={b},T={t}"),
        inputs: vec![
            HostArray::from_bf16(vec![bb, tt, hk, dk], &q),
            HostArray::from_bf16(vec![bb, tt, hk, dk], &k),
            HostArray::from_bf16(vec![bb, tt, hv, dv], &v),
            HostArray::from_f32(vec![bb, tt, hv], &g),
            HostArray::from_bf16(vec![bb, tt, hv], &beta),
            HostArray::from_f32(vec![bb, hv, dv, dk], &state),
        ],
        replay: Box::new(move |inp| {
            let (q, k, v, beta) = (bf16s(&inp[0]), bf16s(&inp[1]), bf16s(&inp[2]), bf16s(&inp[4]));
            let (g, state) = (f32s(&inp[3]), f32s(&inp[5]));
            let out = delta_replay(&geom, &DeltaInputs { q: &q, k: &k, v: &v, g: &g, beta: &beta, state: &state, mask: None });
            vec![HostArray::from_bf16(vec![bb, tt, hv, dv], &out.y), HostArray::from_f32(vec![bb, hv, dv, dk], &out.state)]
        }),
        parallel_replay: false,
    }
}

fn silu_rms_heads(name: &'static str, b: usize, s: usize) -> Case {
    use reference::silu_rms_heads::{HeadsGeometry, silu_rms_heads_replay};
    let d = def(name);
    let dim = |i: usize, j: usize| d.outputs[i].shape[j].as_fixed().expect("a fixed dimension") as usize;
    let geom = HeadsGeometry { rows: b * s, hk: dim(0, 2), hv: dim(2, 2), dk: dim(0, 3), dv: dim(2, 3) };
    let mut rng = SplitMix64::new(7);
    let x = random_bf16(&mut rng, b * s * geom.channels(), 4.0);
    let qs: Vec<bf16> = (0..geom.dk).map(|_| bf16::from_f32(1.0 + (rng.unit() - 0.5) as f32)).collect();
    let ks: Vec<bf16> = (0..geom.dk).map(|_| bf16::from_f32(1.0 + (rng.unit() - 0.5) as f32)).collect();
    let (bb, ss) = (b as u64, s as u64);
    Case {
        kernel: name,
        sizes: format!("B={b},S={s}"),
        inputs: vec![
            HostArray::from_bf16(vec![bb, ss, geom.channels() as u64], &x),
            HostArray::from_bf16(vec![geom.dk as u64], &qs),
            HostArray::from_bf16(vec![geom.dk as u64], &ks),
        ],
        replay: Box::new(move |inp| {
            let r = silu_rms_heads_replay(&bf16s(&inp[0]), &bf16s(&inp[1]), &bf16s(&inp[2]), &geom);
            let (hk, hv, dk, dv) = (geom.hk as u64, geom.hv as u64, geom.dk as u64, geom.dv as u64);
            vec![
                HostArray::from_bf16(vec![bb, ss, hk, dk], &r.q),
                HostArray::from_bf16(vec![bb, ss, hk, dk], &r.k),
                HostArray::from_bf16(vec![bb, ss, hv, dv], &r.v),
            ]
        }),
        parallel_replay: false,
    }
}

fn gated_rms_norm(name: &'static str, rows: usize, eps: f32) -> Case {
    let d = def(name);
    let width = d.inputs[2].shape[0].as_fixed().expect("a fixed dimension") as usize;
    let mut rng = SplitMix64::new(8);
    let x = random_bf16(&mut rng, rows * width, 1.0);
    let gate = random_bf16(&mut rng, rows * width, 4.0);
    let weight: Vec<bf16> = (0..width).map(|_| bf16::from_f32(1.0 + (rng.unit() - 0.5) as f32)).collect();
    let shape = vec![rows as u64, width as u64];
    Case {
        kernel: name,
        sizes: format!("R={rows}"),
        inputs: vec![HostArray::from_bf16(shape.clone(), &x), HostArray::from_bf16(shape.clone(), &gate), HostArray::from_bf16(vec![width as u64], &weight)],
        replay: Box::new(move |inp| {
            let out = reference::gated_rms_norm::gated_rms_norm_replay(&bf16s(&inp[0]), &bf16s(&inp[1]), &bf16s(&inp[2]), eps, width);
            vec![HostArray::from_bf16(shape.clone(), &out)]
        }),
        parallel_replay: false,
    }
}

/// Run `f` on a thread allowed on the first `cores` CPUs of this process (threads it starts
/// inherit that), or on every CPU for `None`.
fn on_cores<R: Send>(cores: Option<usize>, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(n) = cores {
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
                    let mut keep: libc::cpu_set_t = std::mem::zeroed();
                    let mut kept = 0;
                    for cpu in 0..libc::CPU_SETSIZE as usize {
                        if kept < n && libc::CPU_ISSET(cpu, &set) {
                            libc::CPU_SET(cpu, &mut keep);
                            kept += 1;
                        }
                    }
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &keep);
                }
            }
            f()
        })
        .join()
        .expect("benchmark thread")
    })
}

/// CPU time of the whole process (every thread).
fn cpu_time() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// One run of `f`, by wall-clock time or, for `Clock::Cpu`, by the CPU time the process
/// spent (what a single-threaded run costs, whatever else the machine runs).
fn timed<R>(clock: Clock, f: impl FnOnce() -> R) -> (Duration, R) {
    let (t, c) = (Instant::now(), cpu_time());
    let r = f();
    let spent = match clock {
        Clock::Wall => t.elapsed(),
        Clock::Cpu => cpu_time() - c,
    };
    (spent, r)
}

#[derive(Clone, Copy)]
enum Clock {
    Wall,
    Cpu,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// At most this many rounds a kernel, whatever its budget.
const MAX_ROUNDS: usize = 20;

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let reps: usize = std::env::var("KGEMU_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let budget = Duration::from_secs_f64(std::env::var("KGEMU_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(3.0));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let emu = |workers: usize| EmuBackend::new(EmuOptions { workers, ..Default::default() }).expect("emulator");
    let (serial, parallel) = (emu(1), emu(cores));
    let cases: Vec<(&str, Box<dyn Fn() -> Case>)> = vec![
        ("glm52_expert_q4_bf16_r4_gate_up", Box::new(|| expert("glm52_expert_q4_bf16_r4_gate_up", 4))),
        ("head_affine_q4_bf16", Box::new(|| affine("head_affine_q4_bf16"))),
        ("qwen35_delta_bf16_f32", Box::new(|| delta("qwen35_delta_bf16_f32", 1, 64))),
        ("qwen35_silu_rms_heads_bf16", Box::new(|| silu_rms_heads("qwen35_silu_rms_heads_bf16", 1, 256))),
        ("wide4096_gated_rms_norm_bf16", Box::new(|| gated_rms_norm("wide4096_gated_rms_norm_bf16", 256, 1e-6))),
    ];
    println!("Emulator (a launch through EmuBackend) against the family's bit-exact replay model, on the same inputs;");
    println!(
        "fastest of at least {reps} runs (more within {:.0} s a kernel), {cores} cores, load average {} at the start; ratio = emulator / replay;",
        budget.as_secs_f64(),
        loadavg()
    );
    println!("1-core columns are CPU time on one core (one emulator worker), {cores}-core columns wall-clock time;");
    println!("speed-up = emulator wall-clock time with 1 worker / with {cores}.");
    println!(
        "{:<34} {:<10} {:>9} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>8} {:>9} {:>9}",
        "KERNEL", "SIZES", "THREADS", "REPLAY 1", "EMU 1", "RATIO", format!("REPLAY {cores}"), format!("EMU {cores}"), "RATIO", "SPEED-UP", "MTHR/S", "PEAK MiB"
    );
    for (name, make) in &cases {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        reset_peak_rss();
        let case = make();
        let d = def(case.kernel);
        let refs: Vec<&HostArray> = case.inputs.iter().collect();
        // compile (or load) outside the timings
        serial.program(d).expect("program");
        parallel.program(d).expect("program");
        // Every figure's runs alternate with the others' (replay and emulator, one worker
        // and all), so that all see the same conditions on a shared machine; at least
        // `reps` rounds, more while the kernel's budget lasts.
        let (mut replay1, mut emu1, mut emu1_wall) = (Duration::MAX, Duration::MAX, Duration::MAX);
        let (mut replay_par, mut emu_n) = (Duration::MAX, Duration::MAX);
        let mut rounds = 0;
        let started = Instant::now();
        while rounds < reps || (started.elapsed() < budget && rounds < MAX_ROUNDS) {
            rounds += 1;
            let (t, want) = on_cores(Some(1), || timed(Clock::Cpu, || (case.replay)(&case.inputs)));
            replay1 = replay1.min(t);
            let (t, got) = on_cores(Some(1), || timed(Clock::Cpu, || backend::launch_vec(&serial, d, &refs, &[]).expect("launch")));
            emu1 = emu1.min(t);
            assert!(got == want, "{}: the emulator differs from the replay model", case.kernel);
            drop(got);
            let (t, _) = on_cores(Some(1), || timed(Clock::Wall, || backend::launch_vec(&serial, d, &refs, &[]).expect("launch")));
            emu1_wall = emu1_wall.min(t);
            if case.parallel_replay {
                replay_par = replay_par.min(timed(Clock::Wall, || (case.replay)(&case.inputs)).0);
            }
            let (t, got) = timed(Clock::Wall, || backend::launch_vec(&parallel, d, &refs, &[]).expect("launch"));
            emu_n = emu_n.min(t);
            assert!(got == want, "{}: the emulator with {cores} workers differs from the replay model", case.kernel);
        }
        let (replay_n, ideal) = if case.parallel_replay { (replay_par, "") } else { (replay1 / cores as u32, "*") };
        let peak = peak_rss_mib();
        let grid = backend::check(&serial, d, &refs, &[], &[]).expect("sizes").plan().grid();
        let threads: u64 = grid.iter().map(|&g| u64::from(g)).product();
        let s = |t: Duration| format!("{:.3}s", t.as_secs_f64());
        println!(
            "{:<34} {:<10} {:>9} {:>10} {:>10} {:>6.2}x {:>10} {:>10} {:>6.2}x {:>7.2}x {:>9.2} {:>9.0}",
            case.kernel,
            case.sizes,
            threads,
            s(replay1),
            s(emu1),
            emu1.as_secs_f64() / replay1.as_secs_f64(),
            format!("{}{ideal}", s(replay_n)),
            s(emu_n),
            emu_n.as_secs_f64() / replay_n.as_secs_f64(),
            emu1_wall.as_secs_f64() / emu_n.as_secs_f64(),
            threads as f64 / emu_n.as_secs_f64() / 1e6,
            peak
        );
    }
    println!("load average at the end: {} (a loaded machine lowers the speed-up)", loadavg());
    println!("* the replay model is single-threaded: its {cores}-core time is the ideal 1-core time / {cores}");
    println!("MTHR/S: million GPU threads per second with {cores} workers; PEAK MiB: the process's peak RSS while the kernel's inputs, replay and launches were alive");
}

