//! half and bfloat16 conversions (exhaustive over the 16-bit patterns, a large sample of
//! floats with ties, NaNs, infinities and subnormals) and the operator rules, against the
//! `half` crate.

use crate::common;

use common::*;
use half::{bf16, f16};
use kernelgen_emu::{DeviceBuffer, Program};

const SRC: &str = include_str!("emu/conversions.metal");

fn program() -> Program {
    load(SRC, "conversions.metal")
}

fn run_16_to_32(p: &Program, kernel: &str) -> Vec<u32> {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let mut inb = u16_buf(&all);
    let mut out = DeviceBuffer::zeroed(65536 * 4);
    p.dispatch(kernel, &mut [&mut inb, &mut out], [65536, 1, 1], [1024, 1, 1]).unwrap();
    u32s(&out)
}

fn run_32_to_16(p: &Program, kernel: &str, v: &[u32]) -> Vec<u16> {
    let mut inb = u32_buf(v);
    let mut out = DeviceBuffer::zeroed(v.len() * 2);
    p.dispatch(kernel, &mut [&mut inb, &mut out], [v.len() as u32, 1, 1], [256, 1, 1]).unwrap();
    u16s(&out)
}

#[test]
fn half_to_float_exhaustive() {
    let got = run_16_to_32(&program(), "h2f");
    for b in 0..=u16::MAX {
        assert_eq!(got[b as usize], f16::from_bits(b).to_f32().to_bits(), "half bits {b:#06x}");
    }
}

#[test]
fn bfloat_to_float_exhaustive() {
    let got = run_16_to_32(&program(), "b2f");
    for b in 0..=u16::MAX {
        assert_eq!(got[b as usize], bf16::from_bits(b).to_f32().to_bits(), "bf16 bits {b:#06x}");
    }
}

/// Floats that exercise rounding: every 16-bit value as float, the midpoints between
/// neighbours (ties) and one float ulp either side, specials, float subnormals, random bits.
fn float_sample(to32: impl Fn(u16) -> f32) -> Vec<u32> {
    let mut v = Vec::new();
    for b in 0..=u16::MAX {
        let f = to32(b);
        if !f.is_finite() {
            continue;
        }
        v.push(f.to_bits());
        let g = to32(b.wrapping_add(1));
        if g.is_finite() && (g > f) == (f >= 0.0) && b & 0x7fff != 0x7fff {
            let mid = ((f as f64 + g as f64) / 2.0) as f32;
            v.extend([mid.to_bits(), mid.to_bits().wrapping_add(1), mid.to_bits().wrapping_sub(1)]);
        }
    }
    let specials = [
        0x7f80_0000u32, 0xff80_0000, 0x7fc0_0000, 0xffc0_0000, 0x7f80_0001, 0xff80_0001, 0x7fbf_ffff, 0x7fa0_2000,
        0x7f80_2000, 0x7f80_1fff, 0x0000_0001, 0x8000_0001, 0x007f_ffff, 0x0080_0000, 0x7f7f_ffff, 0xff7f_ffff,
        0x477f_e000, 0x477f_efff, 0x477f_f000, 0x477f_f001, 0x3380_0000, 0x3300_0000, 0x3300_0001, 0x0000_0000,
        0x8000_0000,
    ];
    v.extend(specials);
    let mut rng = Rng(0xC0FFEE);
    v.extend((0..200_000).map(|_| rng.u32()));
    v
}

#[test]
fn float_to_half_sample() {
    let v = float_sample(|b| f16::from_bits(b).to_f32());
    let got = run_32_to_16(&program(), "f2h", &v);
    for (i, &x) in v.iter().enumerate() {
        assert_eq!(got[i], f16::from_f32(f32::from_bits(x)).to_bits(), "float bits {x:#010x}");
    }
}

#[test]
fn float_to_bfloat_sample() {
    let v = float_sample(|b| bf16::from_bits(b).to_f32());
    let got = run_32_to_16(&program(), "f2b", &v);
    for (i, &x) in v.iter().enumerate() {
        assert_eq!(got[i], bf16::from_f32(f32::from_bits(x)).to_bits(), "float bits {x:#010x}");
    }
}

