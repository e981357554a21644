#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The report of `make bench` from the lines tests/guest/bench.sh printed (stdin).

Ratios are taken within a round (the four arms of one depth ran back to back) and their
median over the rounds is printed, with the lowest and highest as the spread. Bytes come
from the ring buffer's own counters: a D run's bytes minus those of the A run of the same
round and depth (the same sys_enter events) are the cookie, stack and file_cache events.
"""
import collections
import statistics
import sys

# Entries of the kernel's user stack event (FTRACE_STACK_ENTRIES): B records this many
# frames whatever the depth.
B_FRAMES = 8


def fields(line):
    return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)


def num(v):
    return float(v) if "." in v else int(v)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return f"{min(xs):.2f}-{max(xs):.2f}" if xs else "-"


def main():
    runs = collections.defaultdict(dict)      # (depth, round) -> arm -> fields
    for line in sys.stdin:
        if line.startswith("run "):
            f = {k: (num(v) if k != "arm" else v) for k, v in fields(line).items()}
            runs[(f["depth"], f["round"])][f["arm"]] = f
        else:
            print("guest:", line.rstrip(), file=sys.stderr)
    if not runs:
        sys.exit("bench: the guest printed no runs")
    lost_total = 0
    for depth in sorted({d for d, _ in runs}):
        rounds = [arms for (d, _), arms in sorted(runs.items()) if d == depth]
        rounds = [a for a in rounds if set(a) == set("ABCDE")]
        ratio = {k: [] for k in ("B/A", "C/A", "D/A", "D/C", "E/A", "E/D")}
        # The .eh_frame unwinder's cost over the frame-pointer mode's, each less the event
        # alone: what a stack costs with it, relative to what it costs without.
        extra = []
        bpf, bpf_b, fc, frames, lost = [], [], [], [], 0
        for a in rounds:
            A, B, C, D = (a[k] for k in "ABCD")
            lost += a["E"]["requests"] - a["E"]["stacks"]
            for k in ratio:
                x, y = k.split("/")
                ratio[k].append(a[x]["ns"] / a[y]["ns"])
            if a["D"]["ns"] > a["A"]["ns"]:
                extra.append((a["E"]["ns"] - a["A"]["ns"]) / (a["D"]["ns"] - a["A"]["ns"]))
            if D["frames"]:
                bpf.append((D["bytes"] - A["bytes"]) / D["frames"])
                frames.append(D["frames"] / D["stacks"])
                fc.append(1000 * D["file_cache"] / D["stacks"])
            # B's user stack events are its entries beyond A's sys_enter events.
            b_stacks = B["entries"] - A["entries"]
            bpf_b.append((B["bytes"] - A["bytes"]) / (b_stacks * B_FRAMES)
                         if b_stacks > 0 else float("nan"))
            lost += sum(r["overrun"] + r["dropped"] + r["unrecorded"] for r in a.values())
            lost += D["requests"] - D["stacks"]
        lost_total += lost
        a_ns = med([a["A"]["ns"] for a in rounds])
        print(f"depth={depth} frames={med(frames):.0f} A={a_ns:.0f}ns "
              + " ".join(f"{k}={med(v):.3f}" for k, v in ratio.items())
              + f" bytes/frame={med(bpf):.2f} bytes/frame(B)={med(bpf_b):.2f}"
              + f" file_cache/1000stacks={med(fc):.2f} lost={lost} rounds={len(rounds)}")
        print(f"  eh_frame: (E-A)/(D-A)={med(extra):.3f} spread={spread(extra)} "
              f"frames(E)={med([a['E']['frames'] / max(a['E']['stacks'], 1) for a in rounds]):.0f}")
        print(f"  spread (lowest-highest over rounds): "
              + " ".join(f"{k}={spread(v)}" for k, v in ratio.items()))
    if lost_total:
        print(f"bench: {lost_total} events lost or cookies unanswered: the figures above "
              "are not clean", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
