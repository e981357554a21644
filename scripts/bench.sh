#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Cost of the deferred user stacks on a traced system call, measured in one guest boot.
# Prints the median ns per call of each configuration and the ratios to "sys_enter".
# The guest runs under TCG: absolute numbers are emulated time, ratios are what to read.
# Usage: scripts/bench.sh [ITERATIONS [ROUNDS]]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=$("$ROOT/scripts/run-guest.sh" --add "$ROOT/tests/guest/bench.sh:/bin/bench.sh" -- \
	"/bin/bench.sh ${1:-20000} ${2:-3}")
echo "$out" | python3 -c '
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    if len(f) == 3 and f[1] == "ns_per_call":
        runs[f[0]].append(int(f[2]))
    elif f and f[0] == "dropped_events":
        print("ring-buffer events dropped:", f[1])
base = statistics.median(runs["sys_enter"])
for name in ("off", "sys_enter", "sys_enter+cookies", "sys_enter+user_unwind"):
    med = statistics.median(runs[name])
    print(f"{name:24} {med:8.0f} ns/call  x{med / base:5.2f} of sys_enter  runs {runs[name]}")
'
