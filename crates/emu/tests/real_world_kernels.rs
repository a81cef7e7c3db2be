//! Real-world Metal kernels run in the emulator: the `.metal` sources of candle, mistral.rs and
//! ggml as their crates.io releases ship them (the corpus `crates/msl/tests/corpus/fetch.sh`
//! fetches, pinned there, never committed; `make deps` runs it), each compiled as its project
//! compiles it (files, include folders, macros, Metal 3.1) and dispatched as the project's host
//! code dispatches it (grid, threadgroup, buffers and `setBytes` values in the order and widths
//! its Rust or C++ binds them). Each result is compared with a reference written here from what
//! the kernel is documented to compute (plain f64 or exactly rounded arithmetic), not from its
//! MSL. The figures and what does not run yet: docs/emulator.md, "Real-world kernels".
//!
//! `#[ignore]`d: `make test-slow` runs them (a few hundred kernels compile from each file on first
//! use; the emulator caches the objects). Without the corpus they print why and pass, unless
//! `KERNELGEN_MLX_METAL_REQUIRED` is set (as `make test-slow` sets it after `make deps`).

use half::{bf16, f16};
use kernelgen_emu::{DeviceBuffer, Dispatch, EmuOptions, Emulator, FunctionConstant, LoadOptions, Program};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

// ------------------------------------------------------------------ the corpus

/// The pinned crates' source folders by name, as fetch.sh lists them in target/msl-corpus.
fn corpus() -> Option<&'static HashMap<String, PathBuf>> {
    static C: OnceLock<Option<HashMap<String, PathBuf>>> = OnceLock::new();
    C.get_or_init(|| {
        let list = std::env::var_os("KERNELGEN_MSL_CORPUS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/msl-corpus"))
            .join("crates.tsv");
        let text = std::fs::read_to_string(&list).ok()?;
        let map: HashMap<String, PathBuf> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split('\t');
                let (name, _version, dir) = (it.next()?, it.next()?, it.next()?);
                Some((name.to_string(), PathBuf::from(dir)))
            })
            .collect();
        (!map.is_empty() && map.values().all(|d| d.is_dir())).then_some(map)
    })
    .as_ref()
}

/// One pinned crate's folder, or `None` after saying why (a panic where the corpus must be there).
fn crate_dir(name: &str) -> Option<&'static Path> {
    if let Some(d) = corpus().and_then(|c| c.get(name)) {
        return Some(d);
    }
    let why = format!(
        "{name} is not in the real-world MSL corpus (target/msl-corpus/crates.tsv: run crates/msl/tests/corpus/fetch.sh, as `make deps` does)"
    );
    if std::env::var_os("KERNELGEN_MLX_METAL_REQUIRED").is_some_and(|v| !v.is_empty()) {
        panic!("{why}; KERNELGEN_MLX_METAL_REQUIRED is set, so this test must not skip");
    }
    eprintln!("skipped: {why}");
    None
}

fn emulator() -> &'static Emulator {
    static E: OnceLock<Emulator> = OnceLock::new();
    E.get_or_init(|| Emulator::new(EmuOptions::default()).unwrap_or_else(|e| panic!("{e}")))
}

/// A file of the corpus, loaded under its own path (so quoted includes resolve beside it).
fn load_file(path: &Path, opts: &LoadOptions) -> Program {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    load_text(&text, path, opts)
}

fn load_text(text: &str, path: &Path, opts: &LoadOptions) -> Program {
    emulator().load_with(text, &path.display().to_string(), opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ------------------------------------------------------------------ buffers and launches

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain old data (integers, floats, f16, bf16, repr(C) structs of them) as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }.to_vec()
}

/// A buffer holding `v` (also what `setBytes` of a value or a slice binds).
fn buf<T: Copy>(v: &[T]) -> DeviceBuffer {
    DeviceBuffer::from_bytes_aligned(&bytes_of(v), 16)
}

/// An output buffer of `bytes`, filled with 0xFF so that an element never written shows.
fn out(bytes: usize) -> DeviceBuffer {
    DeviceBuffer::from_bytes_aligned(&vec![0xFFu8; bytes], 16)
}

fn read<T: Copy + Default>(b: &DeviceBuffer) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: `v` has room for exactly the buffer's bytes, and T is plain old data.
    unsafe { std::ptr::copy_nonoverlapping(b.as_bytes().as_ptr(), v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    v
}

/// `dispatchThreadgroups(groups, tg)` (the emulator's grid counts threads).
fn run_groups(p: &Program, name: &str, bufs: &mut [&mut DeviceBuffer], groups: [usize; 3], tg: [usize; 3]) {
    let grid = [(groups[0] * tg[0]) as u32, (groups[1] * tg[1]) as u32, (groups[2] * tg[2]) as u32];
    let d = Dispatch::new(name, grid, [tg[0] as u32, tg[1] as u32, tg[2] as u32]);
    p.run(&d, bufs).unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// What `max_total_threads_per_threadgroup` of these pipelines is on Apple GPUs (1024); the
/// projects' `linear_split` caps a threadgroup's width with it.
const MAX_THREADS: usize = 1024;

/// candle's and mistral.rs's `linear_split(pipeline, n)`: threadgroups of min(1024, n) threads.
fn linear_split(n: usize) -> ([usize; 3], [usize; 3]) {
    let w = MAX_THREADS.min(n).max(1);
    ([n.div_ceil(w), 1, 1], [w, 1, 1])
}

// ------------------------------------------------------------------ inputs and comparisons

/// A small deterministic generator (SplitMix64): values in [-scale, scale).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn f32s(&mut self, n: usize, scale: f64) -> Vec<f32> {
        (0..n).map(|_| ((self.unit() * 2.0 - 1.0) * scale) as f32).collect()
    }
}

/// Every `got[i]` within `abs + rel * |want[i]|` of `want[i]` (NaN never is).
#[track_caller]
fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, {} expected", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= abs + rel * w.abs(), "{what} [{i}]: {g} vs {w} (error {err:e}; allowed {abs:e} + {rel:e} x |want|)");
    }
}

fn f64s<T: Copy>(v: &[T], f: impl Fn(T) -> f64) -> Vec<f64> {
    v.iter().map(|&x| f(x)).collect()
}

/// The element `i` of a row-major `shape` lives at this offset of a view with `strides`.
fn strided(mut i: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        off += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    off
}

// ------------------------------------------------------------------ candle

/// A candle source as candle compiles it: alone, from its text (`new_library_with_source`: no
/// include path, no macros beyond Metal's own, bfloat available as on macOS 14).
fn candle(file: &str) -> Option<Program> {
    let dir = crate_dir("candle-metal-kernels")?;
    Some(load_file(&dir.join("src/metal_src").join(file), &LoadOptions::default()))
}

