#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: the cost of deferred user stacks on the production-config test kernel (the
# base fragment without the debug checkers; built and cached like the debug one), in one
# guest boot. Arms A-D at each depth (tests/guest/bench.sh says what they are), interleaved;
# one line per depth with the medians of the per-round ratios and their spread, the ring
# buffer's bytes per frame from its own counters, then the __fput probe's idle cost.
# The guest runs under TCG: absolute times are emulated, ratios measured in one run are what
# to read. Documentation/user_unwind/performance.rst has the table and what it means.
# Usage: scripts/bench.sh [ITERATIONS [ROUNDS [DEPTH...]]]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

n=${1:-20000} rounds=${2:-9}
shift $(($# < 2 ? $# : 2))
depths=${*:-8 32 128}
"$ROOT/scripts/setup.sh"
KDIR=prod "$ROOT/scripts/build-module.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$ROOT/scripts/run-guest.sh" --kernel prod --smp 1 \
	--add "$ROOT/tests/guest/bench.sh:/bin/bench.sh" -- "/bin/bench.sh $n $rounds $depths" >"$out"
python3 "$ROOT/tests/bench_report.py" "$n" "$rounds" <"$out"
