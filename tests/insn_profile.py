#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What one more call of a benchmark arm costs, in instructions, by kernel function.

Usage: insn_profile.py SYSTEM_MAP LESS MORE [TOP [KO PATTERN]]

LESS and MORE are two runs of scripts/insn-profile.sh's guest (each a prefix: PREFIX.log,
the guest's output, and PREFIX.counts, QEMU's insn-count plugin's "ADDRESS COUNT" lines)
that differ only in their number of calls. Each address is attributed to the function
that holds it (the kernel's from SYSTEM_MAP, the module's from the guest's kallsyms), and
each function's count in LESS is taken from MORE's, over the difference in stacks: the
cost of one more stack, boot and setup cancelled out (up to the timing noise of the boot:
entropy, scheduling, which shows as small counts of either sign in unrelated functions).
The module's functions (marked "M") are exact.

With KO (the module the guests ran) and PATTERN, every module function whose demangled
name holds PATTERN is then printed disassembled (objdump), each instruction with what one
more stack executes of it: where a function's instructions go, a loop left rolled, a call
that makes its caller spill.
"""
import bisect
import collections
import re
import subprocess
import sys


def symbols(system_map, log):
    syms = []
    for line in open(system_map):
        addr, kind, name = line.split()[:3]
        if kind in "tTwW":
            syms.append((int(addr, 16), name))
    for line in open(log, errors="replace"):
        if line.startswith("insn-profile ksym ") and "[user_unwind]" in line:
            f = line.split()
            syms.append((int(f[2], 16), "M " + f[4]))
    syms.sort()
    return syms


def addresses(prefix):
    """PREFIX.counts as a Counter of executed instructions by address."""
    counts = collections.Counter()
    for line in open(prefix + ".counts"):
        addr, n = line.split()
        counts[int(addr, 16)] += int(n)
    return counts


def run(system_map, prefix):
    log = prefix + ".log"
    text = open(log, errors="replace").read()
    m = re.search(r"insn-profile stacks=(\d+) row_misses=(\d+)", text)
    if not m:
        sys.exit(f"insn_profile: {log} has no counters (the guest failed?)")
    syms = symbols(system_map, log)
    addrs = [a for a, _ in syms]
    counts = collections.Counter()
    for addr, n in addresses(prefix).items():
        i = bisect.bisect_right(addrs, addr) - 1
        counts[syms[i][1] if i >= 0 else "?"] += n
    return counts, int(m[1]), int(m[2])


def annotate(ko, pattern, less, more, stacks):
    """Prints the module's functions whose demangled names hold `pattern`, disassembled,
    each instruction with its count for one more stack. A function's address in the guest
    (its kallsyms) less its value in the module's symbol table (objdump -t: section
    offsets) maps the disassembly's offsets to the counted addresses."""
    loaded = {}
    for line in open(more + ".log", errors="replace"):
        if line.startswith("insn-profile ksym ") and "[user_unwind]" in line:
            f = line.split()
            loaded[f[4]] = int(f[2], 16)
    table = subprocess.run(["objdump", "-t", ko], capture_output=True, text=True,
                           check=True).stdout
    where = {}
    for line in table.splitlines():
        f = line.split()
        if len(f) >= 6 and " F " in line and f[-3].startswith(".text"):
            where[f[-1]] = (f[-3], int(f[0], 16))
    names = [n for n in loaded if n in where]
    plain = demangled(["M " + n for n in names])
    a, b = addresses(less), addresses(more)
    for name in names:
        title = plain["M " + name][2:]
        if pattern not in title:
            continue
        section, value = where[name]
        base = loaded[name] - value
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", section,
                              "--disassemble=" + name, ko], capture_output=True, text=True,
                             check=True).stdout
        print(f"\n{title}")
        total = 0.0
        for line in dis.splitlines():
            m = re.match(r"\s*([0-9a-f]+):\s", line)
            if not m:
                continue
            addr = base + int(m[1], 16)
            n = (b[addr] - a[addr]) / stacks
            total += n
            print(f"{n:9.2f} {line}")
        print(f"{total:9.1f}  in all")


def demangled(names):
    """The names, Rust's demangled by c++filt (binutils knows Rust's v0 scheme), without
    the crate's hash."""
    rust = [n[2:] for n in names if n.startswith("M _R")]
    out = subprocess.run(["c++filt"], input="\n".join(rust), capture_output=True,
                         text=True).stdout.splitlines() if rust else []
    plain = dict(zip(rust, out))
    return {n: "M " + re.sub(r"user_unwind_main\[[0-9a-f]+\]::", "", plain.get(n[2:], n[2:]))
            if n.startswith("M ") else n for n in names}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    system_map, less, more = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    a, stacks_a, misses_a = run(system_map, less)
    b, stacks_b, misses_b = run(system_map, more)
    stacks = stacks_b - stacks_a
    if stacks <= 0:
        sys.exit("insn_profile: MORE has no more stacks than LESS")
    per = {k: (b[k] - a[k]) / stacks for k in set(a) | set(b)}
    module = sum(v for k, v in per.items() if k.startswith("M "))
    misses = (misses_b - misses_a) / stacks
    print(f"one more stack: {stacks} stacks, {misses:.2f} row misses a stack; the module's "
          f"functions {module:.0f} instructions a stack")
    shown = sorted(per.items(), key=lambda kv: -abs(kv[1]))[:top]
    names = demangled([name for name, _ in shown])
    for name, v in shown:
        print(f"{v:9.1f}  {names[name]}")
    if len(sys.argv) > 6:
        annotate(sys.argv[5], sys.argv[6], less, more, stacks)


if __name__ == "__main__":
    main()
