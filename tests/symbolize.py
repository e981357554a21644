# SPDX-License-Identifier: GPL-2.0
"""File offset -> symbol, from an ELF file's program headers and symbol table.

The ground truth of the end-to-end tests: the same binaries that ran in the guest, read
with binutils' readelf and nm.
"""
import subprocess


class Elf:
    def __init__(self, path):
        self.path = path
        self.segments = []  # (file offset, vaddr, file size) of each PT_LOAD
        out = subprocess.run(["readelf", "-lW", path], check=True, capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                self.segments.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
        self.symbols = []  # (vaddr, size, name) of defined functions
        out = subprocess.run(["nm", "-S", "--defined-only", path], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "Tt":
                self.symbols.append((int(f[0], 16), int(f[1], 16), f[3]))

    def vaddr(self, offset):
        for off, vaddr, size in self.segments:
            if off <= offset < off + size:
                return offset - off + vaddr
        return None

    def symbol(self, offset, return_address=False):
        """The function holding file offset `offset`; a return address is looked up one
        byte earlier, inside the call instruction."""
        vaddr = self.vaddr(offset)
        if vaddr is None:
            return None
        if return_address:
            vaddr -= 1
        for start, size, name in self.symbols:
            if start <= vaddr < start + size:
                return name
        return None
