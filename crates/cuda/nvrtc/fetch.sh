#!/usr/bin/env bash
# Fetches what `make check-cuda` compiles with, at pinned versions, from PyPI, into DEST (default
# target/nvrtc of the workspace), never committed:
#   - nvrtc 13.0 (nvidia-cuda-nvrtc), the compiler MLX's CUDA backend runs on a kernel source,
#     and CUDA 13.0's headers (nvidia-cuda-runtime: cuda_fp16.h, cuda_bf16.h, cooperative_groups);
#   - MLX 0.32.2's CUDA build (mlx-cuda-13): the CCCL headers it ships (mlx/include/cccl), its
#     config.h, and the two headers MLX compiles into libmlx.so and hands nvrtc by name with every
#     custom kernel (mlx/backend/cuda/device/utils.cuh and complex.cuh, which utils.cuh
#     includes). No package ships those two as files: they are read out of libmlx.so, where they
#     are NUL-terminated strings, each recognised by what it declares (extract_jit_headers.py).
# Idempotent: nothing is downloaded when the stamp of these versions is there. Usage: fetch.sh [DEST]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
NVRTC_VERSION=13.0.88
CUDA_RUNTIME_VERSION=13.0.96
MLX_VERSION="${MLX_CPU_VERSION:-0.32.2}"
DEST="${1:-${KERNELGEN_NVRTC_DIR:-$ROOT/target/nvrtc}}"
PYTHON="${PYTHON:-python3}"
STAMP="$DEST/.kernelgen-nvrtc-$NVRTC_VERSION-cuda-$CUDA_RUNTIME_VERSION-mlx-$MLX_VERSION"

say() { printf 'nvrtc/fetch.sh: %s\n' "$*" >&2; }

if [[ -f $STAMP ]]; then
    exit 0
fi
mkdir -p "$DEST"
tmp="$(mktemp -d "$DEST/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "fetching nvidia-cuda-nvrtc==$NVRTC_VERSION, nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION, mlx-cuda-13==$MLX_VERSION from PyPI (about 180 MB)"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_35_x86_64 -d "$tmp/wheels" \
    "nvidia-cuda-nvrtc==$NVRTC_VERSION" "nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION" "mlx-cuda-13==$MLX_VERSION"
"$PYTHON" - "$tmp/wheels" "$tmp/out" <<'PY'
import glob, os, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
def extract(pattern, keep):
    (wheel,) = glob.glob(os.path.join(wheels, pattern))
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if keep(n) and not n.endswith("/")]
        if not names:
            sys.exit(f"{wheel}: nothing to extract")
        for n in names:
            z.extract(n, out)
extract("nvidia_cuda_nvrtc-*.whl", lambda n: n.startswith("nvidia/cu13/lib/libnvrtc"))
extract("nvidia_cuda_runtime-*.whl", lambda n: n.startswith("nvidia/cu13/include/"))
extract("mlx_cuda_13-*.whl", lambda n: n.startswith(("mlx/include/cccl/", "mlx/include/mlx/backend/cuda/device/")) or n == "mlx/lib/libmlx.so")
PY
"$PYTHON" "$ROOT/crates/cuda/nvrtc/extract_jit_headers.py" "$tmp/out/mlx/lib/libmlx.so" "$tmp/out/mlx/include"
rm -f "$tmp/out/mlx/lib/libmlx.so"
rm -rf "$DEST/nvidia" "$DEST/mlx"
mv "$tmp/out/nvidia" "$tmp/out/mlx" "$DEST/"
touch "$STAMP"
say "ready: $DEST"
