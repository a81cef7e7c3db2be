//! What the emulator gained for MLX's headers, without them: `load_with` include
//! directories and defines, macro-made instantiations, function constants, quad-group
//! and rotate/fill shuffles, and 8x8 simdgroup matrices (in MLX's lane layout).

use crate::common;

use common::*;
use kernelgen_emu::*;

const SRC: &str = r#"
#include <metal_stdlib>
#include "extras.h"
using namespace metal;

constant int scale [[function_constant(1)]];

[[kernel]] void quad(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  y[i] = quad_sum(x[i]) * scale;
}

[[kernel]] void shuffles(device const uint* x [[buffer(0)]], device uint* y [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  y[3 * i] = simd_shuffle_rotate_down(x[i], ushort(5));
  y[3 * i + 1] = simd_shuffle_and_fill_down(x[i], x[i] + 1000u, ushort(3), ushort(8));
  y[3 * i + 2] = simd_shuffle_and_fill_up(x[i], x[i] + 1000u, ushort(2));
}

// D = A * B + C over one 8x8 tile, lane l holding row r(l), columns c(l), c(l) + 1
[[kernel]] void mma(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                    device const float* c [[buffer(2)]], device float* d [[buffer(3)]],
                    ushort l [[thread_index_in_simdgroup]]) {
  const short qid = l / 4;
  const short r = (qid & 4) + ((l / 2) % 4);
  const short col = (qid & 2) * 2 + (l % 2) * 2;
  simdgroup_matrix<float, 8, 8> A, B, C, D;
  A.thread_elements() = float2(a[r * 8 + col], a[r * 8 + col + 1]);
  B.thread_elements() = float2(b[r * 8 + col], b[r * 8 + col + 1]);
  C.thread_elements() = float2(c[r * 8 + col], c[r * 8 + col + 1]);
  simdgroup_multiply_accumulate(D, A, B, C);
  d[r * 8 + col] = D.thread_elements()[0];
  d[r * 8 + col + 1] = D.thread_elements()[1];
}

KG_TEST_INSTANTIATE(twice_float, float)
"#;

const HEADER: &str = r#"#pragma once
template <typename T>
[[kernel]] void twice(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = x[i] * FACTOR; }
#define KG_TEST_INSTANTIATE(name, T) \
  template [[host_name(#name)]] [[kernel]] decltype(twice<T>) twice<T>;
"#;

fn program(scale: Option<i64>) -> Result<Program, EmuError> {
    let dir = std::env::temp_dir().join(format!("kgemu-extras-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the tests of this file load it at once: the header replaced whole (renamed into place),
    // never seen half-written by another's g++
    let tmp = dir.join(format!("extras.h.{:?}", std::thread::current().id()));
    std::fs::write(&tmp, HEADER).unwrap();
    std::fs::rename(&tmp, dir.join("extras.h")).unwrap();
    let opts = LoadOptions {
        include_dirs: vec![dir.clone()],
        defines: vec![("FACTOR".into(), Some("2.0f".into()))],
        function_constants: scale.map(|s| (1, FunctionConstant::Int(s))).into_iter().collect(),
        ..LoadOptions::default()
    };
    emulator().load_with(SRC, "extras.metal", &opts)
}

#[test]
fn include_dirs_defines_and_macro_instantiations() {
    let p = program(Some(3)).unwrap_or_else(|e| panic!("{e}"));
    let k = p.kernel("twice_float").expect("the instantiation made by a header macro");
    assert_eq!(k.metal_line, line_of(SRC, "KG_TEST_INSTANTIATE(twice_float"));
    let mut x = f32_buf(&[1.0, -2.5, 4.0, 0.0]);
    p.dispatch("twice_float", &mut [&mut x], [4, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(f32s(&x), [2.0, -5.0, 8.0, 0.0]);
    assert_eq!(p.function_constants()[0].value, Some(FunctionConstant::Int(3)));
}

#[test]
fn a_function_constant_without_a_value_fails_at_the_line_that_reads_it() {
    let e = program(None).err().expect("scale has no value").to_string();
    let line = line_of(SRC, "quad_sum(x[i]) * scale");
    assert!(e.contains(&format!("extras.metal:{line}")) && e.contains("function constant scale"), "{e}");
}

#[test]
fn quad_sums_and_shuffles() {
    let p = program(Some(2)).unwrap();
    let x: Vec<f32> = (0..64).map(|i| (i * i % 17) as f32).collect();
    let mut xb = f32_buf(&x);
    let mut y = f32_buf(&[0.0; 64]);
    p.dispatch("quad", &mut [&mut xb, &mut y], [64, 1, 1], [64, 1, 1]).unwrap();
    let want: Vec<f32> = (0..64).map(|i| x[i & !3..(i & !3) + 4].iter().sum::<f32>() * 2.0).collect();
    assert_eq!(f32s(&y), want);

    let x: Vec<u32> = (0..32).map(|i| i * 7 + 1).collect();
    let mut xb = u32_buf(&x);
    let mut y = u32_buf(&[0; 96]);
    p.dispatch("shuffles", &mut [&mut xb, &mut y], [32, 1, 1], [32, 1, 1]).unwrap();
    let y = u32s(&y);
    for i in 0..32usize {
        assert_eq!(y[3 * i], x[(i + 5) % 32], "rotate_down lane {i}");
        let (base, j) = (i - i % 8, i % 8 + 3);
        let fill_down = if j < 8 { x[base + j] } else { x[base + j - 8] + 1000 };
        assert_eq!(y[3 * i + 1], fill_down, "fill_down lane {i}");
        let fill_up = if i >= 2 { x[i - 2] } else { x[i + 30] + 1000 };
        assert_eq!(y[3 * i + 2], fill_up, "fill_up lane {i}");
    }
}

#[test]
fn simdgroup_multiply_accumulate_in_mlx_lane_layout() {
    let p = program(Some(1)).unwrap();
    let mut rng = Rng(7);
    let (a, b, c): (Vec<f32>, Vec<f32>, Vec<f32>) = ((0..64).map(|_| rng.f32()).collect(), (0..64).map(|_| rng.f32()).collect(), (0..64).map(|_| rng.f32()).collect());
    let (mut ab, mut bb, mut cb, mut d) = (f32_buf(&a), f32_buf(&b), f32_buf(&c), f32_buf(&[0.0; 64]));
    p.dispatch("mma", &mut [&mut ab, &mut bb, &mut cb, &mut d], [32, 1, 1], [32, 1, 1]).unwrap();
    let mut want = vec![0f32; 64];
    for i in 0..8 {
        for j in 0..8 {
            let mut acc = c[i * 8 + j];
            for k in 0..8 {
                acc = a[i * 8 + k].mul_add(b[k * 8 + j], acc);
            }
            want[i * 8 + j] = acc;
        }
    }
    assert_eq!(f32s(&d), want, "C + A.B in k order, one fma per k");
}

/// `__HAVE_BFLOAT__` is predefined, as the Metal check's prelude defines it (MLX's bf16.h tests
/// it), and the check lets a conditional test it.
#[test]
fn have_bfloat_is_predefined_as_the_check_defines_it() {
    let src = "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n#if defined(__HAVE_BFLOAT__)\n  y[i] = float(bfloat(1.5f));\n#else\n  y[i] = 0.0f;\n#endif\n}\n";
    let p = load(src, "have_bfloat.metal");
    let mut y = DeviceBuffer::zeroed(4 * 4);
    p.dispatch("k", &mut [&mut y], [4, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![1.5; 4]);
}

/// Every header name the Metal check accepts resolves to the stand-in: `<metal_limits>` (candle's
/// reduce.metal includes it for `numeric_limits`) and `<metal_utility>` as `<metal_stdlib>` does.
#[test]
fn metal_limits_and_the_other_header_names_resolve() {
    let src = "#include <metal_limits>\n#include <metal_utility>\n#include <metal_math>\nusing namespace metal;\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  y[i] = i == 0 ? numeric_limits<float>::lowest() : numeric_limits<float>::max();\n}\n";
    let p = load(src, "limits.metal");
    let mut y = DeviceBuffer::zeroed(2 * 4);
    p.dispatch("k", &mut [&mut y], [2, 1, 1], [2, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![f32::MIN, f32::MAX]);
}

/// Idioms of candle's and mistral.rs's kernels (crates/emu/tests/real_world_kernels.rs runs the
/// kernels themselves): an instantiation spelling out its signature or naming a typedef of the
/// template's type (ggml), a program-scope `constant`
/// as a template argument, a defaulted constructor beside its `threadgroup` twin, a specialization
/// of `_numeric_limits_impl`, and `vec_elements`.
#[test]
fn candle_and_mistralrs_idioms() {
    let src = r#"
#include <metal_stdlib>
using namespace metal;
constant uint LIMIT = 7;
template <uint N> constexpr uint twice() { return 2 * N; }
template <typename T> struct pair_t {
  T a;
  T b;
  constexpr pair_t<T>() = default;
  constexpr pair_t<T>() threadgroup = default;
};
template <typename T> struct _numeric_limits_impl<pair_t<T>> {
  static constexpr pair_t<T> lowest() { return pair_t<T>{numeric_limits<T>::lowest(), T(0)}; }
};
template <typename T>
kernel void k(device const T* x [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  threadgroup pair_t<T> p;
  p = numeric_limits<pair_t<T>>::lowest();
  y[i] = float(x[i]) * twice<LIMIT>() + float(vec_elements<float4>::value) + (float(p.a) < 0.0f ? 100.0f : 0.0f);
}
template [[host_name("k_float")]] [[kernel]] void k<float>(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                                           uint i [[thread_position_in_grid]]);
template [[host_name("k_half")]] [[kernel]] void k<half>(device const half* x [[buffer(0)]], device float* y [[buffer(1)]],
                                                         uint i [[thread_position_in_grid]]);
// ggml's form: a typedef of one instantiation's type (the signature does not depend on T)
template <typename T>
kernel void z(device char* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { ((device float*)y)[i] = float(T(2.5f)); }
typedef decltype(z<float>) z_t;
template [[host_name("z_int")]] kernel z_t z<int>;
"#;
    let p = load(src, "idioms.metal");
    let names: Vec<&str> = p.kernels().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["k_float", "k_half", "z_int"]);
    let mut x = f32_buf(&[1.0, -2.5]);
    let mut y = DeviceBuffer::zeroed(2 * 4);
    p.dispatch("k_float", &mut [&mut x, &mut y], [2, 1, 1], [2, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![1.0 * 14.0 + 4.0 + 100.0, -2.5 * 14.0 + 4.0 + 100.0]);
    let mut xh = u16_buf(&[half::f16::from_f32(3.0).to_bits()]);
    let mut y = DeviceBuffer::zeroed(4);
    p.dispatch("k_half", &mut [&mut xh, &mut y], [1, 1, 1], [1, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![3.0 * 14.0 + 4.0 + 100.0]);
    let mut y = DeviceBuffer::zeroed(4);
    p.dispatch("z_int", &mut [&mut y], [1, 1, 1], [1, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![2.0], "z<int>: int(2.5f)");
}

/// `assert` is Metal's (mistral.rs's pagedattention.metal asserts on template constants): the
/// condition is evaluated, a false one does nothing (a GPU without shader validation).
#[test]
fn assert_evaluates_its_condition() {
    let src = "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void k(device int* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  assert(i < 4u);\n  assert(y[i]++ == 0);\n}\n";
    let p = load(src, "assert.metal");
    let mut y = DeviceBuffer::zeroed(2 * 4);
    p.dispatch("k", &mut [&mut y], [2, 1, 1], [2, 1, 1]).unwrap();
    assert_eq!(u32s(&y), vec![1, 1]);
}

/// Packed vectors are N elements without padding (12 bytes for packed_float3), and convert to and
/// from vectors.
#[test]
fn packed_vectors_have_no_padding() {
    let src = "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void k(device const packed_float3* p [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n  float3 v = p[i];\n  packed_float3 q = v * 2.0f;\n  y[i] = q.x + q[1] + v.z + float(sizeof(packed_float3));\n}\n";
    let p = load(src, "packed.metal");
    let mut x = f32_buf(&[1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let mut y = DeviceBuffer::zeroed(2 * 4);
    p.dispatch("k", &mut [&mut x, &mut y], [2, 1, 1], [2, 1, 1]).unwrap();
    assert_eq!(f32s(&y), vec![2.0 + 4.0 + 3.0 + 12.0, 20.0 + 40.0 + 30.0 + 12.0]);
}

/// `simdgroup_matrix<T, 8, 8>(d)` is d on the diagonal (candle's mlx_gemm.metal starts its
/// accumulators from `(0)`): A x diag(2.5) + diag(0) is 2.5 A.
#[test]
fn a_simdgroup_matrix_of_a_value_is_diagonal() {
    let src = r#"
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device const float* a [[buffer(0)]], device float* d [[buffer(1)]], ushort l [[thread_index_in_simdgroup]]) {
  const short r = ((l / 4) & 4) + ((l / 2) % 4);
  const short col = ((l / 4) & 2) * 2 + (l % 2) * 2;
  simdgroup_matrix<float, 8, 8> A, D;
  A.thread_elements() = float2(a[r * 8 + col], a[r * 8 + col + 1]);
  simdgroup_multiply_accumulate(D, A, simdgroup_matrix<float, 8, 8>(2.5f), simdgroup_matrix<float, 8, 8>(0));
  d[r * 8 + col] = D.thread_elements()[0];
  d[r * 8 + col + 1] = D.thread_elements()[1];
}
"#;
    let p = load(src, "diag.metal");
    let a: Vec<f32> = (0..64).map(|i| i as f32 - 20.0).collect();
    let (mut ab, mut d) = (f32_buf(&a), f32_buf(&[f32::NAN; 64]));
    p.dispatch("k", &mut [&mut ab, &mut d], [32, 1, 1], [32, 1, 1]).unwrap();
    assert_eq!(f32s(&d), a.iter().map(|v| v * 2.5).collect::<Vec<_>>());
}