fn check_ops<T: Copy>(kernel: &str, from: impl Fn(f32) -> T, to: impl Fn(T) -> f32, bits: impl Fn(T) -> u16, of: impl Fn(u16) -> T) {
    let p = program();
    let mut rng = Rng(3);
    let n = 4096;
    let a: Vec<u16> = (0..n).map(|_| bits(from(rng.f32() * 4.0 + 0.01))).collect();
    let b: Vec<u16> = (0..n).map(|_| bits(from(rng.f32() * 4.0))).collect();
    let (mut ab, mut bb) = (u16_buf(&a), u16_buf(&b));
    let mut tt = DeviceBuffer::zeroed(n * 6 * 2);
    let mut tf = DeviceBuffer::zeroed(n * 3 * 4);
    p.dispatch(kernel, &mut [&mut ab, &mut bb, &mut tt, &mut tf], [n as u32, 1, 1], [64, 1, 1]).unwrap();
    let (t, f) = (u16s(&tt), f32s(&tf));
    let r = |v: f32| bits(from(v));
    for i in 0..n {
        let (x, y) = (to(of(a[i])), to(of(b[i])));
        let want_t = [
            r(x + y),
            r(x * y),
            r(x - to(from(3.0))),
            r(x.exp()),
            r(y.abs() / x),
            r(x + 0.1f32),
        ];
        assert_eq!(t[i * 6..i * 6 + 6], want_t, "{kernel} T results, i={i} x={x} y={y}");
        let want_f = [x * 0.1f32, 2.5f32 + y, if x < y { 1.0 } else { 0.0 }];
        assert_eq!(f[i * 3..i * 3 + 3].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want_f.map(f32::to_bits), "{kernel} float results, i={i}");
    }
}

#[test]
fn half_operator_rules() {
    check_ops("ops_half", f16::from_f32, f16::to_f32, f16::to_bits, f16::from_bits);
}

#[test]
fn bfloat_operator_rules() {
    check_ops("ops_bfloat", bf16::from_f32, bf16::to_f32, bf16::to_bits, bf16::from_bits);
}

