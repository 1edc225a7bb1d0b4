#!/usr/bin/env python3
"""Keeps one GPU architecture's machine code in a CUDA shared library, for a smaller download.

    dev/fatbin-keep.py SRC DST SM     e.g. SM=90 for H100/H200

A library built for many GPUs carries, in its .nv_fatbin ELF section, one fat binary per
translation unit, each a list of entries: machine code (SASS, an ELF image) or PTX, one per
target architecture. This writes DST with every entry's payload set to zeros except SASS for
SM; headers and sizes stay, so every offset in the file is unchanged and the CUDA runtime still
finds, for a GPU of that architecture, the same image it would have loaded from SRC. Zeros
compress to almost nothing. Run `strip --strip-all` on DST afterwards to drop the symbols too.
Exits 1 if some fat binary keeps nothing (a kernel that would not load on that GPU).
"""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_SASS = 1, 2


def fatbin_section(data):
    """(offset, size) of the .nv_fatbin section of an ELF64 little-endian file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit("fatbin-keep: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        name, _type, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size

    _, names_off, _ = header(shstrndx)
    for i in range(shnum):
        name, off, size = header(i)
        end = data.index(b"\0", names_off + name)
        if data[names_off + name:end] == b".nv_fatbin":
            return off, size
    raise SystemExit("fatbin-keep: no .nv_fatbin section (not a CUDA library?)")


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    src, dst, sm = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(src, "rb") as f:
        data = bytearray(f.read())
    start, size = fatbin_section(data)
    pos, end = start, start + size
    kept = zeroed = binaries = empty = 0
    while pos + 16 <= end:
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned, with padding between them
            continue
        binaries += 1
        entry, body_end = pos + header_size, pos + header_size + body_size
        keeps = False
        while entry < body_end:
            kind, _ver, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            first = entry + entry_header
            if kind == KIND_SASS and arch == sm:
                kept += payload
                keeps = True
            else:
                data[first:first + payload] = bytes(payload)
                zeroed += payload
            entry = first + payload
        empty += 0 if keeps else 1
        pos = body_end
    with open(dst, "wb") as f:
        f.write(data)
    print(f"fatbin-keep: {binaries} fat binaries, sm_{sm} SASS kept {kept} B, {zeroed} B zeroed")
    if empty:
        print(f"fatbin-keep: {empty} fat binaries have no sm_{sm} SASS; their kernels would not load", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