macro_rules! candle_or_skip {
    ($file:expr) => {
        match candle($file) {
            Some(p) => p,
            None => return,
        }
    };
}

/// candle's `get_tile_size`: elements per thread of its contiguous element-wise kernels.
fn tile(dtype_size: usize) -> usize {
    1.max(8 / dtype_size)
}

/// `call_binary_strided`: (length, num_dims, shape, left strides, right strides, left, right,
/// output), `linear_split` over length / tile threads.
fn candle_binary_strided<T: Copy, U: Copy + Default>(p: &Program, name: &str, shape: &[usize], l: (&[T], &[usize]), r: (&[T], &[usize])) -> Vec<U> {
    let n: usize = shape.iter().product();
    let (g, t) = linear_split(n.div_ceil(tile(std::mem::size_of::<T>())));
    let to64 = |v: &[usize]| v.iter().map(|&x| x as u64).collect::<Vec<u64>>();
    let mut o = out(n * std::mem::size_of::<U>());
    run_groups(
        p,
        name,
        &mut [
            &mut buf(&[n as u64]),
            &mut buf(&[shape.len() as u64]),
            &mut buf(&to64(shape)),
            &mut buf(&to64(l.1)),
            &mut buf(&to64(r.1)),
            &mut buf(l.0),
            &mut buf(r.0),
            &mut o,
        ],
        g,
        t,
    );
    read(&o)
}

