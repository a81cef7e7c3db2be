//! One kernel of every bundled family at a small geometry, with random inputs and what
//! its outputs must be by the independent references (`kernelgen-reference`): the replay
//! model's bits (what a backend that follows the emulator's arithmetic computes) and the
//! f64 model's values with their per-element bounds (what any correct backend computes).
//! The geometry is read off each kernel's contract, so a case follows its spec.

use half::bf16;
use kernelgen::contract::{BufferDef, Format, KernelDef};
use kernelgen::kernels::{affine_dtypes, delta, delta_state, experts, gated_rms_norm, silu_rms_heads};
use kernelgen::Dtype;
use kernelgen_reference::affine::{self, Bits, Quantized};
use kernelgen_reference::delta::{DeltaGeometry, DeltaInputs, DeltaStateInputs};
use kernelgen_reference::expert::{self, ExpertGeometry, ExpertWeights, Quant};
use kernelgen_reference::gated_rms_norm::{gated_rms_norm_f64, gated_rms_norm_replay};
use kernelgen_reference::silu_rms_heads::{silu_rms_heads_f64, silu_rms_heads_replay, HeadsGeometry};
use kernelgen_reference::{Element, Exact, SplitMix64};

/// One input array: row-major little-endian bytes of `dtype`.
pub struct Data {
    pub name: &'static str,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub bytes: Vec<u8>,
}

/// What one output must be.
pub struct Expected {
    pub name: &'static str,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// The replay model's output bytes (the emulator's arithmetic, bit for bit).
    pub replay: Vec<u8>,
    /// The f64 model: every element's exact value and how far a correct kernel may be.
    pub exact: Exact,
}

/// A launch of `def` and what it must give.
pub struct Case {
    pub def: &'static KernelDef,
    /// The run-time sizes, in the contract's order.
    pub sizes: Vec<u64>,
    /// The array inputs, in contract order.
    pub inputs: Vec<Data>,
    /// The host-integer inputs, in contract order.
    pub host: Vec<Vec<i32>>,
    /// Every output, in contract order.
    pub outputs: Vec<Expected>,
}

/// Little-endian bytes of `values`.
pub fn bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let size = T::DTYPE.size();
    values.iter().flat_map(|v| v.to_bits().to_le_bytes().into_iter().take(size)).collect()
}

/// `bytes` as elements of `T`.
pub fn elements<T: Element>(bytes: &[u8]) -> Vec<T> {
    let size = T::DTYPE.size();
    bytes.chunks_exact(size).map(|c| T::from_bits(c.iter().rev().fold(0u32, |w, &b| (w << 8) | u32::from(b)))).collect()
}

/// Random values in `[-1, 1)` times `scale`, rounded to `T`.
fn random<T: Element>(rng: &mut SplitMix64, n: usize, scale: f32) -> Vec<T> {
    (0..n).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32 * scale)).collect()
}

fn buffer<'d>(def: &'d KernelDef, name: &str) -> &'d BufferDef {
    def.inputs.iter().chain(def.outputs.iter()).find(|b| b.name == name).unwrap_or_else(|| panic!("{}: no buffer `{name}`", def.name))
}

/// A fixed dimension of a buffer.
fn dim(def: &KernelDef, name: &str, axis: usize) -> usize {
    buffer(def, name).shape[axis].as_fixed().unwrap_or_else(|| panic!("{}: dimension {axis} of `{name}` is not fixed", def.name)) as usize
}

fn shape_of(def: &KernelDef, name: &str, sizes: &[u64]) -> Vec<u64> {
    buffer(def, name).shape_at(sizes).unwrap_or_else(|| panic!("{}: no shape for `{name}`", def.name))
}

/// The case's inputs in contract order, from `(name, dtype, values)`; asserts every data
/// input is given once, each of its contract dtype.
fn inputs(def: &KernelDef, sizes: &[u64], mut given: Vec<Data>) -> Vec<Data> {
    let ordered: Vec<Data> = def
        .data_inputs()
        .map(|b| {
            let at = given.iter().position(|d| d.name == b.name).unwrap_or_else(|| panic!("{}: the case gives no `{}`", def.name, b.name));
            let d = given.remove(at);
            assert_eq!(d.dtype, b.dtype, "{}: `{}`", def.name, b.name);
            Data { shape: shape_of(def, d.name, sizes), ..d }
        })
        .collect();
    assert!(given.is_empty(), "{}: the case gives inputs the kernel does not take", def.name);
    ordered
}

