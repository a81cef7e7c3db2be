"""`make check-cuda`: every CUDA kernel source compiled as MLX's CUDA backend compiles it, without
a GPU: nvrtc 13.0 (the compiler MLX runs on a custom kernel), for an H200 (sm_90), against
MLX 0.32.2's device headers and CCCL and CUDA 13.0's headers (crates/cuda/nvrtc/fetch.sh puts
them in target/nvrtc). A source nvrtc refuses is an error at its file and line (exit 1). For each
kernel that compiles it reports what ptxas allocated (registers a thread, bytes spilled, static
shared memory) and what that leaves an SM of an H200: blocks and warps resident at once, and
which limit binds (registers, shared memory, threads, blocks).

Usage: check.py [--nvrtc-dir DIR] [--manifest generated/manifest.json] [FILE.cu ...]
With no FILE, every kernel of the manifest that has a CUDA body, with its threads per block;
a FILE alone is compiled and its occupancy left out (its block size is not known).
"""

import argparse
import concurrent.futures
import ctypes
import json
import math
import multiprocessing
import os
import re
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# An H200 (compute capability 9.0): what an SM holds at once.
SM_REGISTERS = 65536
SM_SHARED = 233472  # 228 KiB, of which each block also reserves 1 KiB
BLOCK_RESERVED_SHARED = 1024
SM_THREADS = 2048
SM_BLOCKS = 32
# Registers are allocated a warp at a time, in units of 256.
REGISTER_UNIT = 256
ARCH = "sm_90"


@dataclass
class Compiled:
    ok: bool
    log: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    shared: int = 0
    # with compile(..., kernel=...): the machine code, and the kernel's symbol in it
    cubin: bytes = None
    symbol: str = None


def parse_ptxas(log):
    """ptxas's -v lines of the one kernel a source holds."""
    c = {"registers": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0, "shared": 0}
    if m := re.search(r"Used (\d+) registers", log):
        c["registers"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log):
        c["stack"], c["spill_stores"], c["spill_loads"] = map(int, m.groups())
    if m := re.search(r"Used \d+ registers.*?(\d+) bytes smem", log):
        c["shared"] = int(m.group(1))
    return c


def diagnostics(log, path):
    """nvrtc's `name(line): error: message` lines as `path:line: error: message`."""
    out = []
    for line in log.splitlines():
        if m := re.match(r"^(.*?)\((\d+)\): (error|warning)(?: #\S+)?: (.*)$", line):
            out.append((m.group(3), f"{path}:{m.group(2)}: {m.group(3)}: {m.group(4)}"))
        elif line.startswith("nvrtc: error") or line.startswith("ptxas error") or line.startswith("ptxas fatal"):
            out.append(("error", f"{path}: {line}"))
    return out


def occupancy(threads, registers, shared):
    """Blocks of `threads` resident on one SM, and the limit that binds."""
    warps = -(-threads // 32)
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    limits = {
        "registers": SM_REGISTERS // (regs_per_warp * warps) if regs_per_warp else SM_BLOCKS,
        "shared memory": SM_SHARED // (shared + BLOCK_RESERVED_SHARED),
        "threads": SM_THREADS // (warps * 32),
        "blocks": SM_BLOCKS,
    }
    blocks = min(limits.values())
    binding = " and ".join(k for k, v in limits.items() if v == blocks)
    return blocks, blocks * warps, binding


class Nvrtc:
    def __init__(self, directory):
        lib = os.path.join(directory, "nvidia", "cu13", "lib")
        builtins = os.path.join(lib, "libnvrtc-builtins.so.13.0")
        main = os.path.join(lib, "libnvrtc.so.13")
        if not (os.path.isfile(builtins) and os.path.isfile(main)):
            sys.exit(f"check.py: no nvrtc in {lib}: run crates/cuda/nvrtc/fetch.sh (make check-cuda does)")
        # nvrtc dlopens its builtins by soname: loaded first, it is found without LD_LIBRARY_PATH.
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(main)
        include = os.path.join(directory, "mlx", "include")
        self.options = [
            f"--gpu-architecture={ARCH}",
            f"--include-path={os.path.join(include, 'cccl')}",
            f"--include-path={os.path.join(directory, 'nvidia', 'cu13', 'include')}",
            # MLX hands nvrtc its device headers by name; here they are files under mlx/include.
            f"--include-path={include}",
            "--ptxas-options=-v",
        ]

    def compile(self, source, name, kernel=None):
        """Compiles `source`. With `kernel`, the name of its kernel (`mlx::core::cu::f`), the
        result also holds the machine code and the kernel's symbol in it, as MLX looks it up."""
        lib = self.lib
        prog = ctypes.c_void_p()
        if lib.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None) != 0:
            return Compiled(False, "nvrtc: error: nvrtcCreateProgram failed")
        try:
            if kernel:
                lib.nvrtcAddNameExpression(prog, kernel.encode())
            opts = (ctypes.c_char_p * len(self.options))(*[o.encode() for o in self.options])
            status = lib.nvrtcCompileProgram(prog, len(self.options), opts)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value + 1)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode("utf-8", "replace")
            compiled = Compiled(status == 0, log, **(parse_ptxas(log) if status == 0 else {}))
            if kernel and status == 0:
                lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
                out = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetCUBIN(prog, out)
                lowered = ctypes.c_char_p()
                lib.nvrtcGetLoweredName(prog, kernel.encode(), ctypes.byref(lowered))
                compiled.cubin, compiled.symbol = out.raw, lowered.value.decode()
            return compiled
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_nvrtc = None