#[test]
#[ignore]
fn candle_binary() {
    let p = candle_or_skip!("binary.metal");
    let mut rng = Rng(1);
    // contiguous (`call_binary_contiguous`: length, left, right, output)
    for n in [1, 1001, 4099] {
        let (a, b) = (rng.f32s(n, 100.0), rng.f32s(n, 100.0));
        let (g, t) = linear_split(n.div_ceil(tile(4)));
        let mut o = out(n * 4);
        run_groups(&p, "badd_f32", &mut [&mut buf(&[n as u64]), &mut buf(&a), &mut buf(&b), &mut o], g, t);
        let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (*x as f64 + *y as f64) as f32 as f64).collect();
        assert_close(&format!("badd_f32 n {n}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, 0.0, 0.0);
        let (ah, bh): (Vec<f16>, Vec<f16>) = (a.iter().map(|&v| f16::from_f32(v)).collect(), b.iter().map(|&v| f16::from_f32(v)).collect());
        let (g, t) = linear_split(n.div_ceil(tile(2)));
        let mut o = out(n * 2);
        run_groups(&p, "bsub_f16", &mut [&mut buf(&[n as u64]), &mut buf(&ah), &mut buf(&bh), &mut o], g, t);
        let want: Vec<f64> = ah.iter().zip(&bh).map(|(x, y)| f16::from_f64(x.to_f64() - y.to_f64()).to_f64()).collect();
        assert_close(&format!("bsub_f16 n {n}"), &f64s(&read::<f16>(&o), |v| v.to_f64()), &want, 0.0, 0.0);
    }
    // strided multiply: the left operand a transposed view of a [5, 4, 3] tensor, the right one a
    // [4, 1] column broadcast over [3, 4, 5]; then a [2, 33, 17] by a broadcast row
    for (shape, lstrides, lsize, rstrides, rsize) in [
        (vec![3usize, 4, 5], vec![1usize, 3, 12], 60usize, vec![0usize, 1, 0], 4usize),
        (vec![2, 33, 17], vec![561, 17, 1], 1122, vec![0, 0, 1], 17),
    ] {
        let n: usize = shape.iter().product();
        let (l, r) = (rng.f32s(lsize, 10.0), rng.f32s(rsize, 10.0));
        let got: Vec<f32> = candle_binary_strided(&p, "bmul_f32_strided", &shape, (&l, &lstrides), (&r, &rstrides));
        let want: Vec<f64> =
            (0..n).map(|i| (l[strided(i, &shape, &lstrides)] as f64 * r[strided(i, &shape, &rstrides)] as f64) as f32 as f64).collect();
        assert_close(&format!("bmul_f32_strided {shape:?}"), &f64s(&got, |v| v as f64), &want, 0.0, 0.0);
        let (lb, rb): (Vec<bf16>, Vec<bf16>) = (l.iter().map(|&v| bf16::from_f32(v)).collect(), r.iter().map(|&v| bf16::from_f32(v)).collect());
        let got: Vec<bf16> = candle_binary_strided(&p, "bmul_bf16_strided", &shape, (&lb, &lstrides), (&rb, &rstrides));
        let want: Vec<f64> = (0..n)
            .map(|i| bf16::from_f64(lb[strided(i, &shape, &lstrides)].to_f64() * rb[strided(i, &shape, &rstrides)].to_f64()).to_f64())
            .collect();
        assert_close(&format!("bmul_bf16_strided {shape:?}"), &f64s(&got, |v| v.to_f64()), &want, 0.0, 0.0);
        // a comparison writes bools (one byte each)
        let want: Vec<u8> = (0..n).map(|i| (l[strided(i, &shape, &lstrides)] < r[strided(i, &shape, &rstrides)]) as u8).collect();
        let got: Vec<u8> = candle_binary_strided(&p, "lt_f32_strided", &shape, (&l, &lstrides), (&r, &rstrides));
        assert_eq!(got, want, "lt_f32_strided {shape:?}");
    }
}

#[test]
#[ignore]
fn candle_unary_and_affine() {
    let p = candle_or_skip!("unary.metal");
    let mut rng = Rng(2);
    let gelu = |x: f64| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh());
    for n in [3, 1000, 2049] {
        let x = rng.f32s(n, 6.0);
        // `call_unary_contiguous`: (length, input, output), length / tile threads
        for (name, f, rel) in [
            ("gelu_f32", &gelu as &dyn Fn(f64) -> f64, 1e-5),
            ("exp_f32", &|x: f64| x.exp(), 1e-6),
            ("silu_f32", &|x: f64| x / (1.0 + (-x).exp()), 1e-5),
        ] {
            let (g, t) = linear_split(n.div_ceil(tile(4)));
            let mut o = out(n * 4);
            run_groups(&p, name, &mut [&mut buf(&[n as u64]), &mut buf(&x), &mut o], g, t);
            let want = f64s(&x, |v| f(v as f64));
            assert_close(&format!("{name} n {n}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, rel, 1e-6);
        }
        // bfloat16: every operation rounds to 8 bits of mantissa
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let (g, t) = linear_split(n.div_ceil(tile(2)));
        let mut o = out(n * 2);
        run_groups(&p, "sigmoid_bf16", &mut [&mut buf(&[n as u64]), &mut buf(&xb), &mut o], g, t);
        let want = f64s(&xb, |v| 1.0 / (1.0 + (-v.to_f64()).exp()));
        assert_close(&format!("sigmoid_bf16 n {n}"), &f64s(&read::<bf16>(&o), |v| v.to_f64()), &want, 2.0 / 128.0, 1e-3);
    }
    // `call_unary_strided`: (length, num_dims, shape, strides, input, output), length threads;
    // a [7, 9] view of a [9, 7] tensor
    let (shape, strides) = ([7usize, 9], [1usize, 7]);
    let x = rng.f32s(63, 3.0);
    let (g, t) = linear_split(63);
    let mut o = out(63 * 4);
    run_groups(
        &p,
        "exp_f32_strided",
        &mut [&mut buf(&[63u64]), &mut buf(&[2u64]), &mut buf(&[7u64, 9]), &mut buf(&[1u64, 7]), &mut buf(&x), &mut o],
        g,
        t,
    );
    let want: Vec<f64> = (0..63).map(|i| (x[strided(i, &shape, &strides)] as f64).exp()).collect();
    assert_close("exp_f32_strided", &f64s(&read::<f32>(&o), |v| v as f64), &want, 1e-6, 0.0);

    // affine.metal, `call_affine`: (size, mul, add, input, output), size / tile threads
    let p = candle_or_skip!("affine.metal");
    for n in [5, 3001] {
        let x = rng.f32s(n, 50.0);
        let (mul, add) = (0.37f32, -1.25f32);
        let (g, t) = linear_split(n.div_ceil(tile(4)));
        let mut o = out(n * 4);
        run_groups(&p, "affine_f32", &mut [&mut buf(&[n as u64]), &mut buf(&[mul]), &mut buf(&[add]), &mut buf(&x), &mut o], g, t);
        let want = f64s(&x, |v| v as f64 * mul as f64 + add as f64);
        assert_close(&format!("affine_f32 n {n}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, 1.2e-7, 0.0);
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let (g, t) = linear_split(n.div_ceil(tile(2)));
        let mut o = out(n * 2);
        run_groups(&p, "affine_f16", &mut [&mut buf(&[n as u64]), &mut buf(&[mul]), &mut buf(&[add]), &mut buf(&xh), &mut o], g, t);
        let want = f64s(&xh, |v| f16::from_f64(v.to_f64() * mul as f64 + add as f64).to_f64());
        assert_close(&format!("affine_f16 n {n}"), &f64s(&read::<f16>(&o), |v| v.to_f64()), &want, 1.0 / 1024.0, 0.0);
    }
}

/// candle's reductions over the last axis: one threadgroup per row, of
/// min(1024, next_power_of_two(row / 2)) threads (`call_last_softmax`, `call_rms_norm`,
/// `call_reduce_contiguous`).
fn row_threads(row: usize) -> usize {
    MAX_THREADS.min((row / 2).next_power_of_two())
}

fn rows_of(x: &[f32], d: usize) -> impl Iterator<Item = Vec<f64>> + '_ {
    x.chunks(d).map(|r| r.iter().map(|&v| v as f64).collect())
}

#[test]
#[ignore]
fn candle_reductions() {
    let p = candle_or_skip!("reduce.metal");
    let mut rng = Rng(3);
    for (rows, d) in [(4, 7), (3, 1000), (2, 4099)] {
        let n = rows * d;
        let x = rng.f32s(n, 8.0);
        let groups = [rows, 1, 1];
        let tg = [row_threads(d), 1, 1];

        // softmax: (length, elements per row: usize), input, output
        let mut o = out(n * 4);
        run_groups(&p, "softmax_f32", &mut [&mut buf(&[n as u64]), &mut buf(&[d as u64]), &mut buf(&x), &mut o], groups, tg);
        let want: Vec<f64> = rows_of(&x, d)
            .flat_map(|r| {
                let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
                r.iter().map(|v| (v - m).exp() / s).collect::<Vec<_>>()
            })
            .collect();
        assert_close(&format!("softmax_f32 {rows}x{d}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, 1e-5, 1e-9);

        // rms_norm: (length, elements per row: usize), input, output, alpha, eps
        let alpha = rng.f32s(d, 2.0);
        let eps = 1e-5f32;
        let mut o = out(n * 4);
        run_groups(
            &p,
            "rmsnorm_f32",
            &mut [&mut buf(&[n as u64]), &mut buf(&[d as u64]), &mut buf(&x), &mut o, &mut buf(&alpha), &mut buf(&[eps])],
            groups,
            tg,
        );
        let want: Vec<f64> = rows_of(&x, d)
            .flat_map(|r| {
                let inv = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps as f64).sqrt();
                r.iter().zip(&alpha).map(|(v, a)| v * inv * *a as f64).collect::<Vec<_>>()
            })
            .collect();
        assert_close(&format!("rmsnorm_f32 {rows}x{d}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, 1e-5, 1e-6);

        // sum, max and argmax over each row: (length: u32, num_dims: u32, shape: u32[],
        // elements per row: u32), input, output
        let params = |p: &Program, name: &str, o: &mut DeviceBuffer| {
            run_groups(
                p,
                name,
                &mut [&mut buf(&[n as u32]), &mut buf(&[2u32]), &mut buf(&[rows as u32, d as u32]), &mut buf(&[d as u32]), &mut buf(&x), o],
                groups,
                tg,
            )
        };
        let mut o = out(rows * 4);
        params(&p, "fast_sum_f32", &mut o);
        let sums: Vec<f64> = rows_of(&x, d).map(|r| r.iter().sum()).collect();
        assert_close(&format!("fast_sum_f32 {rows}x{d}"), &f64s(&read::<f32>(&o), |v| v as f64), &sums, 1e-5, 1e-5 * d as f64);
        let mut o = out(rows * 4);
        params(&p, "fast_max_f32", &mut o);
        let maxs: Vec<f64> = rows_of(&x, d).map(|r| r.iter().cloned().fold(f64::NEG_INFINITY, f64::max)).collect();
        assert_close(&format!("fast_max_f32 {rows}x{d}"), &f64s(&read::<f32>(&o), |v| v as f64), &maxs, 0.0, 0.0);
        let mut o = out(rows * 4);
        params(&p, "fast_argmax_f32", &mut o);
        let argmax: Vec<u32> = rows_of(&x, d).map(|r| (0..d).fold(0, |b, i| if r[i] > r[b] { i } else { b }) as u32).collect();
        assert_eq!(read::<u32>(&o), argmax, "fast_argmax_f32 {rows}x{d}");
    }
}

/// `call_mlx_gemv` for `out[b] = mat[b] . vec[b]` (`gemv`, a row-major [M, K] matrix) or
/// `vec[b] . mat[b]` (`gemv_t`, a row-major [K, N] one), with its tile choice; the matrix is
/// shared by the batch (batch stride 0) when `mat_batched` is false.
fn run_candle_gemv(p: &Program, transposed: bool, b: usize, out_size: usize, k: usize, mat: &[f32], vec: &[f32], mat_batched: bool) -> (String, Vec<f32>) {
    let (bm, bn, sm, sn, tm, tn) = if transposed {
        let (sm, sn) = if k >= 8192 && out_size >= 2048 { (4, 8) } else { (8, 4) };
        let bn = if out_size >= 2048 { 16 } else if out_size >= 512 { 4 } else { 2 };
        (1, bn, sm, sn, 4, if out_size < 4 { 1 } else { 4 })
    } else {
        let (bm, bn, sm, sn) = if k <= 64 {
            (1, 1, 8, 4)
        } else if k >= 16 * out_size {
            (1, 8, 1, 32)
        } else if out_size >= 4096 {
            (8, 1, 1, 32)
        } else {
            (4, 1, 1, 32)
        };
        (bm, bn, sm, sn, if out_size < 4 { 1 } else { 4 }, 4)
    };
    let name =
        format!("{}_float32_bm{bm}_bn{bn}_sm{sm}_sn{sn}_tm{tm}_tn{tn}_nc0_axpby0", if transposed { "gemv_t" } else { "gemv" });
    let per_group = if transposed { bn * sn * tn } else { bm * sm * tm };
    let mat_ld = if transposed { out_size } else { k };
    let mut o = out(b * out_size * 4);
    run_groups(
        p,
        &name,
        &mut [
            &mut buf(mat),
            &mut buf(vec),
            // the bias: candle binds nothing there (`()`), and the kernel reads it only with axpby
            &mut out(16),
            &mut o,
            &mut buf(&[k as i32]),
            &mut buf(&[out_size as i32]),
            &mut buf(&[mat_ld as i32]),
            &mut buf(&[1.0f32]),
            &mut buf(&[0.0f32]),
            &mut buf(&[1i32]),
            &mut buf(&[b as i32]),
            &mut buf(&[k as i64]),
            &mut buf(&[if mat_batched { (k * out_size) as i64 } else { 0 }]),
            &mut buf(&[0i64]),
            &mut buf(&[1i32]),
        ],
        [out_size.div_ceil(per_group), 1, b],
        [32, bn, bm],
    );
    (name, read(&o))
}

#[test]
#[ignore]
fn candle_gemv() {
    let p = candle_or_skip!("gemv.metal");
    let mut rng = Rng(4);
    // (transposed, batch, outputs, K, matrix batched): every tile shape call_mlx_gemv picks here
    for (transposed, b, m, k, batched) in [
        (false, 1, 100, 256, false),
        (false, 1, 37, 64, false),
        (false, 2, 30, 2048, true),
        (false, 3, 3, 100, false),
        // gemv_t only where N is a whole number of the threadgroup's columns: see below
        (true, 1, 320, 512, false),
        (true, 2, 640, 96, true),
        (true, 1, 2048, 128, false),
    ] {
        let mat = rng.f32s(if batched { b } else { 1 } * m * k, 1.0);
        let vec = rng.f32s(b * k, 1.0);
        let (name, got) = run_candle_gemv(&p, transposed, b, m, k, &mat, &vec, batched);
        let mut want = Vec::new();
        let mut bound = Vec::new();
        for bi in 0..b {
            let mat = if batched { &mat[bi * m * k..] } else { &mat[..] };
            for o in 0..m {
                let terms: Vec<f64> = (0..k)
                    .map(|i| vec[bi * k + i] as f64 * if transposed { mat[i * m + o] } else { mat[o * k + i] } as f64)
                    .collect();
                want.push(terms.iter().sum::<f64>());
                bound.push(terms.iter().map(|t| t.abs()).sum::<f64>());
            }
        }
        // a float32 sum of K terms in any order: within K ulps of the sum of magnitudes
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let allowed = bound[i] * k as f64 * f32::EPSILON as f64 / 4.0 + 1e-30;
            assert!((*g as f64 - w).abs() <= allowed, "{name} b {b} M {m} K {k} [{i}]: {g} vs {w}");
        }
    }
    // gemv_t's main loop (MLX's GEMVTKernel) has a threadgroup_barrier inside
    // `if (out_col < out_vec_size)`: in a threadgroup holding the last columns, threads past N
    // skip it. Metal requires every thread of a threadgroup to reach a barrier; Apple's GPUs
    // run it anyway, the emulator stops with a divergence (docs/emulator.md, "Real-world kernels").
    let (mat, vec) = (rng.f32s(300 * 512, 1.0), rng.f32s(512, 1.0));
    let e = std::panic::catch_unwind(|| run_candle_gemv(&p, true, 1, 300, 512, &mat, &vec, false)).expect_err("gemv_t with N = 300");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("divergent SIMD-group") && msg.contains("threadgroup_barrier (") && msg.contains("gemv.metal:"), "{msg}");
}

#[test]
#[ignore]
fn candle_argsort_threadgroup_memory() {
    // sort.metal's bitonic argsort keeps its indices in a `[[threadgroup(0)]]` array the host
    // sizes (`call_arg_sort`: one threadgroup of ncols_pad threads per row, ncols_pad * 4 bytes
    // at index 0; candle-core pads ncols to the next power of two)
    let p = candle_or_skip!("sort.metal");
    let mut rng = Rng(5);
    for (rows, cols) in [(1, 5), (3, 64), (2, 1000)] {
        let pad = (cols as usize).next_power_of_two();
        let x = rng.f32s(rows * cols, 100.0);
        for (name, desc) in [("asort_asc_f32", false), ("asort_desc_f32", true)] {
            let mut o = out(rows * cols * 4);
            let d = Dispatch::new(name, [pad as u32, rows as u32, 1], [pad as u32, 1, 1]).threadgroup_memory(0, (pad * 4).max(16) as u32);
            p.run(&d, &mut [&mut buf(&x), &mut o, &mut buf(&[cols as i64]), &mut buf(&[pad as i64])]).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = read::<u32>(&o);
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let mut want: Vec<u32> = (0..cols as u32).collect();
                want.sort_by(|&a, &b| {
                    let o = row[a as usize].partial_cmp(&row[b as usize]).unwrap();
                    if desc { o.reverse() } else { o }
                });
                assert_eq!(&got[r * cols..(r + 1) * cols], &want[..], "{name} row {r} of {rows}x{cols}");
            }
        }
    }
}

// ------------------------------------------------------------------ mistral.rs

/// A mistral.rs kernel source as its build.rs compiles it (`xcrun metal -std=metal3.1 -c`, each
/// file alone; its quoted includes resolve beside it).
fn mistral(krate: &str, sub: &str, file: &str) -> Option<Program> {
    let dir = crate_dir(krate)?;
    Some(load_file(&dir.join(sub).join(file), &LoadOptions::default()))
}

macro_rules! quant_or_skip {
    ($file:expr) => {
        match mistral("mistralrs-quant", "src/metal_kernels", $file) {
            Some(p) => p,
            None => return,
        }
    };
}

/// OCP FP8 E4M3 (the "fn" variant, no infinities): sign, 4 exponent bits of bias 7, 3 mantissa
/// bits; exponent 0 is subnormal (m / 8 x 2^-6), S.1111.111 is NaN.
fn e4m3(code: u8) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((code >> 3) & 0xF) as i32, (code & 7) as f64);
    if e == 15 && m == 7.0 {
        return f64::NAN;
    }
    sign * if e == 0 { m / 8.0 * 2f64.powi(-6) } else { (1.0 + m / 8.0) * 2f64.powi(e - 7) }
}

fn same_or_both_nan(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w || (g.is_nan() && w.is_nan()), "{what} [{i}]: {g} vs {w}");
    }
}

