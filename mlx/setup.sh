#!/usr/bin/env bash
# Prepares the `mlx` feature's build on Linux: Debian's build tools,
# the CPU build of MLX from the PyPI wheel mlx-cpu, and a patched copy of
# mlx-sys taken from cargo's registry cache. Idempotent: each step is skipped
# when its result is already in place. Everything goes under target/mlx/ (or
# $KERNELGEN_MLX_LANE_DIR), which mlx/cargo-config.toml points at.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MLX_CPU_VERSION="${MLX_CPU_VERSION:-0.32.2}"
LANE="${KERNELGEN_MLX_LANE_DIR:-$ROOT/target/mlx}"
WHEEL_DIR="$LANE/mlx-cpu"
SYS_DIR="$LANE/mlx-sys"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"

say() { printf 'mlx/setup.sh: %s\n' "$*" >&2; }
# shellcheck source=mlx/mlx-sys.sh
source "$ROOT/mlx/mlx-sys.sh"

# 1. Debian packages: cmake builds mlx-c, clang/libclang run bindgen.
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
command -v patch >/dev/null || missing+=(patch)
dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q 'install ok installed' || missing+=(libclang-dev)
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    SUDO=""
    [[ $(id -u) == 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$LANE"

# 2. The wheel, unpacked with its layout kept (libmlx.so finds its bundled
#    BLAS/LAPACK in ../../mlx_cpu.libs through its rpath).
stamp="$WHEEL_DIR/.kernelgen-mlx-cpu-$MLX_CPU_VERSION"
if [[ ! -f $stamp ]]; then
    say "fetching mlx-cpu==$MLX_CPU_VERSION from PyPI"
    rm -rf "$WHEEL_DIR" "$LANE/wheel"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: -d "$LANE/wheel" "mlx-cpu==$MLX_CPU_VERSION"
    wheel=("$LANE"/wheel/mlx_cpu-"$MLX_CPU_VERSION"-*.whl)
    "$PYTHON" -m zipfile -e "${wheel[0]}" "$WHEEL_DIR.tmp"
    mv "$WHEEL_DIR.tmp" "$WHEEL_DIR"
    rm -rf "$LANE/wheel"
    touch "$stamp"
fi
test -f "$WHEEL_DIR/mlx/lib/libmlx.so"

# 3. mlx-sys from cargo's registry cache, patched (mlx/mlx-sys.sh).
if mlx_sys_stale "$SYS_DIR"; then
    # Without the opt-in configuration this also puts Cargo.lock back on the
    # registry's mlx-sys if a previous patched build rewrote it. Only the
    # host's packages: the lock also names every other platform's.
    host="$(rustc -vV | sed -n 's/^host: //p')"
    "$CARGO" fetch --quiet --target "$host"
    mlx_sys_patch "$SYS_DIR"
fi
say "ready: $LANE"
