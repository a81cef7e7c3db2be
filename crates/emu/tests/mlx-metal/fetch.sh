#!/usr/bin/env bash
# Fetches MLX's Metal kernel headers, unmodified, from the PyPI wheel
# mlx-metal (a macOS wheel; pip downloads it on any platform, and it is a zip)
# and unpacks them under DEST (default: target/mlx-metal of the workspace):
#
#   DEST/mlx-metal-<version>/include/mlx/backend/metal/kernels/*.h, *.metal
#
# so `-I DEST/mlx-metal-<version>/include` resolves MLX's `#include "mlx/..."`.
# Idempotent: nothing is downloaded when the stamp of that version is there.
# Never committed: the files are MLX's (MIT licensed), used as a test corpus
# by crates/emu/tests/mlx_kernels.rs. Usage: fetch.sh [DEST]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
VERSION="${MLX_METAL_VERSION:-0.32.2}"
DEST="${1:-${KERNELGEN_MLX_METAL_DIR:-$ROOT/target/mlx-metal}}"
PYTHON="${PYTHON:-python3}"
OUT="$DEST/mlx-metal-$VERSION"
STAMP="$OUT/.kernelgen-mlx-metal-$VERSION"

say() { printf 'mlx-metal/fetch.sh: %s\n' "$*" >&2; }

if [[ -f $STAMP ]]; then
    exit 0
fi
mkdir -p "$DEST"
tmp="$(mktemp -d "$DEST/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "fetching mlx-metal==$VERSION from PyPI (about 42 MB)"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform macosx_14_0_arm64 -d "$tmp/wheel" "mlx-metal==$VERSION"
wheel=("$tmp"/wheel/mlx_metal-"$VERSION"-*.whl)
# Only the kernel headers (and MLX's license): the metallib is not needed.
"$PYTHON" - "${wheel[0]}" "$tmp/unpacked" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "mlx/include/mlx/backend/metal/kernels/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    names += [n for n in z.namelist() if n.endswith(("LICENSE", "LICENSE.txt")) and "dist-info" in n]
    if not any(n.startswith(prefix) for n in names):
        sys.exit(f"{wheel}: no {prefix} in the wheel")
    for n in names:
        z.extract(n, out)
PY
rm -rf "$OUT"
mkdir -p "$OUT"
mv "$tmp/unpacked/mlx/include" "$OUT/include"
for lic in "$tmp"/unpacked/*.dist-info/*LICENSE*; do
    [[ -f $lic ]] && cp "$lic" "$OUT/" || true
done
count="$(find "$OUT/include" -type f | wc -l)"
say "unpacked $count files under $OUT/include"
touch "$STAMP"
