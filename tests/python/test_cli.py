"""`kernelgen run` and `kernelgen emu` against independent numpy references,
on geometries and kernels that are not in the repo."""

import subprocess
import textwrap

import numpy as np
import pytest

from kernelgen_paths import BIN


def kernelgen(*args, cwd=None):
    return subprocess.run([BIN, *map(str, args)], cwd=cwd, capture_output=True, text=True)


def to_bf16_bits(x):
    """float32 -> bfloat16 bits (round to nearest even), as numpy has no bfloat16."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


# An expert geometry that no bundled spec has, with an explicit slot layout.
H, I = 320, 96
LAYOUT = dict(gate_weights=0, up_weights=32768, down_weights=65536, gate_scales=98304, up_scales=99328, down_scales=100352, bytes=114688)


def expert_spec(tmp_path, quant, dtype):
    specs = tmp_path / "specs"
    specs.mkdir()
    slot = "\n".join(f"{k} = {v}" for k, v in LAYOUT.items())
    (specs / "mine.toml").write_text(textwrap.dedent(f"""\
        family = "expert"
        [axes]
        quant = ["{quant}"]
        dtype = ["{dtype}"]
        [geometry.mine]
        hidden = {H}
        intermediate = {I}
        [geometry.mine.slot.{quant}]
        """) + slot + "\n")
    return specs


def make_slot(rng, quant):
    """Random weights packed at LAYOUT, and the same weights as float64 matrices."""
    slot = np.zeros(LAYOUT["bytes"], dtype=np.uint8)
    mats = {}
    for name, rows, cols in (("gate", I, H), ("up", I, H), ("down", H, I)):
        if quant == "q8":
            q = rng.integers(-128, 128, size=(rows, cols)).astype(np.int8)
            raw = q.view(np.uint8).reshape(-1)
        else:
            nib = rng.integers(0, 16, size=(rows, cols)).astype(np.uint8)
            q = nib.astype(np.int8) - 8
            raw = (nib[:, 0::2] | (nib[:, 1::2] << 4)).reshape(-1)  # two per byte, low nibble first
        off = LAYOUT[f"{name}_weights"]
        slot[off:off + raw.size] = raw
        scales = (rng.random(rows) * 0.01 + 0.005).astype(np.float32)
        off = LAYOUT[f"{name}_scales"]
        slot[off:off + 4 * rows] = scales.view(np.uint8)
        mats[name] = q.astype(np.float64) * scales.astype(np.float64)[:, None]
    return slot, mats


@pytest.mark.parametrize("quant", ["q4", "q8"])
def test_run_expert_f32_matches_numpy(tmp_path, quant):
    rng = np.random.default_rng(7)
    specs = expert_spec(tmp_path, quant, "f32")
    slot, W = make_slot(rng, quant)
    x = rng.standard_normal((3, H)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "slot.npy", slot)
    name = f"mine_expert_{quant}_f32_r4"
    r = kernelgen("run", f"{name}_gate_up", "--specs", specs, "--input", f"x={tmp_path / 'x.npy'}",
                  "--input", f"slot={tmp_path / 'slot.npy'}", "--out", tmp_path / "o1")
    assert r.returncode == 0, r.stderr
    mid = np.load(tmp_path / "o1" / "mid.npy")
    gate, up = W["gate"] @ x.T.astype(np.float64), W["up"] @ x.T.astype(np.float64)
    want_mid = (gate / (1 + np.exp(-gate)) * up).T
    np.testing.assert_allclose(mid, want_mid, rtol=1e-4, atol=1e-5)

    r = kernelgen("run", f"{name}_down", "--specs", specs, "--input", f"mid={tmp_path / 'o1' / 'mid.npy'}",
                  "--input", f"slot={tmp_path / 'slot.npy'}", "--size", "M=3", "--out", tmp_path / "o2")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "o2" / "out.npy")
    np.testing.assert_allclose(out, (W["down"] @ mid.T.astype(np.float64)).T, rtol=1e-4, atol=1e-5)


def test_run_expert_bf16_as_uint16_matches_numpy(tmp_path):
    rng = np.random.default_rng(8)
    specs = expert_spec(tmp_path, "q4", "bf16")
    slot, W = make_slot(rng, "q4")
    x_bits = to_bf16_bits(rng.standard_normal((2, H)))
    np.save(tmp_path / "x.npy", x_bits)
    np.save(tmp_path / "slot.npy", slot)
    r = kernelgen("run", "mine_expert_q4_bf16_r4_gate_up", "--specs", specs, "--input", f"x={tmp_path / 'x.npy'}",
                  "--input", f"slot={tmp_path / 'slot.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    mid = np.load(tmp_path / "o" / "mid.npy")
    assert mid.dtype == np.uint16
    x = from_bf16_bits(x_bits).astype(np.float64)
    gate, up = W["gate"] @ x.T, W["up"] @ x.T
    want = (gate / (1 + np.exp(-gate)) * up).T
    # bf16 keeps 8 significant bits; the kernel rounds at five points.
    np.testing.assert_allclose(from_bf16_bits(mid), want, rtol=4 * 2.0**-8, atol=1e-3)


def test_run_rejects_a_wrong_shape_and_runs_nothing(tmp_path):
    specs = expert_spec(tmp_path, "q8", "f32")
    np.save(tmp_path / "x.npy", np.zeros((2, H + 1), dtype=np.float32))
    np.save(tmp_path / "slot.npy", np.zeros(LAYOUT["bytes"], dtype=np.uint8))
    r = kernelgen("run", "mine_expert_q8_f32_r4_gate_up", "--specs", specs, "--input", f"x={tmp_path / 'x.npy'}",
                  "--input", f"slot={tmp_path / 'slot.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 2
    assert "mine_expert_q8_f32_r4_gate_up" in r.stderr and "`x`" in r.stderr and f"[2, {H}]" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()
    np.save(tmp_path / "x.npy", np.zeros((2, H), dtype=np.float16))
    r = kernelgen("run", "mine_expert_q8_f32_r4_gate_up", "--specs", specs, "--input", f"x={tmp_path / 'x.npy'}",
                  "--input", f"slot={tmp_path / 'slot.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 2 and "dtype f32" in r.stderr, r.stderr


TEMPLATED = """\
#include <metal_stdlib>
using namespace metal;

