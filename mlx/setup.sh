#!/usr/bin/env bash
# Prepares the `mlx` feature's build on Linux (issue 5): Debian's build tools,
# the CPU build of MLX from the PyPI wheel mlx-cpu, and a patched copy of
# mlx-sys taken from cargo's registry cache. Idempotent: each step is skipped
# when its result is already in place. Everything goes under target/mlx/ (or
# $KERNELGEN_MLX_LANE_DIR), which mlx/cargo-config.toml points at.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MLX_CPU_VERSION="${MLX_CPU_VERSION:-0.32.2}"
MLX_SYS_VERSION="0.7.0"
LANE="${KERNELGEN_MLX_LANE_DIR:-$ROOT/target/mlx}"
WHEEL_DIR="$LANE/mlx-cpu"
SYS_DIR="$LANE/mlx-sys"
PATCH="$ROOT/mlx/mlx-sys.patch"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"

say() { printf 'mlx/setup.sh: %s\n' "$*" >&2; }

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

# 3. mlx-sys from cargo's registry cache, patched. The stamp holds the patch's
#    hash, so a changed patch is applied to a fresh copy.
patch_hash="$(sha256sum "$PATCH" | cut -d' ' -f1)"
stamp="$SYS_DIR/.kernelgen-patch"
if [[ ! -f $stamp || $(cat "$stamp") != "$patch_hash" ]]; then
    # Without the opt-in configuration this also puts Cargo.lock back on the
    # registry's mlx-sys if a previous patched build rewrote it. Only the
    # host's packages: the lock also names every other platform's.
    host="$(rustc -vV | sed -n 's/^host: //p')"
    "$CARGO" fetch --quiet --target "$host"
    cargo_home="${CARGO_HOME:-$HOME/.cargo}"
    src=""
    for dir in "$cargo_home"/registry/src/*/mlx-sys-"$MLX_SYS_VERSION"; do
        [[ -f $dir/Cargo.toml ]] && src="$dir" && break
    done
    rm -rf "$SYS_DIR" "$SYS_DIR.tmp"
    mkdir -p "$SYS_DIR.tmp"
    if [[ -n $src ]]; then
        cp -R "$src/." "$SYS_DIR.tmp/"
    else
        crate=("$cargo_home"/registry/cache/*/mlx-sys-"$MLX_SYS_VERSION".crate)
        tar -xzf "${crate[0]}" -C "$SYS_DIR.tmp" --strip-components=1
    fi
    rm -f "$SYS_DIR.tmp/.cargo-ok"
    say "patching mlx-sys $MLX_SYS_VERSION"
    patch --quiet --forward -p1 -d "$SYS_DIR.tmp" < "$PATCH"
    mv "$SYS_DIR.tmp" "$SYS_DIR"
    echo "$patch_hash" > "$stamp"
fi
say "ready: $LANE"