/// The shim's software conversions (used when the CPU has no F16C) against the crate:
/// a small C++ program built from the shim header with `-mno-f16c`.
#[test]
fn software_conversions_without_f16c() {
    let dir = std::env::temp_dir().join(format!("kgemu-nof16c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cpp = dir.join("conv.cpp");
    std::fs::write(
        &cpp,
        r#"#include "kgemu_shim.h"
#undef device
#undef constant
#undef thread
#undef threadgroup
#undef kernel
extern "C" int write(int, const void*, unsigned long);
static uint32_t buf[65536 * 3];
int main() {
#if defined(__F16C__)
  return 2;
#endif
  for (uint32_t b = 0; b < 65536; ++b) {
    buf[b] = kgemu::float_to_bits(kgemu::f16_to_f32((uint16_t)b));
    buf[65536 + b] = kgemu::f32_to_f16(kgemu::bits_to_float(b * 65537u + (b >> 3)));
    buf[131072 + b] = kgemu::f32_to_f16(kgemu::bits_to_float((b << 16) | (b & 0x3ffu) << 3 | 0x1000u));
  }
  write(1, buf, sizeof(buf));
  return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("conv");
    let shim = concat!(env!("CARGO_MANIFEST_DIR"), "/src/shim");
    let st = std::process::Command::new("g++")
        .args(["-std=c++17", "-O2", "-mno-f16c", "-ffp-contract=off", "-I", shim])
        .arg(&cpp)
        .arg("-o")
        .arg(&exe)
        .env_remove("LD_PRELOAD")
        .status()
        .unwrap();
    assert!(st.success());
    let out = std::process::Command::new(&exe).env_remove("LD_PRELOAD").output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let v: Vec<u32> = out.stdout.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(v.len(), 65536 * 3);
    for b in 0..65536u32 {
        assert_eq!(v[b as usize], f16::from_bits(b as u16).to_f32().to_bits(), "f16 {b:#06x}");
        for (k, x) in [(1, b.wrapping_mul(65537).wrapping_add(b >> 3)), (2, (b << 16) | (b & 0x3ff) << 3 | 0x1000)] {
            assert_eq!(v[k * 65536 + b as usize], f16::from_f32(f32::from_bits(x)).to_bits() as u32, "float {x:#010x}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conditionals_take_metals_types() {
    let p = program();
    let n = 8usize;
    // floats a half cannot hold: a float result keeps them, a half one rounds them
    let f: Vec<f32> = (0..n)
        .map(|i| 1.0 + (i as f32 + 1.0) * 2f32.powi(-20) + i as f32)
        .collect();
    let h: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(0.5 + i as f32 * 0.25))
        .collect();
    let mut hb = u16_buf(&h.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let mut fb = f32_buf(&f);
    let mut wide = DeviceBuffer::zeroed(n * 3 * 4);
    let mut narrow = DeviceBuffer::zeroed(n * 2 * 2);
    p.dispatch(
        "mixed_conditionals",
        &mut [&mut hb, &mut fb, &mut wide, &mut narrow],
        [n as u32, 1, 1],
        [n as u32, 1, 1],
    )
    .unwrap();
    let (wide, narrow) = (f32s(&wide), u16s(&narrow));
    for i in 0..n {
        let odd = i % 2 == 1;
        let (x, y) = (h[i].to_f32(), f[i]);
        assert_eq!(wide[i * 3], if odd { x } else { y }, "half ?: float at {i}");
        assert_eq!(
            wide[i * 3 + 1],
            if odd {
                y
            } else {
                f16::from_f32(x * x).to_f32()
            },
            "float ?: half at {i}"
        );
        assert_eq!(
            wide[i * 3 + 2],
            if odd { y } else { -y },
            "lvalue conditional at {i}"
        );
        assert_eq!(
            narrow[i * 2],
            if odd { 0 } else { h[i].to_bits() },
            "int ?: half at {i}"
        );
        assert_eq!(
            narrow[i * 2 + 1],
            if odd { h[i] } else { f16::from_f32(y) }.to_bits(),
            "half ?: half at {i}"
        );
    }
}

/// A half vector with a float scalar is a half vector (MSL 3.1: the scalar converts to the
/// element type), in `?:` and in arithmetic. The Metal check of this branch refuses these
/// (main's accepts them), so the emulator runs it unchecked.
#[test]
fn vector_scalar_operations_convert_the_scalar_to_the_element_type() {
    let src = "#include <metal_stdlib>\nusing namespace metal;\n\
        kernel void k(device half4* v [[buffer(0)]], constant float& s [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n\
          half4 a = v[i];\n\
          half4 b = (i & 1) != 0 ? a : s;\n\
          b *= s;\n\
          v[i] = b * s;\n\
        }\n";
    let p = unchecked_emulator().load(src, "vec_scalar.metal").unwrap();
    let n = 4usize;
    let v: Vec<f16> = (0..n * 4)
        .map(|k| f16::from_f32(1.0 + k as f32 * 0.125))
        .collect();
    let s = 1.0f32 + 2f32.powi(-20) + 0.3;
    let mut vb = u16_buf(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let mut sb = f32_buf(&[s]);
    p.dispatch(
        "k",
        &mut [&mut vb, &mut sb],
        [n as u32, 1, 1],
        [n as u32, 1, 1],
    )
    .unwrap();
    let got = u16s(&vb);
    let rh = |x: f32| f16::from_f32(x);
    let hs = rh(s);
    for i in 0..n {
        for k in 0..4 {
            let a = v[i * 4 + k];
            let b = if i % 2 == 1 { a } else { hs };
            let want = rh(rh(b.to_f32() * hs.to_f32()).to_f32() * hs.to_f32());
            assert_eq!(got[i * 4 + k], want.to_bits(), "element {i}.{k}");
        }
    }
}
