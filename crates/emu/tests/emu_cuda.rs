//! The emulator's CUDA mode: sources as MLX's cuda_kernel assembles them, run against Rust
//! references (elementwise, a warp-shuffle reduction bit for bit in its order, a shared-memory
//! reduction across warps, half and bfloat conversions against the `half` crate), CUDA's
//! launch model (whole blocks), warp operations with masks and widths as CUDA documents them,
//! the planted bugs the emulator must catch, and shared memory as threadgroup memory (guards,
//! limits beyond Metal's, the threadgroup-memory check with CUDA's barriers).

use crate::common;

use common::*;
use half::bf16;
use kernelgen_emu::*;

const ELEMENTWISE: &str = include_str!("emu/cuda/elementwise.cu");

fn load_cuda(src: &str, name: &str) -> Program {
    let opts = LoadOptions { language: Language::Cuda, ..LoadOptions::default() };
    emulator().load_with(src, name, &opts).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_elementwise_kernel_matches_its_reference_in_whole_blocks() {
    let p = load_cuda(ELEMENTWISE, "elementwise.cu");
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..1000).map(|_| rng.f32()).collect();
    let y: Vec<u16> = (0..1000).map(|_| bf16::from_f32(rng.f32()).to_bits()).collect();
    let mut xb = f32_buf(&x);
    let mut yb = u16_buf(&y);
    let mut out = f32_buf(&vec![0.0; 1000]);
    let stats = p.run(&Dispatch::new("custom_kernel_axpy", [1000, 1, 1], [256, 1, 1]), &mut [&mut xb, &mut yb, &mut out]).unwrap();
    // CUDA launches whole blocks: 4 of 256 threads, 24 past the grid
    assert_eq!(stats.threadgroups, 4);
    // but a block larger than the grid is cut to it (MLX 0.32's cuda_kernel: dim3 block(min(tx, gx),
    // ...)): a grid of 100 threads in blocks of 256 is one block of 100, which writes 100 elements
    let mut short = f32_buf(&vec![-1.0; 1000]);
    let stats = p.run(&Dispatch::new("custom_kernel_axpy", [100, 1, 1], [256, 1, 1]), &mut [&mut xb, &mut yb, &mut short]).unwrap();
    assert_eq!((stats.threadgroups, stats.threads), (1, 100));
    assert!(f32s(&short)[100..].iter().all(|&v| v == -1.0), "no thread past the grid");
    let got = f32s(&out);
    for i in 0..1000 {
        let want = 2.0 * x[i] + bf16::from_bits(y[i]).to_f32();
        assert_eq!(got[i].to_bits(), want.to_bits(), "element {i}");
    }
}

const ROW_SUM: &str = include_str!("emu/cuda/row_sum.cu");
const BUGS: &str = include_str!("emu/cuda/bugs.cu");
const BUGS_FILE: &str = "bugs.cu";

/// row_sum.cu's order: each thread's strided sum, a xor butterfly in each warp (every lane
/// adds its partner's value at once), the 8 warp sums through shared memory, a butterfly in
/// warp 0.
fn row_sum_reference(row: &[f32]) -> f32 {
    let butterfly = |mut v: [f32; 32]| {
        for offset in [16, 8, 4, 2, 1] {
            let before = v;
            for (l, x) in v.iter_mut().enumerate() {
                *x = before[l] + before[l ^ offset];
            }
        }
        v[0]
    };
    let mut acc = [0f32; 256];
    for (t, a) in acc.iter_mut().enumerate() {
        for x in row.iter().skip(t).step_by(256) {
            *a += x;
        }
    }
    let mut partial = [0f32; 32];
    for w in 0..8 {
        partial[w] = butterfly(acc[w * 32..w * 32 + 32].try_into().unwrap());
    }
    butterfly(partial)
}

fn bf16_rows(rows: usize, cols: usize, seed: u64) -> (Vec<u16>, Vec<f32>) {
    let mut rng = Rng(seed);
    let bits: Vec<u16> = (0..rows * cols).map(|_| bf16::from_f32(rng.f32()).to_bits()).collect();
    let values = bits.iter().map(|&b| bf16::from_bits(b).to_f32()).collect();
    (bits, values)
}