fn data<T: Element>(name: &'static str, values: &[T]) -> Data {
    Data { name, dtype: T::DTYPE, shape: Vec::new(), bytes: bytes(values) }
}

fn expected<T: Element>(def: &KernelDef, sizes: &[u64], name: &'static str, replay: &[T], exact: Exact) -> Expected {
    let shape = shape_of(def, name, sizes);
    assert_eq!(buffer(def, name).dtype, T::DTYPE, "{}: `{name}`", def.name);
    assert_eq!(shape.iter().product::<u64>(), replay.len() as u64, "{}: `{name}`", def.name);
    Expected { name, dtype: T::DTYPE, shape, replay: bytes(replay), exact }
}

/// The tiny expert's sizes, slot layout and quantization, from the generated layout of its
/// slot (each kernel's contract lists only the regions it reads). It is Q4, whose lanes take
/// words of 8 nibbles in both bodies, so the replay order (`Lanes::Strided`, the seed's) binds
/// whichever body a backend runs; a Q8 case would need the body's (`Lanes::Words` for CUDA).
fn expert_geometry() -> (ExpertGeometry, Quant) {
    let layout = experts::TinyExpertQ4Bf16R4::SLOT;
    let region = |name: &str| layout.regions.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("the tiny slot has no region `{name}`"));
    let def = &experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    assert_eq!(region("gate_weights").format, Format::Q4, "the conformance cases' replay order assumes Q4");
    let quant = Quant::Q4;
    let offset = |name: &str| region(name).offset as usize;
    let g = ExpertGeometry {
        hidden: dim(def, "x", 1),
        intermediate: dim(def, "mid", 1),
        gate_weights: offset("gate_weights"),
        up_weights: offset("up_weights"),
        down_weights: offset("down_weights"),
        gate_scales: offset("gate_scales"),
        up_scales: offset("up_scales"),
        down_scales: offset("down_scales"),
        slot_bytes: layout.bytes as usize,
    };
    (g, quant)
}

/// The packed slot both expert kernels of `tiny` read.
pub fn expert_slot() -> Vec<u8> {
    let (g, quant) = expert_geometry();
    ExpertWeights::random(quant, g.hidden, g.intermediate, 11).pack(quant, &g)
}

/// `mid = silu(gate x) * up x` of the tiny Q4 bf16 expert, M = 3.
pub fn expert_gate_up() -> Case {
    let def = &experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    let (g, quant) = expert_geometry();
    let m = 3;
    let x: Vec<bf16> = random(&mut SplitMix64::new(5), m * g.hidden, 1.0);
    let slot = expert_slot();
    let sizes = [m as u64];
    let replay = expert::gate_up_replay(&x, &slot, &g, quant, m, expert::Lanes::Strided);
    let exact = expert::gate_up_f64(&x, &slot, &g, quant, m);
    Case {
        def,
        sizes: sizes.to_vec(),
        inputs: inputs(def, &sizes, vec![data("x", &x), Data { name: "slot", dtype: Dtype::U8, shape: Vec::new(), bytes: slot }]),
        host: Vec::new(),
        outputs: vec![expected(def, &sizes, "mid", &replay, exact)],
    }
}

/// `out = down mid` of the tiny Q4 bf16 expert, on the `mid` given (M its rows).
pub fn expert_down(mid: &[bf16]) -> Case {
    let def = &experts::TINY_EXPERT_Q4_BF16_R4_DOWN;
    let (g, quant) = expert_geometry();
    let m = mid.len() / g.intermediate;
    let slot = expert_slot();
    let sizes = [m as u64];
    let replay = expert::down_replay(mid, &slot, &g, quant, m, expert::Lanes::Strided);
    let exact = expert::down_f64(mid, &slot, &g, quant, m);
    Case {
        def,
        sizes: sizes.to_vec(),
        inputs: inputs(def, &sizes, vec![data("mid", mid), Data { name: "slot", dtype: Dtype::U8, shape: Vec::new(), bytes: slot }]),
        host: Vec::new(),
        outputs: vec![expected(def, &sizes, "out", &replay, exact)],
    }
}

