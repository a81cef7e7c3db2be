//! `make bench-gpu`'s harness (gpu/bench.sh builds nothing and runs it where MLX has a GPU).
//!
//! Every kernel of the bundled catalog at its production geometries, launched through the typed
//! launch path (`backend::check`, then `MlxBackend::run`: what each generated launcher calls),
//! MLX's own equivalent ops in the same process as baselines, and one MoE decode step three
//! ways (8 routed experts of 256 resident): kernelgen's per-expert kernels (gate/up then down
//! per expert, then the weighted sum in MLX ops), its grouped kernels (two launches), and
//! MLX's gather_qmm.
//!
//! Each case is timed as users see it: a lazy chain of launches, evaluated once, wall time per
//! iteration. Inputs rotate over enough copies that the weights of a chain never fit the GPU's
//! L2, as a model's different layers would not. With `--profile` each case instead runs one
//! iteration between two marker launches (the catalog's `small_affine_q4_bf16`, which no case
//! times), for Nsight Compute: gpu/bench_report.py attributes the kernels between two markers
//! to their case. Output: one JSON object per case on stdout.

use kernelgen::backend::mlx::{Gpu, MlxBackend, gpu, to_mlx_dtype};
use kernelgen::backend::{self, Backend};
use kernelgen::kernels::{CATALOG, experts};
use kernelgen::KernelDef;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::{Array, Dtype};
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The geometries each bundled spec names for tests only (small shapes, odd widths), which the
/// benchmark leaves out; the `_dtypes` specs are all test geometries.
const TEST_GEOMETRIES: &[&str] = &["small", "small2", "tiny", "odd200", "odd1000", "head128x"];

/// The values of each run-time size a kernel is timed at (the first size a kernel has takes
/// them, the others are 1): samples routed to an expert (M), sequences of a DeltaNet step (B,
/// one token each: T = 1; the SiLU-RMS heads' sequences, S = 1) and rows of a norm (R).
fn size_values(name: &str) -> &'static [u64] {
    match name {
        "M" | "B" => &[1, 4, 32],
        "R" => &[32, 1024, 16384],
        _ => &[1],
    }
}

/// Weights are rotated over copies until a chain's inputs exceed this (the H200's L2 is 60 MB).
const ROTATE_BYTES: u64 = 256 << 20;
/// A timed chain moves at most this many bytes (its outputs stay allocated until it is evaluated).
const CHAIN_BYTES: u64 = 16 << 30;
/// A timed chain lasts about this long.
const CHAIN_SECONDS: f64 = 0.25;

struct Args {
    profile: bool,
    filter: Option<String>,
}

fn args() -> Result<Args> {
    let mut a = Args { profile: false, filter: None };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--profile" => a.profile = true,
            "--filter" => a.filter = Some(it.next().ok_or("--filter needs a value")?),
            _ => return Err(format!("unknown argument {arg:?} (--profile, --filter SUBSTRING)").into()),
        }
    }
    Ok(a)
}

/// One timed case: `build(i)` adds iteration `i` to MLX's graph and returns what to evaluate.
struct Case<'a> {
    name: String,
    /// `kernel` (a catalog kernel), `mlx` (MLX's own op) or `step` (an MoE decode step).
    kind: &'static str,
    /// The catalog kernel a case times, or, for MLX's op, the case of kernelgen's it is the
    /// baseline of (with the same `sizes`): the report puts the two side by side.
    kernel: Option<String>,
    sizes: String,
    /// Bytes one iteration must move (the manifest's cost for a kernel).
    bytes: u64,
    /// Launches of catalog kernels one iteration makes.
    launches: usize,
    build: Box<dyn FnMut(usize) -> Result<Vec<Array>> + 'a>,
}

fn eval(arrays: &[Array]) -> Result<()> {
    mlx_rs::transforms::eval(arrays.iter())?;
    Ok(())
}

fn mlx_shape(shape: &[u64]) -> Result<Vec<i32>> {
    shape.iter().map(|&d| i32::try_from(d).map_err(|_| format!("dimension {d} is over MLX's i32").into())).collect()
}

/// Host bytes as an MLX array of `dtype` and `shape`.
fn upload(dtype: kernelgen::Dtype, shape: &[u64], bytes: &[u8]) -> Result<Array> {
    let len = i32::try_from(bytes.len()).map_err(|_| "an input of 2 GiB or more")?;
    let mlx = to_mlx_dtype(dtype).ok_or_else(|| format!("no MLX dtype for {dtype}"))?;
    Ok(Array::from_slice(bytes, &[len]).view_dtype(mlx)?.reshape(&mlx_shape(shape)?)?)
}