#[test]
fn a_shuffle_and_shared_memory_reduction_matches_its_reference_bit_for_bit_in_every_run_order() {
    let p = load_cuda(ROW_SUM, "row_sum.cu");
    let (rows, cols) = (6, 1000);
    let (bits, values) = bf16_rows(rows, cols, 11);
    let want: Vec<u32> = values.chunks(cols).map(|r| row_sum_reference(r).to_bits()).collect();
    // the reduction order is the kernel's own: any order of the fibers gives the same bits
    let orders = [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(1), RunOrder::Shuffle(99)];
    for (order, workers) in orders.into_iter().zip([1, 2, 1, 3]) {
        let mut x = u16_buf(&bits);
        let mut out = f32_buf(&vec![0.0; rows]);
        let d = Dispatch::new("custom_kernel_row_sum", [256 * rows as u32, 1, 1], [256, 1, 1]).order(order).workers(workers);
        p.run(&d, &mut [&mut x, &mut out]).unwrap_or_else(|e| panic!("{order:?}: {e}"));
        let got: Vec<u32> = f32s(&out).iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{order:?} with {workers} workers");
    }
}

fn bug_program() -> Program {
    load_cuda(BUGS, BUGS_FILE)
}

/// The fault a dispatch must end in, with its line of bugs.cu.
fn expect_fault(e: EmuError, kernel_name: &str, marker: &str) -> (String, [u32; 3]) {
    match e {
        EmuError::Fault { kernel, metal_line, thread_position_in_grid, what, .. } => {
            assert_eq!(kernel, kernel_name);
            assert_eq!(metal_line, Some((BUGS_FILE.to_string(), line_of(BUGS, marker))), "{what}");
            (what, thread_position_in_grid)
        }
        other => panic!("expected a fault in {kernel_name}, got {other}"),
    }
}