/// Three slots of the tiny Q4 bf16 expert stacked as the grouped kernels' `[S, slot_bytes]`
/// `slots` (the first is [`expert_slot`]), and routes for M = 2 tokens of K = 3: slot indices
/// in range, repeated, and one past the slots (its pair is skipped).
fn expert_routes() -> (Vec<u8>, Vec<u32>) {
    let (g, quant) = expert_geometry();
    let slots = (0..3).flat_map(|s| ExpertWeights::random(quant, g.hidden, g.intermediate, 11 + s).pack(quant, &g)).collect();
    (slots, vec![2, 0, 2, 1, 3, 0])
}

/// The tiny Q4 bf16 expert's gate_up for every (token, route) pair in one launch.
pub fn expert_gate_up_grouped() -> Case {
    let def = &experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP_GROUPED;
    let (g, quant) = expert_geometry();
    let (slots, experts) = expert_routes();
    let (m, k) = (2, 3);
    let x: Vec<bf16> = random(&mut SplitMix64::new(6), m * g.hidden, 1.0);
    let routes = expert::Routes { slots: &slots, experts: &experts, m, k };
    let replay = expert::gate_up_grouped_replay(&x, &routes, &g, quant, expert::Lanes::Strided);
    let exact = expert::gate_up_grouped_f64(&x, &routes, &g, quant);
    let sizes = sizes_of(def, &[("M", m), ("K", k), ("S", 3)]);
    let given = vec![data("x", &x), Data { name: "slots", dtype: Dtype::U8, shape: Vec::new(), bytes: slots.clone() }, Data { name: "experts", dtype: Dtype::U32, shape: Vec::new(), bytes: experts.iter().flat_map(|e| e.to_le_bytes()).collect() }];
    Case { def, sizes: sizes.clone(), inputs: inputs(def, &sizes, given), host: Vec::new(), outputs: vec![expected(def, &sizes, "mid", &replay, exact)] }
}

/// The tiny Q4 bf16 expert's down of every route of each token, weighted and summed, on the
/// `mid` given (`[2, 3, I]`, the grouped gate_up case's).
pub fn expert_down_grouped(mid: &[bf16]) -> Case {
    let def = &experts::TINY_EXPERT_Q4_BF16_R4_DOWN_GROUPED;
    let (g, quant) = expert_geometry();
    let (slots, experts) = expert_routes();
    let (m, k) = (2, 3);
    let weights: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(0.125 * (i + 1) as f32)).collect();
    let routes = expert::Routes { slots: &slots, experts: &experts, m, k };
    let replay = expert::down_grouped_replay(mid, &weights, &routes, &g, quant, expert::Lanes::Strided);
    let exact = expert::down_grouped_f64(mid, &weights, &routes, &g, quant);
    let sizes = sizes_of(def, &[("M", m), ("K", k), ("S", 3)]);
    let given = vec![data("mid", mid), Data { name: "slots", dtype: Dtype::U8, shape: Vec::new(), bytes: slots.clone() }, Data { name: "experts", dtype: Dtype::U32, shape: Vec::new(), bytes: experts.iter().flat_map(|e| e.to_le_bytes()).collect() }, data("weights", &weights)];
    Case { def, sizes: sizes.clone(), inputs: inputs(def, &sizes, given), host: Vec::new(), outputs: vec![expected(def, &sizes, "out", &replay, exact)] }
}

/// The kernel's run-time sizes in its contract's order, by name.
fn sizes_of(def: &KernelDef, named: &[(&str, usize)]) -> Vec<u64> {
    def.sizes.iter().map(|s| named.iter().find(|(n, _)| *n == s.as_ref()).unwrap_or_else(|| panic!("{}: no value for size `{s}`", def.name)).1 as u64).collect()
}

/// MLX's affine one-row matmul, 4 bits, f32, K = 1024, N = 256.
pub fn affine_row() -> Case {
    let def = &affine_dtypes::SMALL2_AFFINE_Q4_F32;
    let (k, n) = (dim(def, "x", 1), dim(def, "y", 1));
    let bits = match dim(def, "w", 1) * 32 / k {
        3 => Bits::Three,
        4 => Bits::Four,
        other => panic!("{}: {other} bits per weight", def.name),
    };
    let q = Quantized::<f32>::random(n, k, bits, 7);
    let x: Vec<f32> = random(&mut SplitMix64::new(3), k, 1.0);
    let replay = affine::affine_row_replay(&x, &q);
    let exact = affine::affine_row_f64(&x, &q);
    let given = vec![data("x", &x), data("scales", &q.scales), data("biases", &q.biases), Data { name: "w", dtype: Dtype::U32, shape: Vec::new(), bytes: q.w.iter().flat_map(|w| w.to_le_bytes()).collect() }];
    Case { def, sizes: Vec::new(), inputs: inputs(def, &[], given), host: Vec::new(), outputs: vec![expected(def, &[], "y", &replay, exact)] }
}