/// Random values drawn here from a fixed seed and uploaded (a run's inputs do not depend on
/// MLX's generator): floats uniform in [-1, 1) as `dtype`, or random bits for an integer `dtype`
/// (weights whose every bit pattern is valid).
fn random(dtype: Dtype, shape: &[i32]) -> Result<Array> {
    static SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut rng = Rng(SEED.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let mut unit = || (rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
    let bytes: Vec<u8> = match dtype {
        Dtype::Float32 => (0..n).flat_map(|_| unit().to_le_bytes()).collect(),
        Dtype::Float16 => (0..n).flat_map(|_| half::f16::from_f32(unit()).to_le_bytes()).collect(),
        Dtype::Bfloat16 => (0..n).flat_map(|_| half::bf16::from_f32(unit()).to_le_bytes()).collect(),
        Dtype::Uint8 | Dtype::Uint32 => {
            let mut b = vec![0u8; n * if dtype == Dtype::Uint8 { 1 } else { 4 }];
            b.chunks_mut(8).for_each(|c| c.copy_from_slice(&rng.next().to_le_bytes()[..c.len()]));
            b
        }
        other => return Err(format!("no random {other:?}").into()),
    };
    let len = i32::try_from(bytes.len())?;
    let a = Array::from_slice(&bytes, &[len]).view_dtype(dtype)?.reshape(shape)?;
    eval(std::slice::from_ref(&a))?;
    Ok(a)
}

/// Random values of `shape` whose leading axis repeats at most 16 distinct slices, copied on
/// the GPU (drawing gigabytes here would take minutes): the weights of 256 experts, as far as
/// bandwidth is concerned.
fn random_rows(dtype: Dtype, shape: &[i32]) -> Result<Array> {
    let (rows, rest) = shape.split_first().ok_or("a scalar")?;
    let one: Vec<i32> = std::iter::once(1).chain(rest.iter().copied()).collect();
    let distinct = (0..(*rows).min(16)).map(|_| random(dtype, &one)).collect::<Result<Vec<_>>>()?;
    let block = mlx_rs::ops::concatenate(&distinct, 0)?;
    let pick: Vec<i32> = (0..*rows).map(|r| r % 16.min(*rows)).collect();
    Ok(block.take_axis(Array::from_slice(&pick, &[*rows]), 0)?)
}

fn production(def: &KernelDef) -> bool {
    !def.spec.ends_with("_dtypes.toml") && !TEST_GEOMETRIES.iter().any(|g| def.name.starts_with(&format!("{g}_")))
}

/// A catalog kernel at `sizes`, through the typed launch path, its inputs rotated (drawn from
/// its contract; a routed kernel's `experts` are the [M, K] `routes` given).
fn kernel_case<'a>(mlx: &'a MlxBackend, def: &'static KernelDef, sizes: &[(&str, u64)], routes: Option<&[u32]>, seed: u64, profile: bool) -> Result<Case<'a>> {
    let mut case = kernelgen_verify::random_case(def, sizes, &[], seed)?;
    if let Some(routes) = routes {
        let drawn = case.arrays.get("experts").ok_or("a routed kernel without experts")?;
        let bytes: Vec<u8> = routes.iter().flat_map(|e| e.to_le_bytes()).collect();
        if bytes.len() != drawn.data.len() {
            return Err(format!("{} routes for an experts input of {} bytes", routes.len(), drawn.data.len()).into());
        }
        let experts = kernelgen_emu::HostArray::new(drawn.dtype, drawn.shape.clone(), bytes);
        case = case.array("experts", experts);
    }
    let bound = case.bind(def)?;
    let at: Vec<u64> = sizes.iter().map(|(_, v)| *v).collect();
    let read = def.cost.bytes_read.eval(&at).ok_or("the cost does not evaluate")?;
    let written = def.cost.bytes_written.eval(&at).ok_or("the cost does not evaluate")?;
    let copies = if profile { 1 } else { ROTATE_BYTES.div_ceil(read.max(1)).clamp(1, 64) as usize };
    let mut sets = Vec::new();
    for _ in 0..copies {
        let set = bound.arrays.iter().map(|a| upload(a.dtype, &a.shape, &a.data)).collect::<Result<Vec<_>>>()?;
        eval(&set)?;
        sets.push(set);
    }
    let host: Vec<Vec<i32>> = bound.host.iter().map(|h| h.to_vec()).collect();
    let given: Vec<(String, u64)> = bound.sizes.clone();
    Ok(Case {
        name: def.name.to_string(),
        kind: "kernel",
        kernel: Some(def.name.to_string()),
        sizes: sizes.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(","),
        bytes: read + written,
        launches: 1,
        build: Box::new(move |i| {
            let set: Vec<&Array> = sets[i % sets.len()].iter().collect();
            let host: Vec<&[i32]> = host.iter().map(|h| h.as_slice()).collect();
            let checked = backend::check(mlx, def, &set, &host, &given)?;
            Ok(mlx.run(&checked)?)
        }),
    })
}

/// Whether a kernel takes an array of slots and the routes into it (the expert family's grouped
/// parts): alone, such a kernel is timed at M tokens of [`ROUTES`] distinct routes each into
/// [`ROUTED_SLOTS`] resident slots (drawn from the contract alone, an index would fall past the
/// slots, and the kernel read nothing). The MoE step cases time glm52's bf16 ones again with 256
/// resident slots.
fn routed(def: &KernelDef) -> bool {
    def.input_names().contains(&"experts")
}

/// Routes per token (K) of a routed kernel's case: a decode step's.
const ROUTES: u64 = 8;
/// Resident slots (S) of a routed kernel's case (32 of glm52's Q4 slots are 605 MB). A case's
/// routes are the same at every launch; its inputs' copies, rotated, keep them out of the L2.
const ROUTED_SLOTS: u64 = 32;

/// Every catalog kernel at every size value (a routed one at M = 1 and 32).
fn kernel_cases(mlx: &MlxBackend, runner: &mut Runner<'_>) -> Result<()> {
    for (n, def) in CATALOG.iter().copied().filter(|d| production(d)).enumerate() {
        if !runner.wants(&def.name) {
            continue;
        }
        let routed = routed(def);
        let first = def.sizes.first().map(|s| s.as_ref());
        let values: &[u64] = if routed { &[1, 32] } else { first.map_or(&[0], size_values) };
        for &v in values {
            let other = |s: &str| match s {
                "K" if routed => ROUTES,
                "S" if routed => ROUTED_SLOTS,
                _ => size_values(s)[0],
            };
            let sizes: Vec<(&str, u64)> = def.sizes.iter().map(|s| (s.as_ref(), if Some(s.as_ref()) == first { v } else { other(s) })).collect();
            let mut rng = Rng(1000 + n as u64);
            let routes: Option<Vec<u32>> = routed.then(|| (0..v).flat_map(|_| rng.route(ROUTED_SLOTS, ROUTES as usize)).collect());
            match kernel_case(mlx, def, &sizes, routes.as_deref(), 1000 + n as u64, runner.profile) {
                Ok(case) => runner.run(case)?,
                Err(e) => println!("{{\"setup\": {}, \"error\": {}}}", json_string(&def.name), json_string(&e.to_string())),
            }
        }
    }
    Ok(())
}

/// MLX's `quantized_matmul` at each affine kernel's shapes (group 64, its bits: the affine family
/// reads MLX's quantized layout as it is).
fn affine_baselines<'a>(profile: bool, wants: &dyn Fn(&str) -> bool) -> Result<Vec<Case<'a>>> {
    let mut cases = Vec::new();
    for def in CATALOG.iter().copied().filter(|d| production(d) && &*d.family == "affine") {
        let shape = |name: &str| def.inputs.iter().find(|b| &*b.name == name).and_then(|b| b.shape.iter().map(|d| d.as_fixed()).collect::<Option<Vec<u64>>>());
        let (Some(x), Some(w), Some(s)) = (shape("x"), shape("w"), shape("scales")) else { continue };
        let (k, n) = (x[1], w[0]);
        let bits = (w[1] * 32 / k) as i32;
        let name = format!("mlx quantized_matmul k{k} n{n} q{bits}");
        if !wants(&name) {
            continue;
        }
        let read = def.cost.bytes_read.eval(&[]).unwrap_or(0);
        let copies = if profile { 1 } else { ROTATE_BYTES.div_ceil(read.max(1)).clamp(1, 64) as usize };
        let mut sets = Vec::new();
        for _ in 0..copies {
            let set = vec![
                random(Dtype::Bfloat16, &mlx_shape(&x)?)?,
                random(Dtype::Uint32, &mlx_shape(&w)?)?,
                random(Dtype::Bfloat16, &mlx_shape(&s)?)?,
                random(Dtype::Bfloat16, &mlx_shape(&s)?)?,
            ];
            eval(&set)?;
            sets.push(set);
        }
        cases.push(Case {
            name,
            kind: "mlx",
            kernel: Some(def.name.to_string()),
            sizes: String::new(),
            bytes: read + def.cost.bytes_written.eval(&[]).unwrap_or(0),
            launches: 0,
            build: Box::new(move |i| {
                let [x, w, s, b] = &sets[i % sets.len()][..] else { unreachable!() };
                Ok(vec![mlx_rs::ops::quantized_matmul(x, w, s, b, true, 64, bits)?])
            }),
        });
    }
    Ok(cases)
}

/// MLX's `fast::rms_norm` times SiLU of the gate (the gated norm composed of MLX's ops) at the
/// gated norm's shapes, and the SiLU-RMS heads composed the same way.
fn norm_baselines<'a>(wants: &dyn Fn(&str) -> bool) -> Result<Vec<Case<'a>>> {
    let mut cases = Vec::new();
    for (d, r, ours) in [(128, 16384, "head128_gated_rms_norm_bf16"), (4096, 1024, "wide4096_gated_rms_norm_bf16")] {
        let name = format!("mlx rms_norm * silu(gate) R={r} D={d}");
        if !wants(&name) {
            continue;
        }
        let set: Vec<Array> = (0..8).map(|_| Ok(vec![random(Dtype::Bfloat16, &[r, d])?, random(Dtype::Bfloat16, &[r, d])?])).collect::<Result<Vec<_>>>()?.concat();
        let weight = random(Dtype::Bfloat16, &[d])?;
        eval(&set)?;
        let bytes = 3 * 2 * (r * d) as u64 + 2 * d as u64;
        cases.push(Case {
            name,
            kind: "mlx",
            kernel: Some(ours.into()),
            sizes: format!("R={r}"),
            bytes,
            launches: 0,
            build: Box::new(move |i| {
                let (x, gate) = (&set[2 * (i % 8)], &set[2 * (i % 8) + 1]);
                let gate = gate.as_dtype(Dtype::Float32)?;
                let silu = mlx_rs::nn::silu(&gate)?;
                Ok(vec![silu.multiply(mlx_rs::fast::rms_norm(x, Some(&weight), 1e-6)?)?.as_dtype(Dtype::Bfloat16)?])
            }),
        });
    }
    for s in [1, 4, 32] {
        let name = format!("mlx silu, rms_norm of q and k heads B={s}");
        if !wants(&name) {
            continue;
        }
        let xs: Vec<Array> = (0..8).map(|_| random(Dtype::Bfloat16, &[1, s, 8192])).collect::<Result<_>>()?;
        let (qs, ks) = (random(Dtype::Bfloat16, &[128])?, random(Dtype::Bfloat16, &[128])?);
        eval(&xs)?;
        cases.push(Case {
            name,
            kind: "mlx",
            kernel: Some("qwen35_silu_rms_heads_bf16".into()),
            sizes: format!("B={s},S=1"),
            bytes: 2 * 2 * 8192 * s as u64,
            launches: 0,
            build: Box::new(move |i| {
                let act = mlx_rs::nn::silu(&xs[i % 8])?.reshape(&[1, s, 64, 128])?;
                let parts = act.split_at_indices(&[16, 32], 2)?;
                let q = mlx_rs::fast::rms_norm(&parts[0], Some(&qs), 1e-6)?;
                let k = mlx_rs::fast::rms_norm(&parts[1], Some(&ks), 1e-6)?;
                Ok(vec![q, k, parts[2].clone()])
            }),
        });
    }
    Ok(cases)
}

/// One DeltaNet decode step (T = 1) of MLX's ops, as mlx-lm's gated_delta falls back to them,
/// at the qwen35 geometry (16 key heads, 32 value heads, 128 x 128 state per value head).
fn delta_baselines<'a>(wants: &dyn Fn(&str) -> bool) -> Result<Vec<Case<'a>>> {
    let mut cases = Vec::new();
    for b in [1, 4, 32] {
        let name = format!("mlx ops DeltaNet step B={b}");
        if !wants(&name) {
            continue;
        }
        let state = random(Dtype::Float32, &[b, 32, 128, 128])?;
        let q = random(Dtype::Bfloat16, &[b, 1, 16, 128])?;
        let k = random(Dtype::Bfloat16, &[b, 1, 16, 128])?;
        let v = random(Dtype::Bfloat16, &[b, 1, 32, 128])?;
        // decays in [0.5, 1), betas in [0, 1)
        let g = random(Dtype::Float32, &[b, 1, 32])?.multiply(Array::from_f32(0.25))?.add(Array::from_f32(0.75))?;
        let beta = random(Dtype::Float32, &[b, 1, 32])?.multiply(Array::from_f32(0.5))?.add(Array::from_f32(0.5))?.as_dtype(Dtype::Bfloat16)?;
        eval(&[state.clone(), q.clone(), k.clone(), v.clone(), g.clone(), beta.clone()])?;
        let bytes = 2 * 4 * 32 * 128 * 128 * b as u64 + 2 * 128 * (16 + 16 + 32 + 32) * b as u64;
        cases.push(Case {
            name,
            kind: "mlx",
            kernel: Some("qwen35_delta_bf16_f32".into()),
            sizes: format!("B={b},T=1"),
            bytes,
            launches: 0,
            build: Box::new(move |_| {
                // key head of value head h is h / 2
                let rep = |a: &Array| -> Result<Array> { Ok(mlx_rs::ops::repeat_axis::<f32>(a.as_dtype(Dtype::Float32)?.index((.., 0)), 2, 1)?) };
                let (q, k, v) = (rep(&q)?, rep(&k)?, v.index((.., 0)).as_dtype(Dtype::Float32)?);
                let s = state.multiply(g.index((.., 0)).reshape(&[b, 32, 1, 1])?)?;
                let kv = s.multiply(k.reshape(&[b, 32, 1, 128])?)?.sum_axis(-1, false)?;
                let delta = v.subtract(&kv)?.multiply(beta.index((.., 0)).as_dtype(Dtype::Float32)?.reshape(&[b, 32, 1])?)?;
                let s = s.add(k.reshape(&[b, 32, 1, 128])?.multiply(delta.reshape(&[b, 32, 128, 1])?)?)?;
                let y = s.multiply(q.reshape(&[b, 32, 1, 128])?)?.sum_axis(-1, false)?.as_dtype(Dtype::Bfloat16)?;
                Ok(vec![y, s])
            }),
        });
    }
    Ok(cases)
}

/// SplitMix64: the routing (which experts, in which order) and the values drawn here.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// `k` distinct experts of `n`.
    fn route(&mut self, n: u64, k: usize) -> Vec<u32> {
        let mut picked = Vec::with_capacity(k);
        while picked.len() < k {
            let e = (self.next() % n) as u32;
            if !picked.contains(&e) {
                picked.push(e);
            }
        }
        picked
    }
}

const EXPERTS: i32 = 256;
const ROUTED: usize = 8;
const HIDDEN: i32 = 6144;
const INTERMEDIATE: i32 = 2048;

/// The MoE decode step at the glm52 geometry (H 6144, I 2048), 8 routed of 256 resident experts,
/// `m` tokens, `bits` 4 or 8, both ways: kernelgen's expert kernels (one slot per expert, the
/// routing known to the host as the streamed-expert design has it; tokens grouped by expert),
/// and mlx-lm's SwitchGLU over MLX's `gather_qmm` (group 64; tokens sorted by expert when
/// `m * 8 >= 64`, as mlx-lm does). Both end with the weighted sum of the routed outputs.
fn step_cases<'a>(mlx: &'a MlxBackend, bits: i32, m: i32, steps: usize, wants: &dyn Fn(&str) -> bool) -> Result<Vec<Case<'a>>> {
    let (ours, theirs) = (format!("kernelgen MoE step q{bits} M={m}"), format!("mlx gather_qmm MoE step q{bits} M={m}"));
    let grouped = format!("kernelgen grouped MoE step q{bits} M={m}");
    if !wants(&ours) && !wants(&theirs) && !wants(&grouped) {
        return Ok(Vec::new());
    }
    // a typed launcher of the expert family: (backend, activations, slot) -> output
    type Launcher = fn(&MlxBackend, &Array, &Array) -> std::result::Result<Array, kernelgen::launch::LaunchError>;
    let (slot_bytes, gate_up, down): (u64, Launcher, Launcher) = if bits == 4 {
        (experts::Glm52ExpertQ4Bf16R4::SLOT.bytes, experts::Glm52ExpertQ4Bf16R4::gate_up, experts::Glm52ExpertQ4Bf16R4::down)
    } else {
        (experts::Glm52ExpertQ8Bf16R4::SLOT.bytes, experts::Glm52ExpertQ8Bf16R4::gate_up, experts::Glm52ExpertQ8Bf16R4::down)
    };
    // the grouped launchers: (backend, x, slots, experts) -> mid, (backend, mid, slots, experts, weights) -> out
    type GateUpGrouped = fn(&MlxBackend, &Array, &Array, &Array) -> std::result::Result<Array, kernelgen::launch::LaunchError>;
    type DownGrouped = fn(&MlxBackend, &Array, &Array, &Array, &Array) -> std::result::Result<Array, kernelgen::launch::LaunchError>;
    let (gate_up_grouped, down_grouped): (GateUpGrouped, DownGrouped) = if bits == 4 {
        (experts::Glm52ExpertQ4Bf16R4::gate_up_grouped, experts::Glm52ExpertQ4Bf16R4::down_grouped)
    } else {
        (experts::Glm52ExpertQ8Bf16R4::gate_up_grouped, experts::Glm52ExpertQ8Bf16R4::down_grouped)
    };
    let mut rng = Rng(7 + bits as u64 * 100 + m as u64);
    // per step: each token's 8 experts and their weights
    let routes: Vec<Vec<Vec<u32>>> = (0..steps).map(|_| (0..m).map(|_| rng.route(EXPERTS as u64, ROUTED)).collect()).collect();
    // (bf16 throughout: an f32 scalar would promote MLX's operands to f32, and its kernels with them)
    let scores = random(Dtype::Bfloat16, &[m, ROUTED as i32])?;
    let x = random(Dtype::Bfloat16, &[m, HIDDEN])?;
    // the distinct experts of a step and the weights they read
    let distinct = |r: &Vec<Vec<u32>>| {
        let mut e: Vec<u32> = r.concat();
        e.sort_unstable();
        e.dedup();
        e
    };
    let expert_bytes = |n: usize| n as u64 * slot_bytes;
    let mean_distinct = routes.iter().map(|r| distinct(r).len()).sum::<usize>() as f64 / steps as f64;

    let slots = random_rows(Dtype::Uint8, &[EXPERTS, i32::try_from(slot_bytes)?])?;
    eval(&[slots.clone(), x.clone(), scores.clone()])?;
    let mut cases = Vec::new();
    {
        let (routes, x, scores, slots) = (routes.clone(), x.clone(), scores.clone(), slots.clone());
        cases.push(Case {
            name: ours.clone(),
            kind: "step",
            kernel: None,
            sizes: format!("M={m}"),
            bytes: expert_bytes(mean_distinct.round() as usize),
            launches: 2 * mean_distinct.round() as usize,
            build: Box::new(move |i| {
                let route = &routes[i % routes.len()];
                // (token, k) pairs grouped by expert
                let mut pairs: Vec<(u32, u32, u32)> = route.iter().enumerate().flat_map(|(t, es)| es.iter().enumerate().map(move |(k, &e)| (e, t as u32, k as u32))).collect();
                pairs.sort_unstable();
                let mut outs = Vec::new();
                let mut start = 0;
                while start < pairs.len() {
                    let e = pairs[start].0;
                    let end = start + pairs[start..].iter().take_while(|p| p.0 == e).count();
                    let tokens: Vec<i32> = pairs[start..end].iter().map(|p| p.1 as i32).collect();
                    let xe = if m == 1 { x.clone() } else { x.take_axis(Array::from_slice(&tokens, &[tokens.len() as i32]), 0)? };
                    // a slice of rows is a view (an integer index would gather a copy)
                    let slot = slots.index(e as i32..e as i32 + 1).reshape(&[-1])?;
                    let mid = gate_up(mlx, &xe, &slot)?;
                    outs.push(down(mlx, &mid, &slot)?);
                    start = end;
                }
                // each row weighted by its (token, k) score, then summed into its token: a
                // [M, rows] 0/1 matrix times the weighted rows
                let rows = mlx_rs::ops::concatenate(&outs, 0)?;
                let n = pairs.len() as i32;
                let at: Vec<i32> = pairs.iter().map(|p| (p.1 * ROUTED as u32 + p.2) as i32).collect();
                let weights = scores.reshape(&[-1])?.take_axis(Array::from_slice(&at, &[n]), 0)?.reshape(&[n, 1])?;
                let mut assign = vec![0f32; (m * n) as usize];
                for (row, p) in pairs.iter().enumerate() {
                    assign[p.1 as usize * n as usize + row] = 1.0;
                }
                let assign = Array::from_slice(&assign, &[m, n]).as_dtype(Dtype::Bfloat16)?;
                Ok(vec![mlx_rs::ops::matmul(&assign, rows.multiply(&weights)?)?])
            }),
        });
    }
    {
        // the same step in two launches: every (token, route) pair's gate/up from the [256,
        // slot_bytes] slots, then each token's weighted sum of its routes' down rows
        let (x, scores, slots) = (x.clone(), scores.clone(), slots.clone());
        let indices: Vec<Array> = routes.iter().map(|r| Array::from_slice(&r.concat(), &[m, ROUTED as i32])).collect();
        cases.push(Case {
            name: grouped.clone(),
            kind: "step",
            kernel: None,
            sizes: format!("M={m}"),
            bytes: expert_bytes(mean_distinct.round() as usize),
            launches: 2,
            build: Box::new(move |i| {
                let experts = &indices[i % indices.len()];
                let mid = gate_up_grouped(mlx, &x, &slots, experts)?;
                Ok(vec![down_grouped(mlx, &mid, &slots, experts, &scores)?])
            }),
        });
    }
    // MLX: the same experts as [256, out, in] quantized matrices, group 64
    let q = |rows: i32, cols: i32| -> Result<[Array; 3]> {
        let groups = cols / 64;
        Ok([
            random_rows(Dtype::Uint32, &[EXPERTS, rows, cols * bits / 32])?,
            random_rows(Dtype::Bfloat16, &[EXPERTS, rows, groups])?,
            random_rows(Dtype::Bfloat16, &[EXPERTS, rows, groups])?,
        ])
    };
    let (wg, wu, wd) = (q(INTERMEDIATE, HIDDEN)?, q(INTERMEDIATE, HIDDEN)?, q(HIDDEN, INTERMEDIATE)?);
    eval(&[wg[0].clone(), wg[1].clone(), wg[2].clone(), wu[0].clone(), wu[1].clone(), wu[2].clone(), wd[0].clone(), wd[1].clone(), wd[2].clone()])?;
    let mlx_expert_bytes = |n: f64| (n * 3.0 * (INTERMEDIATE as f64 * HIDDEN as f64) * (bits as f64 / 8.0 + 4.0 / 64.0)) as u64;
    let indices: Vec<Array> = routes.iter().map(|r| Array::from_slice(&r.concat().iter().map(|&e| e as i32).collect::<Vec<_>>(), &[m, ROUTED as i32])).collect();
    let sorted = m as usize * ROUTED >= 64;
    cases.push(Case {
        name: theirs,
        kind: "mlx",
        // the two-launch step is the one issue 28 compares with gather_qmm's
        kernel: Some(grouped),
        sizes: format!("M={m}"),
        bytes: mlx_expert_bytes(mean_distinct),
        launches: 0,
        build: Box::new(move |i| {
            let idx = &indices[i % indices.len()];
            let gq = |x: &Array, w: &[Array; 3], rhs: &Array| -> Result<Array> {
                Ok(mlx_rs::ops::gather_qmm(x, &w[0], &w[1], &w[2], None, rhs, true, 64, bits, sorted)?)
            };
            let y = if sorted {
                // mlx-lm's _gather_sort: tokens in expert order, then back
                let flat = idx.reshape(&[-1])?;
                let order = mlx_rs::ops::argsort_axis(&flat, 0)?;
                let inverse = mlx_rs::ops::argsort_axis(&order, 0)?;
                let xs = x.reshape(&[m, 1, HIDDEN])?.take_axis(order.floor_divide(Array::from_int(ROUTED as i32))?, 0)?;
                let es = flat.take_axis(&order, 0)?;
                let mid = mlx_rs::nn::silu(gq(&xs, &wg, &es)?)?.multiply(gq(&xs, &wu, &es)?)?;
                gq(&mid, &wd, &es)?.take_axis(&inverse, 0)?.reshape(&[m, ROUTED as i32, HIDDEN])?
            } else {
                let xe = x.reshape(&[m, 1, 1, HIDDEN])?;
                let mid = mlx_rs::nn::silu(gq(&xe, &wg, idx)?)?.multiply(gq(&xe, &wu, idx)?)?;
                gq(&mid, &wd, idx)?.reshape(&[m, ROUTED as i32, HIDDEN])?
            };
            Ok(vec![y.multiply(scores.reshape(&[m, ROUTED as i32, 1])?)?.sum_axis(1, false)?])
        }),
    });
    Ok(cases)
}

