#!/usr/bin/env bash
# The GPU lane (`make test-gpu`), run where MLX's CUDA build has an NVIDIA GPU, from the bundle
# gpu/build.sh made (target/gpu/bundle/, or $KERNELGEN_GPU_BUNDLE): the MLX lane's tests
# (the conformance suite with values compared, the lazy chains evaluated once, the backend's
# own tests), then `kernelgen verify --backend mlx` over every kernel of the catalog through
# the typed launch path. Needs python3 with the CUDA 13 libraries of the nvidia-* wheels
# (PyTorch for CUDA 13 brings them); builds nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
PYTHON="${PYTHON:-python3}"

source "$ROOT/gpu/env.sh"

status=0
for t in "$BUNDLE"/tests/*; do
    echo "---- $(basename "$t")"
    "$t" --test-threads=1 || status=1
done
echo "---- kernelgen verify --backend mlx"
"$BUNDLE/bin/kernelgen" verify --backend mlx "$@" || status=1
exit "$status"
