#!/usr/bin/env bash
# Packs the bundle gpu/build.sh made for a GPU machine that takes at most LIMIT bytes a transfer
# (default 60 MB): libmlx.so compressed (xz -9e, about 67 MB) and cut in parts, and everything
# else in one more archive, into target/gpu/xfer/<n>/ folders of at most LIMIT each, to carry
# one folder a transfer, in order. There, gpu/unpack.sh puts the bundle back in target/gpu/bundle.
# Usage: pack.sh [LIMIT_BYTES]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
XFER="$ROOT/target/gpu/xfer"
LIMIT="${1:-60000000}"
say() { printf 'gpu/pack.sh: %s\n' "$*" >&2; }

lib="$BUNDLE/mlx-cuda/mlx/lib/libmlx.so"
[[ -f $lib ]] || { say "no bundle at $BUNDLE: run make gpu-build first"; exit 2; }
rm -rf "$XFER.tmp"
mkdir -p "$XFER.tmp"
say "compressing libmlx.so (xz -9e: about 2 minutes on 2 cores)"
xz -9e -T0 -c "$lib" > "$XFER.tmp/libmlx.so.xz"
tar -C "$BUNDLE" --exclude=mlx-cuda/mlx/lib/libmlx.so -cf - . | xz -6 -T0 > "$XFER.tmp/rest.tar.xz"
rest=$(stat -c %s "$XFER.tmp/rest.tar.xz")
((rest < LIMIT)) || { say "the bundle without libmlx.so is $rest bytes compressed, over the limit of $LIMIT"; exit 1; }
# libmlx.so's parts fill folders 1, 2, ...; the rest goes beside the last part if it fits
split -b "$LIMIT" -d -a 2 "$XFER.tmp/libmlx.so.xz" "$XFER.tmp/libmlx.so.xz.part"
n=0
for part in "$XFER.tmp"/libmlx.so.xz.part*; do
    n=$((n + 1))
    mkdir -p "$XFER.tmp/$n"
    mv "$part" "$XFER.tmp/$n/"
done
last=$(stat -c %s "$XFER.tmp/$n"/libmlx.so.xz.part*)
if ((last + rest > LIMIT)); then
    n=$((n + 1))
    mkdir -p "$XFER.tmp/$n"
fi
mv "$XFER.tmp/rest.tar.xz" "$XFER.tmp/$n/"
rm -f "$XFER.tmp/libmlx.so.xz"
rm -rf "$XFER"
mv "$XFER.tmp" "$XFER"
for d in "$XFER"/*/; do
    say "$(basename "$d"): $(du -b "$d" | cut -f1) bytes"
done
say "carry target/gpu/xfer/1, then 2, ... one a transfer; there: bash gpu/unpack.sh"