const COPY: &str = "mlx a + 0, 1 GiB (read + write)";

/// The device's copy bandwidth as MLX reaches it: `a + 0` over 1 GiB (read and write).
fn copy_case<'a>() -> Result<Case<'a>> {
    let n = 1 << 28;
    let a = random_rows(Dtype::Uint32, &[64, n / 64])?.reshape(&[n])?;
    let zero = Array::from_slice(&[0u32], &[1]);
    eval(std::slice::from_ref(&a))?;
    Ok(Case {
        name: COPY.into(),
        kind: "copy",
        kernel: None,
        sizes: String::new(),
        bytes: 2 * 4 * n as u64,
        launches: 0,
        build: Box::new(move |_| Ok(vec![a.add(&zero)?])),
    })
}

/// The wall time of one iteration, as a lazy chain of `n` iterations evaluated once, and the
/// part of it the host spends building the chain (the launchers' checks and MLX's graph
/// building, before the evaluation starts).
fn time(case: &mut Case<'_>) -> Result<(f64, f64, usize)> {
    // the first iteration compiles (nvrtc) and loads
    eval(&(case.build)(0)?)?;
    let t = Instant::now();
    eval(&(case.build)(1)?)?;
    let one = t.elapsed().as_secs_f64();
    // A chain holds every output until its evaluation: at most CHAIN_BYTES of them.
    let n = ((CHAIN_SECONDS / one.max(1e-6)) as usize).min((CHAIN_BYTES / case.bytes.max(1)) as usize).clamp(4, 400);
    let chain = |case: &mut Case<'_>| -> Result<(f64, f64)> {
        let t = Instant::now();
        let mut outs = Vec::new();
        for i in 0..n {
            outs.extend((case.build)(i)?);
        }
        let built = t.elapsed().as_secs_f64();
        eval(&outs)?;
        Ok((t.elapsed().as_secs_f64() / n as f64, built / n as f64))
    };
    // The first chain touches every copy of the inputs: MLX's CUDA build moves an array made
    // from host memory to the GPU at its first use there (a few ms for an expert's slot).
    chain(case)?;
    let (wall, host) = chain(case)?;
    Ok((wall, host, n))
}