#[test]
#[ignore]
fn mistralrs_fp8() {
    let p = quant_or_skip!("scalar_fp8.metal");
    // every code, then a longer run of them; `call_fp8_to_dtype`: (input, output, n: u32),
    // linear_split(n)
    let codes: Vec<u8> = (0..=255u8).collect();
    let mut o = out(256 * 4);
    let (g, t) = linear_split(256);
    run_groups(&p, "fp8_to_dtype_float", &mut [&mut buf(&codes), &mut o, &mut buf(&[256u32])], g, t);
    let got = f64s(&read::<f32>(&o), |v| v as f64);
    // mistral.rs 0.8.1 decodes the 14 subnormal codes 8 times too small (float8.metal:
    // `ldexp(m, 1 - 7 - 3)` of m = mantissa / 8, where the format has 2^-6): the normal codes and
    // NaN are checked against the format, the subnormals pinned at what mistral.rs computes
    let subnormal = |c: u8| c & 0x78 == 0 && c & 7 != 0;
    let want: Vec<f64> = codes.iter().map(|&c| if subnormal(c) { e4m3(c) / 8.0 } else { e4m3(c) }).collect();
    same_or_both_nan("fp8_to_dtype_float", &got, &want);

    let mut rng = Rng(6);
    for n in [1000usize, 3000] {
        let w: Vec<u8> = (0..n).map(|_| (rng.next() & 0xFF) as u8).filter(|&c| !subnormal(c)).collect();
        let n = w.len();
        let (g, t) = linear_split(n);
        // per tensor: output = fp8 x scale_inv[0]; bfloat16 out (`call_fp8_pertensor_dequant`)
        let scale = [0.0123f32];
        let mut o = out(n * 2);
        run_groups(&p, "fp8_pertensor_dequant_bfloat16_t", &mut [&mut buf(&w), &mut buf(&scale), &mut o, &mut buf(&[n as u32])], g, t);
        let want: Vec<f64> = w.iter().map(|&c| bf16::from_f32((e4m3(c) * scale[0] as f64) as f32).to_f64()).collect();
        same_or_both_nan(&format!("fp8_pertensor_dequant_bfloat16_t n {n}"), &f64s(&read::<bf16>(&o), |v| v.to_f64()), &want);
        // per vector of 128: output[i] = fp8[i] x scale[i / 128] (`call_fp8_vector_dequant`)
        let scales = rng.f32s(n.div_ceil(128), 4.0);
        let mut o = out(n * 4);
        run_groups(&p, "fp8_vector_dequant_float", &mut [&mut buf(&w), &mut buf(&scales), &mut o, &mut buf(&[n as u32])], g, t);
        let want: Vec<f64> = w.iter().enumerate().map(|(i, &c)| (e4m3(c) * scales[i / 128] as f64) as f32 as f64).collect();
        same_or_both_nan(&format!("fp8_vector_dequant_float n {n}"), &f64s(&read::<f32>(&o), |v| v as f64), &want);
    }

    // float to E4M3 (`call_dtype_to_fp8`): each value's nearest code, on values that are no tie,
    // not below the smallest normal (mistral.rs flushes those to zero) and below 240: mistral.rs
    // saturates everything from 256 up to 448 (float8.metal: `exp > 0xE`), where the format has
    // codes 256 to 448 (pinned below)
    let normal: Vec<(u8, f64)> = (0..=255u8).filter(|&c| !subnormal(c) && c & 0x78 != 0 && !e4m3(c).is_nan()).map(|c| (c, e4m3(c))).collect();
    let mut x = Vec::new();
    while x.len() < 2000 {
        let v = (rng.unit() * 2.0 - 1.0) * 240.0 * rng.unit().powi(6);
        let nearest = normal.iter().map(|&(_, e)| (e - v).abs()).fold(f64::INFINITY, f64::min);
        let ties = normal.iter().filter(|&&(_, e)| ((e - v).abs() - nearest).abs() < 1e-9 * (1.0 + nearest)).count();
        if v.abs() >= 2f64.powi(-6) && ties == 1 {
            x.push(v as f32);
        }
    }
    let n = x.len();
    let (g, t) = linear_split(n);
    let mut o = out(n);
    run_groups(&p, "dtype_to_fp8_float", &mut [&mut buf(&x), &mut o, &mut buf(&[n as u32])], g, t);
    let want: Vec<u8> = x
        .iter()
        .map(|&v| {
            let v = (v as f64).clamp(-448.0, 448.0);
            normal.iter().min_by(|a, b| (a.1 - v).abs().partial_cmp(&(b.1 - v).abs()).unwrap()).unwrap().0
        })
        .collect();
    assert_eq!(read::<u8>(&o), want, "dtype_to_fp8_float");
    let big = [300.0f32, -288.0, 1000.0];
    let mut o = out(3);
    run_groups(&p, "dtype_to_fp8_float", &mut [&mut buf(&big), &mut o, &mut buf(&[3u32])], [1, 1, 1], [3, 1, 1]);
    assert_eq!(e4m3(0x79), 288.0);
    assert_eq!(read::<u8>(&o), [0x7E, 0xFE, 0x7E], "300 and -288 saturate to +-448 (0x7E, 0xFE), 1000 clamps");
}

