#!/usr/bin/env bash
# One `cargo check` of the check-apple lane: the arguments go to cargo check
# (a --target, -p/--package, --features, a --manifest-path of a file in the
# repository), run by the Debian toolchain with -Zbuild-std through the opt-in
# apple/cargo-config.toml. apple/setup.sh must have run. See apple/README.md.
#
# cargo runs in a snapshot of the working tree, target/apple/tree: the [patch]
# in the configuration makes cargo write the path copy of mlx-sys into each
# Cargo.lock it resolves, and the repository's own lock files must never change
# under a build running beside this one (CI runs the lane in the background).
# The snapshot keeps the files' times, so cargo's fingerprints hold from run to
# run, and its `target` links back to the repository's, so the configuration's
# paths (target/apple, the patched mlx-sys) are the same ones. (cargo's
# resolver.lockfile-path would avoid the rewrite too, but under -Zbuild-std it
# also steers the resolution of std's own dependencies, which then no longer
# build for aarch64-unknown-linux-gnu.)
# Runs of this script are serialised with a lock, so `make -j` is safe.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Fixed: apple/cargo-config.toml names target/apple (target dir, mlx-sys copy).
LANE="$ROOT/target/apple"
# The configuration's target directory, whatever the caller's: cargo would let
# $CARGO_TARGET_DIR (which the Makefile exports) win over --config.
unset CARGO_TARGET_DIR
APPLE_CARGO="${APPLE_CARGO:-/usr/bin/cargo}"
APPLE_RUSTC="${APPLE_RUSTC:-/usr/bin/rustc}"
APPLE_BUILD_STD="${APPLE_BUILD_STD:-std,panic_abort}"

mkdir -p "$LANE"
exec 9>"$LANE/.check.lock"
flock 9

# A fresh snapshot every run (a few MB): a file deleted from the tree must not
# linger in it. Everything but git's store and build output (target*, and any
# directory cargo tagged as a cache: an example crate's own target/). The POSIX
# format keeps the files' times to the nanosecond: rounded down to the second,
# an edit made in the second a check started would look older than its result.
# The snapshot goes when the check ends, its `target` link (a loop back to the
# tree's parent) with it.
TREE="$LANE/tree"
rm -rf "$TREE"
trap 'rm -rf "$TREE"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$TREE"
tar --format=posix -c --exclude-caches --exclude=./.git --exclude=./target --exclude='./target-*' . | tar -x -C "$TREE"
ln -s "$ROOT/target" "$TREE/target"

# A --manifest-path names a file of the repository, relative to it or absolute:
# the snapshot's copy is checked. One outside the repository is refused (its
# lock file would be rewritten in place).
args=()
in_tree() {
    local p="$1"
    case "$p" in
        /*) ;;
        *) p="$ROOT/$p" ;;
    esac
    p="$(realpath -m "$p")"
    local root
    root="$(realpath "$ROOT")"
    case "$p" in
        "$root"/target/*|"$root"/target) ;;
        "$root"/*) printf '%s\n' "$TREE/${p#"$root"/}"; return ;;
    esac
    echo "apple/check.sh: --manifest-path $1 is not a file of the repository ($ROOT)" >&2
    exit 2
}
while (($#)); do
    case "$1" in
        --manifest-path) (($# >= 2)) || { echo "apple/check.sh: --manifest-path needs a path" >&2; exit 2; }
            manifest="$(in_tree "$2")"; args+=(--manifest-path "$manifest"); shift 2 ;;
        --manifest-path=*) manifest="$(in_tree "${1#--manifest-path=}")"; args+=(--manifest-path "$manifest"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
cd "$TREE"

# --offline: apple/setup.sh fetched every crate the lane needs (std's too), so
# the checks never touch the network (APPLE_OFFLINE=0 to allow it).
offline=(--offline)
[[ ${APPLE_OFFLINE:-1} == 0 ]] && offline=()

echo "apple/check.sh: cargo check ${args[*]}" >&2
# RUSTC_BOOTSTRAP=1 lets the stable Debian toolchain take -Z flags; it is set
# for this command only. PATH puts the Debian rustc (and rustdoc) before
# rustup's proxies for anything cargo or a build script runs.
env PATH="$(dirname "$APPLE_RUSTC"):$PATH" RUSTC="$APPLE_RUSTC" RUSTC_BOOTSTRAP=1 \
    "$APPLE_CARGO" check --config apple/cargo-config.toml -Zbuild-std="$APPLE_BUILD_STD" \
    "${offline[@]}" "${args[@]}"
