#!/usr/bin/env bash
# Builds the GPU lane's bundle on this machine (Linux x86-64): the `kernelgen` CLI and the MLX
# lane's test binaries with the feature `mlx`, built as the MLX lane builds them (against the
# CPU wheel mlx-cpu, mlx/setup.sh), and MLX's CUDA build of the same version (the PyPI wheel
# mlx-cuda-13), whose libmlx.so they load where it runs. Everything goes to target/gpu/bundle/
# (or $KERNELGEN_GPU_BUNDLE); `make test-gpu` (gpu/run.sh) runs it on a machine with an NVIDIA
# GPU. Nothing here needs a GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# The same MLX as the lane's mlx-cpu (mlx/setup.sh): one C++ API, so a binary built against
# one loads the other.
MLX_VERSION="${MLX_CPU_VERSION:-0.32.2}"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"
say() { printf 'gpu/build.sh: %s\n' "$*" >&2; }

bash mlx/setup.sh

# 1. The binaries: the CLI, make bench-gpu's harness (gpu/bench.rs) and the tests that launch
#    through MLX (tests/mlx_*.rs but the emulator's comparison with MLX's quantizer, which needs
#    g++ and runs in make test-mlx). The harness is a release build, as a user's model would be:
#    a launcher's checks take about seven times as long unoptimized (6.6 us against 0.9 a launch
#    of an affine kernel), which a benchmark of launches must not count.
lane=(--features mlx --config mlx/cargo-config.toml)
status=0
"$CARGO" build -p kernelgen-cli "${lane[@]}" || status=$?
((status == 0)) && { "$CARGO" build --release --example bench_gpu "${lane[@]}" || status=$?; }
tests=()
if ((status == 0)); then
    mapfile -t tests < <("$CARGO" test "${lane[@]}" --test mlx_backend --test mlx_conformance --no-run --message-format=json \
        | "$PYTHON" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"] + " " + m["executable"])') || status=$?
fi
# As make test-mlx does: cargo put the path copy of mlx-sys in Cargo.lock; put it back.
"$CARGO" metadata --offline --format-version 1 --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" >/dev/null
((status == 0)) || exit "$status"

rm -rf "$BUNDLE.tmp"
mkdir -p "$BUNDLE.tmp/bin" "$BUNDLE.tmp/tests"
# without debug information: a tenth of the size, and nothing a run needs
objcopy --strip-debug target/debug/kernelgen "$BUNDLE.tmp/bin/kernelgen"
objcopy --strip-debug target/release/examples/bench_gpu "$BUNDLE.tmp/bin/bench_gpu"
for t in "${tests[@]}"; do
    objcopy --strip-debug "${t#* }" "$BUNDLE.tmp/tests/${t%% *}"
done

# 2. MLX's CUDA build, its layout kept (libmlx.so finds mlx_cuda_13.libs through its rpath,
#    and nvrtc compiles custom kernels against mlx/include beside mlx/lib).
wheels="$ROOT/target/gpu/wheel"
wheel=("$wheels"/mlx_cuda_13-"$MLX_VERSION"-*.whl)
if [[ ! -f ${wheel[0]} ]]; then
    say "fetching mlx-cuda-13==$MLX_VERSION from PyPI"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform manylinux_2_35_x86_64 -d "$wheels" "mlx-cuda-13==$MLX_VERSION"
    wheel=("$wheels"/mlx_cuda_13-"$MLX_VERSION"-*.whl)
fi
"$PYTHON" -m zipfile -e "${wheel[0]}" "$BUNDLE.tmp/mlx-cuda"
rm -rf "$BUNDLE.tmp/mlx-cuda"/*.dist-info
# its symbol table is two fifths of the file; the dynamic symbols stay
strip --strip-all "$BUNDLE.tmp/mlx-cuda/mlx/lib/libmlx.so"
echo "$MLX_VERSION" > "$BUNDLE.tmp/mlx-cuda/VERSION"
# what the binaries were built from, for the run's record
git -C "$ROOT" describe --always --dirty > "$BUNDLE.tmp/COMMIT" 2>/dev/null || echo unknown > "$BUNDLE.tmp/COMMIT"

rm -rf "$BUNDLE"
mv "$BUNDLE.tmp" "$BUNDLE"
say "ready: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1)); run it with make test-gpu where the GPU is"
