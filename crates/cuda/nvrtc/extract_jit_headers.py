"""MLX's CUDA build compiles the device headers a custom kernel includes into libmlx.so (as
NUL-terminated strings, its cuda_jit_sources.h) and hands them to nvrtc by name; no package
ships them as files. This reads the two a custom kernel's default header reaches,
mlx/backend/cuda/device/utils.cuh and complex.cuh (utils.cuh includes it), out of libmlx.so and
writes them under INCLUDE_DIR, each recognised by what it includes and declares. Exactly one
string must match each, and every `mlx/backend/cuda/device/` header they include must then be
there (config.h ships in the wheel): otherwise this stops with an error naming what it could not
find, rather than let the check compile against something else.

Usage: extract_jit_headers.py LIBMLX_SO INCLUDE_DIR
"""

import os
import re
import sys

DEVICE = "mlx/backend/cuda/device/"

# name -> (what the header includes, names it declares)
SIGNATURES = {
    "utils.cuh": ([DEVICE + "complex.cuh", DEVICE + "config.h"], [b"AlignedVector", b"store_vector", b"elem_to_loc"]),
    "complex.cuh": (["cuda/std/complex"], [b"is_complex", b"complex64_t"]),
}


def includes(text):
    return re.findall(rb'#include\s*[<"]([^>"]+)[>"]', text)


def main():
    lib, include_dir = sys.argv[1], sys.argv[2]
    data = open(lib, "rb").read()
    # Each header is a source file: MLX's copyright line first, `#pragma once` near the top.
    candidates = [m.group(1) for m in re.finditer(rb"(// Copyright[^\x00]{64,})\x00", data) if b"#pragma once" in m.group(1)[:512]]
    found = {}
    for name, (incs, decls) in SIGNATURES.items():
        matches = [c for c in candidates if all(i.encode() in includes(c) for i in incs) and all(d in c for d in decls)]
        if len(matches) != 1:
            sys.exit(f"extract_jit_headers.py: {len(matches)} strings of {lib} look like MLX's {DEVICE}{name}; expected exactly one")
        found[name] = matches[0]
    os.makedirs(os.path.join(include_dir, DEVICE), exist_ok=True)
    for name, text in found.items():
        with open(os.path.join(include_dir, DEVICE, name), "wb") as f:
            f.write(text)
    for name, text in found.items():
        for inc in includes(text):
            inc = inc.decode()
            if inc.startswith(DEVICE) and not os.path.isfile(os.path.join(include_dir, inc)):
                sys.exit(f"extract_jit_headers.py: {DEVICE}{name} includes {inc}, which neither libmlx.so's strings nor the wheel gave")


if __name__ == "__main__":
    main()
