#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The report of `make bench-real` from the lines tests/guest/bench_real.sh printed.

Usage: bench_real.py --perf PERF --ustack USTACK --data DIR OUTPUT

For each program, one line per arm: the program's instructions (under -icount) against
the untraced run N of the same round, as an overhead in percent (the median over the
rounds, and the lowest and highest); the bytes the tracer wrote (the ring buffer's own
count, perf's perf.data size), per stack and in all; the stacks recorded and lost (ring
buffer overruns and drops and cookies no buffer took, perf's LOST records); and the share
of the first round's stacks that are complete, rooted at `_start` or at a thread's start:
the module's symbolized by USTACK, perf's by `PERF script` (a perf with libdw, which
unwinds the user stack the dwarf arm copied; the time that takes is printed as the cost
perf leaves to the report). The first round's data, as the guest sent it, is kept in DIR.

Last, the targets of issue 36, each met or missed: the module's default unwinder (E)
costs no more than perf's deferred frame-pointer callchains (P1) on each program; against
perf's dwarf copies (P2) at most half the overhead, at most a twentieth of the bytes, and a
complete share at least as high.
"""
import argparse
import base64
import collections
import gzip
import os
import statistics
import subprocess
import sys
import time

import unwind

ARMS = ("N", "A", "E", "D", "P1", "P2")
TRACING = ("A", "E", "D", "P1", "P2")
WHAT = {
    "N": "no tracing",
    "A": "the event alone",
    "E": "module, .eh_frame",
    "D": "module, unwinder=fp",
    "P1": "perf fp,defer",
    "P2": "perf dwarf",
}
# The outermost frame of a complete stack is one of unwind.ROOTS; in a stripped program
# its entry has no name, and is the caller of __libc_start_main.
START_MAIN = "__libc_start_main"


def fields(line):
    return {k: num(v) for k, v in (f.split("=", 1) for f in line.split()[1:] if "=" in f)}


def num(v):
    try:
        return int(v)
    except ValueError:
        return v


def read(path, data_dir):
    """The run lines by (program, arm), in round order, and the DATA sections to files."""
    runs = collections.defaultdict(list)
    files = {}
    cur = None
    chunks = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("=== "):
                if cur:
                    files[cur[0]] = write_data(data_dir, cur, chunks)
                    cur, chunks = None, []
                w = line.split()
                if len(w) == 4 and w[1] == "DATA":
                    cur = ((w[2], w[3]), w[3])
                continue
            if cur:
                chunks.append(line)
            elif line.startswith("run "):
                r = fields(line)
                runs[(r["prog"], r["arm"])].append(r)
    return runs, files


def write_data(data_dir, cur, chunks):
    (prog, arm), _ = cur
    ext = "perf.data" if arm.startswith("P") else "dat"
    path = os.path.join(data_dir, f"{prog}-{arm}.{ext}")
    with open(path, "wb") as f:
        f.write(gzip.decompress(base64.b64decode("".join(chunks))))
    return path


def ustack_roots(ustack, path):
    """The outermost frame of each of the module's stacks, and ustack's time."""
    t = time.monotonic()
    out = subprocess.run([ustack, "-q", "--user-only", "--folded", "-", path],
                         capture_output=True, text=True, check=True).stdout
    took = time.monotonic() - t
    roots = collections.Counter()
    for line in out.splitlines():
        stack, _, count = line.rpartition(" ")
        # EVENT;OUTERMOST;...;INNERMOST
        frames = stack.split(";")[1:] + ["", ""]
        roots[(frames[0], frames[1])] += int(count)
    return roots, took


def perf_roots(perf, path):
    """The outermost user frame of each of perf's samples, and perf script's time."""
    t = time.monotonic()
    out = subprocess.run([perf, "script", "-i", path, "-F", "comm,tid,event,ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    took = time.monotonic() - t
    roots = collections.Counter()
    frames = None
    for line in out.splitlines() + [""]:
        if not line.strip():
            if frames is not None:
                roots[tuple((frames[::-1] + ["", ""])[:2])] += 1
            frames = None
        elif line.startswith(("\t", " ")) and frames is not None:
            w = line.split()
            frames.append(w[1] if len(w) > 1 else "[unknown]")
        else:
            frames = []
    return roots, took


def complete(roots):
    """The share of (outermost, next) frame pairs that root a complete stack."""
    n = sum(roots.values())
    ok = sum(v for (root, below), v in roots.items()
             if root.split("+")[0] in unwind.ROOTS or below.startswith(START_MAIN))
    return ok / n if n else 0.0


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", required=True)
    ap.add_argument("--ustack", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("output")
    a = ap.parse_args()
    runs, files = read(a.output, a.data)
    progs = list(dict.fromkeys(p for p, _ in runs))
    if not progs:
        sys.exit("bench-real: no run lines in the guest's output")
    bad = [r for rs in runs.values() for r in rs if r.get("status") != 0]
    if bad:
        sys.exit(f"bench-real: runs that failed: {bad}")
    table = {}
    for prog in progs:
        base = {r["round"]: r["ns"] for r in runs[(prog, "N")]}
        print(f"\n{prog}: {med(list(base.values())) / 1e9:.3f} G instructions untraced, "
              f"{len(base)} rounds")
        print(f"  {'arm':4} {'':20} {'overhead':>9} {'spread':>13} {'stacks':>7} {'lost':>5} "
              f"{'bytes':>11} {'B/stack':>8} {'complete':>9} {'host s':>7}")
        for arm in TRACING:
            rs = runs.get((prog, arm), [])
            if not rs:
                continue
            over = [100 * (r["ns"] / base[r["round"]] - 1) for r in rs if r["round"] in base]
            if arm.startswith("P"):
                stacks = med([r["samples"] for r in rs])
                lost = max(r["lost"] for r in rs)
            else:
                stacks = med([r.get("stacks", r["entries"]) for r in rs])
                lost = max(r["overrun"] + r["dropped"] + r.get("unrecorded", 0) for r in rs)
            nbytes = med([r["bytes"] for r in rs])
            share, took = None, None
            path = files.get((prog, arm))
            if path and arm != "A":
                if arm.startswith("P"):
                    roots, took = perf_roots(a.perf, path)
                else:
                    roots, took = ustack_roots(a.ustack, path)
                share = complete(roots)
            table[(prog, arm)] = (med(over), nbytes, share)
            print(f"  {arm:4} {WHAT[arm]:20} {med(over):8.1f}% "
                  f"{min(over):6.1f}-{max(over):5.1f}% {stacks:7.0f} {lost:5} "
                  f"{nbytes:11.0f} {nbytes / stacks if stacks else 0:8.0f} "
                  f"{'-' if share is None else f'{100 * share:.1f} %':>9} "
                  f"{'-' if took is None else f'{took:.2f}':>7}")
    print("\nTargets (issue 36):")
    for prog in progs:
        e, p1, p2 = (table.get((prog, x)) for x in ("E", "P1", "P2"))
        if not (e and p1 and p2):
            continue
        checks = (
            (f"E overhead <= P1's ({e[0]:.1f} % vs {p1[0]:.1f} %)", e[0] <= p1[0]),
            (f"E overhead <= P2's / 2 ({e[0]:.1f} % vs {p2[0] / 2:.1f} %)", e[0] <= p2[0] / 2),
            (f"E bytes <= P2's / 20 ({e[1]:.0f} vs {p2[1] / 20:.0f})", e[1] <= p2[1] / 20),
            (f"E complete >= P2's ({100 * (e[2] or 0):.1f} % vs {100 * (p2[2] or 0):.1f} %)",
             (e[2] or 0) >= (p2[2] or 0)),
        )
        for text, ok in checks:
            print(f"  {prog:8} {text}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