#[test]
fn a_missing_syncthreads_reads_poison_or_depends_on_the_run_order() {
    let p = bug_program();
    let x: Vec<f32> = (0..512).map(|i| (i % 5) as f32).collect();
    let mut results = Vec::new();
    for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(5)] {
        let mut xb = f32_buf(&x);
        let mut out = f32_buf(&[0.0; 2]);
        p.run(&Dispatch::new("missing_syncthreads", [512, 1, 1], [256, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap();
        results.push(f32s(&out));
    }
    // in forward order warp 0 reads the sums of warps 1..7 before they are written: poison
    assert!(results[0].iter().all(|v| v.is_nan()), "forward order: {results:?}");
    let correct: f32 = x[..256].iter().sum();
    assert!(results.iter().any(|r| r[0].to_bits() != correct.to_bits()), "some order must show the race: {results:?}");
}

#[test]
fn an_off_by_one_read_past_the_input_hits_its_guard() {
    let p = bug_program();
    let mut x = f32_buf(&[1.0; 1000]);
    let mut out = f32_buf(&[0.0; 1000]);
    let e = p.dispatch("off_by_one", &mut [&mut x, &mut out], [1000, 1, 1], [256, 1, 1]).unwrap_err();
    let (what, thread) = expect_fault(e, "off_by_one", "@past-end");
    assert_eq!(thread, [1000, 0, 0], "the thread one past the end, in a whole last block");
    assert!(what.contains("invalid read") && what.contains("past the end of the 4000-byte buffer"), "{what}");
}

#[test]
fn a_mask_leaving_out_calling_lanes_is_reported_at_its_line() {
    let p = bug_program();
    let mut x = f32_buf(&[1.0; 32]);
    let mut out = f32_buf(&[0.0; 32]);
    let e = p.dispatch("half_warp_mask", &mut [&mut x, &mut out], [32, 1, 1], [32, 1, 1]).unwrap_err();
    let (what, thread) = expect_fault(e, "half_warp_mask", "@half-mask");
    assert!(what.contains("__shfl_xor_sync with mask 0x0000ffff") && what.contains("calling lane 16"), "{what}");
    assert_eq!(thread, [16, 0, 0], "the first lane outside the mask");
    // in a block of 16 threads every calling lane is in the mask; xor 16 then reads lanes
    // that do not exist, which is undefined in CUDA and poison here
    let mut x = f32_buf(&[1.0; 16]);
    let mut out = f32_buf(&[0.0; 16]);
    p.dispatch("half_warp_mask", &mut [&mut x, &mut out], [16, 1, 1], [16, 1, 1]).unwrap();
    assert!(f32s(&out).iter().all(|v| v.is_nan()), "{:?}", f32s(&out));
}

#[test]
fn a_mask_naming_lanes_that_wait_elsewhere_is_divergence() {
    let p = bug_program();
    let mut x = f32_buf(&[1.0; 64]);
    let mut out = f32_buf(&[0.0; 64]);
    let e = p.dispatch("mask_names_waiting_lanes", &mut [&mut x, &mut out], [64, 1, 1], [64, 1, 1]).unwrap_err();
    let msg = e.to_string();
    match &e {
        EmuError::Divergence { kernel, simdgroup, first, second, .. } => {
            assert_eq!(kernel, "mask_names_waiting_lanes");
            assert_eq!(*simdgroup, 0);
            assert_eq!(first.metal_line, Some((BUGS_FILE.to_string(), line_of(BUGS, "@absent"))), "{msg}");
            assert!(first.at.contains("__shfl_down_sync(mask 0xffffffff)"), "{msg}");
            assert!((16..32).contains(&second.thread_position_in_grid[0]), "the lane waited for is one of 16..31: {msg}");
            assert_eq!(second.metal_line, Some((BUGS_FILE.to_string(), line_of(BUGS, "@elsewhere"))), "{msg}");
        }
        other => panic!("expected divergence, got {other}"),
    }
}

#[test]
fn a_mask_naming_lanes_that_returned_reads_poison_from_them() {
    let p = bug_program();
    let mut x = f32_buf(&[1.0; 32]);
    let mut out = f32_buf(&[0.0; 32]);
    // CUDA excludes exited lanes from a mask; what a lane reads from one is undefined
    for order in [RunOrder::Forward, RunOrder::Reverse] {
        p.run(&Dispatch::new("mask_names_returned_lanes", [32, 1, 1], [32, 1, 1]).order(order), &mut [&mut x, &mut out]).unwrap();
        let got = f32s(&out);
        assert_eq!(&got[..8], &[2.0; 8], "{order:?}");
        assert!(got[8..16].iter().all(|v| v.is_nan()), "{order:?}: lanes 8..15 read lanes 16..23: {got:?}");
        assert_eq!(&got[16..], &[1.0; 16], "{order:?}");
    }
}

#[test]
fn a_width_that_is_not_a_power_of_two_is_reported_at_its_line() {
    let p = bug_program();
    let mut x = f32_buf(&[1.0; 32]);
    let mut out = f32_buf(&[0.0; 32]);
    let e = p.dispatch("bad_width", &mut [&mut x, &mut out], [32, 1, 1], [32, 1, 1]).unwrap_err();
    let (what, thread) = expect_fault(e, "bad_width", "@width");
    assert!(what.contains("__shfl_xor_sync with width 24"), "{what}");
    assert_eq!(thread, [0, 0, 0]);
}

#[test]
fn a_narrow_width_sums_half_warps_and_misses_the_reference() {
    let p = bug_program();
    let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let mut xb = f32_buf(&x);
    let mut out = f32_buf(&[0.0; 32]);
    p.dispatch("narrow_width", &mut [&mut xb, &mut out], [32, 1, 1], [32, 1, 1]).unwrap();
    let want: f32 = x.iter().sum();
    let got = f32s(&out);
    // width 16 (CUDA: a lane reads an earlier segment, not a later one, where it reads its
    // own value): at xor 16 lanes 0..15 double their value, lanes 16..31 add lanes 0..15
    assert_eq!(&got[..16], &[2.0 * 120.0; 16]);
    assert_eq!(&got[16..], &[120.0 + 376.0; 16]);
    // lane 0, where a reduction takes its result, misses the reference
    assert_ne!(got[0], want);
}

/// A kernel as MLX assembles one, `body` its body, `header` the user header.
fn cuda_source(header: &str, body: &str) -> String {
    format!(
        "\n#include \"mlx/backend/cuda/device/utils.cuh\"\n\n#include <cooperative_groups.h>\n\n{header}\nnamespace mlx::core::cu {{\n\nnamespace cg = cooperative_groups;\n\n__global__ void custom_kernel_k(\n    const float* x,\n    float* y) {{\n{body}\n}}\n\n}} // namespace mlx::core::cu\n"
    )
}

#[test]
fn the_front_end_refuses_what_could_reach_the_host_before_compiling() {
    // (header, body, words of the problem); each source's problem is on the line marked @bad
    let cases: &[(&str, &str, &str)] = &[
        ("", "  asm volatile(\"nop\"); // @bad", "inline assembly"),
        ("", "  __asm__(\"syscall\"); // @bad", "inline assembly"),
        ("extern \"C\" int getpid(); // @bad", "  y[0] = 1.0f;", "`extern` declarations"),
        ("extern float table[4]; // @bad", "  y[0] = table[0];", "`extern` declarations"),
        ("", "  y[0] = (float)(unsigned long)x; // @bad", "pointer and an integer"),
        ("", "  y[0] = (float)reinterpret_cast<uintptr_t>(x); // @bad", "pointer and an integer"),
        ("", "  float* p = (float*)0x1000; // @bad\n  y[0] = *p;", "pointer and an integer"),
        ("", "  float* p = reinterpret_cast<float*>(1234ul); // @bad\n  y[0] = *p;", "pointer and an integer"),
        ("__attribute__((constructor)) void init() {} // @bad", "  y[0] = 1.0f;", "attribute"),
        ("[[gnu::constructor]] void init() {} // @bad", "  y[0] = 1.0f;", "attribute"),
        ("__attribute__((section(\".init_array\"))) void f() {} // @bad", "  y[0] = 1.0f;", "attribute"),
        ("", "  printf(\"%f\", x[0]); // @bad", "C library"),
        ("", "  float* p = (float*)malloc(4); // @bad", "C library"),
        ("", "  __builtin_trap(); // @bad", "compiler builtins"),
        ("", "  kgemu::rt.barrier(1, 0); // @bad", "emulator's own"),
        ("#include <stdio.h> // @bad", "  y[0] = 1.0f;", "may include only MLX's headers"),
        ("#include \"/etc/passwd\" // @bad", "  y[0] = 1.0f;", "may include only MLX's headers"),
        ("const char data[] = {\n#embed \"/etc/passwd\" // @bad\n};", "  y[0] = data[0];", "may include only MLX's headers"),
        ("", "#pragma GCC optimize(\"O0\") // @bad\n  y[0] = 1.0f;", "pragma"),
        ("", "  _Pragma(\"GCC diagnostic ignored \\\"-Wall\\\"\") // @bad\n  y[0] = 1.0f;", "pragma"),
        ("__device__ float counter; // @bad", "  y[0] = counter;", "`__device__` variable"),
        ("", "  static thread_local float t; // @bad\n  y[0] = t;", "thread_local"),
    ];
    let e = emulator();
    let opts = LoadOptions { language: Language::Cuda, ..LoadOptions::default() };
    for (header, body, words) in cases {
        let src = cuda_source(header, body);
        match e.load_with(&src, "bad.cu", &opts) {
            Err(EmuError::InvalidCuda { file, problems }) => {
                assert_eq!(file, "bad.cu");
                let at = format!("bad.cu:{}:", line_of(&src, "@bad"));
                assert!(problems.iter().any(|p| p.starts_with(&at) && p.contains(words)), "{header} {body}: expected `{words}` at {at}, got {problems:?}");
            }
            // a cast's types are g++'s to know: the translation routes every cast through a
            // static_assert, and the compile fails there (nothing is linked)
            Err(EmuError::Compile { file, message }) if *words == "pointer and an integer" => {
                assert_eq!(file, "bad.cu");
                let at = format!("bad.cu:{}:", line_of(&src, "@bad"));
                assert!(message.contains(&at) && message.contains(words), "{body}: expected `{words}` at {at}, got {message}");
            }
            Err(other) => panic!("{header} {body}: expected the front end to refuse it, got {other}"),
            Ok(_) => panic!("{header} {body}: loaded"),
        }
    }
}

#[test]
fn the_front_end_accepts_what_cuda_bodies_write() {
    // the attributes and pragmas MLX's and kernelgen's bodies use, casts between numbers and
    // between pointers to data
    let header = "__device__ __forceinline__ float sq(float v) { return v * v; }\ntemplate <typename U> __device__ __noinline__ U twice(U v) { return v + v; }";
    let body = "  __shared__ __align__(16) float s[32];\n  uint32_t i = threadIdx.x;\n  s[i] = sq(x[i]);\n  __syncthreads();\n  const float4* v = reinterpret_cast<const float4*>(x);\n  float t = (float)(int)s[31 - i] + static_cast<float>(v[0].x);\n#pragma unroll\n  for (int k = 0; k < 4; ++k) {\n    t += twice(1.0f);\n  }\n#pragma unroll 2\n  for (int k = 0; k < 4; ++k) {\n    t += __fdividef(1.0f, 2.0f);\n  }\n  y[i] = t;";
    let p = load_cuda(&cuda_source(header, body), "ok.cu");
    let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let mut xb = f32_buf(&x);
    let mut yb = f32_buf(&[0.0; 32]);
    p.dispatch("custom_kernel_k", &mut [&mut xb, &mut yb], [32, 1, 1], [32, 1, 1]).unwrap();
    let want: Vec<f32> = (0..32).map(|i| (31 - i) as f32 * (31 - i) as f32 + 0.0 + 8.0 + 2.0).collect();
    assert_eq!(f32s(&yb), want);
}

#[test]
fn half_and_bfloat_conversions_and_math_match_rust() {
    use half::f16;
    let p = load_cuda(include_str!("emu/cuda/convert.cu"), "convert.cu");
    let mut rng = Rng(3);
    let mut x: Vec<f32> = (0..250).map(|_| rng.f32() * 300.0).collect();
    // ties, overflow, subnormals, signed zero, infinities, NaN
    x.extend([1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 65520.0, 1e-7, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    x.extend([6e-8, 1.0e-40]);
    let n = x.len();
    let mut xb = f32_buf(&x);
    let (mut h, mut b) = (u16_buf(&vec![0; n]), u16_buf(&vec![0; n]));
    let (mut back, mut math) = (f32_buf(&vec![0.0; 2 * n]), f32_buf(&vec![0.0; 8 * n]));
    p.dispatch("custom_kernel_convert", &mut [&mut xb, &mut h, &mut b, &mut back, &mut math], [n as u32, 1, 1], [n as u32, 1, 1]).unwrap();
    let (h, b, back, math) = (u16s(&h), u16s(&b), f32s(&back), f32s(&math));
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            // CUDA's canonical NaNs
            assert_eq!((h[i], b[i], back[2 * i].to_bits()), (0x7fff, 0x7fff, 0x7fffffff));
            continue;
        }
        assert_eq!(h[i], f16::from_f32(v).to_bits(), "__float2half({v})");
        assert_eq!(b[i], bf16::from_f32(v).to_bits(), "__float2bfloat16({v})");
        assert_eq!(back[2 * i].to_bits(), f16::from_bits(h[i]).to_f32().to_bits(), "__half2float");
        assert_eq!(back[2 * i + 1].to_bits(), bf16::from_bits(b[i]).to_f32().to_bits(), "__bfloat162float");
        let a = v.abs();
        let want = [v.exp(), v.exp(), 1.0 / a.sqrt(), v.tanh(), v.max(0.25) + v.min(-0.25), a.sqrt() + a.ln(), v / 3.0, v / (1.0 + (-v).exp())];
        for (k, w) in want.iter().enumerate() {
            let g = math[8 * i + k];
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "math[{k}]({v}): {g} != {w}");
        }
    }
}

const SHARED: &str = include_str!("emu/cuda/shared.cu");
const SHARED_FILE: &str = "shared.cu";
const RACES: Option<MemoryCheck> = Some(MemoryCheck::Races);

fn shared_at(marker: &str) -> Option<(String, u32)> {
    Some((SHARED_FILE.to_string(), line_of(SHARED, marker)))
}

/// `__shared__` arrays are threadgroup arrays: the threadgroup-memory check sees every access,
/// and __syncthreads orders them as threadgroup_barrier(mem_threadgroup) does.
#[test]
fn the_memory_check_passes_the_row_sum_and_names_the_missing_syncthreads() {
    let p = load_cuda(ROW_SUM, "row_sum.cu");
    let (rows, cols) = (6, 1000);
    let (bits, values) = bf16_rows(rows, cols, 13);
    let want: Vec<u32> = values.chunks(cols).map(|r| row_sum_reference(r).to_bits()).collect();
    let (mut x, mut out) = (u16_buf(&bits), f32_buf(&vec![0.0; rows]));
    let d = Dispatch::new("custom_kernel_row_sum", [256 * rows as u32, 1, 1], [256, 1, 1]).memory_check(Some(MemoryCheck::UninitializedReads));
    let stats = p.run(&d, &mut [&mut x, &mut out]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f32s(&out).iter().map(|v| v.to_bits()).collect::<Vec<u32>>(), want);
    assert_eq!(stats.threadgroup_arrays, vec![ThreadgroupArray { name: "partial".into(), bytes: 32, line: line_of(ROW_SUM, "__shared__ float partial[8];") }]);

    let p = bug_program();
    let x: Vec<f32> = (0..512).map(|i| (i % 5) as f32).collect();
    let (mut xb, mut out) = (f32_buf(&x), f32_buf(&[0.0; 2]));
    let e = p.run(&Dispatch::new("missing_syncthreads", [512, 1, 1], [256, 1, 1]).memory_check(RACES), &mut [&mut xb, &mut out]).unwrap_err();
    match &e {
        EmuError::Race { at: element, same_simdgroup, first, second, .. } => {
            assert_eq!(element.array, "partial", "{e}");
            assert_eq!(element.declared, (BUGS_FILE.to_string(), line_of(BUGS, "__shared__ float partial[8];")), "{e}");
            let (write, read) = if first.write { (first, second) } else { (second, first) };
            assert!(write.write && !read.write, "a write and a read: {e}");
            assert_eq!(write.metal_line, Some((BUGS_FILE.to_string(), line_of(BUGS, "@warp-sum"))), "{e}");
            assert_eq!(read.metal_line, Some((BUGS_FILE.to_string(), line_of(BUGS, "@no-barrier"))), "{e}");
            assert!(write.thread_position_in_grid[0] % 32 == 0 && write.thread_position_in_grid[0] % 256 >= 32, "lane 0 of warps 1..7 writes: {e}");
            assert!(read.thread_position_in_grid[0] % 256 < 8 && !same_simdgroup, "lanes 0..7 of warp 0 read: {e}");
        }
        other => panic!("expected a race, got {other}"),
    }
}

/// __syncwarp orders shared memory among its lanes; a shuffle does not, though every run order
/// hides the race.
#[test]
fn syncwarp_orders_shared_memory_and_a_shuffle_does_not() {
    let p = load_cuda(SHARED, SHARED_FILE);
    let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let want: Vec<f32> = (0..32).map(|i| 2.0 * (31 - i) as f32).collect();
    for kernel in ["warp_exchange_synced", "warp_exchange_shuffled"] {
        for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(3)] {
            let (mut xb, mut out) = (f32_buf(&x), f32_buf(&[0.0; 32]));
            p.run(&Dispatch::new(kernel, [32, 1, 1], [32, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap_or_else(|e| panic!("{kernel}: {e}"));
            assert_eq!(f32s(&out), want, "{kernel} {order:?}");
        }
    }
    let (mut xb, mut out) = (f32_buf(&x), f32_buf(&[0.0; 32]));
    p.run(&Dispatch::new("warp_exchange_synced", [32, 1, 1], [32, 1, 1]).memory_check(RACES), &mut [&mut xb, &mut out]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f32s(&out), want);
    let e = p.run(&Dispatch::new("warp_exchange_shuffled", [32, 1, 1], [32, 1, 1]).memory_check(RACES), &mut [&mut xb, &mut out]).unwrap_err();
    match &e {
        EmuError::Race { at: element, same_simdgroup, first, second, .. } => {
            assert_eq!(element.array, "s", "{e}");
            assert!(*same_simdgroup, "{e}");
            assert_eq!((first.write, first.metal_line.clone()), (true, shared_at("@shfl-write")), "{e}");
            assert_eq!((second.write, second.metal_line.clone()), (false, shared_at("@shfl-read")), "{e}");
            assert_eq!(first.thread_position_in_grid[0], 31 - second.thread_position_in_grid[0], "a lane reads its mirror's slot: {e}");
        }
        other => panic!("expected a race, got {other}"),
    }
}

/// A CUDA block may have more shared memory than Metal's 32 KiB: 40000 bytes of a static
/// array, and 160000 of dynamic memory (above 48000 bytes: an H200's 227 KiB a block), with
/// their guards, in both placements, with and without the check.
#[test]
fn shared_memory_beyond_metals_32_kib_runs_with_and_without_the_check() {
    let p = load_cuda(SHARED, SHARED_FILE);
    let count = 40_000;
    let x: Vec<f32> = (0..count).map(|i| i as f32 * 0.5).collect();
    let want: Vec<f32> = (0..10_000).map(|i| x[9999 - i]).chain((0..count).map(|i| x[count - 1 - i] + 1.0)).collect();
    for check in [None, Some(MemoryCheck::UninitializedReads)] {
        let (mut xb, mut n, mut out) = (f32_buf(&x), u32_buf(&[count as u32]), f32_buf(&vec![0.0; 10_000 + count]));
        let d = Dispatch::new("large_shared", [256, 1, 1], [256, 1, 1]).shared_memory(count as u32 * 4).memory_check(check);
        let stats = p.run(&d, &mut [&mut xb, &mut n, &mut out]).unwrap_or_else(|e| panic!("{check:?}: {e}"));
        assert!(f32s(&out) == want, "{check:?}: the arrays reversed");
        assert_eq!(stats.threadgroup_memory(), 40_000 + count * 4);
    }
}

#[test]
fn a_read_past_the_dynamic_shared_memory_faults_naming_it() {
    let p = load_cuda(SHARED, SHARED_FILE);
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    for check in [None, RACES] {
        let (mut xb, mut out) = (f32_buf(&x), f32_buf(&[0.0; 256]));
        let d = Dispatch::new("dynamic_past_end", [256, 1, 1], [256, 1, 1]).shared_memory(256 * 4).memory_check(check);
        match p.run(&d, &mut [&mut xb, &mut out]).unwrap_err() {
            EmuError::Fault { what, metal_line, thread_position_in_grid, .. } => {
                let past = format!("byte 1024 of threadgroup array `dyn`, past its end (1024 bytes, declared at {SHARED_FILE}:{})", line_of(SHARED, "@dyn-decl"));
                assert!(what.contains("invalid read") && what.contains(&past), "{check:?}: {what}");
                assert_eq!(metal_line, shared_at("@dyn-past-end"), "{check:?}: {what}");
                assert_eq!(thread_position_in_grid, [255, 0, 0], "{check:?}: {what}");
            }
            other => panic!("expected a fault ({check:?}), got {other}"),
        }
    }
}