#[test]
#[ignore]
fn mistralrs_blockwise_fp8_and_hqq() {
    let p = quant_or_skip!("blockwise_fp8.metal");
    let mut rng = Rng(7);
    // `call_dequant_blockwise_fp8`: (weight, scales, output, DequantParams), one threadgroup of
    // 32 x 32 per block of the scale grid
    for (h, w, by, bx) in [(256usize, 384usize, 128usize, 128usize), (130, 70, 64, 32)] {
        // normal codes only (mistral.rs's subnormals: mistralrs_fp8)
        let codes: Vec<u8> =
            (0..2 * h * w).map(|_| (rng.next() & 0xFF) as u8).filter(|&c| c & 0x78 != 0 && c & 0x7F != 0x7F).take(h * w).collect();
        let codes = &codes[..];
        assert_eq!(codes.len(), h * w);
        let (sy, sx) = (h.div_ceil(by), w.div_ceil(bx));
        let scales = rng.f32s(sy * sx, 2.0);
        let params = [h as u32, w as u32, w as u32, sx as u32, by as u32, bx as u32];
        for (name, size) in [("dequant_fp8_blockwise_float", 4), ("dequant_fp8_blockwise_bfloat16_t", 2)] {
            let mut o = out(h * w * size);
            run_groups(&p, name, &mut [&mut buf(codes), &mut buf(&scales), &mut o, &mut buf(&params)], [sx, sy, 1], [32, 32, 1]);
            let exact: Vec<f64> = (0..h * w).map(|i| e4m3(codes[i]) * scales[(i / w / by) * sx + (i % w) / bx] as f64).collect();
            let (got, want) = if size == 4 {
                (f64s(&read::<f32>(&o), |v| v as f64), f64s(&exact, |v| v as f32 as f64))
            } else {
                (f64s(&read::<bf16>(&o), |v| v.to_f64()), f64s(&exact, |v| bf16::from_f32(v as f32).to_f64()))
            };
            same_or_both_nan(&format!("{name} {h}x{w} blocks {by}x{bx}"), &got, &want);
        }
    }

    // HQQ 4-bit (`call_dequant_4bit`: weight, scale, zero, output, h, w; linear_split(h * w)): a
    // [h, w] byte holds row i of the [2h, w] result in its high nibble and row h + i in its low
    // one, each (q - zero[j]) x scale[j]
    let p = quant_or_skip!("hqq_dequantize.metal");
    for (h, w) in [(8usize, 64usize), (32, 96), (16, 128)] {
        let packed: Vec<u8> = (0..h * w).map(|_| (rng.next() & 0xFF) as u8).collect();
        let scale = rng.f32s(w, 0.1);
        let zero: Vec<f32> = (0..w).map(|_| (rng.unit() * 15.0) as f32).collect();
        let (g, t) = linear_split(h * w);
        let mut o = out(2 * h * w * 4);
        run_groups(
            &p,
            "dequantize_4bit_float",
            &mut [&mut buf(&packed), &mut buf(&scale), &mut buf(&zero), &mut o, &mut buf(&[h as u32]), &mut buf(&[w as u32])],
            g,
            t,
        );
        let q = |r: usize, j: usize| if r < h { packed[r * w + j] >> 4 } else { packed[(r - h) * w + j] & 0xF } as f64;
        let want: Vec<f64> = (0..2 * h * w).map(|i| ((q(i / w, i % w) - zero[i % w] as f64) as f32 as f64 * scale[i % w] as f64) as f32 as f64).collect();
        assert_close(&format!("dequantize_4bit_float {h}x{w}"), &f64s(&read::<f32>(&o), |v| v as f64), &want, 1e-7, 0.0);
    }
    // with h x w not a multiple of 1024 the last threadgroup's threads past h x w (the kernel has
    // no bound check) read and write past the buffers: the emulator stops at the first
    let (h, w) = (10usize, 150usize);
    let (g, t) = linear_split(h * w);
    let e = p
        .run(
            &Dispatch::new("dequantize_4bit_float", [(g[0] * t[0]) as u32, 1, 1], [t[0] as u32, 1, 1]),
            &mut [&mut buf(&vec![0u8; h * w]), &mut buf(&vec![1f32; w]), &mut buf(&vec![0f32; w]), &mut out(2 * h * w * 4), &mut buf(&[h as u32]), &mut buf(&[w as u32])],
        )
        .expect_err("dequantize_4bit over 1500 bytes in 2 threadgroups of 1024");
    match &e {
        kernelgen_emu::EmuError::Fault { metal_line: Some((file, _)), thread_position_in_grid, .. } => {
            assert!(file.ends_with("hqq_dequantize.metal"), "{e}");
            assert!(thread_position_in_grid[0] as usize >= h * w, "a thread past h x w faults: {e}");
        }
        _ => panic!("a fault in hqq_dequantize.metal expected: {e}"),
    }
}

