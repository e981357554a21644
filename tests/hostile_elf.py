#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Writes hostile ELF files for the guest test (e2e HOSTILE): each is mapped by uu_many,
which puts a frame in it, so the module reads its program headers and notes for the
file_cache event. Nothing may crash or hang; an image whose build-id note is whole inside
the file (a 64-bit and a 32-bit one, and two whose headers overstate what the file holds)
must give its build-id, and every other one none. readelf -n agrees on the well-formed two.

Usage: hostile_elf.py DIR: writes DIR/NAME for every case and DIR/expected, one
"NAME BUILD_ID" line each ("-" for none).
"""
import os
import struct
import sys

BUILD_ID = bytes(range(0x10, 0x24))  # 20 bytes, as GNU ld's SHA-1 ones


def note(name=b"GNU\0", desc=BUILD_ID, ntype=3, align=4, namesz=None, descsz=None):
    pad = lambda b: b + b"\0" * (-len(b) % align)
    return (struct.pack("<III", len(name) if namesz is None else namesz,
                        len(desc) if descsz is None else descsz, ntype) + pad(name) + pad(desc))


def elf64(notes=b"", phdrs=None, phnum=None, phentsize=56, phoff=64, size=None):
    """An ELF64 LE shared object whose one PT_NOTE (or `phdrs`) covers `notes` at 0x200."""
    if phdrs is None:
        phdrs = [(4, 0x200, len(notes), 4)]
    ph = b"".join(struct.pack("<IIQQQQQQ", t, 4, off, off, off, sz, sz, al)
                  for t, off, sz, al in phdrs)
    hdr = (b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8 +
           struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, phentsize,
                       len(phdrs) if phnum is None else phnum, 64, 0, 0))
    img = bytearray(max(0x200 + len(notes), 64 + len(ph), 0x1000))
    img[:64] = hdr
    img[64:64 + len(ph)] = ph
    img[0x200:0x200 + len(notes)] = notes
    return bytes(img[:size] if size is not None else img)


def elf32(notes):
    ph = struct.pack("<IIIIIIII", 4, 0x200, 0x200, 0x200, len(notes), len(notes), 4, 4)
    hdr = (b"\x7fELF" + bytes([1, 1, 1, 0]) + b"\0" * 8 +
           struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 52, 0, 0, 52, 32, 1, 40, 0, 0))
    img = bytearray(0x1000)
    img[:52] = hdr
    img[52:52 + len(ph)] = ph
    img[0x200:0x200 + len(notes)] = notes
    return bytes(img)


CASES = {
    # Well-formed: the build-id must come out.
    "good64": (elf64(note()), BUILD_ID),
    "good32": (elf32(note()), BUILD_ID),
    # Hostile: no build-id, no crash, no hang.
    "truncated_header": (elf64(note())[:20], None),
    "phdrs_past_end": (elf64(note(), phoff=0x7ffff000), None),
    "note_past_end": (elf64(note(), phdrs=[(4, 0x10_0000, 36, 4)]), None),
    # A segment that claims more than the file holds, around a whole note: the note is
    # read within the file, as the kernel's own build_id_parse() reads it.
    "segment_huge": (elf64(note(), phdrs=[(4, 0x200, 0xffff_ffff_ffff, 4)]), BUILD_ID),
    "note_zero": (elf64(note(), phdrs=[(4, 0x200, 0, 4)]), None),
    "namesz_huge": (elf64(note(namesz=0xffff_ffff)), None),
    "descsz_huge": (elf64(note(descsz=0xffff_fff0)), None),
    "desc_past_segment": (elf64(note(), phdrs=[(4, 0x200, 30, 4)]), None),
    "empty_notes_only": (elf64(note(b"", b"", 0) * 300), None),
    # A program header table that runs past the end of the file: the headers inside it
    # are read, and the first is the note.
    "phnum_huge": (elf64(note(), phnum=0xffff), BUILD_ID),
    # The same with the note's header past the end.
    "phnum_huge_note_outside": (elf64(note(), phnum=0xffff, phdrs=[(1, 0, 0, 0)] * 80), None),
    "phentsize_zero": (elf64(note(), phentsize=0), None),
    "overlapping_segments": (elf64(note(name=b"GNU\0", ntype=5),
                                   phdrs=[(4, 0x200, 36, 4)] * 40 + [(4, 0x40, 0x1000, 4)]),
                             None),
    "not_gnu": (elf64(note(name=b"GNV\0")), None),
    "bad_class": (b"\x7fELF\x07\x01\x01" + elf64(note())[7:], None),
    "zero_length_file": (b"", None),
}


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "expected"), "w") as exp:
        for name, (image, build_id) in CASES.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(image)
            exp.write(f"{name} {build_id.hex() if build_id else '-'}\n")


if __name__ == "__main__":
    main(sys.argv[1])
