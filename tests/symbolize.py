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


# Trace clocks whose timestamps order events across CPUs (Documentation/trace/ftrace.rst,
# trace_clock), and those that do not: "local" (the default) and "perf" are per-CPU
# sched_clock, "x86-tsc" the raw TSC; "uptime" is jiffies, too coarse to order anything.
COHERENT_CLOCKS = {"global", "counter", "mono", "mono_raw", "boot", "tai"}


def clock_warning(text):
    """A warning when the trace's clock does not order events across CPUs, or is not known.
    The clock is read from a "# trace_clock: ..." line (what /sys/kernel/tracing/trace_clock
    reads, the selected one in brackets) that the guest scripts print before a trace."""
    import re
    m = re.search(r"^# trace_clock: .*\[(\S+)\]", text, re.M)
    if m and m.group(1) in COHERENT_CLOCKS:
        return None
    clock = m.group(1) if m else "unknown"
    return (f"warning: trace clock {clock}: a file_cache and the stack that uses it may be "
            "merged out of order across CPUs; record with a coherent clock "
            "(echo global > trace_clock, trace-cmd record -C global)")


def resolve_stacks(text):
    """(stack header, [(offset, path or None)]) for every user_unwind_stack in `text` (the
    trace file), each file cookie resolved through the latest file_cache before it."""
    import re
    paths, out, cur = {}, [], None
    for line in text.splitlines():
        m = re.search(r"file_cache: cookie=(\w+) path=(.*) build_id=", line)
        if m:
            paths[int(m.group(1), 16)] = m.group(2)
            continue
        m = re.search(r"(\S+-\d+) .*user_unwind_stack: cookie=(\w+)", line)
        if m:
            cur = (f"{m.group(1)} cookie={m.group(2)}", [])
            out.append(cur)
            continue
        m = re.match(r" => <(\w+)> : 0x(\w+)$", line)
        if m and cur:
            cookie = int(m.group(2), 16)
            cur[1].append((int(m.group(1), 16), paths.get(cookie) if cookie > 1 else None))
    return out


def main(argv):
    """symbolize.py TRACE [GUEST_DIR=HOST_DIR]...: print the stacks of a trace file with
    function names, reading each file from the host (GUEST_DIR mapped to HOST_DIR)."""
    import os
    if len(argv) < 2:
        print(main.__doc__)
        return 2
    maps = [a.split("=", 1) for a in argv[2:]]
    elves = {}

    def host(path):
        for guest, hostdir in maps:
            if path.startswith(guest.rstrip("/") + "/"):
                return os.path.join(hostdir, path[len(guest.rstrip("/")) + 1:])
        return path

    import sys
    with open(argv[1]) as f:
        text = f.read()
    warning = clock_warning(text)
    if warning:
        print(warning, file=sys.stderr)
    stacks = resolve_stacks(text)
    for header, frames in stacks:
        print(header)
        for i, (off, path) in enumerate(frames):
            name = None
            if path and os.path.exists(host(path)):
                elf = elves.setdefault(path, Elf(host(path)))
                name = elf.symbol(off, return_address=i > 0)
            print(f"  #{i:<2} {name or '?':24} {path or '[no file]'} +{off:#x}")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv))