// ------------------------------------------------------------------ ggml (llama-cpp-sys-2)

/// Every function constant ggml-metal.metal declares: (index, type, name), the index
/// `FC_GROUP + n` resolved with ggml-metal-impl.h's `#define FC_GROUP value`.
fn ggml_function_constants(metal: &str, impl_h: &str) -> Vec<(u32, String, String)> {
    let groups: HashMap<&str, u32> = impl_h
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let (name, value) = (w.next()?, w.next()?);
            Some((name, value.parse().ok()?)).filter(|(n, _): &(&str, u32)| n.starts_with("FC_"))
        })
        .collect();
    let mut out = Vec::new();
    for l in metal.lines().map(str::trim).filter(|l| l.starts_with("constant ") && l.contains("[[function_constant(")) {
        let (decl, attr) = l.split_once("[[function_constant(").unwrap();
        let mut w = decl.split_whitespace().skip(1);
        let (ty, name) = (w.next().unwrap().to_string(), w.next().unwrap().to_string());
        let expr = attr.split(')').next().unwrap();
        let index: u32 = expr.split('+').map(|t| t.trim()).map(|t| groups.get(t).copied().unwrap_or_else(|| t.parse().unwrap())).sum();
        out.push((index, ty, name));
    }
    out
}

/// ggml-metal.metal's load options as ggml compiles it (`newLibraryWithSource` of the file beside
/// ggml-common.h, GGML_METAL_HAS_BF16 on devices with bfloat; ggml-metal-device.m), with the
/// function constants ggml's pipelines set (`ggml_metal_cv_set_*` in ggml-metal-device.cpp):
/// `set` by name; every other one (read only by kernels not run) 1 or false, for the file to
/// compile whole.
fn ggml_options(src_dir: &Path, fcs: &[(u32, String, String)], set: &[(&str, FunctionConstant)]) -> LoadOptions {
    for (name, _) in set {
        assert!(fcs.iter().any(|(_, _, n)| n == name), "ggml-metal.metal declares no function constant {name}");
    }
    let function_constants = fcs
        .iter()
        .map(|(i, ty, name)| {
            let v = set.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
            (*i, v.unwrap_or(if ty == "bool" { FunctionConstant::Bool(false) } else { FunctionConstant::Int(1) }))
        })
        .collect();
    LoadOptions {
        include_dirs: vec![src_dir.to_path_buf()],
        defines: vec![("GGML_METAL_HAS_BF16".into(), Some("1".into()))],
        function_constants,
        ..LoadOptions::default()
    }
}

