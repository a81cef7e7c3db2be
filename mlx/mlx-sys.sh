# Sourced by mlx/setup.sh and apple/setup.sh (bash): the one copy of mlx-sys both lanes
# patch. Defines MLX_SYS_VERSION, mlx_sys_stale DIR and mlx_sys_patch DIR; the caller
# defines `say`.

MLX_SYS_VERSION="0.7.0"
MLX_SYS_PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/mlx-sys.patch"

# Whether DIR lacks a copy of mlx-sys patched with today's patch (its stamp holds the
# patch's hash, so a changed patch is applied to a fresh copy).
mlx_sys_stale() {
    local stamp="$1/.kernelgen-patch"
    [[ ! -f $stamp || $(cat "$stamp") != "$(sha256sum "$MLX_SYS_PATCH" | cut -d' ' -f1)" ]]
}

# DIR becomes mlx-sys from cargo's registry cache (the unpacked sources, else the
# .crate), patched; built beside it and moved into place, so DIR is never half made.
mlx_sys_patch() {
    local dir="$1" cargo_home="${CARGO_HOME:-$HOME/.cargo}" src="" found
    for found in "$cargo_home"/registry/src/*/mlx-sys-"$MLX_SYS_VERSION"; do
        [[ -f $found/Cargo.toml ]] && src="$found" && break
    done
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$dir.tmp"
    if [[ -n $src ]]; then
        cp -R "$src/." "$dir.tmp/"
    else
        local crate=("$cargo_home"/registry/cache/*/mlx-sys-"$MLX_SYS_VERSION".crate)
        tar -xzf "${crate[0]}" -C "$dir.tmp" --strip-components=1
    fi
    rm -f "$dir.tmp/.cargo-ok"
    say "patching mlx-sys $MLX_SYS_VERSION"
    patch --quiet --forward -p1 -d "$dir.tmp" < "$MLX_SYS_PATCH"
    mv "$dir.tmp" "$dir"
    sha256sum "$MLX_SYS_PATCH" | cut -d' ' -f1 > "$dir/.kernelgen-patch"
}
