#!/usr/bin/env python3
"""Keeps only one GPU architecture's code in a shared library's CUDA fat binaries.

MLX's CUDA build carries every kernel six times over (cubins for sm_75, 80, 90, 100, 120 and 121,
and PTX for 120): 65 MB of libmlx.so's 116. A GPU runs one of them; where a transfer is capped,
gpu/pack.sh drops the rest, as a build for that one architecture would have made it. Each fat
binary in `.nv_fatbin` keeps its place (the registration records point at its start): its kept
entries move to the front, its header's size shrinks to them, and the bytes freed become zeros.
A fat binary with no entry for the architecture is an error, not a library that would fail at
launch. Usage: prune_fatbin.py LIBRARY ARCH (ARCH as 90 for sm_90); rewrites LIBRARY in place.
"""
import os
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_CUBIN = 2


def fatbin_section(data):
    """(offset, size) of the `.nv_fatbin` section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in sections:
        end = data.index(b"\0", names + name)
        if data[names + name:end] == b".nv_fatbin":
            return offset, size
    raise ValueError("no .nv_fatbin section")


def prune(data, arch):
    """Prunes `data` (a bytearray) in place; returns (fat binaries, bytes freed)."""
    start, size = fatbin_section(data)
    end = start + size
    pos, count, freed = start, 0, 0
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries sit 8-byte aligned, zeros between them
            continue
        body, body_end = pos + header_size, pos + header_size + fat_size
        if body_end > end:
            raise ValueError(f"fat binary at {pos:#x} runs past its section")
        kept, entry = [], body
        while entry < body_end:
            kind, _ver, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            entry_arch = struct.unpack_from("<I", data, entry + 28)[0]
            length = entry_header + payload
            if length <= 0 or entry + length > body_end:
                raise ValueError(f"entry at {entry:#x} runs past its fat binary")
            if kind == KIND_CUBIN and entry_arch == arch:
                kept.append(bytes(data[entry:entry + length]))
            entry += length
        if not kept:
            raise ValueError(f"the fat binary at {pos:#x} holds no sm_{arch} cubin")
        joined = b"".join(kept)
        data[body:body_end] = joined + bytes(fat_size - len(joined))
        struct.pack_into("<Q", data, pos + 8, len(joined))
        freed += fat_size - len(joined)
        count += 1
        pos = body_end
    if count == 0:
        raise ValueError("no fat binary in .nv_fatbin")
    return count, freed


def main(argv):
    if len(argv) != 3 or not argv[2].isdigit():
        print("usage: prune_fatbin.py LIBRARY ARCH (e.g. 90)", file=sys.stderr)
        return 2
    path, arch = argv[1], int(argv[2])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    try:
        count, freed = prune(data, arch)
    except ValueError as e:
        print(f"prune_fatbin.py: {path}: {e}", file=sys.stderr)
        return 1
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    print(f"prune_fatbin.py: {path}: kept sm_{arch} in {count} fat binaries, {freed} bytes zeroed",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
