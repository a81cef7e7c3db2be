"""`kernelgen emu` with include directories (-I), predefined macros (-D), function
constants (--function-constant) and int64 buffers, checked against numpy; and MLX's
own affine_qmv_fast from the mlx-metal wheel's headers (skipped when they have not
been fetched: crates/emu/tests/mlx-metal/fetch.sh, which `make test` runs)."""

import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kernelgen_paths import BIN, ROOT
MLX_INCLUDE = Path(os.environ.get("KERNELGEN_MLX_METAL_INCLUDE", ROOT / "target" / "mlx-metal" / "mlx-metal-0.32.2" / "include"))


def kernelgen(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)


HEADER = """\
#pragma once
// an instantiation macro, as MLX's defines.h has
#define INSTANTIATE(name, T) \\
  template [[host_name(#name)]] [[kernel]] decltype(strided<T>) strided<T>;
"""

SOURCE = """\
#include <metal_stdlib>
#include "helpers/inst.h"
using namespace metal;

constant bool use_bias [[function_constant(0)]];
constant float alpha [[function_constant(1)]];

template <typename T>
[[kernel]] void strided(
    const device T* x [[buffer(0)]],
    const constant int64_t* strides [[buffer(1)]],
    device T* y [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  T v = x[i * strides[0]] * SCALE;
  y[i] = use_bias ? T(v * alpha + 1.0f) : T(v * alpha);
}

INSTANTIATE(strided_float, float)
"""


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "inc" / "helpers").mkdir(parents=True)
    (tmp_path / "inc" / "helpers" / "inst.h").write_text(HEADER)
    (tmp_path / "k.metal").write_text(SOURCE)
    x = np.arange(64, dtype=np.float32) - 7
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "strides.npy", np.array([2], dtype=np.int64))
    return tmp_path


def run(tree, *extra):
    return kernelgen("emu", tree / "k.metal", "-I", tree / "inc", "--grid", "32,1,1", "--threadgroup", "32,1,1",
                     "--buffer", f"0={tree / 'x.npy'}", "--buffer", f"1={tree / 'strides.npy'}",
                     "--output", "2=float32:32", "--out", tree / "o", *extra)


def test_include_define_function_constants_and_int64_buffer(tree):
    r = run(tree, "-D", "SCALE=3.0f", "--function-constant", "0=true", "--function-constant", "1=0.5")
    assert r.returncode == 0, r.stderr
    x = np.load(tree / "x.npy")
    want = (x[::2][:32] * 3.0 * 0.5 + 1.0).astype(np.float32)
    np.testing.assert_array_equal(np.load(tree / "o" / "y.npy"), want)
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "0=false", "--function-constant", "1=2")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tree / "o" / "y.npy"), x[::2][:32] * 2.0)


def test_a_function_constant_without_a_value_does_not_compile_where_it_is_read(tree):
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "1=2")
    assert r.returncode == 2
    # the line that reads use_bias, and the constant named
    assert "k.metal:15" in r.stderr and "use_bias" in r.stderr and "--function-constant 0=VALUE" in r.stderr, r.stderr


def test_a_function_constant_of_the_wrong_kind_or_index_is_refused(tree):
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "0=3", "--function-constant", "1=2")
    assert r.returncode == 2 and "k.metal:5" in r.stderr and "use_bias" in r.stderr, r.stderr
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "0=true", "--function-constant", "1=2", "--function-constant", "7=1")
    assert r.returncode == 2 and "function constant 7" in r.stderr, r.stderr


def test_int64_strides_must_be_given_as_int64(tree):
    np.save(tree / "strides.npy", np.array([2], dtype=np.int32))
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "0=true", "--function-constant", "1=2")
    assert r.returncode == 2 and "int64_t" in r.stderr and "int32" in r.stderr, r.stderr
    np.save(tree / "strides.npy", np.array([2.0], dtype=np.float64))
    r = run(tree, "-D", "SCALE=1.0f", "--function-constant", "0=true", "--function-constant", "1=2")
    assert r.returncode == 2 and "no double" in r.stderr, r.stderr


def to_bf16_bits(x):
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.skipif(not (MLX_INCLUDE / "mlx/backend/metal/kernels/quantized.h").is_file(),
                    reason="MLX's Metal headers are not fetched (crates/emu/tests/mlx-metal/fetch.sh)")
def test_mlx_affine_qmv_fast_from_the_wheel_headers(tmp_path):
    """MLX's kernel through `kernelgen emu -I`, with MLX's int32 shape and int64 stride
    buffers (the batched instantiation), against a numpy dequantize-and-dot."""
    rng = np.random.default_rng(5)
    B, K, N, bits = 2, 512, 64, 4
    q = rng.integers(0, 16, size=(B, N, K), dtype=np.uint32)
    w = np.zeros((B, N, K // 8), dtype=np.uint32)
    for j in range(8):
        w |= q[:, :, j::8] << (4 * j)
    scales = to_bf16_bits(rng.uniform(-0.1, 0.1, size=(B, N, K // 64)))
    biases = to_bf16_bits(rng.uniform(-0.5, 0.5, size=(B, N, K // 64)))
    x = to_bf16_bits(rng.uniform(-1, 1, size=(B, 1, K)))
    files = {
        0: w, 1: scales, 2: biases, 3: x,
        5: np.array(K, dtype=np.int32), 6: np.array(N, dtype=np.int32),
        7: np.array(1, dtype=np.int32), 8: np.array([B, 1, K], dtype=np.int32),
        9: np.array([K, K, 1], dtype=np.int64),
        10: np.array(1, dtype=np.int32), 11: np.array([B, N, K // 8], dtype=np.int32),
        12: np.array([N * K // 8, K // 8, 1], dtype=np.int64),
        13: np.array([N * K // 64, K // 64, 1], dtype=np.int64),
        14: np.array([N * K // 64, K // 64, 1], dtype=np.int64),
    }
    args = []
    for i, a in files.items():
        np.save(tmp_path / f"b{i}.npy", a)
        args += ["--buffer", f"{i}={tmp_path / f'b{i}.npy'}"]
    tu = ROOT / "crates" / "emu" / "tests" / "mlx-metal" / "quantized.metal"
    # quantized.cpp: threadgroups of (32, 2, 1), grid (M, N / 8, B) threadgroups
    r = kernelgen("emu", tu, "-I", MLX_INCLUDE, "--kernel", "affine_qmv_fast_bfloat16_t_gs_64_b_4_batch_1",
                  "--grid", f"32,{N // 8 * 2},{B}", "--threadgroup", "32,2,1", *args,
                  "--output", f"4=bfloat16:{B},1,{N}", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    y = from_bf16_bits(np.load(tmp_path / "o" / "y.npy")).astype(np.float64)
    deq = (from_bf16_bits(scales).astype(np.float64).repeat(64, axis=2) * q
           + from_bf16_bits(biases).astype(np.float64).repeat(64, axis=2))
    want = np.einsum("bmk,bnk->bmn", from_bf16_bits(x).astype(np.float64), deq)
    np.testing.assert_allclose(y, want, rtol=2e-2, atol=2e-2)
