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
say() { printf 'gpu/run.sh: %s\n' "$*" >&2; }

if [[ ! -x $BUNDLE/bin/kernelgen || ! -f $BUNDLE/mlx-cuda/mlx/lib/libmlx.so ]]; then
    say "no bundle at $BUNDLE: build it with make gpu-build (on a Linux machine with pip and cargo)"
    exit 2
fi
# MLX's CUDA build first (the binaries load libmlx.so by name), then the CUDA libraries.
cuda_libs="$("$PYTHON" - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
print(":".join(sorted({d for r in roots for d in glob.glob(os.path.join(r, "nvidia", "*", "lib")) + glob.glob(os.path.join(r, "nvidia", "*", "*", "lib"))})))
PY
)"
export LD_LIBRARY_PATH="$BUNDLE/mlx-cuda/mlx/lib${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "---- the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "MLX $(cat "$BUNDLE/mlx-cuda/VERSION") (mlx-cuda-13), kernelgen built from $(cat "$BUNDLE/COMMIT" 2>/dev/null || echo '(unknown)')"

status=0
for t in "$BUNDLE"/tests/*; do
    echo "---- $(basename "$t")"
    "$t" --test-threads=1 || status=1
done
echo "---- kernelgen verify --backend mlx"
"$BUNDLE/bin/kernelgen" verify --backend mlx "$@" || status=1
exit "$status"
