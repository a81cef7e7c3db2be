//! MLX's own Metal kernels, compiled by the emulator from MLX's unmodified headers
//! (the `mlx-metal` wheel, fetched by `crates/emu/tests/mlx-metal/fetch.sh`, which
//! `make test` runs), instantiated with MLX's own `instantiate_kernel` macro and
//! dispatched as MLX's host code dispatches them.
//!
//! - `affine_qmv_fast` (quantized.h, bits 3 and 4, group 64, bfloat16_t) with the
//!   dispatch of MLX's quantized.cpp (`qmv`: threadgroups of (32, 2, 1), a grid of
//!   (M, N / 8, B) threadgroups) is bit for bit kernelgen's own affine kernel
//!   (templates/affine.metal.tera, rendered for each K x N) on weights quantized by
//!   kernelgen's quantizer (crates/reference/src/affine.rs, MLX's packing).
//! - The other kernels that run (see crates/emu/MLX_KERNELS.md) are checked against
//!   simple references written here.
//!
//! Without the headers every test prints why it is skipped and passes.

use half::bf16;
use kernelgen_emu::{DeviceBuffer, EmuOptions, Emulator, LoadOptions, Program};
use kernelgen_reference::affine::{Bits, Quantized};
use std::path::PathBuf;
use std::sync::OnceLock;

/// MLX's `include/` directory (holding `mlx/backend/metal/kernels/`), if fetched.
fn mlx_include() -> Option<PathBuf> {
    let dir = match std::env::var_os("KERNELGEN_MLX_METAL_INCLUDE") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mlx-metal/mlx-metal-0.32.2/include"),
    };
    dir.join("mlx/backend/metal/kernels/quantized.h").is_file().then_some(dir)
}

macro_rules! mlx_or_skip {
    () => {
        match mlx_include() {
            Some(dir) => dir,
            None => {
                let why = "MLX's Metal headers are not in target/mlx-metal (run crates/emu/tests/mlx-metal/fetch.sh, \
                           as `make test` does, or set KERNELGEN_MLX_METAL_INCLUDE)";
                // `make test` fetched them: a skip there would hide the test.
                if std::env::var_os("KERNELGEN_MLX_METAL_REQUIRED").is_some_and(|v| !v.is_empty()) {
                    panic!("{why}; KERNELGEN_MLX_METAL_REQUIRED is set");
                }
                eprintln!("skipped: {why}");
                return;
            }
        }
    };
}

fn emulator() -> &'static Emulator {
    static E: OnceLock<Emulator> = OnceLock::new();
    E.get_or_init(|| Emulator::new(EmuOptions::default()).unwrap_or_else(|e| panic!("{e}")))
}

/// One of the translation units under tests/mlx-metal/, with MLX's headers on the path.
fn load_tu(include: &PathBuf, file: &str) -> Program {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mlx-metal").join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    emulator()
        .load_with(&source, &path.display().to_string(), &LoadOptions::with_include_dir(include))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    // SAFETY: plain old data (integers, floats, bf16) viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
}

fn buf<T: Copy>(v: &[T]) -> DeviceBuffer {
    DeviceBuffer::from_bytes_aligned(&bytes_of(v), 16)
}

