# Sourced by gpu/run.sh and gpu/bench.sh: the bundle's MLX CUDA build first on LD_LIBRARY_PATH
# (the binaries load libmlx.so by name), then the CUDA 13 libraries of the nvidia-* wheels.
# Needs ROOT, BUNDLE and PYTHON set.
if [[ ! -x $BUNDLE/bin/kernelgen || ! -f $BUNDLE/mlx-cuda/mlx/lib/libmlx.so ]]; then
    printf '%s: no bundle at %s: build it with make gpu-build (on a Linux machine with pip and cargo)\n' "$0" "$BUNDLE" >&2
    exit 2
fi
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
