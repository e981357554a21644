#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench-real: what profiling costs a real program, by this module and by perf, side by
# side, in one boot of the production-config test kernel with QEMU's instruction counter as
# its clock (run-guest.sh --icount: a guest nanosecond is an instruction). Debian's own
# binaries, none of the project's, at their host paths (scripts/real-programs.sh):
#
#   cc1      GCC 12's compiler proper, by `gcc -O2 -S` on the kernel source's
#            scripts/dtc/livetree.c, preprocessed here           sampled: the tick (250 Hz)
#   python3  python3.11 tokenizing, then parsing, its typing.py   sampled
#   clang    clang 19 compiling the same file (190 MB of LLVM libraries, their constructors
#            at start-up: the first-sight worst case)             sampled
#   sqlite3  100 autocommit inserts into a new database           every sys_enter
#
# The arms (tests/guest/bench_real.sh says what each is): no tracing, the event alone, the
# module's default unwinder, the module with unwinder=fp, perf --call-graph fp,defer and perf
# --call-graph dwarf, each run alone, interleaved over ROUNDS rounds. tests/bench_real.py
# prints one table per program: the program's instructions against the untraced run as an
# overhead, bytes written, stacks recorded and lost, and the share of them complete (rooted
# at _start or a thread's start), counted here on the host: the module's stacks through
# ustack, perf's through `perf script` of a perf built with libdw (scripts/build-perf.sh
# --dwarf), which for the dwarf arm also unwinds what perf copied (its time is printed:
# the cost perf defers to the report); then the issue's targets, each met or missed.
# About 30 minutes; not part of make check. Documentation/performance.rst has the table.
#
# Usage: scripts/bench-real.sh [ROUNDS] (default 3). The guest's output, its console and the
# first round's traces stay in $TREE_OUT/bench-real/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$ROOT/scripts/real-programs.sh"

rounds=${1:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/bench-real.sh [ROUNDS]"
# The number of autocommit inserts sqlite3 makes, each a transaction of some 30 system
# calls (its journal created, written, synced and deleted). The test kernels have no
# CONFIG_FILE_LOCKING: sqlite3 opens its database with its unix-none VFS, which takes no
# file locks (one writer, nothing to lock against).
INSERTS=100

"$ROOT/scripts/setup.sh"
install_packages " for make bench-real" sqlite3
KDIR=prod "$ROOT/scripts/build-module.sh"
perf=$("$ROOT/scripts/build-perf.sh")
perf_dwarf=$("$ROOT/scripts/build-perf.sh" --dwarf)
build_test_programs
(cd "$ROOT/tools/ustack" && cargo build --release --quiet) || die "building ustack failed"
USTACK=$ROOT/tools/ustack/target/release/ustack

CC1=$(gcc -print-prog-name=cc1)
DRIVER=$(readlink -f "$(command -v gcc)")
CLANG=/usr/bin/clang-19
SQLITE=/usr/bin/sqlite3
for b in "$CC1" "$DRIVER" "$CLANG" "$SQLITE"; do
	[ -x "$b" ] || die "$b is not installed"
done

OUT=$TREE_OUT/bench-real
STAGE=$OUT/stage
rm -rf "$OUT/data"
mkdir -p "$OUT/data" "$STAGE"

adds=(--add "$ROOT/tests/guest/bench_real.sh:/bin/bench_real.sh"
	--add "$PROG/uu_timeit:/usr/bin/uu_timeit" --add "$perf:/usr/bin/perf"
	--add "$DRIVER:/usr/bin/gcc")
stage_c_inputs "$STAGE"
stage_c_inputs "$STAGE" clang-19
stage_python "$STAGE"
add_libraries "$perf"
add_binaries "$CC1" "$DRIVER" "$CLANG" "$SQLITE"

{
	echo "create table t(id integer primary key, name text, value real);"
	for i in $(seq "$INSERTS"); do
		echo "insert into t(name, value) values('row $i', $i.5);"
	done
} >"$STAGE/inserts.sql"
adds+=(--add "$STAGE/inserts.sql:/root/bigprog/inserts.sql")

# The programs file: NAME, EVENT, COMMAND.
i=/root/bigprog/$(basename "${CC_FILES%.c}")
{
	printf 'cc1\tirq_vectors/local_timer_entry\tgcc -O2 -S -o /tmp/out.s %s.i\n' "$i"
	printf 'python3\tirq_vectors/local_timer_entry\t'
	printf 'python3 -m tokenize %s/%s.py && python3 -m ast %s/%s.py\n' \
		"$PYLIB" "$PY_MODULES" "$PYLIB" "$PY_MODULES"
	printf 'clang\tirq_vectors/local_timer_entry\tclang-19 -O2 -S -o /tmp/out.s %s.clang-19.i\n' "$i"
	printf 'sqlite3\traw_syscalls/sys_enter\t'
	printf 'rm -f /tmp/bench.db && sqlite3 file:/tmp/bench.db?vfs=unix-none '
	printf '</root/bigprog/inserts.sql\n'
} >"$STAGE/programs"
adds+=(--add "$STAGE/programs:/root/programs")

say "bench-real: cc1, python3, clang and sqlite3 under six arms, $rounds rounds, instructions counted"
start=$SECONDS
status=0
UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-7200} "$ROOT/scripts/run-guest.sh" --kernel prod --smp 1 \
	--icount --log "$OUT/console.log" "${adds[@]}" -- sh /bin/bench_real.sh "$rounds" \
	/root/programs >"$OUT/out.txt" || status=$?
if [ "$status" != 0 ]; then
	grep -v '^[A-Za-z0-9+/=]*$' "$OUT/out.txt" | tail -n 30 >&2
	die "the guest run failed (status $status; console in $OUT/console.log)"
fi
say "bench-real: the guest took $((SECONDS - start)) s; counting complete stacks"
python3 "$ROOT/tests/bench_real.py" --perf "$perf_dwarf" --ustack "$USTACK" \
	--data "$OUT/data" "$OUT/out.txt" || die "the analysis failed (guest output in $OUT/out.txt)"