/// ggml compiles ggml-metal.metal whole, so no kernel of it runs until all of it compiles for
/// the emulator; it does not yet (docs/emulator.md, "Real-world kernels"): ggml-common.h puts
/// `half` in anonymous structs (g++ refuses a member with a constructor there, clang takes it),
/// and the file uses Metal's matrix types (`float4x4`, `half4x4`, `matrix<T, C, R>`), which the
/// emulator's stand-in lacks. This test pins those as the first blockers: when it fails, the
/// file compiles further, and its kernels (add, rms_norm, soft_max, mul_mv) are next.
#[test]
#[ignore]
fn ggml_compiles_whole_or_names_its_blockers() {
    let Some(dir) = crate_dir("llama-cpp-sys-2") else { return };
    let dir = dir.join("llama.cpp/ggml/src");
    let metal = dir.join("ggml-metal/ggml-metal.metal");
    let text = std::fs::read_to_string(&metal).unwrap();
    let impl_h = std::fs::read_to_string(dir.join("ggml-metal/ggml-metal-impl.h")).unwrap();
    let fcs = ggml_function_constants(&text, &impl_h);
    assert!(fcs.len() >= 50, "ggml-metal.metal declares {} function constants", fcs.len());
    let opts = ggml_options(&dir, &fcs, &[]);
    let e = match emulator().load_with(&text, &metal.display().to_string(), &opts) {
        Ok(p) => panic!("ggml-metal.metal compiles now ({} kernels): run its kernels here", p.kernels().len()),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("does not compile for the emulator"), "{e}");
    assert!(e.contains("with constructor not allowed in anonymous aggregate") && e.contains("ggml-common.h"), "{e}");
    assert!(e.contains("float4x4") && e.contains("half4x4"), "{e}");
}

/// A mistralrs-paged-attn kernel source, with `[[function_constant]]` values as its pipeline sets them.
fn paged(file: &str, fcs: &[(u32, bool)]) -> Option<Program> {
    let dir = crate_dir("mistralrs-paged-attn")?;
    let path = dir.join("src/metal/kernels").join(file);
    let opts = LoadOptions { function_constants: fcs.iter().map(|&(i, b)| (i, FunctionConstant::Bool(b))).collect(), ..LoadOptions::default() };
    Some(load_file(&path, &opts))
}