fn u16s(b: &DeviceBuffer) -> Vec<u16> {
    b.as_bytes().chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

fn activations(n: usize, seed: u64) -> Vec<bf16> {
    let mut rng = kernelgen_reference::SplitMix64::new(seed);
    (0..n).map(|_| bf16::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect()
}

// ------------------------------------------------------------------ affine_qmv_fast

/// MLX's `affine_qmv_fast` on `x [B, M=1, K]` and `B` weight matrices (`B > 1`: the
/// `_batch_1` instantiation with MLX's shape and int64 stride buffers), dispatched as
/// quantized.cpp's `qmv` does.
fn mlx_qmv(p: &Program, x: &[bf16], ws: &[&Quantized<bf16>], k: usize, n: usize) -> Vec<u16> {
    let b = ws.len();
    let bits = ws[0].bits.bits();
    let name = format!("affine_qmv_fast_bfloat16_t_gs_64_b_{bits}_batch_{}", (b > 1) as u8);
    let cat = |f: &dyn Fn(&Quantized<bf16>) -> Vec<u8>| ws.iter().flat_map(|q| f(q)).collect::<Vec<u8>>();
    let mut w = DeviceBuffer::from_bytes_aligned(&cat(&|q| bytes_of(&q.w)), 16);
    let mut scales = DeviceBuffer::from_bytes_aligned(&cat(&|q| bytes_of(&q.scales)), 16);
    let mut biases = DeviceBuffer::from_bytes_aligned(&cat(&|q| bytes_of(&q.biases)), 16);
    let mut xb = buf(x);
    let mut y = DeviceBuffer::from_bytes_aligned(&vec![0xFFu8; b * n * 2], 16);
    let m = 1usize;
    let wpr = k * bits / 32;
    // MLX binds these only when batched (add_strides_and_shapes); every index exists
    // in the signature, so they are given either way, with the values MLX would set.
    let mut kb = buf(&[k as i32]);
    let mut nb = buf(&[n as i32]);
    let mut x_batch_ndims = buf(&[1i32]);
    let mut x_shape = buf(&[b as i32, m as i32, k as i32]);
    let mut x_strides = buf(&[(m * k) as i64, k as i64, 1]);
    let mut w_batch_ndims = buf(&[1i32]);
    let mut w_shape = buf(&[b as i32, n as i32, wpr as i32]);
    let mut w_strides = buf(&[(n * wpr) as i64, wpr as i64, 1]);
    let mut s_strides = buf(&[(n * k / 64) as i64, (k / 64) as i64, 1]);
    let mut b_strides = buf(&[(n * k / 64) as i64, (k / 64) as i64, 1]);
    // quantized.cpp: group_dims (32, 2, 1), grid_dims (M, N / 8, B) threadgroups; the
    // emulator's grid counts threads.
    let tg = [32u32, 2, 1];
    let grid = [m as u32 * tg[0], (n / 8) as u32 * tg[1], b as u32 * tg[2]];
    p.dispatch(
        &name,
        &mut [
            &mut w,
            &mut scales,
            &mut biases,
            &mut xb,
            &mut y,
            &mut kb,
            &mut nb,
            &mut x_batch_ndims,
            &mut x_shape,
            &mut x_strides,
            &mut w_batch_ndims,
            &mut w_shape,
            &mut w_strides,
            &mut s_strides,
            &mut b_strides,
        ],
        grid,
        tg,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    u16s(&y)
}

/// kernelgen's affine kernel for `K x N` (rendered from a spec, as `make generate`
/// renders specs/affine.toml), run with its own launch geometry.
fn kernelgen_affine(k: usize, n: usize, bits: Bits, x: &[bf16], q: &Quantized<bf16>) -> Vec<u16> {
    let spec = format!(
        "family = \"affine\"\ndescription = \"test\"\n[axes]\nbits = [{}]\ndtype = [\"bf16\"]\n[geometry.k{k}_n{n}]\nK = {k}\nN = {n}\n",
        bits.bits()
    );
    let source = kernelgen_codegen::spec::SpecSource {
        display: "mlx_kernels.toml".into(),
        origin: "specs/mlx_kernels.toml".into(),
        stem: "mlx_kernels".into(),
        text: spec,
    };
    let generated = kernelgen_codegen::generate(vec![source]).unwrap_or_else(|e| panic!("{e}"));
    let r = &generated.kernels[0];
    let def = &r.def;
    let p = emulator().load(r.metal(), &r.metal_path).unwrap_or_else(|e| panic!("{e}"));
    let grid: Vec<u32> = def.grid.iter().map(|d| d.eval(&[]).expect("the affine grid has no run-time sizes") as u32).collect();
    let tg = def.threadgroup;
    let mut xb = buf(x);
    let mut w = buf(&q.w);
    let mut s = buf(&q.scales);
    let mut b = buf(&q.biases);
    let mut y = DeviceBuffer::from_bytes_aligned(&vec![0xFFu8; n * 2], 16);
    let name = p.kernels()[0].name.clone();
    p.dispatch(&name, &mut [&mut xb, &mut w, &mut s, &mut b, &mut y], [grid[0], grid[1], grid[2]], tg)
        .unwrap_or_else(|e| panic!("{e}"));
    u16s(&y)
}

#[test]
fn mlx_affine_qmv_fast_is_kernelgen_affine_bit_for_bit() {
    let include = mlx_or_skip!();
    let p = load_tu(&include, "quantized.metal");
    let mut cases = 0;
    for (k, n) in [(512, 128), (1024, 256), (2048, 192), (5120, 64), (7680, 192)] {
        for bits in [Bits::Four, Bits::Three] {
            let seed = (k * 31 + n + bits.bits()) as u64;
            let q = Quantized::<bf16>::random(n, k, bits, seed);
            let x = activations(k, seed ^ 0x5eed);
            let mlx = mlx_qmv(&p, &x, &[&q], k, n);
            let ours = kernelgen_affine(k, n, bits, &x, &q);
            let replay: Vec<u16> = kernelgen_reference::affine::affine_row_replay(&x, &q).iter().map(|v| v.to_bits()).collect();
            assert_eq!(mlx, ours, "K {k} N {n} bits {}: MLX's affine_qmv_fast and kernelgen's affine kernel differ", bits.bits());
            assert_eq!(mlx, replay, "K {k} N {n} bits {}: MLX's affine_qmv_fast and the replay model differ", bits.bits());
            cases += 1;
        }
    }
    assert_eq!(cases, 10);
}

#[test]
fn mlx_affine_qmv_fast_batched_reads_int64_strides() {
    let include = mlx_or_skip!();
    let p = load_tu(&include, "quantized.metal");
    let (k, n) = (1024, 128);
    for bits in [Bits::Four, Bits::Three] {
        let q0 = Quantized::<bf16>::random(n, k, bits, 1);
        let q1 = Quantized::<bf16>::random(n, k, bits, 2);
        let x = activations(2 * k, 3);
        let got = mlx_qmv(&p, &x, &[&q0, &q1], k, n);
        let mut want = Vec::new();
        for (i, q) in [&q0, &q1].into_iter().enumerate() {
            let y = kernelgen_reference::affine::affine_row_replay(&x[i * k..(i + 1) * k], q);
            want.extend(y.iter().map(|v| v.to_bits()));
        }
        assert_eq!(got, want, "bits {}", bits.bits());
    }
}

// ------------------------------------------------------------------ other kernels

fn f32s(b: &DeviceBuffer) -> Vec<f32> {
    b.as_bytes().chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn floats(n: usize, seed: u64, scale: f64) -> Vec<f32> {
    let mut rng = kernelgen_reference::SplitMix64::new(seed);
    (0..n).map(|_| ((rng.unit() * 2.0 - 1.0) * scale) as f32).collect()
}

fn poison(bytes: usize) -> DeviceBuffer {
    DeviceBuffer::from_bytes_aligned(&vec![0xFFu8; bytes], 16)
}

fn elementwise() -> Option<&'static Program> {
    static P: OnceLock<Option<Program>> = OnceLock::new();
    P.get_or_init(|| mlx_include().map(|inc| load_tu(&inc, "elementwise.metal"))).as_ref()
}

macro_rules! elementwise_or_skip {
    () => {{
        let _ = mlx_or_skip!();
        elementwise().unwrap()
    }};
}

#[test]
fn mlx_unary_kernels() {
    let p = elementwise_or_skip!();
    // vn_: WorkPerThread<float>::n = 2 values per thread (unary.cpp: ceil(size / 2) threads)
    let n = 1001;
    let x = floats(n, 1, 8.0);
    let (mut xb, mut y, mut size) = (buf(&x), poison(n * 4), buf(&[n as u32]));
    p.dispatch("vn_Expfloat32float32", &mut [&mut xb, &mut y, &mut size], [n.div_ceil(2) as u32, 1, 1], [256, 1, 1]).unwrap();
    let want: Vec<u32> = x.iter().map(|v| v.exp().to_bits()).collect();
    assert_eq!(f32s(&y).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "exp (glibc expf both sides)");

    // Sigmoid in bfloat16, every operation rounded as MLX's bf16 arithmetic does
    let xb16 = activations(n, 2).iter().map(|v| bf16::from_f32(v.to_f32() * 6.0)).collect::<Vec<_>>();
    let (mut xb, mut y) = (buf(&xb16), poison(n * 2));
    p.dispatch("v_Sigmoidbfloat16bfloat16", &mut [&mut xb, &mut y, &mut size], [n as u32, 1, 1], [128, 1, 1]).unwrap();
    let r = |v: f32| bf16::from_f32(v).to_f32();
    let want: Vec<u16> = xb16
        .iter()
        .map(|x| {
            let x = x.to_f32();
            let e = r(x.abs().exp());
            let y = r(1.0 / r(1.0 + e));
            bf16::from_f32(if x < 0.0 { y } else { 1.0 - y }).to_bits()
        })
        .collect();
    assert_eq!(u16s(&y), want, "sigmoid bf16");

    // unary_g over a transposed [3, 5] view: int32 shape, int64 strides, `device const int&` ndim
    let x = floats(15, 3, 4.0);
    let (mut xb, mut y) = (buf(&x), poison(15 * 4));
    let (mut shape, mut strides, mut ndim) = (buf(&[3i32, 5]), buf(&[1i64, 3]), buf(&[2i32]));
    p.dispatch("gn1_Absfloat32float32", &mut [&mut xb, &mut y, &mut shape, &mut strides, &mut ndim], [5, 3, 1], [5, 3, 1]).unwrap();
    let want: Vec<f32> = (0..15).map(|i| x[(i % 5) * 3 + i / 5].abs()).collect();
    assert_eq!(f32s(&y), want, "abs over strides");
}

#[test]
fn mlx_binary_kernels() {
    let p = elementwise_or_skip!();
    let n = 777;
    let (a, b) = (floats(n, 4, 100.0), floats(n, 5, 100.0));
    let (mut ab, mut bb, mut c, mut size) = (buf(&a), buf(&b), poison(n * 4), buf(&[n as u32]));
    p.dispatch("vvn_Addfloat32", &mut [&mut ab, &mut bb, &mut c, &mut size], [n.div_ceil(2) as u32, 1, 1], [128, 1, 1]).unwrap();
    assert_eq!(f32s(&c), a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<_>>());
    let (a, b) = (activations(n, 6), activations(n, 7));
    let (mut ab, mut bb, mut c) = (buf(&a), buf(&b), poison(n * 2));
    p.dispatch("vv_Multiplybfloat16", &mut [&mut ab, &mut bb, &mut c, &mut size], [n as u32, 1, 1], [128, 1, 1]).unwrap();
    let want: Vec<u16> = a.iter().zip(&b).map(|(x, y)| bf16::from_f32(x.to_f32() * y.to_f32()).to_bits()).collect();
    assert_eq!(u16s(&c), want);
}

fn softmax_f64(x: &[f32], rows: usize) -> Vec<f64> {
    let d = x.len() / rows;
    let mut out = Vec::new();
    for r in x.chunks(d) {
        let m = r.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let s: f64 = r.iter().map(|&v| (v as f64 - m).exp()).sum();
        out.extend(r.iter().map(|&v| (v as f64 - m).exp() / s));
    }
    out
}

#[test]
fn mlx_softmax_kernels() {
    let p = elementwise_or_skip!();
    // softmax.cpp: one threadgroup per row; single_row with ceil(d / 4) threads rounded
    // up to whole SIMD-groups, looped with up to 1024 threads
    for (name, rows, d, tg) in [("block_softmax_float32", 3, 1000, 256), ("looped_softmax_float32", 2, 5000, 1024)] {
        let x = floats(rows * d, d as u64, 10.0);
        let (mut xb, mut y, mut axis) = (buf(&x), poison(rows * d * 4), buf(&[d as i32]));
        p.dispatch(name, &mut [&mut xb, &mut y, &mut axis], [(rows * tg) as u32, 1, 1], [tg as u32, 1, 1]).unwrap();
        let want = softmax_f64(&x, rows);
        for (i, (g, w)) in f32s(&y).iter().zip(&want).enumerate() {
            assert!((*g as f64 - w).abs() <= 1e-6 * w.abs() + 1e-9, "{name} [{i}]: {g} vs {w}");
        }
    }
    let (rows, d) = (4, 300);
    let x: Vec<bf16> = activations(rows * d, 8).iter().map(|v| bf16::from_f32(v.to_f32() * 5.0)).collect();
    let (mut xb, mut y, mut axis) = (buf(&x), poison(rows * d * 2), buf(&[d as i32]));
    p.dispatch("block_softmax_precise_bfloat16", &mut [&mut xb, &mut y, &mut axis], [(rows * 96) as u32, 1, 1], [96, 1, 1]).unwrap();
    let want = softmax_f64(&x.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), rows);
    for (g, w) in u16s(&y).iter().zip(&want) {
        let g = bf16::from_bits(*g).to_f32() as f64;
        assert!((g - w).abs() <= w.abs() / 128.0 + 1e-9, "bf16 softmax {g} vs {w}");
    }
}

#[test]
fn mlx_arange_and_all_reduce() {
    let p = elementwise_or_skip!();
    let n = 300;
    let (mut start, mut step, mut out) = (buf(&[-3.5f32]), buf(&[0.25f32]), poison(n * 4));
    p.dispatch("arangefloat32", &mut [&mut start, &mut step, &mut out], [n as u32, 1, 1], [64, 1, 1]).unwrap();
    assert_eq!(f32s(&out), (0..n).map(|i| -3.5f32 + i as f32 * 0.25).collect::<Vec<_>>());

    // reduce.cpp's two passes: 8 rows of the input to 8 partials, then one row of those
    let n = 100_000;
    let x = floats(n, 9, 1.0);
    for (name, want) in [
        ("all_reduce_sumfloat32", x.iter().map(|&v| v as f64).sum::<f64>()),
        ("all_reduce_maxfloat32", x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64))),
    ] {
        let rows = 8;
        let row = n.div_ceil(rows);
        let (mut xb, mut part) = (buf(&x), poison(rows * 4));
        let (mut in_size, mut row_size) = (buf(&[n as u64]), buf(&[row as u64]));
        p.dispatch(name, &mut [&mut xb, &mut part, &mut in_size, &mut row_size], [256, rows as u32, 1], [256, 1, 1]).unwrap();
        let mut out = poison(4);
        let (mut in_size, mut row_size) = (buf(&[rows as u64]), buf(&[rows as u64]));
        p.dispatch(name, &mut [&mut part, &mut out, &mut in_size, &mut row_size], [32, 1, 1], [32, 1, 1]).unwrap();
        let got = f32s(&out)[0] as f64;
        assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "{name}: {got} vs {want}");
    }
}

