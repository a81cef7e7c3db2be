//! `kernelgen emu FILE.cu`: a CUDA kernel as MLX's cuda_kernel assembles one, run in whole
//! blocks with its .npy inputs typed by CUDA's names, its dynamic shared memory from
//! `--shared-memory`; the Metal-only options refused for it, and its front end's refusals; a Metal
//! kernel's `--threadgroup-memory`.

use std::path::Path;
use std::process::Command;

/// A block reverses its slice of `x` through dynamic shared memory and doubles it.
const REVERSE: &str = "
#include \"mlx/backend/cuda/device/utils.cuh\"

#include <cooperative_groups.h>

// kernelgen test: reverse each block's slice through extern __shared__
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_reverse(
    const __half* x,
    float* y) {
  extern __shared__ float buf[];
  uint32_t t = threadIdx.x;
  uint32_t base = blockIdx.x * blockDim.x;
  buf[t] = __half2float(x[base + t]);
  __syncthreads();
  y[base + t] = 2.0f * buf[blockDim.x - 1 - t];
}

} // namespace mlx::core::cu
";

fn kernelgen(dir: &Path, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir).args(args).output().expect("kernelgen runs");
    (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// A 1-D .npy of `descr` with `data`'s bytes.
fn write_npy(path: &Path, descr: &str, n: usize, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

fn read_f32_npy(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// 0.5, 1, 2, ..., 7 as float16 bits.
const HALVES: [u16; 8] = [0x3800, 0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700];

#[test]
fn a_cu_file_runs_in_whole_blocks_with_its_dynamic_shared_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reverse.cu"), REVERSE).unwrap();
    let x: Vec<u8> = HALVES.iter().flat_map(|h| h.to_le_bytes()).collect();
    write_npy(&dir.path().join("x.npy"), "<f2", 8, &x);
    let base = ["emu", "reverse.cu", "--grid", "6,1,1", "--threadgroup", "4,1,1", "--buffer", "0=x.npy", "--output", "1=float32:8"];
    let (code, text) = kernelgen(dir.path(), &[&base[..], &["--out", "o", "--shared-memory", "16"]].concat());
    assert_eq!(code, 0, "{text}");
    // a grid of 6 threads in blocks of 4 is two whole blocks, 8 threads (Metal would run 6)
    assert!(text.contains("custom_kernel_reverse: 8 threads in 2 threadgroups"), "{text}");
    assert_eq!(read_f32_npy(&dir.path().join("o/y.npy")), [6.0, 4.0, 2.0, 1.0, 14.0, 12.0, 10.0, 8.0]);
    // without its dynamic shared memory the block writes past an empty array
    let (code, text) = kernelgen(dir.path(), &[&base[..], &["--out", "o2"]].concat());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`buf`") && text.contains("reverse.cu"), "{text}");
    assert!(!dir.path().join("o2").exists(), "no output written");
    // a float32 file where the kernel declares __half
    write_npy(&dir.path().join("xf.npy"), "<f4", 8, &[0u8; 32]);
    let (code, text) = kernelgen(dir.path(), &["emu", "reverse.cu", "--grid", "8,1,1", "--threadgroup", "4,1,1", "--buffer", "0=xf.npy", "--output", "1=float32:8", "--out", "o3"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("buffer(0) `x` (__half) is declared __half, given float32"), "{text}");
}

#[test]
fn metal_options_and_what_a_kernel_may_not_do_are_refused_for_a_cu_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reverse.cu"), REVERSE).unwrap();
    std::fs::write(dir.path().join("k.metal"), "[[kernel]] void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]]) { a[i] = 1.0f; }\n").unwrap();
    let run = |file: &str, extra: &[&str]| {
        let args = [&["emu", file, "--grid", "4,1,1", "--threadgroup", "4,1,1", "--output", "0=float32:4", "--out", "o"][..], extra].concat();
        kernelgen(dir.path(), &args)
    };
    let cases: [(&str, &[&str], &str); 4] = [
        ("reverse.cu", &["--function-constant", "0=1"], "function constants are Metal's; a CUDA source has none"),
        ("reverse.cu", &["-I", "."], "a CUDA source includes only MLX's headers"),
        ("k.metal", &["--shared-memory", "16"], "--shared-memory is a CUDA launch's"),
        ("asm.cu", &[], "asm.cu:14: `asm`: inline assembly is not allowed"),
    ];
    std::fs::write(dir.path().join("asm.cu"), REVERSE.replace("  extern __shared__ float buf[];", "  asm(\"int3\");")).unwrap();
    for (file, extra, words) in cases {
        let (code, text) = run(file, extra);
        assert_eq!(code, 2, "{file} {extra:?}: {text}");
        assert!(text.contains(words), "{file} {extra:?}: expected `{words}`: {text}");
        assert!(!dir.path().join("o").exists());
    }
}

/// A Metal kernel's `[[threadgroup(0)]]` parameter takes its size from `--threadgroup-memory`.
#[test]
fn a_metal_threadgroup_parameter_takes_its_size_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <metal_stdlib>\nusing namespace metal;\n\
        kernel void rev(device float* y [[buffer(0)]], threadgroup float* t [[threadgroup(0)]], uint i [[thread_index_in_threadgroup]]) {\n\
          t[i] = float(i);\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n  y[i] = t[3 - i];\n}\n";
    std::fs::write(dir.path().join("rev.metal"), src).unwrap();
    let base = [
        "emu",
        "rev.metal",
        "--grid",
        "4,1,1",
        "--threadgroup",
        "4,1,1",
        "--output",
        "0=float32:4",
    ];
    let (code, text) = kernelgen(
        dir.path(),
        &[&base[..], &["--out", "o", "--threadgroup-memory", "0=16"]].concat(),
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        read_f32_npy(&dir.path().join("o/y.npy")),
        [3.0, 2.0, 1.0, 0.0]
    );
    for (extra, want) in [
        (&[][..], "`t` [[threadgroup(0)]] needs a size"),
        (
            &[
                "--threadgroup-memory",
                "0=16",
                "--threadgroup-memory",
                "0=32",
            ][..],
            "given twice",
        ),
        (
            &[
                "--threadgroup-memory",
                "0=16",
                "--threadgroup-memory",
                "1=16",
            ][..],
            "index 1, which the kernel does not declare",
        ),
    ] {
        let (code, text) = kernelgen(dir.path(), &[&base[..], &["--out", "o2"], extra].concat());
        assert_eq!(code, 2, "{text}");
        assert!(text.contains(want), "{want}: {text}");
        assert!(!dir.path().join("o2").exists(), "no output written");
    }
}
