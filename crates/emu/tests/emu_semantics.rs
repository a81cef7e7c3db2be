//! Emulator semantics: collectives over active lanes in the documented order, attributes,
//! barriers in every run order, threadgroup memory, partial threadgroups, vectors,
//! templated kernels with host_name and header helpers, errors of compile and launch.

use crate::common;

use common::*;
use half::{bf16, f16};
use kernelgen_emu::*;

const SEM: &str = include_str!("emu/semantics.metal");
const TPL: &str = include_str!("emu/mlx_template.metal");
const Q4: &str = include_str!("emu/q4_gate_up.metal");

fn lanes_of<T: Copy>(vals: &[T], active: impl Fn(usize) -> bool, lo: usize, hi: usize) -> [Option<T>; 32] {
    let mut l = [None; 32];
    for i in lo..hi {
        if active(i) {
            l[i - lo] = Some(vals[i]);
        }
    }
    l
}

#[test]
fn collectives_over_active_lanes_follow_the_documented_order() {
    let p = load(SEM, "semantics.metal");
    let mut rng = Rng(42);
    let n = 200;
    let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    let sentinel = 12345.0f32;
    for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(9)] {
        let mut xb = f32_buf(&x);
        let mut out = f32_buf(&vec![sentinel; n * 3]);
        p.run(&Dispatch::new("sum_inactive", [n as u32, 1, 1], [100, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap();
        let got = f32s(&out);
        for tg in 0..2 {
            for sg in 0..4 {
                let lo = tg * 100 + sg * 32;
                let hi = (lo + 32).min(tg * 100 + 100);
                let active = |i: usize| ((i - tg * 100) % 32 * 7 + sg) % 5 != 3;
                let l = lanes_of(&x, active, lo, hi);
                let sum = tree(&l, -0.0f32, |a, b| a + b);
                let max = tree(&l, f32::NEG_INFINITY, f32::max);
                let mut acc = -0.0f32;
                for i in lo..hi {
                    if active(i) {
                        assert_eq!(got[i * 3].to_bits(), sum.to_bits(), "sum lane {i} {order:?}");
                        assert_eq!(got[i * 3 + 1].to_bits(), max.to_bits(), "max lane {i}");
                        assert_eq!(got[i * 3 + 2].to_bits(), acc.to_bits(), "prefix lane {i}");
                        acc += x[i];
                    } else {
                        assert_eq!(got[i * 3], sentinel, "inactive lane {i} must not write");
                    }
                }
            }
        }
    }
    // the order is visible: the same sum in plain sequential order differs for this data
    let seq: f32 = x[..32].iter().fold(-0.0, |a, b| a + b);
    let l = lanes_of(&x, |_| true, 0, 32);
    let tr = tree(&l, -0.0f32, |a, b| a + b);
    assert_ne!(seq.to_bits(), tr.to_bits(), "test data should make the reduction order observable");
}

#[test]
fn half_and_int_collectives() {
    let p = load(SEM, "semantics.metal");
    let mut rng = Rng(7);
    let h: Vec<f16> = (0..64).map(|_| f16::from_f32(rng.f32() * 8.0)).collect();
    let v: Vec<i32> = (0..64).map(|_| (rng.u32() % 101) as i32 - 50).collect();
    let mut hb = u16_buf(&h.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let mut vb = DeviceBuffer::from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    let mut ho = DeviceBuffer::zeroed(128);
    let mut io = DeviceBuffer::zeroed(256);
    p.dispatch("typed_sums", &mut [&mut hb, &mut vb, &mut ho, &mut io], [64, 1, 1], [64, 1, 1]).unwrap();
    let hout = u16s(&ho);
    let iout: Vec<i32> = io.as_bytes().chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    for sg in 0..2 {
        let lo = sg * 32;
        let l = lanes_of(&h, |i| i % 32 < 29, lo, lo + 32);
        let s = tree(&l, f16::from_f32(-0.0), |a, b| f16::from_f32(a.to_f32() + b.to_f32()));
        let li = lanes_of(&v, |i| i % 32 < 29, lo, lo + 32);
        let mn = tree(&li, i32::MAX, i32::min);
        let mx = tree(&li, i32::MIN, i32::max);
        for i in lo..lo + 29 {
            assert_eq!(hout[i], s.to_bits(), "half sum lane {i}");
            assert_eq!(iout[i], mn + 1000 * mx, "int min/max lane {i}");
        }
        for i in lo + 29..lo + 32 {
            assert_eq!(hout[i], 0);
        }
    }
}

#[test]
fn shuffles_and_broadcast() {
    let p = load(SEM, "semantics.metal");
    let x: Vec<f32> = (0..64).map(|i| i as f32 * 1.25).collect();
    let mut xb = f32_buf(&x);
    let mut out = DeviceBuffer::zeroed(64 * 16);
    p.dispatch("shuffles", &mut [&mut xb, &mut out], [64, 1, 1], [64, 1, 1]).unwrap();
    let o = f32s(&out);
    for i in 0..64 {
        let (sg, l) = (i / 32 * 32, i % 32);
        let down = if l + 3 < 32 { x[sg + l + 3] } else { x[i] };
        let up = if l >= 2 { x[sg + l - 2] } else { x[i] };
        assert_eq!(o[i * 4..i * 4 + 4], [down, x[sg + 5], x[sg + (l ^ 1)], up], "lane {i}");
    }
}

#[test]
fn attributes_have_metal_values_with_partial_threadgroups() {
    let p = load(SEM, "semantics.metal");
    let grid = [5u32, 3, 2];
    let tg = [4u32, 2, 2];
    let n = 30;
    let mut out = DeviceBuffer::zeroed(n * 32 * 4);
    p.dispatch("attributes", &mut [&mut out], grid, tg).unwrap();
    let o = u32s(&out);
    for z in 0..2u32 {
        for y in 0..3u32 {
            for x in 0..5u32 {
                let i = ((z * 3 + y) * 5 + x) as usize;
                let t = &o[i * 32..i * 32 + 32];
                let tgid = [x / 4, y / 2, z / 2];
                let actual = [4.min(5 - tgid[0] * 4), 2.min(3 - tgid[1] * 2), 2.min(2 - tgid[2] * 2)];
                let local = [x % 4, y % 2, z % 2];
                let lin = local[0] + local[1] * actual[0] + local[2] * actual[0] * actual[1];
                let nthreads = actual[0] * actual[1] * actual[2];
                let want = [
                    x, y, z, tgid[0], tgid[1], tgid[2], local[0], local[1], local[2], actual[0], actual[1], actual[2], 5, 3, 2, 2,
                    2, 1, 5, 4, 2, 2, lin % 32, lin / 32, lin, 32, nthreads.div_ceil(32), 32, y * 100 + x, 0xdeadbeef,
                ];
                assert_eq!(t[..30], want, "thread ({x},{y},{z})");
            }
        }
    }
}

fn tg_reduce_model(x: &[f32], tg: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    for base in (0..x.len()).step_by(tg) {
        let end = (base + tg).min(x.len());
        let nsg = (end - base).div_ceil(32);
        let mut partial = [Some(0.0f32); 32];
        for sg in 0..nsg {
            let lo = base + sg * 32;
            let l = lanes_of(x, |_| true, lo, (lo + 32).min(end));
            partial[sg] = Some(tree(&l, -0.0, |a, b| a + b));
        }
        let total = tree(&partial, -0.0, |a, b| a + b) + nsg as f32 * 0.0;
        out[base..end].fill(total);
    }
    out
}

#[test]
fn barriers_and_threadgroup_memory_in_every_run_order() {
    let p = load(SEM, "semantics.metal");
    let mut rng = Rng(99);
    let x: Vec<f32> = (0..1000).map(|_| rng.f32()).collect();
    let want = tg_reduce_model(&x, 256);
    for order in [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(1), RunOrder::Shuffle(2)] {
        let mut xb = f32_buf(&x);
        let mut out = DeviceBuffer::zeroed(4000);
        let st = p.run(&Dispatch::new("tg_reduce", [1000, 1, 1], [256, 1, 1]).order(order), &mut [&mut xb, &mut out]).unwrap();
        assert_eq!(st.threadgroups, 4);
        assert_eq!(st.threads, 1000);
        let got = f32s(&out);
        for i in 0..1000 {
            assert_eq!(got[i].to_bits(), want[i].to_bits(), "thread {i} in {order:?}");
        }
    }
}

#[test]
fn uninitialised_threadgroup_memory_reads_as_poison() {
    let p = load(SEM, "semantics.metal");
    let mut out = DeviceBuffer::zeroed(64 * 4);
    p.dispatch("uninit_read", &mut [&mut out], [64, 1, 1], [64, 1, 1]).unwrap();
    assert!(u32s(&out).iter().all(|&b| b == 0xFFFF_FFFF), "every value is the poison NaN");
    assert!(f32s(&out).iter().all(|v| v.is_nan()));
}

#[test]
fn vectors_swizzles_and_half_literals() {
    let p = load(SEM, "semantics.metal");
    let x: Vec<f32> = (0..40).map(|i| i as f32 * 0.37 - 3.0).collect();
    let mut xb = f32_buf(&x);
    let mut out = DeviceBuffer::zeroed(160);
    let mut sizes = DeviceBuffer::zeroed(32);
    p.dispatch("vectors", &mut [&mut xb, &mut out, &mut sizes], [40, 1, 1], [8, 1, 1]).unwrap();
    let o = f32s(&out);
    for (i, &xi) in x.iter().enumerate() {
        let v = [1.5f32, xi, 2.0 + 0.25, 3.0 + 0.25];
        let w = [v[0] * 2.0, v[1] * 2.0, v[2] * 2.0];
        let hy = f16::from_f32(v[1]).to_f32();
        let q = [w[0] + 1.0, w[1] + 2.0, w[2] + v[2], hy + v[3]];
        let dot = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
        let want = q[0] + q[1] * 10.0 + q[2] * 100.0 + q[3] * 1000.0 + dot;
        assert_eq!(o[i].to_bits(), want.to_bits(), "i={i}");
    }
    assert_eq!(u32s(&sizes)[..6], [16, 16, 8, 8, 8, 2], "Metal vector layout");
}

#[test]
fn every_compound_assignment_through_a_swizzle_writes_the_vector() {
    let src = "#include <metal_stdlib>\nusing namespace metal;\n\
               [[kernel]] void k(device uint4* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n\
               uint4 v = uint4(1, 2, 3, 4);\n\
               v.xy <<= 1u;\n  v.zw >>= 1u;\n  v.yx |= 8u;\n  v.zy &= uint2(15, 4);\n  v.xw %= 3u;\n  v.wz ^= uint2(1, 6);\n\
               v.zx += uint2(1, 1);\n  o[i] = v;\n}\n";
    let p = load(src, "swizzle_ops.metal");
    let mut o = DeviceBuffer::zeroed(16);
    p.dispatch("k", &mut [&mut o], [1, 1, 1], [1, 1, 1]).unwrap();
    // (1,2,3,4) -> (2,4,3,4) -> (2,4,1,2) -> (10,12,1,2) -> (10,4,1,2) -> (1,4,1,2) -> (1,4,7,3) -> (2,4,8,3)
    assert_eq!(u32s(&o), [2, 4, 8, 3]);
}

#[test]
fn templated_kernels_with_host_name_and_header_helpers() {
    let p = load(TPL, "rowdot.metal");
    let names: Vec<&str> = p.kernels().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["custom_kernel_rowdot_16_float", "custom_kernel_rowdot_24_bfloat16_t"]);
    let k = p.kernel("custom_kernel_rowdot_24_bfloat16_t").unwrap();
    assert_eq!(k.params[0].type_name, "bfloat16_t");
    assert_eq!(k.params[0].binding, Binding::Buffer(0));
    assert!(k.params[0].is_const && k.params[0].address_space == AddressSpace::Device);
    assert!(k.params[2].is_reference && k.params[2].address_space == AddressSpace::Constant);
    assert_eq!(k.params[4].binding, Binding::Attribute(Attribute::ThreadPositionInGrid));
    assert_eq!(k.buffer_count(), 4);

    let mut rng = Rng(5);
    let rows = 8;
    // f32, N = 16
    let w: Vec<f32> = (0..rows * 16).map(|_| rng.f32()).collect();
    let x: Vec<f32> = (0..16).map(|_| rng.f32()).collect();
    let (mut wb, mut xb, mut sb, mut yb) = (f32_buf(&w), f32_buf(&x), f32_buf(&[0.5]), DeviceBuffer::zeroed(rows * 4));
    p.dispatch("custom_kernel_rowdot_16_float", &mut [&mut wb, &mut xb, &mut sb, &mut yb], [rows as u32, 1, 1], [4, 1, 1])
        .unwrap();
    let y = f32s(&yb);
    for r in 0..rows {
        let acc = (0..16).fold(0.0f32, |a, k| w[r * 16 + k].mul_add(x[k], a));
        assert_eq!(y[r].to_bits(), (acc * 0.5).to_bits(), "row {r}");
    }
    // bf16, N = 24
    let w: Vec<bf16> = (0..rows * 24).map(|_| bf16::from_f32(rng.f32())).collect();
    let x: Vec<f32> = (0..24).map(|_| rng.f32()).collect();
    let mut wb = u16_buf(&w.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let (mut xb, mut sb, mut yb) = (f32_buf(&x), f32_buf(&[1.75]), DeviceBuffer::zeroed(rows * 2));
    p.dispatch("custom_kernel_rowdot_24_bfloat16_t", &mut [&mut wb, &mut xb, &mut sb, &mut yb], [rows as u32, 1, 1], [4, 1, 1])
        .unwrap();
    let y = u16s(&yb);
    for r in 0..rows {
        let acc = (0..24).fold(0.0f32, |a, k| w[r * 24 + k].to_f32().mul_add(x[k], a));
        assert_eq!(y[r], bf16::from_f32(acc * 1.75).to_bits(), "row {r}");
    }
}

/// The expert-style Q4 gate/up kernel against a Rust model of its arithmetic.
#[test]
fn q4_gate_up_matches_a_model_bit_for_bit() {
    let p = load(Q4, "q4_gate_up.metal");
    let (h, i_rows) = (256usize, 8usize);
    let mut rng = Rng(11);
    let act: Vec<f32> = (0..h).map(|_| rng.f32()).collect();
    let mut slot = vec![0u8; 2112];
    for b in slot[..2048].iter_mut() {
        *b = rng.u32() as u8;
    }
    let scales: Vec<f32> = (0..16).map(|k| 0.01 + k as f32 * 0.003).collect();
    for (k, s) in scales.iter().enumerate() {
        slot[2048 + k * 4..2052 + k * 4].copy_from_slice(&s.to_le_bytes());
    }
    let mut ab = f32_buf(&act);
    let mut sb = DeviceBuffer::from_bytes_aligned(&slot, 16);
    sb.set_regions(&[0..2112]);
    let mut ob = DeviceBuffer::zeroed(i_rows * 4);
    p.dispatch("q4_gate_up_f32_small", &mut [&mut ab, &mut sb, &mut ob], [128, 2, 1], [128, 1, 1]).unwrap();
    let out = f32s(&ob);
    let word = |off: usize, r: usize, w: usize| {
        let o = off + (r * (h / 8) + w) * 4;
        u32::from_le_bytes(slot[o..o + 4].try_into().unwrap())
    };
    for r in 0..i_rows {
        let mut g = [None; 32];
        let mut u = [None; 32];
        for lane in 0..32 {
            let (mut ga, mut ua) = (0.0f32, 0.0f32);
            let mut w = lane;
            while w < h / 8 {
                let (gw, uw) = (word(0, r, w), word(1024, r, w));
                for k in 0..8 {
                    let a = act[w * 8 + k];
                    ga = (((gw >> (4 * k)) & 15) as f32 - 8.0).mul_add(a, ga);
                    ua = (((uw >> (4 * k)) & 15) as f32 - 8.0).mul_add(a, ua);
                }
                w += 32;
            }
            g[lane] = Some(ga);
            u[lane] = Some(ua);
        }
        let gate = tree(&g, -0.0, |a, b| a + b) * scales[r];
        let up = tree(&u, -0.0, |a, b| a + b) * scales[8 + r];
        let sig = 1.0f32 / (1.0 + (-gate).exp());
        let want = (gate * sig) * up;
        assert_eq!(out[r].to_bits(), want.to_bits(), "row {r}");
    }
}

#[test]
fn compile_errors_point_at_the_metal_line() {
    let src = "[[kernel]] void k(device float* x [[buffer(0)]]) {\n  float y = 1.0f\n  x[0] = undefined_name;\n}\n";
    // g++'s errors (the Metal check off: it finds them first).
    match unchecked_emulator().load(src, "bad.metal") {
        Err(e @ EmuError::Compile { .. }) => {
            let m = e.to_string();
            assert!(m.contains("bad.metal:3"), "{m}");
        }
        other => panic!("expected a compile error, got {:?}", other.map(|_| ())),
    }
    // The Metal check's, with the check on (the default).
    match emulator().load(src, "bad.metal") {
        Err(e @ EmuError::InvalidMetal { .. }) => {
            let m = e.to_string();
            assert!(m.contains("bad.metal:2:17: expected ';' at end of declaration"), "{m}");
        }
        other => panic!("expected the Metal check to fail, got {:?}", other.map(|_| ())),
    }
    // a construct the emulator rejects before compiling
    let src = "kernel void k(device float* x [[buffer(0)]], threadgroup float* t [[threadgroup(0)]]) {}\n";
    let e = emulator().load(src, "tgparam.metal").err().expect("rejected");
    assert!(matches!(e, EmuError::Compile { .. }) && e.to_string().contains("tgparam.metal:1"), "{e}");
}

#[test]
fn launch_errors() {
    let p = load(SEM, "semantics.metal");
    let mut a = DeviceBuffer::zeroed(64);
    let mut b = DeviceBuffer::zeroed(64);
    let e = p.dispatch("nope", &mut [&mut a], [1, 1, 1], [1, 1, 1]).unwrap_err();
    assert!(matches!(e, EmuError::Launch { .. }) && e.to_string().contains("nope"), "{e}");
    let e = p.dispatch("uninit_read", &mut [&mut a], [64, 1, 1], [64, 32, 1]).unwrap_err();
    assert!(e.to_string().contains("2048 threads"), "{e}");
    let e = p.dispatch("uninit_read", &mut [&mut a, &mut b], [16, 1, 1], [16, 1, 1]).unwrap_err();
    assert!(e.to_string().contains("1 expected"), "{e}");
    // MLX checks the unclamped threadgroup against 1024, even when the grid is smaller
    let e = p.dispatch("uninit_read", &mut [&mut a], [4, 1, 1], [2048, 1, 1]).unwrap_err();
    assert!(matches!(e, EmuError::Launch { .. }));
    // a zero grid runs nothing
    let st = p.dispatch("uninit_read", &mut [&mut a], [0, 1, 1], [16, 1, 1]).unwrap();
    assert_eq!(st.threads, 0);
    // 2^32 threadgroups and more: refused before anything runs (they were counted modulo
    // 2^32, so 2^32 of them ran none and reported success, and 2 * (2^32 - 1)^2 overflowed)
    for grid in [[65536, 65536, 1], [u32::MAX, u32::MAX, 2]] {
        let e = p.dispatch("uninit_read", &mut [&mut a], grid, [1, 1, 1]).unwrap_err();
        assert!(matches!(e, EmuError::Launch { .. }) && e.to_string().contains("at most 4294967295"), "{e}");
    }
}

#[test]
fn a_cache_hit_does_not_compile() {
    let dir = std::env::temp_dir().join(format!("kgemu-test-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let emu = Emulator::new(EmuOptions { cache_dir: Some(dir.clone()), ..Default::default() }).unwrap();
    let src = "[[kernel]] void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 2.0f; }\n";
    assert!(emu.load(src, "k.metal").unwrap().was_compiled());
    let p = emu.load(src, "k.metal").unwrap();
    assert!(!p.was_compiled());
    assert!(p.object_path().starts_with(&dir));
    let mut x = DeviceBuffer::zeroed(16);
    p.dispatch("k", &mut [&mut x], [4, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(f32s(&x), [2.0; 4]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn atomics_and_threadgroup_pointers() {
    let p = load(SEM, "semantics.metal");
    let mut acc = DeviceBuffer::zeroed(4);
    let mut count = DeviceBuffer::zeroed(8);
    p.dispatch("atomics", &mut [&mut acc, &mut count], [100, 1, 1], [32, 1, 1]).unwrap();
    assert_eq!(f32s(&acc), [4950.0]);
    assert_eq!(u32s(&count), [100, 99]);
    let mut out = DeviceBuffer::zeroed(64 * 4);
    p.run(&Dispatch::new("tg_pointer", [64, 1, 1], [64, 1, 1]).order(RunOrder::Reverse), &mut [&mut out]).unwrap();
    let o = f32s(&out);
    for t in 0..64 {
        assert_eq!(o[t], (32 + t % 32) as f32 + (63 - t) as f32, "thread {t}");
    }
}
