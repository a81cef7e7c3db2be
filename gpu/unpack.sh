#!/usr/bin/env bash
# Where the GPU is: puts the bundle gpu/pack.sh cut into target/gpu/xfer/<n>/ back together in
# target/gpu/bundle (libmlx.so's parts joined and decompressed, the rest unpacked), then removes
# the parts. Fails, leaving no bundle, when a part is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
XFER="$ROOT/target/gpu/xfer"
say() { printf 'gpu/unpack.sh: %s\n' "$*" >&2; }

mapfile -t parts < <(ls "$XFER"/*/libmlx.so.xz.part* 2>/dev/null | sort -V)
rest=("$XFER"/*/rest.tar.xz)
[[ ${#parts[@]} -gt 0 && -f ${rest[0]} ]] || { say "no complete transfer under $XFER (libmlx.so's parts and rest.tar.xz)"; exit 2; }
rm -rf "$BUNDLE.tmp"
mkdir -p "$BUNDLE.tmp/mlx-cuda/mlx/lib"
xz -dc "${rest[0]}" | tar -C "$BUNDLE.tmp" -xf -
cat "${parts[@]}" | xz -dc > "$BUNDLE.tmp/mlx-cuda/mlx/lib/libmlx.so" || { say "libmlx.so's parts do not decompress: a part is missing or cut"; rm -rf "$BUNDLE.tmp"; exit 1; }
rm -rf "$BUNDLE"
mv "$BUNDLE.tmp" "$BUNDLE"
rm -rf "$XFER"
say "ready: $BUNDLE (built from $(cat "$BUNDLE/COMMIT"))"