// A helper template in the header, as MLX users write them.
template <typename T>
inline float squared(T v) { return float(v) * float(v); }

template <int N, typename T>
[[kernel]] void custom_kernel_rms(
  const device T* x [[buffer(0)]],
  device T* y [[buffer(1)]],
  uint3 threadgroup_position_in_grid [[threadgroup_position_in_grid]],
  uint thread_index_in_threadgroup [[thread_index_in_threadgroup]],
  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],
  uint thread_index_in_simdgroup [[thread_index_in_simdgroup]]) {
  threadgroup float partial[4];
  threadgroup float inv[1];
  const uint row = threadgroup_position_in_grid.x;
  float acc = 0.0f;
  for (uint i = thread_index_in_threadgroup; i < (uint)N; i += 128u) acc += squared(x[row * N + i]);
  acc = simd_sum(acc);
  if (thread_index_in_simdgroup == 0) partial[simdgroup_index_in_threadgroup] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (thread_index_in_threadgroup == 0)
    inv[0] = metal::precise::rsqrt((partial[0] + partial[1] + partial[2] + partial[3]) / float(N) + 1e-5f);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = thread_index_in_threadgroup; i < (uint)N; i += 128u) y[row * N + i] = T(float(x[row * N + i]) * inv[0]);
}

template [[host_name("rms_384_float")]] [[kernel]] decltype(custom_kernel_rms<384, float>) custom_kernel_rms<384, float>;
template [[host_name("rms_384_half")]] [[kernel]] decltype(custom_kernel_rms<384, half>) custom_kernel_rms<384, half>;

// Reverses each 64-value block through threadgroup memory.
[[kernel]] void reverse_blocks(
  const device int32_t* x [[buffer(0)]],
  device int32_t* y [[buffer(1)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]],
  uint3 thread_position_in_threadgroup [[thread_position_in_threadgroup]]) {
  threadgroup int32_t block[64];
  const uint t = thread_position_in_threadgroup.x;
  block[t] = x[thread_position_in_grid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[thread_position_in_grid.x] = block[63 - t];
}
"""


@pytest.fixture
def templated(tmp_path):
    path = tmp_path / "k.metal"
    path.write_text(TEMPLATED)
    return path


@pytest.mark.parametrize("kernel,dtype,npdtype", [("rms_384_float", "float32", np.float32), ("rms_384_half", "f16", np.float16)])
def test_emu_templated_kernel_matches_numpy(tmp_path, templated, kernel, dtype, npdtype):
    x = np.random.default_rng(3).standard_normal((5, 384)).astype(npdtype)
    np.save(tmp_path / "x.npy", x)
    r = kernelgen("emu", templated, "--kernel", kernel, "--grid", "640,1,1", "--threadgroup", "128,1,1",
                  "--buffer", f"0={tmp_path / 'x.npy'}", "--output", f"1={dtype}:5,384", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "o" / "y.npy")
    assert y.dtype == npdtype and y.shape == (5, 384)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-5)
    tol = 1e-5 if npdtype == np.float32 else 2e-3
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


def test_emu_threadgroup_memory_and_barrier_exact(tmp_path, templated):
    x = np.arange(256, dtype=np.int32) * 3 - 100
    np.save(tmp_path / "x.npy", x)
    r = kernelgen("emu", templated, "--kernel", "reverse_blocks", "--grid", "256,1,1", "--threadgroup", "64,1,1",
                  "--buffer", f"0={tmp_path / 'x.npy'}", "--output", "1=int32:256", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "y.npy"), x.reshape(4, 64)[:, ::-1].reshape(-1))


def test_emu_reports_usage_errors(tmp_path, templated):
    r = kernelgen("emu", templated, "--grid", "64,1,1", "--threadgroup", "64,1,1", "--out", tmp_path / "o")
    assert r.returncode == 2 and "several kernels" in r.stderr, r.stderr
    r = kernelgen("emu", templated, "--kernel", "reverse_blocks", "--grid", "64,1,1", "--threadgroup", "64,1,1",
                  "--output", "1=int32:64", "--out", tmp_path / "o")
    assert r.returncode == 2 and "buffer(0)" in r.stderr, r.stderr
    r = kernelgen("emu", templated, "--kernel", "reverse_blocks", "--grid", "64,1,1", "--threadgroup", "64,1,1",
                  "--buffer", f"0={tmp_path / 'missing.npy'}", "--output", "1=int99:64", "--out", tmp_path / "o")
    assert r.returncode == 2, r.stderr
