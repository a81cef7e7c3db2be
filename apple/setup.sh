#!/usr/bin/env bash
# Prepares the `check-apple` lane: type-checking crates for aarch64-apple-darwin
# (and aarch64-unknown-linux-gnu) on Linux x86-64, where rustup cannot download
# those targets' std and there is no macOS SDK. Idempotent: each step is skipped
# when its result is already in place. See apple/README.md.
#
#  1. Debian packages: rustc-web, cargo-web, rust-web-src from bookworm-security
#     (a stable Rust whose std sources allow `-Zbuild-std`), clang and
#     libclang-dev (bindgen, for mlx-sys's bindings), patch. apt-get runs only
#     if one of them is missing.
#  2. The std sources' own dependencies (compiler_builtins, libc, hashbrown, ...)
#     and the project's, for every target the lane checks, into cargo's cache
#     (one `cargo fetch`; later runs need no network).
#  3. A copy of mlx-sys 0.7.0 from cargo's registry cache with mlx/mlx-sys.patch
#     applied, in target/apple/mlx-sys;
#     apple/cargo-config.toml points [patch.crates-io] at it and sets
#     MLX_SYS_CHECK_ONLY=1, under which its build script only runs bindgen.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Fixed: apple/cargo-config.toml names target/apple (target dir, mlx-sys copy).
LANE="$ROOT/target/apple"
SYS_DIR="$LANE/mlx-sys"
# The Debian toolchain, by path: rustup's stays first on PATH.
APPLE_CARGO="${APPLE_CARGO:-/usr/bin/cargo}"
APPLE_RUSTC="${APPLE_RUSTC:-/usr/bin/rustc}"
# Targets whose dependencies `cargo fetch` brings in (space separated); the
# host's are added (build scripts and proc-macros run there), so that
# apple/check.sh can run with --offline.
APPLE_TARGETS="${APPLE_TARGETS:-aarch64-apple-darwin aarch64-unknown-linux-gnu}"

say() { printf 'apple/setup.sh: %s\n' "$*" >&2; }
# shellcheck source=mlx/mlx-sys.sh
source "$ROOT/mlx/mlx-sys.sh"

# 1. Debian packages.
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for pkg in rustc-web cargo-web rust-web-src clang libclang-dev patch; do
    installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    SUDO=""
    [[ $(id -u) == 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    # rustc-web & co. exist only in bookworm-security; -t prefers that release
    # and leaves the others (clang, patch) to come from bookworm.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-security \
        "${missing[@]}" >/dev/null
fi
sysroot="$("$APPLE_RUSTC" --print sysroot)"
test -f "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" || {
    say "no std sources under $sysroot/lib/rustlib/src/rust/library (rust-web-src)"
    exit 1
}

# The Debian cargo must run the Debian rustc, never rustup's proxy.
debian() { env PATH="$(dirname "$APPLE_RUSTC"):$PATH" RUSTC="$APPLE_RUSTC" "$@"; }

mkdir -p "$LANE"

# 2. Dependencies of std (from the sources' Cargo.lock) and of the project. Without
#    the opt-in configuration, so Cargo.lock keeps the registry's mlx-sys (and a
#    lock a previous patched run rewrote is put back). Skipped when the lock and
#    the toolchain are unchanged since the last successful fetch.
fetch_key="$(cat Cargo.lock "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" \
    <("$APPLE_RUSTC" -V) <(echo "$APPLE_TARGETS") | sha256sum | cut -d' ' -f1)"
stamp="$LANE/.kernelgen-fetch"
if [[ ! -f $stamp || $(cat "$stamp") != "$fetch_key" ]]; then
    say "fetching dependencies (std's and the project's) for $APPLE_TARGETS"
    host="$("$APPLE_RUSTC" -vV | sed -n 's/^host: //p')"
    targets=(--target "$host")
    for t in $APPLE_TARGETS; do targets+=(--target "$t"); done
    debian env RUSTC_BOOTSTRAP=1 "$APPLE_CARGO" fetch --quiet -Zbuild-std=std,panic_abort "${targets[@]}"
    # Fetch may have rewritten Cargo.lock only if it was stale; key on the result.
    fetch_key="$(cat Cargo.lock "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" \
        <("$APPLE_RUSTC" -V) <(echo "$APPLE_TARGETS") | sha256sum | cut -d' ' -f1)"
    echo "$fetch_key" > "$stamp"
fi

# 3. mlx-sys from cargo's registry cache, patched (mlx/mlx-sys.sh).
if mlx_sys_stale "$SYS_DIR"; then
    mlx_sys_patch "$SYS_DIR"
fi
say "ready: $LANE"