#[test]
fn mlx_logsumexp_kernels() {
    // logsumexp.cpp: block_ up to 4096 per row (32 x ceil(ceil(d / 4) / 32) threads a row),
    // looped_ beyond (1024 threads a row); one threadgroup per row, axis_size an int
    let include = mlx_or_skip!();
    let p = load_tu(&include, "logsumexp.metal");
    for (rows, d) in [(3usize, 1usize), (4, 100), (2, 4096), (2, 5000)] {
        let x = floats(rows * d, (rows * d) as u64, 20.0);
        let (name, tg) = if d > 4096 { ("looped_logsumexp_float32", 1024) } else { ("block_logsumexp_float32", 32 * d.div_ceil(4).div_ceil(32)) };
        let (mut xb, mut y, mut axis) = (buf(&x), poison(rows * 4), buf(&[d as i32]));
        p.dispatch(name, &mut [&mut xb, &mut y, &mut axis], [(rows * tg) as u32, 1, 1], [tg as u32, 1, 1]).unwrap();
        for (r, got) in f32s(&y).iter().enumerate() {
            let row = &x[r * d..(r + 1) * d];
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let want = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
            assert!((*got as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "{name} {rows}x{d} row {r}: {got} vs {want}");
        }
    }
    let (rows, d) = (3, 700);
    let x: Vec<bf16> = activations(rows * d, 11).iter().map(|v| bf16::from_f32(v.to_f32() * 8.0)).collect();
    let (mut xb, mut y, mut axis) = (buf(&x), poison(rows * 2), buf(&[d as i32]));
    let tg = 32 * d.div_ceil(4).div_ceil(32);
    p.dispatch("block_logsumexp_bfloat16", &mut [&mut xb, &mut y, &mut axis], [(rows * tg) as u32, 1, 1], [tg as u32, 1, 1]).unwrap();
    for (r, got) in u16s(&y).iter().enumerate() {
        let row: Vec<f64> = x[r * d..(r + 1) * d].iter().map(|v| v.to_f64()).collect();
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        let got = bf16::from_bits(*got).to_f64();
        assert!((got - want).abs() <= want.abs() / 128.0, "block_logsumexp_bfloat16 row {r}: {got} vs {want}");
    }
}
