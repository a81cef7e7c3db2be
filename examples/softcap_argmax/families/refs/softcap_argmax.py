"""numpy reference of the softcap_argmax family (softcap_argmax.toml, [verify]).

`kernelgen verify` calls `reference` with keyword arguments: each input by its
buffer name as a numpy array of its contract shape (bf16 as float32 holding
bf16 values, numpy having no bfloat16), each run-time size by its name, and
`params`, the kernel's axis values and fields (params["dtype"] == "bf16",
params["V"], params["cap"]). It returns {output name: array}.

The kernel mirrors MLX's unfused `mx.argmax(mx.tanh(x / cap) * cap, -1)` in
dtype T, so this does too, one rounding at a time:
    capT   = T(f32(cap))                  # a Python float scalar becomes a T scalar
    scaled = T(f32(x) / f32(capT))        # each op computes in f32, rounds to T
    t      = T(tanhf(scaled))
    s      = T(f32(t) * f32(capT))
then the first index of the largest s (a NaN never wins; a row of NaNs only
gives index 0 and -inf), and that s.

tanh is the C library's tanhf, the one the emulator runs: argmax is
discontinuous, so a tanh one ulp off could move the argmax between two
near-equal logits, and integer outputs are compared exactly. (For bf16 and f16
that choice does not matter at these caps: on every one of the 65536 inputs,
glibc's tanhf and a correctly rounded tanh give the same s. For f32 they differ
by up to 2 ulps on about a fifth of the inputs in [-3, 3].) Without a C
library, tanh falls back to float64 tanh rounded to f32.
"""

import ctypes
import ctypes.util

import numpy as np


def _load_tanhf():
    for name in (ctypes.util.find_library("m"), None):
        try:
            f = ctypes.CDLL(name).tanhf
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_float
        f.argtypes = [ctypes.c_float]
        return f
    return None


_TANHF = _load_tanhf()


def tanh_f32(a):
    """tanhf of each float32 value, as float32."""
    a = np.asarray(a, dtype=np.float32)
    if _TANHF is None:
        return np.tanh(a.astype(np.float64)).astype(np.float32)
    # One call per distinct value (at most 65536 of them for bf16 and f16).
    values, where = np.unique(a, return_inverse=True)
    out = np.array([_TANHF(float(v)) for v in values], dtype=np.float32)
    return out[where].reshape(a.shape)


def round_bf16(a):
    """float32 -> nearest bf16 (ties to even), as float32; NaN stays NaN."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), out)


def round_to(dtype, a):
    """float32 values rounded to `dtype`, returned as float32."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "f32":
        return a
    if dtype == "f16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(a)
    raise ValueError(f"softcap_argmax has no dtype {dtype!r}")


def reference(*, logits, R, params):
    dtype = params["dtype"]
    V = params["V"]
    x = np.asarray(logits, dtype=np.float32)
    assert x.shape == (R, V), (x.shape, R, V)
    with np.errstate(over="ignore", invalid="ignore"):
        cap_t = round_to(dtype, np.float32(params["cap"]))
        scaled = round_to(dtype, x / cap_t)
        t = round_to(dtype, tanh_f32(scaled))
        s = round_to(dtype, t * cap_t)
    # NaN never wins: as -inf it loses to every softcapped value (all finite).
    ranked = np.where(np.isnan(s), np.float32(-np.inf), s)
    token = np.argmax(ranked, axis=1).astype(np.uint32)  # the first index of the maximum
    value = ranked[np.arange(R), token]
    return {
        "token": token,
        "value": value.astype(np.float16) if dtype == "f16" else value.astype(np.float32),
    }