fn json_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Times (or, with `--profile`, marks) each case as it comes, then drops its arrays.
struct Runner<'a> {
    profile: bool,
    filter: Option<String>,
    next_id: usize,
    marker: Case<'a>,
}

impl Runner<'_> {
    fn wants(&self, name: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| name.contains(f))
    }

    fn run(&mut self, mut case: Case<'_>) -> Result<()> {
        if !(self.wants(&case.name) || case.kernel.as_deref().is_some_and(|k| self.wants(k))) {
            return Ok(());
        }
        let id = self.next_id;
        self.next_id += 1;
        let fields = format!(
            "\"id\": {id}, \"name\": {}, \"kind\": {}, \"kernel\": {}, \"sizes\": {}, \"bytes\": {}, \"launches\": {}",
            json_string(&case.name),
            json_string(case.kind),
            case.kernel.as_deref().map_or("null".into(), json_string),
            json_string(&case.sizes),
            case.bytes,
            case.launches
        );
        if let Err(e) = self.measure(&mut case, &fields) {
            println!("{{{fields}, \"error\": {}}}", json_string(&e.to_string()));
        }
        Ok(())
    }

    /// Times the case (or runs it between markers), printing its line.
    fn measure(&mut self, case: &mut Case<'_>, fields: &str) -> Result<()> {
        if self.profile {
            // compiled, loaded and its inputs moved to the GPU before the first marker
            eval(&(case.build)(1)?)?;
            eval(&(self.marker.build)(0)?)?;
            // one iteration: Nsight Compute replays each kernel, and its times vary little
            eval(&(case.build)(1)?)?;
            eval(&(self.marker.build)(0)?)?;
            println!("{{{fields}, \"iterations\": 1}}");
        } else {
            let (wall, host, n) = time(case)?;
            println!("{{{fields}, \"iterations\": {n}, \"wall_us\": {:.3}, \"build_us\": {:.3}}}", wall * 1e6, host * 1e6);
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    run()?;
    // MLX's CUDA build can fail or stall in its static destructors at exit ("Destroy(handle_)
    // failed: driver shutting down", docs/gpu.md); every line is printed by now, so the process
    // ends here without running them.
    use std::io::Write;
    std::io::stdout().flush()?;
    unsafe extern "C" {
        fn _exit(status: i32) -> !;
    }
    // SAFETY: ends the process; nothing of this program runs afterwards.
    unsafe { _exit(0) }
}

fn run() -> Result<()> {
    let args = args()?;
    if gpu() == Gpu::None {
        return Err("MLX here has no GPU (the CPU build): run the benchmark where MLX's Metal or CUDA build runs".into());
    }
    let mlx = MlxBackend::new();
    let marker: &'static KernelDef = CATALOG.iter().copied().find(|d| &*d.name == "small_affine_q4_bf16").ok_or("no marker kernel")?;
    let marker = kernel_case(&mlx, marker, &[], None, 1, true)?;
    let mut runner = Runner { profile: args.profile, filter: args.filter, next_id: 0, marker };

    // a case that cannot be set up is reported, and the others still run
    let report = |what: &str, e: Box<dyn Error>| println!("{{\"setup\": {}, \"error\": {}}}", json_string(what), json_string(&e.to_string()));
    if runner.wants(COPY) {
        match copy_case() {
            Ok(case) => runner.run(case)?,
            Err(e) => report(COPY, e),
        }
    }
    kernel_cases(&mlx, &mut runner)?;
    let filter = runner.filter.clone();
    let wants = move |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let mut baselines: Vec<(String, Result<Vec<Case<'_>>>)> = vec![
        ("affine baselines".into(), affine_baselines(args.profile, &wants)),
        ("norm baselines".into(), norm_baselines(&wants)),
        ("DeltaNet baselines".into(), delta_baselines(&wants)),
    ];
    for (what, cases) in baselines.drain(..) {
        match cases {
            Ok(cases) => cases.into_iter().try_for_each(|c| runner.run(c))?,
            Err(e) => report(&what, e),
        }
    }
    for bits in [4, 8] {
        for m in [1, 32] {
            match step_cases(&mlx, bits, m, 16, &wants) {
                Ok(cases) => cases.into_iter().try_for_each(|c| runner.run(c))?,
                Err(e) => report(&format!("MoE step q{bits} M={m}"), e),
            }
        }
    }
    Ok(())
}