#[test]
#[ignore]
fn mistralrs_paged_attention() {
    // vLLM's paged layout, as the kernels' signatures document it: key cache [num_blocks,
    // num_kv_heads, head_size / x, block_size, x], value cache [num_blocks, num_kv_heads,
    // head_size, block_size]; a sequence's token t in block block_tables[seq][t / block_size],
    // slot t % block_size. x = 16 bytes of the cache's type (4 floats).
    let (heads, kv_heads, d, bs, x) = (4usize, 2usize, 64usize, 16usize, 4usize);
    let ctx = [37usize, 5];
    let (seqs, blocks_per_seq, num_blocks) = (ctx.len(), 3usize, 8usize);
    let tables: [[u32; 3]; 2] = [[5, 0, 6], [2, 7, 1]];
    let kc_at = |b: usize, h: usize, i: usize, s: usize| (((b * kv_heads + h) * (d / x) + i / x) * bs + s) * x + i % x;
    let vc_at = |b: usize, h: usize, i: usize, s: usize| ((b * kv_heads + h) * d + i) * bs + s;
    let mut rng = Rng(8);
    // per sequence: K and V [ctx, kv_heads, d]
    let k: Vec<Vec<f32>> = ctx.iter().map(|&c| rng.f32s(c * kv_heads * d, 1.0)).collect();
    let v: Vec<Vec<f32>> = ctx.iter().map(|&c| rng.f32s(c * kv_heads * d, 1.0)).collect();

    // reshape_and_cache (`call_reshape_and_cache`, fp8 scales off: function constant 10 false):
    // one threadgroup per token of min(heads x head_size, 512) threads, the slot of a token
    // block_tables[seq][t / bs] x bs + t % bs (an int64)
    let Some(p) = paged("reshape_and_cache.metal", &[(10, false)]) else { return };
    let tokens: Vec<(usize, usize)> = (0..seqs).flat_map(|s| (0..ctx[s]).map(move |t| (s, t))).collect();
    let key: Vec<f32> = tokens.iter().flat_map(|&(s, t)| k[s][t * kv_heads * d..(t + 1) * kv_heads * d].to_vec()).collect();
    let value: Vec<f32> = tokens.iter().flat_map(|&(s, t)| v[s][t * kv_heads * d..(t + 1) * kv_heads * d].to_vec()).collect();
    let slots: Vec<i64> = tokens.iter().map(|&(s, t)| (tables[s][t / bs] as usize * bs + t % bs) as i64).collect();
    let cache_len = num_blocks * kv_heads * d * bs;
    let (mut kc, mut vc) = (buf(&vec![0f32; cache_len]), buf(&vec![0f32; cache_len]));
    let stride = (kv_heads * d) as i32;
    run_groups(
        &p,
        "reshape_and_cache_kv_float_cache_float",
        &mut [
            &mut buf(&key),
            &mut buf(&value),
            &mut kc,
            &mut vc,
            &mut buf(&slots),
            &mut out(16),
            &mut out(16),
            &mut buf(&[stride]),
            &mut buf(&[stride]),
            &mut buf(&[kv_heads as i32]),
            &mut buf(&[d as i32]),
            &mut buf(&[bs as i32]),
            &mut buf(&[x as i32]),
        ],
        [tokens.len(), 1, 1],
        [(kv_heads * d).min(512), 1, 1],
    );
    let (mut kc_want, mut vc_want) = (vec![0f32; cache_len], vec![0f32; cache_len]);
    for s in 0..seqs {
        for t in 0..ctx[s] {
            for h in 0..kv_heads {
                for i in 0..d {
                    let b = tables[s][t / bs] as usize;
                    kc_want[kc_at(b, h, i, t % bs)] = k[s][(t * kv_heads + h) * d + i];
                    vc_want[vc_at(b, h, i, t % bs)] = v[s][(t * kv_heads + h) * d + i];
                }
            }
        }
    }
    assert_eq!(read::<f32>(&kc), kc_want, "reshape_and_cache: key cache");
    assert_eq!(read::<f32>(&vc), vc_want, "reshape_and_cache: value cache");

    // paged_attention v1 (`call_paged_attention_v1`: partitioning, alibi, fp8 scales and sinks
    // off, function constants 10 to 40): one threadgroup of 256 per (head, sequence), a
    // [[threadgroup(0)]] of max(padded context x 4, 4 x head_size x 4) bytes
    let Some(p) = paged("pagedattention.metal", &[(10, false), (20, false), (30, false), (40, false)]) else { return };
    let q = rng.f32s(seqs * heads * d, 1.0);
    let scale = 1.0 / (d as f32).sqrt();
    let max_ctx = *ctx.iter().max().unwrap();
    let shared = (max_ctx.div_ceil(bs) * bs * 4).max(4 * d * 4);
    let mut o = out(seqs * heads * d * 4);
    let name = format!("paged_attention_float_cache_float_hs{d}_bs{bs}_nt256_nsl32_ps0");
    let flat_tables: Vec<u32> = tables.iter().flatten().copied().collect();
    let ctx32: Vec<u32> = ctx.iter().map(|&c| c as u32).collect();
    let dispatch = Dispatch::new(&name, [(heads * 256) as u32, seqs as u32, 1], [256, 1, 1]).threadgroup_memory(0, shared as u32);
    p.run(
        &dispatch,
        &mut [
            &mut out(16),
            &mut out(16),
            &mut o,
            &mut buf(&q),
            &mut buf(&kc_want),
            &mut buf(&vc_want),
            &mut out(16),
            &mut out(16),
            &mut buf(&[kv_heads as i32]),
            &mut buf(&[scale]),
            &mut buf(&[1.0f32]),
            &mut buf(&flat_tables),
            &mut buf(&ctx32),
            &mut buf(&[blocks_per_seq as i32]),
            &mut out(16),
            &mut buf(&[(heads * d) as i32]),
            &mut buf(&[(kv_heads * d * bs) as i32]),
            &mut buf(&[(d * bs) as i32]),
        ],
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    // softmax(scale q.k) . v over each sequence's tokens, query head h reading kv head h / 2
    let mut want = Vec::new();
    for s in 0..seqs {
        for h in 0..heads {
            let kh = h / (heads / kv_heads);
            let qv = &q[(s * heads + h) * d..(s * heads + h + 1) * d];
            let logits: Vec<f64> = (0..ctx[s])
                .map(|t| scale as f64 * (0..d).map(|i| qv[i] as f64 * k[s][(t * kv_heads + kh) * d + i] as f64).sum::<f64>())
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            for i in 0..d {
                want.push((0..ctx[s]).map(|t| e[t] / sum * v[s][(t * kv_heads + kh) * d + i] as f64).sum::<f64>());
            }
        }
    }
    assert_close(&name, &f64s(&read::<f32>(&o), |v| v as f64), &want, 1e-4, 1e-5);
}

/// candle's `GemmParams` (mlx_gemm.rs, `#[repr(C)]`, as mlx_gemm.metal's GEMMParams).
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct GemmParams {
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
    ldd: i32,
    tiles_n: i32,
    tiles_m: i32,
    batch_stride_a: isize,
    batch_stride_b: isize,
    batch_stride_d: isize,
    swizzle_log: i32,
    gemm_k_iterations_aligned: i32,
    batch_ndim: i32,
}

#[test]
#[ignore]
fn candle_gemm() {
    // `call_mlx_gemm` for row-major A [b, m, k] and B [b, k, n] (nn), on a medium device (an M
    // Max, or one candle does not classify): tiles (bm, bn, bk, wm, wn) 32x32x16 2x2 for m < 16,
    // else 64x32x32 2x2 for float32 below 2^20 outputs; function constants 10 (has_batch: b > 1),
    // 100, 110, 300 false, 200-202 (M, N, K whole tiles); threadgroups (n / bn, m / bm, b) of
    // (32, wn, wm). Buffers 0 A, 1 B, 3 D, 4 the params, and with a batch 6 the batch size and 7
    // the two batch strides; C (2) and the addmm params (5) exist only with use_out_source.
    let Some(dir) = crate_dir("candle-metal-kernels") else { return };
    let path = dir.join("src/metal_src/mlx_gemm.metal");
    let mut rng = Rng(9);
    // each set of function constants is a compile of the whole file (half a minute here): one
    // set, batched, no dimension a whole number of tiles, two shapes (the second 64x32 tiles)
    for (b, m, n, k) in [(2usize, 8usize, 40usize, 24usize), (3, 70, 33, 50)] {
        let (bm, bn, bk, wm, wn) = if m < 16 { (32, 32, 16, 2, 2) } else { (64, 32, 32, 2, 2) };
        let fcs = [(10, b > 1), (100, false), (110, false), (200, m % bm == 0), (201, n % bn == 0), (202, k % bk == 0), (300, false)];
        let opts = LoadOptions { function_constants: fcs.iter().map(|&(i, v)| (i, FunctionConstant::Bool(v))).collect(), ..LoadOptions::default() };
        let p = load_file(&path, &opts);
        let (a, bb) = (rng.f32s(b * m * k, 1.0), rng.f32s(b * k * n, 1.0));
        let params = GemmParams {
            m: m as i32,
            n: n as i32,
            k: k as i32,
            lda: k as i32,
            ldb: n as i32,
            ldd: n as i32,
            tiles_n: n.div_ceil(bn) as i32,
            tiles_m: m.div_ceil(bm) as i32,
            batch_stride_a: (m * k) as isize,
            batch_stride_b: (n * k) as isize,
            batch_stride_d: (m * n) as isize,
            swizzle_log: 0,
            gemm_k_iterations_aligned: (k / bk) as i32,
            batch_ndim: 1,
        };
        let name = format!("gemm_nn_f32_f32_{bm}_{bn}_{bk}_{wm}_{wn}");
        let mut d = out(b * m * n * 4);
        let (mut ab, mut bbuf, mut pb) = (buf(&a), buf(&bb), buf(&[params]));
        let (mut none2, mut none5, mut shape, mut strides) = (out(16), out(16), buf(&[b as i32]), buf(&[(m * k) as isize, (n * k) as isize]));
        let mut bufs: Vec<&mut DeviceBuffer> = vec![&mut ab, &mut bbuf, &mut none2, &mut d, &mut pb];
        if b > 1 {
            bufs.extend([&mut none5, &mut shape, &mut strides]);
        }
        run_groups(&p, &name, &mut bufs, [n.div_ceil(bn), m.div_ceil(bm), b], [32, wn, wm]);
        let mut want = Vec::new();
        let mut bound = Vec::new();
        for bi in 0..b {
            for i in 0..m {
                for j in 0..n {
                    let terms: Vec<f64> = (0..k).map(|l| a[(bi * m + i) * k + l] as f64 * bb[(bi * k + l) * n + j] as f64).collect();
                    want.push(terms.iter().sum::<f64>());
                    bound.push(terms.iter().map(|t| t.abs()).sum::<f64>());
                }
            }
        }
        for (i, (g, w)) in read::<f32>(&d).iter().zip(&want).enumerate() {
            assert!((*g as f64 - w).abs() <= bound[i] * k as f64 * f32::EPSILON as f64 / 4.0 + 1e-30, "{name} {b}x{m}x{n}x{k} [{i}]: {g} vs {w}");
        }
    }
}
