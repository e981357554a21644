#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check: set everything up, then run every test of every stage. One summary line per
# stage, then "N passed, N failed" over all of them; non-zero exit on any failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

LOGS=$TREE_OUT/check-logs
mkdir -p "$LOGS"
passed=0 failed=0

# stage NAME PASSED FAILED
stage() {
	passed=$((passed + $2)) failed=$((failed + $3))
	printf 'stage %-10s %3d passed, %d failed\n' "$1:" "$2" "$3"
}

# one NAME LOG COMMAND...: a stage that is a single test.
one() {
	local name=$1 log=$LOGS/$2
	shift 2
	if "$@" >"$log" 2>&1; then
		stage "$name" 1 0
	else
		tail -n 30 "$log"
		echo "  (full log: $log)"
		stage "$name" 0 1
	fi
}

one setup setup.log bash -c 'scripts/setup.sh && scripts/build-kernel.sh'
if [ "$failed" -ne 0 ]; then
	echo "$passed passed, $failed failed"
	exit 1
fi
SRC=$(kernel_src)

# cargo_tests NAME DIR COMMAND...: a stage of cargo's tests run by COMMAND in DIR, counted
# from cargo's "test result" lines.
cargo_tests() {
	local name=$1 dir=$2 log=$LOGS/$1.log ok ko
	shift 2
	(cd "$dir" && "$@") >"$log" 2>&1
	ok=$(grep -oE '^test result: .* ([0-9]+) passed' "$log" | grep -oE '[0-9]+ passed' |
		awk '{s += $1} END {print s + 0}')
	ko=$(grep -oE '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
	if ! grep -q '^test result' "$log"; then
		tail -n 30 "$log"
		ko=$((ko + 1))
	fi
	stage "$name" "$ok" "$ko"
}

# Host: the pure logic's unit tests, formatting and clippy.
cargo_tests cargo-test host cargo test --quiet
one bindgen bindgen.log scripts/check-bindgen.sh
one cargo-fmt cargo-fmt.log bash -c 'cd host && cargo fmt --check'
one clippy clippy.log bash -c 'cd host && cargo clippy --quiet --all-targets -- -D warnings'

# tools/ustack: its tests (release, as the end-to-end test runs it), formatting, clippy,
# and the licences of every crate it links.
cargo_tests ustack-test tools/ustack \
	bash -c 'cargo build --release --quiet && cargo test --release --quiet'
one ustack-fmt ustack-fmt.log bash -c 'cd tools/ustack && cargo fmt --check'
one ustack-clippy ustack-clippy.log \
	bash -c 'cd tools/ustack && cargo clippy --release --quiet --all-targets -- -D warnings'
one licenses licenses.log python3 scripts/check-licenses.py

# The module: CLIPPY=1 build without warnings, kernel rustfmt, checkpatch.
one module module.log scripts/build-module.sh
one rustfmt rustfmt.log rustfmt --check --edition 2021 --config-path "$SRC/.rustfmt.toml" \
	src/user_unwind_main.rs
ok=0 ko=0
for f in src/*.c src/*.h src/wrapper/*.c src/wrapper/*.h include/*.h tests/kmod/*.c \
	tools/ustack/plugin/*.c tools/ustack/plugin/fuzz/*.c; do
	if "$SRC/scripts/checkpatch.pl" --no-tree --quiet --show-types -f "$f" \
		--ignore SPDX_LICENSE_TAG,FILE_PATH_CHANGES >"$LOGS/checkpatch.log" 2>&1; then
		ok=$((ok + 1))
	else
		echo "checkpatch: $f"
		cat "$LOGS/checkpatch.log"
		ko=$((ko + 1))
	fi
done
stage checkpatch "$ok" "$ko"

# suite NAME SUMMARY COMMAND...: a stage of a suite that prints "ok - " and "not ok - "
# lines and ends with a "SUMMARY: " line (without it, the suite did not finish: a failure).
# Its failures and its "# skipped" lines are shown.
suite() {
	local name=$1 summary=$2 log=$LOGS/$1.log ok ko
	shift 2
	"$@" >"$log" 2>&1
	grep -E '^not ok' "$log"
	ok=$(grep -c '^ok - ' "$log")
	ko=$(grep -c '^not ok - ' "$log")
	grep -q "^$summary: " "$log" || { tail -n 30 "$log"; ko=$((ko + 1)); }
	grep -E '^# skipped' "$log"
	stage "$name" "$ok" "$ko"
}

# The trace-cmd plugin against hostile traces: its handlers under ASan/UBSan over mutated
# fixture records, and crafted trace.dat files through trace-cmd report.
suite plugin-fuzz plugin-fuzz scripts/plugin-fuzz.sh

# e2e NAME KERNEL: the end-to-end suite in a guest booting KERNEL (test or debian).
e2e() {
	suite "$1" e2e tests/e2e.py --kernel "$2"
}

# Two guests at once, one a host core (QEMU's TCG runs a guest on one thread): Debian's
# stock kernel (the module built with Debian's own toolchain, the same suite in a guest
# booting Debian's vmlinuz; KUnit is not in its config), then the kernel's own ftrace
# selftests with and without the module (on the test kernel), run in the background while
# the test kernel's other stages run here; their stage lines are printed and counted at the
# end. The test programs both use are built first, once.
(build_test_programs) >"$LOGS/prog.log" 2>&1 || { tail -n 30 "$LOGS/prog.log"; failed=$((failed + 1)); }
(
	one stock-build stock-build.log env KDIR=debian scripts/build-module.sh
	if grep -q "built .* for Debian" "$LOGS/stock-build.log"; then
		e2e e2e-debian debian
	else
		stage e2e-debian 0 1
	fi
	if [ -f user_unwind.ko ]; then
		one ftracetest ftracetest.log scripts/ftracetest.sh test.d/event/toplevel-enable.tc
		grep '^ftracetest' "$LOGS/ftracetest.log"
	else
		stage ftracetest 0 1
	fi
) >"$LOGS/background-stages.txt" 2>&1 &
background=$!

# The guest: end-to-end tests, and the KUnit suite that ran at insmod.
if [ -f user_unwind.ko ]; then
	e2e e2e test
	kunit=$PROG/kunit-test.log
	python3 "$SRC/tools/testing/kunit/kunit.py" parse "$kunit" >"$LOGS/kunit.log" 2>&1
	summary=$(sed 's/\x1b\[[0-9;]*m//g' "$LOGS/kunit.log" | grep -E 'Ran [0-9]+ tests' | tail -n1)
	ok=$(echo "$summary" | grep -oE 'passed: [0-9]+' | grep -oE '[0-9]+' || echo 0)
	ko=$(echo "$summary" | grep -oE '(failed|crashed): [0-9]+' | grep -oE '[0-9]+' |
		awk '{s += $1} END {print s + 0}')
	if [ -z "$summary" ] || [ "${ok:-0}" -eq 0 ]; then
		cat "$LOGS/kunit.log"
		ko=$((ko + 1))
	fi
	stage kunit "${ok:-0}" "$ko"
else
	stage e2e 0 1
	stage kunit 0 1
fi

# ustack on fresh recordings of every trace.dat format: the reader against trace-cmd
# report, the plugin, and the symbolized call chain against the sources.
if [ -f user_unwind.ko ]; then
	suite ustack-e2e ustack-e2e python3 tests/ustack_e2e.py
else
	stage ustack-e2e 0 1
fi

# make demo as a user runs it: every step, uu_nofp's whole stack and the off-CPU profile
# with the kernel's own names (tests/demo.py).
if [ -f user_unwind.ko ]; then
	suite demo demo python3 tests/demo.py
else
	stage demo 0 1
fi

# Stress: load, churn and reloads, counted, two of its three cycles checked in a window
# (make stress runs the long version, and the long ftrace selftests).
if [ -f user_unwind.ko ]; then
	one stress stress.log scripts/stress.sh 3 2 2 2
	grep '^stress: ' "$LOGS/stress.log"
else
	stage stress 0 1
fi

# The background stages (Debian's stock kernel, ftracetest), started before the guest
# stages above, are collected here.
wait "$background"
while IFS= read -r line; do
	echo "$line"
	if [[ $line =~ ^stage\ .*\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
	fi
done <"$LOGS/background-stages.txt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
