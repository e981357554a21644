#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: the cost of deferred user stacks on the production-config test kernel (the
# base fragment without the debug checkers; built and cached like the debug one), in one
# guest boot. Arms A-E at each depth (tests/guest/bench.sh says what they are), interleaved;
# one line per depth with the medians of the per-round ratios and their spread, the ring
# buffer's bytes per frame from its own counters.
# The guest runs under TCG: absolute times are emulated, ratios measured in one run are what
# to read. Then the same again, fewer rounds, with QEMU's instruction counter as the guest's
# clock (run-guest.sh --icount): "ns" there count instructions, and the ratios are those of
# instructions executed, free of the host's noise and of TCG's uneven emulation costs (and
# blind to cache misses and stalls). Documentation/performance.rst has the tables and what
# they mean.
# Usage: scripts/bench.sh [ITERATIONS [ROUNDS [DEPTH...]]] (ROUNDS/3 rounds, at least 2, counted)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

n=${1:-20000} rounds=${2:-9}
shift $(($# < 2 ? $# : 2))
depths=${*:-8 32 128}
"$ROOT/scripts/setup.sh"
KDIR=prod "$ROOT/scripts/build-module.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
guest() {
	"$ROOT/scripts/run-guest.sh" --kernel prod --smp 1 "$@" \
		--add "$ROOT/tests/guest/bench.sh:/bin/bench.sh" -- "/bin/bench.sh $n $rounds $depths" >"$out"
}
guest
echo "time (TCG, emulated ns):"
python3 "$ROOT/tests/bench_report.py" "$n" "$rounds" <"$out"
rounds=$((rounds / 3 > 2 ? rounds / 3 : 2))
guest --icount
echo "instructions (QEMU -icount, ns = instructions):"
python3 "$ROOT/tests/bench_report.py" "$n" "$rounds" <"$out"