/// The DeltaNet step's inputs at B = 2, T = 3: keys and queries scaled like normalized
/// heads, decays and betas in (0, 1), a random incoming state.
struct DeltaData {
    geom: DeltaGeometry,
    q: Vec<bf16>,
    k: Vec<bf16>,
    v: Vec<bf16>,
    g: Vec<f32>,
    beta: Vec<bf16>,
    state: Vec<f32>,
}

fn delta_data(def: &KernelDef, seed: u64) -> DeltaData {
    let geom = DeltaGeometry { b: 2, t: 3, hk: dim(def, "k", 2), dk: dim(def, "k", 3), hv: dim(def, "v", 2), dv: dim(def, "v", 3) };
    let mut rng = SplitMix64::new(seed);
    let scale = 1.7 / (geom.dk as f32).sqrt();
    let q = random(&mut rng, geom.qk_len(), scale);
    let k = random(&mut rng, geom.qk_len(), scale);
    let v = random(&mut rng, geom.v_len(), 1.0);
    let g = (0..geom.gate_len()).map(|_| (-(rng.unit() * 0.5 + 0.01)).exp() as f32).collect();
    let beta = (0..geom.gate_len()).map(|_| bf16::from_f32((0.1 + 0.8 * rng.unit()) as f32)).collect();
    let state = random(&mut rng, geom.state_len(), 1.0);
    DeltaData { geom, q, k, v, g, beta, state }
}

/// The gated DeltaNet step, bf16 with an f32 state; masked: batch 0 skips its middle step.
pub fn delta_step(masked: bool) -> Case {
    delta_step_from(masked, 17, None)
}

/// The DeltaNet step on inputs drawn from `seed`, from `state` where one is given (a state
/// an earlier step computed) instead of a random one.
pub fn delta_step_from(masked: bool, seed: u64, state: Option<Vec<f32>>) -> Case {
    let def = if masked { &delta::SMALL_DELTA_MASKED_BF16_F32 } else { &delta::SMALL_DELTA_BF16_F32 };
    let mut d = delta_data(def, seed);
    if let Some(state) = state {
        assert_eq!(state.len(), d.state.len(), "{}: the state given", def.name);
        d.state = state;
    }
    let (b, t) = (d.geom.b, d.geom.t);
    let mask: Vec<bool> = (0..b * t).map(|i| !(i / t == 0 && i % t == 1)).collect();
    let inp = DeltaInputs { q: &d.q, k: &d.k, v: &d.v, g: &d.g, beta: &d.beta, state: &d.state, mask: masked.then_some(&mask[..]) };
    let replay = kernelgen_reference::delta::delta_replay(&d.geom, &inp);
    let exact = kernelgen_reference::delta::delta_f64(&d.geom, &inp);
    let sizes = [b as u64, t as u64];
    let mut given = vec![data("q", &d.q), data("k", &d.k), data("v", &d.v), data("g", &d.g), data("beta", &d.beta), data("state_in", &d.state)];
    if masked {
        given.push(Data { name: "mask", dtype: Dtype::Bool, shape: Vec::new(), bytes: mask.iter().map(|&m| u8::from(m)).collect() });
    }
    Case {
        def,
        sizes: sizes.to_vec(),
        inputs: inputs(def, &sizes, given),
        host: Vec::new(),
        outputs: vec![expected(def, &sizes, "y", &replay.y, exact.y), expected(def, &sizes, "state_out", &replay.state, exact.state)],
    }
}

