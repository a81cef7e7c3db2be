#!/usr/bin/env bash
# Fetches the Metal check's real-world corpus: the crates Cargo.toml beside this script names,
# at the versions it and Cargo.lock pin, from crates.io (`cargo fetch`, which unpacks their
# sources under $CARGO_HOME/registry/src). Then writes where each one's sources are to
#
#   DEST/crates.tsv: NAME<TAB>VERSION<TAB>DIRECTORY, one line per pinned crate
#
# (DEST: target/msl-corpus of the workspace), which crates/msl/tests/real_world.rs reads. Only
# this script uses the network; nothing fetched is committed. Idempotent (cargo fetches a crate
# once). Usage: fetch.sh [DEST]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
DEST="${1:-${KERNELGEN_MSL_CORPUS_DIR:-$ROOT/target/msl-corpus}}"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"
MANIFEST="$HERE/Cargo.toml"

# The crates are Apple-platform code: their macOS dependencies are what cargo resolves.
# `cargo metadata` reads every package's manifest, other platforms' included (core_detect, an
# x86 dependency, is not among what `fetch --target` downloads), so it may download too.
"$CARGO" fetch --locked --target aarch64-apple-darwin --manifest-path "$MANIFEST"
mkdir -p "$DEST"
tmp="$(mktemp "$DEST/.crates.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
"$CARGO" metadata --locked --filter-platform aarch64-apple-darwin --format-version 1 --manifest-path "$MANIFEST" \
  | "$PYTHON" -c '
import json, os, sys
meta = json.load(sys.stdin)
root = next(p for p in meta["packages"] if p["name"] == "kernelgen-msl-corpus")
wanted = {d["name"] for d in root["dependencies"]}
for p in sorted(meta["packages"], key=lambda p: p["name"]):
    if p["name"] in wanted:
        print(p["name"], p["version"], os.path.dirname(p["manifest_path"]), sep="\t")
' > "$tmp"
[[ $(wc -l < "$tmp") -ge 1 ]] || { echo "msl corpus/fetch.sh: no crate resolved" >&2; exit 1; }
mv "$tmp" "$DEST/crates.tsv"
trap - EXIT
printf 'msl corpus/fetch.sh: %s crates listed in %s\n' "$(wc -l < "$DEST/crates.tsv")" "$DEST/crates.tsv" >&2
