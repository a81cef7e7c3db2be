//! Helpers shared by the emulator tests.
#![allow(dead_code)]

use kernelgen_emu::{DeviceBuffer, EmuOptions, Emulator, Program};

pub fn emulator() -> Emulator {
    Emulator::new(EmuOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// An emulator without the Metal check, for tests of what g++ and the emulator itself report.
pub fn unchecked_emulator() -> Emulator {
    Emulator::new(EmuOptions { metal_check: false, ..EmuOptions::default() }).unwrap_or_else(|e| panic!("{e}"))
}

pub fn load(src: &str, name: &str) -> Program {
    emulator().load(src, name).unwrap_or_else(|e| panic!("{e}"))
}

/// The 1-based line of the first line of `src` containing `marker`.
pub fn line_of(src: &str, marker: &str) -> u32 {
    src.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("marker {marker} not found")) as u32 + 1
}

pub fn f32_buf(v: &[f32]) -> DeviceBuffer {
    DeviceBuffer::from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}
pub fn u32_buf(v: &[u32]) -> DeviceBuffer {
    DeviceBuffer::from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}
pub fn u16_buf(v: &[u16]) -> DeviceBuffer {
    DeviceBuffer::from_bytes(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}
pub fn f32s(b: &DeviceBuffer) -> Vec<f32> {
    b.as_bytes().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}
pub fn u32s(b: &DeviceBuffer) -> Vec<u32> {
    b.as_bytes().chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}
pub fn u16s(b: &DeviceBuffer) -> Vec<u16> {
    b.as_bytes().chunks(2).map(|c| u16::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// A float in [-1, 1) times 2^e for e in -8..8: magnitudes vary, so the summation
    /// order changes results.
    pub fn f32(&mut self) -> f32 {
        let m = (self.u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0;
        let e = (self.u32() % 16) as i32 - 8;
        m * 2f32.powi(e)
    }
}

/// The emulator's documented simd reduction: inactive lanes hold `ident`, then for
/// off = 16, 8, 4, 2, 1: v[i] = op(v[i], v[i + off]) for i < off; result v[0].
pub fn tree<T: Copy>(lanes: &[Option<T>; 32], ident: T, op: impl Fn(T, T) -> T) -> T {
    let mut v: Vec<T> = lanes.iter().map(|l| l.unwrap_or(ident)).collect();
    let mut off = 16;
    while off >= 1 {
        for i in 0..off {
            v[i] = op(v[i], v[i + off]);
        }
        off /= 2;
    }
    v[0]
}

/// A test of the module `module` (its `module_path!()`) as the test harness names it, for a
/// child process that runs exactly that test: `emu_bounds::name` (the crate is left out).
pub fn test_path(module: &str, name: &str) -> String {
    format!("{}::{name}", module.split_once("::").map_or(module, |(_, m)| m))
}

/// Run the test `name` of `module` (its `module_path!()`) alone in a child process of this
/// test binary with `envs` set, and assert that it passed: its stdout and stderr.
pub fn run_in_child(module: &str, name: &str, envs: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args([test_path(module, name).as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .envs(envs.iter().copied())
        .output()
        .expect("spawn the child");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success() && stdout.contains("1 passed"), "the child running {name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}", out.status);
    (stdout, stderr)
}