def _worker_init(nvrtc_dir):
    global _nvrtc
    _nvrtc = Nvrtc(nvrtc_dir)


def _compile_one(path):
    """(the path as shown, the source's read error or None, the Compiled or None)."""
    # a file of the project by its path in it; any other as given
    inside = os.path.isabs(path) and os.path.commonpath([ROOT, os.path.abspath(path)]) == ROOT
    shown = os.path.relpath(path, ROOT) if inside else path
    try:
        source = open(path, "rb").read()
    except OSError as e:
        return shown, e.strerror, None
    return shown, None, _nvrtc.compile(source, os.path.basename(path))


def compile_files(nvrtc_dir, paths):
    """Each source at `paths` compiled as MLX compiles it: (the path as shown, its read error or
    None, the Compiled or None), in the paths' order."""
    # One process a core: nvrtc compiles one program at a time in a process (measured: threads
    # gave no speed-up), and the kernels are independent.
    workers = max(1, min(len(paths), len(os.sched_getaffinity(0))))
    # forked: the workers find _compile_one in this module as it was loaded, however that was
    fork = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=fork, initializer=_worker_init, initargs=(nvrtc_dir,)) as pool:
        return list(pool.map(_compile_one, paths))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nvrtc-dir", default=os.environ.get("KERNELGEN_NVRTC_DIR", os.path.join(ROOT, "target", "nvrtc")))
    ap.add_argument("--manifest", default=os.path.join(ROOT, "generated", "manifest.json"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args(argv)

    if args.files:
        kernels = [(os.path.basename(f)[:-3] if f.endswith(".cu") else f, f, None) for f in args.files]
    else:
        manifest = json.load(open(args.manifest))
        kernels = [(k["name"], os.path.join(ROOT, k["cuda"]["path"]), math.prod(k["cuda"]["threadgroup"])) for k in manifest["kernels"] if k.get("cuda")]
    Nvrtc(args.nvrtc_dir)  # here first: a missing nvrtc is said once, not by every worker
    failed = 0
    print("| kernel | registers | spilled bytes (stores / loads) | static shared | threads | blocks an SM | warps an SM | bound by |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    results = compile_files(args.nvrtc_dir, [path for _, path, _ in kernels])
    notes = []
    unlaunchable = 0
    # in the kernels' order, whatever order they compiled in
    for (name, _, threads), (shown, unreadable, c) in zip(kernels, results):
        if unreadable:
            notes.append(f"{shown}: error: cannot read: {unreadable}")
            failed += 1
            continue
        found = diagnostics(c.log, shown)
        notes.extend(text for _, text in found)
        if not c.ok:
            failed += 1
            if not any(kind == "error" for kind, _ in found):
                notes.append(f"{shown}: error: nvrtc refused it: {c.log.strip()[:2000]}")
            print(f"| {name} | refused | | | | | | |")
            continue
        if c.spill_stores or c.spill_loads:
            notes.append(f"{shown}: warning: ptxas spills {c.spill_stores} bytes and reloads {c.spill_loads} a thread (local memory traffic)")
        if threads:
            blocks, warps, binding = occupancy(threads, c.registers, c.shared)
            occ = f"{threads} | {blocks} | {warps} | {binding}"
            if blocks == 0:
                # CUDA refuses such a launch (too many resources requested): a failure, not a figure
                notes.append(f"{shown}: error: a block of {threads} threads at {c.registers} registers and {c.shared} bytes of shared memory does not fit one SM ({binding}): CUDA refuses the launch")
                unlaunchable += 1
        else:
            occ = "- | - | - | -"
        print(f"| {name} | {c.registers} | {c.spill_stores} / {c.spill_loads} | {c.shared} | {occ} |")
    for n in notes:
        print(n, file=sys.stderr)
    print(f"check-cuda: {len(kernels) - failed} compiled, {failed} refused (nvrtc, {ARCH}), {unlaunchable} fit no SM", file=sys.stderr)
    return 1 if failed or unlaunchable else 0


if __name__ == "__main__":
    sys.exit(main())
