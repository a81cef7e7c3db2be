"""crates/cuda/nvrtc/check.py, the CUDA compile check of `make check-cuda`: its reading of nvrtc's
and ptxas's logs and its occupancy arithmetic (always), and nvrtc itself refusing a broken kernel
at its line and compiling a good one (where crates/cuda/nvrtc/fetch.sh has fetched nvrtc;
`make check-cuda` sets KERNELGEN_NVRTC_REQUIRED=1, so there they cannot be skipped)."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen_paths import BIN, ROOT
spec = importlib.util.spec_from_file_location("cuda_check", ROOT / "crates" / "cuda" / "nvrtc" / "check.py")
check = importlib.util.module_from_spec(spec)
# registered as an import would register it (check.py's workers get their function by its
# module's name)
sys.modules[spec.name] = check
spec.loader.exec_module(check)

NVRTC_DIR = Path(os.environ.get("KERNELGEN_NVRTC_DIR", ROOT / "target" / "nvrtc"))
have_nvrtc = (NVRTC_DIR / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13").is_file()
needs_nvrtc = pytest.mark.skipif(
    not have_nvrtc and not os.environ.get("KERNELGEN_NVRTC_REQUIRED"), reason="nvrtc not fetched (crates/cuda/nvrtc/fetch.sh)"
)

PTXAS = """ptxas info    : 6339 bytes gmem
ptxas info    : Compiling entry function '_ZN3mlx4core2cu8custom_kE' for 'sm_90'
ptxas info    : Function properties for _ZN3mlx4core2cu8custom_kE
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 21760 bytes smem
"""


def test_ptxas_figures_are_read():
    assert check.parse_ptxas(PTXAS) == {"registers": 72, "spill_stores": 8, "spill_loads": 12, "stack": 16, "shared": 21760}


def test_nvrtc_errors_become_file_and_line():
    log = 'k.cu(31): error: identifier "y" is undefined\nk.cu(40): warning #177-D: variable "z" was declared but never referenced\n'
    assert check.diagnostics(log, "generated/cuda/a/k.cu") == [
        ("error", 'generated/cuda/a/k.cu:31: error: identifier "y" is undefined'),
        ("warning", 'generated/cuda/a/k.cu:40: warning: variable "z" was declared but never referenced'),
    ]


def test_occupancy_of_an_h200_sm():
    # 512 threads, 32 registers: 16 warps of 1024 registers a block, 4 blocks by registers and by threads
    assert check.occupancy(512, 32, 21760) == (4, 64, "registers and threads")
    # 72 registers round up to 2304 a warp: one block of 16 warps
    assert check.occupancy(512, 72, 21760) == (1, 16, "registers")
    # one warp a block, few registers: the 32-block limit
    assert check.occupancy(32, 25, 0) == (32, 32, "blocks")
    # shared memory: 100 KiB a block (and 1 KiB reserved) leaves two
    assert check.occupancy(128, 16, 100 * 1024) == (2, 8, "shared memory")
    # 150 registers (4864 a warp) for 16 warps: more than an SM's 64K, so no block fits and
    # CUDA refuses the launch, which `make check-cuda` fails (the affine body at 3 bits, 4 steps
    # ahead, 16 warps, measured so on an H200)
    assert check.occupancy(512, 150, 21764)[0] == 0


@needs_nvrtc
def test_a_broken_kernel_is_refused_at_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.cu"
    bad.write_text('#include "mlx/backend/cuda/device/utils.cuh"\n__global__ void k(float* y) {\n  y[0] = undefined_name;\n}\n')
    assert check.main(["--nvrtc-dir", str(NVRTC_DIR), str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3: error: identifier \"undefined_name\" is undefined" in err
    assert "0 compiled, 1 refused" in err


@needs_nvrtc
def test_a_kernel_of_mlx_shape_compiles_and_is_measured(tmp_path, capsys):
    good = tmp_path / "good.cu"
    good.write_text(
        '#include "mlx/backend/cuda/device/utils.cuh"\n#include <cooperative_groups.h>\n'
        "namespace mlx::core::cu {\n__global__ void custom_kernel_k(const __nv_bfloat16* x, float* y) {\n"
        "  float v = static_cast<float>(x[threadIdx.x]);\n"
        "  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
        "  if (threadIdx.x == 0) y[blockIdx.x] = v;\n}\n}\n"
    )
    assert check.main(["--nvrtc-dir", str(NVRTC_DIR), str(good)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| good |"))
    registers = int(row.split("|")[2])
    assert 0 < registers <= 255


@needs_nvrtc
def test_every_block_size_of_the_grouped_expert_parts_fits_an_sm(tmp_path):
    """MLX compiles a custom kernel for no block size (no __launch_bounds__), so a block whose
    threads need more than an SM's 65536 registers is refused at its launch. The expert family's
    down_grouped body holds its route's row of mid in registers, fewer values a thread in larger
    blocks: at each block size the family allows (4 to 32 rows, one warp each), at a hidden size
    and an intermediate size of 6720 (every one of those block sizes divides it; a row of mid is
    27 words a lane, in segments of 8 at the smaller blocks, the last one partial), the part
    compiles and fits an SM (the others hold no more a thread at 32 rows than at 4)."""
    if not os.path.isfile(BIN):
        pytest.skip(f"no kernelgen at {BIN} (make cli)")
    sizes = (4, 8, 12, 16, 20, 24, 28, 32)
    spec = 'family = "expert"\n[axes]\nquant = ["q4", "q8"]\ndtype = ["bf16"]\nrows_per_threadgroup = [4]\n' + "".join(
        f"[geometry.b{b}]\nhidden = 6720\nintermediate = 6720\ncuda_rows_per_block = {b}\n" for b in sizes
    )
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "blocks.toml").write_text(spec)
    out = tmp_path / "out"
    subprocess.run([BIN, "generate", "--specs", str(tmp_path / "specs"), "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    manifest = json.loads((out / "manifest.json").read_text())
    down = [k for k in manifest["kernels"] if k["name"].endswith("_down_grouped")]
    assert len(down) == 2 * len(sizes)
    paths = [str(out / Path(k["cuda"]["path"]).relative_to("generated")) for k in down]
    results = check.compile_files(str(NVRTC_DIR), paths)
    for k, (_, unreadable, compiled) in zip(down, results):
        assert unreadable is None and compiled.ok, f"{k['name']}: {unreadable or compiled.log}"
        threads = math.prod(k["cuda"]["threadgroup"])
        blocks, _, binding = check.occupancy(threads, compiled.registers, compiled.shared)
        assert blocks >= 1, f"{k['name']}: {threads} threads at {compiled.registers} registers ({binding}) fit no SM"
        assert compiled.spill_stores == 0 and compiled.spill_loads == 0, f"{k['name']} spills"
