#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: the cost of deferred user stacks on the production-config test kernel (the
# base fragment without the debug checkers; built and cached like the debug one), in one
# guest boot. Arms A-E, the first-sight arms Ac and Ec, and perf's arms P0-P2 at each depth
# (tests/guest/bench.sh says what they are), interleaved; one line per depth with the
# medians of the per-round ratios and their spread, the ring buffer's bytes per frame from
# its own counters, perf's from its perf.data. perf is built from the kernel's own source
# (scripts/build-perf.sh) and goes into this guest only.
# The guest runs under TCG: absolute times are emulated, ratios measured in one run are what
# to read. Then the same again, fewer rounds, with QEMU's instruction counter as the guest's
# clock (run-guest.sh --icount): "ns" there count instructions, and the ratios are those of
# instructions executed, free of the host's noise and of TCG's uneven emulation costs (and
# blind to cache misses and stalls). Documentation/performance.rst has the tables and what
# they mean.
# Usage: scripts/bench.sh [ITERATIONS [ROUNDS [DEPTH...]]] (ROUNDS/3 rounds, at least 2, counted)
# BENCH_PASSES=icount runs the instruction-count pass alone (with ROUNDS rounds), =time the
# emulated-time pass alone; both by default.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

n=${1:-20000} rounds=${2:-9}
shift $(($# < 2 ? $# : 2))
depths=${*:-8 32 128}
"$ROOT/scripts/setup.sh"
KDIR=prod "$ROOT/scripts/build-module.sh"
perf=$("$ROOT/scripts/build-perf.sh")
build_test_programs
# perf and the libraries it links (those trace-cmd brought are already there): in this
# guest only.
adds=(--add "$perf:/usr/bin/perf")
add_libraries "$perf"
# The guest's lines, kept in $BENCH_OUT.PASS when set (bench_report.py reads them again).
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Ten arms, perf's reports: longer than a test guest's default limit.
export UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-7200}
guest() {
	local pass=$1
	shift
	"$ROOT/scripts/run-guest.sh" --kernel prod --smp 1 "$@" "${adds[@]}" \
		--add "$ROOT/tests/guest/bench.sh:/bin/bench.sh" -- "/bin/bench.sh $n $rounds $depths" \
		>"$out" || { cat "$out" >&2; die "the bench guest failed (its output above)"; }
	[ -z "${BENCH_OUT:-}" ] || cp "$out" "$BENCH_OUT.$pass"
}
passes=${BENCH_PASSES:-time icount}
case " $passes " in
*" time "*)
	say "bench: $n calls an arm, $rounds rounds, depths $depths, emulated time"
	guest time
	echo "time (TCG, emulated ns):"
	python3 "$ROOT/tests/bench_report.py" "$n" "$rounds" <"$out"
	rounds=$((rounds / 3 > 2 ? rounds / 3 : 2)) ;;
esac
case " $passes " in *" icount "*) ;; *) exit 0 ;; esac
say "bench: $rounds rounds, instructions counted"
guest icount --icount
echo "instructions (QEMU -icount, ns = instructions):"
python3 "$ROOT/tests/bench_report.py" --icount "$n" "$rounds" <"$out"
