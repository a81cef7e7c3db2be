#!/usr/bin/env bash
# Packs the bundle gpu/build.sh made for a GPU machine that takes at most LIMIT bytes a transfer
# (default 60 MB): libmlx.so compressed (xz -9e) and cut in parts, and everything else in one
# more archive, into target/gpu/xfer/<n>/ folders of at most LIMIT each, to carry one folder a
# transfer, in order. There, gpu/unpack.sh puts the bundle back in target/gpu/bundle.
# libmlx.so keeps only the GPU code of KERNELGEN_GPU_ARCH (default 90, the H100 and H200;
# `all` keeps every architecture): 15 MB compressed, so the whole bundle is one folder, against
# 67 MB and two folders for all six (gpu/prune_fatbin.py).
# Usage: pack.sh [LIMIT_BYTES]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${KERNELGEN_GPU_BUNDLE:-$ROOT/target/gpu/bundle}"
XFER="$ROOT/target/gpu/xfer"
LIMIT="${1:-60000000}"
ARCH="${KERNELGEN_GPU_ARCH:-90}"
say() { printf 'gpu/pack.sh: %s\n' "$*" >&2; }

lib="$BUNDLE/mlx-cuda/mlx/lib/libmlx.so"
[[ -f $lib ]] || { say "no bundle at $BUNDLE: run make gpu-build first"; exit 2; }
rm -rf "$XFER.tmp"
mkdir -p "$XFER.tmp"
cp "$lib" "$XFER.tmp/libmlx.so"
[[ $ARCH == all ]] || python3 "$ROOT/gpu/prune_fatbin.py" "$XFER.tmp/libmlx.so" "$ARCH"
say "compressing libmlx.so (xz -9e: 1 to 2 minutes on 2 cores)"
xz -9e -T0 -c "$XFER.tmp/libmlx.so" > "$XFER.tmp/libmlx.so.xz"
rm "$XFER.tmp/libmlx.so"
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
