#!/bin/sh
# Fetch MLX's Metal kernel headers (the mlx-metal 0.32.2 wheel from PyPI, ~42 MB, a zip)
# into a cache directory that is never committed, for kernelgen-msl's MLX header tests.
#   crates/msl/fetch-mlx-metal.sh [DIR]     (default: <repo>/target/mlx-metal/0.32.2)
# Afterwards DIR/mlx/include holds mlx/backend/metal/kernels/*.h. Exits 0 at once if they
# are already there; exits 1 with a message if the download fails (offline, no pip).
set -eu
VERSION=0.32.2
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-"$HERE/../../target/mlx-metal/$VERSION"}
KERNELS="$DIR/mlx/include/mlx/backend/metal/kernels"
if [ -f "$KERNELS/utils.h" ]; then
  echo "mlx-metal $VERSION headers already in $DIR"
  exit 0
fi
mkdir -p "$DIR"
WHEEL_DIR="$DIR/wheel"
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --platform macosx_14_0_arm64 \
    "mlx-metal==$VERSION" -d "$WHEEL_DIR"; then
  echo "fetch-mlx-metal: could not download mlx-metal==$VERSION with pip (offline?); MLX header tests will skip" >&2
  exit 1
fi
WHEEL=$(ls "$WHEEL_DIR"/mlx_metal-"$VERSION"-*.whl | head -n 1)
# Only the Metal kernel headers are extracted (the wheel also carries the metallib and dylib).
python3 - "$WHEEL" "$DIR" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if "/include/mlx/backend/metal/kernels/" in n and not n.endswith("/")]
    z.extractall(dest, members=names)
print(f"fetch-mlx-metal: {len(names)} headers in {dest}/mlx/include")
PY
rm -rf "$WHEEL_DIR"