/// The DeltaNet prefix state: batch 0 keeps every step, batch 1 one.
pub fn delta_prefix_state() -> Case {
    let def = &delta_state::SMALL_DELTA_STATE_BF16_F32;
    let d = delta_data(def, 17);
    let lengths = [d.geom.t as i32, 1];
    let inp = DeltaStateInputs { k: &d.k, v: &d.v, g: &d.g, beta: &d.beta, state: &d.state, lengths: &lengths };
    let replay = kernelgen_reference::delta::delta_state_replay(&d.geom, &inp);
    let exact = kernelgen_reference::delta::delta_state_f64(&d.geom, &inp);
    let sizes = [d.geom.b as u64, d.geom.t as u64];
    let given = vec![data("k", &d.k), data("v", &d.v), data("g", &d.g), data("beta", &d.beta), data("state_in", &d.state)];
    Case { def, sizes: sizes.to_vec(), inputs: inputs(def, &sizes, given), host: vec![lengths.to_vec()], outputs: vec![expected(def, &sizes, "state_out", &replay, exact)] }
}

/// SiLU + RMS heads, bf16, B = 2, S = 3, on convolution outputs of a few units.
pub fn silu_rms_heads() -> Case {
    let def = &silu_rms_heads::SMALL_SILU_RMS_HEADS_BF16;
    let (b, s) = (2, 3);
    let geom = HeadsGeometry { rows: b * s, hk: dim(def, "q", 2), dk: dim(def, "q", 3), hv: dim(def, "v", 2), dv: dim(def, "v", 3) };
    let mut rng = SplitMix64::new(23);
    let x: Vec<bf16> = random(&mut rng, geom.rows * geom.channels(), 4.0);
    let scales = |rng: &mut SplitMix64| -> Vec<bf16> { random::<f32>(rng, geom.dk, 0.5).iter().map(|v| bf16::from_f32(1.0 + v)).collect() };
    let (qscale, kscale) = (scales(&mut rng), scales(&mut rng));
    let replay = silu_rms_heads_replay(&x, &qscale, &kscale, &geom);
    let exact = silu_rms_heads_f64(&x, &qscale, &kscale, &geom);
    let sizes = [b as u64, s as u64];
    Case {
        def,
        sizes: sizes.to_vec(),
        inputs: inputs(def, &sizes, vec![data("x", &x), data("qscale", &qscale), data("kscale", &kscale)]),
        host: Vec::new(),
        outputs: vec![
            expected(def, &sizes, "q", &replay.q, exact.q),
            expected(def, &sizes, "k", &replay.k, exact.k),
            expected(def, &sizes, "v", &replay.v, exact.v),
        ],
    }
}

/// The gated RMS norm of an odd width (D = 200, eps = 1e-5), bf16, R = 3 rows.
pub fn gated_rms_norm() -> Case {
    let def = &gated_rms_norm::ODD200_GATED_RMS_NORM_BF16;
    let d = dim(def, "x", 1);
    // The spec's epsilon, which the kernel holds as f32 bits (not in its contract).
    let eps = 1e-5f32;
    assert!(def.metal.contains(&format!("as_type<float>({:#010x}u)", eps.to_bits())), "{}: eps is not {eps}", def.name);
    let rows = 3;
    let mut rng = SplitMix64::new(29);
    let x: Vec<bf16> = random(&mut rng, rows * d, 1.0);
    let gate: Vec<bf16> = random(&mut rng, rows * d, 4.0);
    let weight: Vec<bf16> = random::<f32>(&mut rng, d, 0.5).iter().map(|v| bf16::from_f32(1.0 + v)).collect();
    let replay = gated_rms_norm_replay(&x, &gate, &weight, eps, d);
    let exact = gated_rms_norm_f64(&x, &gate, &weight, eps, d);
    let sizes = [rows as u64];
    Case {
        def,
        sizes: sizes.to_vec(),
        inputs: inputs(def, &sizes, vec![data("x", &x), data("gate", &gate), data("weight", &weight)]),
        host: Vec::new(),
        outputs: vec![expected(def, &sizes, "out", &replay, exact)],
    }
}

/// The kernels the cases launch (the expert's down on the gate/up case's replay, the grouped
/// down on the grouped gate_up's).
pub fn all() -> Vec<Case> {
    let up = expert_gate_up();
    let mid: Vec<bf16> = elements(&up.outputs[0].replay);
    let grouped = expert_gate_up_grouped();
    let grouped_mid: Vec<bf16> = elements(&grouped.outputs[0].replay);
    vec![up, expert_down(&mid), grouped, expert_down_grouped(&grouped_mid), affine_row(), delta_step(false), delta_step(true), delta_prefix_state(), silu_rms_heads(), gated_rms_norm()]
}
