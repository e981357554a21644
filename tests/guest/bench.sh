#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/bench.sh, in one boot. Usage: bench.sh ITERATIONS ROUNDS DEPTH...
#
# Per round, per depth, each arm runs a workload once (ITERATIONS getppid calls with
# raw_syscalls:sys_enter on, filtered to getppid) in an order rotated every round, so that
# drift hits all arms alike, one arm at a time (the kernel's deferred unwind is cached per
# kernel entry and shared by its users: perf and the module never run together):
#   A   the event alone
#   B   the kernel's userstacktrace option (synchronous, in the event)
#   C   userstacktrace_delay with user_unwind_stack and file_cache off: the deferred unwind
#       and the request hook, nothing translated
#   D   userstacktrace_delay with the kernel's frame-pointer stack (unwinder=fp)
#   E   userstacktrace_delay with the .eh_frame unwinder (the default), on uu_bench_nofp:
#       the same workload built without frame pointers, as Debian builds
#   Ac  the event alone, on uu_bench_cold: every stack through functions no recent stack
#       went through (more return addresses than the module's row cache holds)
#   Ec  E on uu_bench_cold: the .eh_frame unwinder at first sight of every row: the
#       files' tables dropped before the run and their memory limit (table_kib) set to
#       what their search tables take, so that they keep no more rows (FIRST_ROWS of
#       src/logic/ftable.rs, a few hundred of the workload's tens of thousands, excepted)
#   Et  E on uu_bench_cold with every row kept in the files' tables (a run through all its
#       functions first): the row cache misses, the tables answer
#   P0  perf record of the same event and filter: perf's event alone
#   P1  P0 with perf's deferred user callchains (--call-graph fp,defer --user-callchains)
#   P2  P0 with --call-graph dwarf --user-callchains (8 KiB of user stack copied into
#       every sample), on uu_bench_nofp, beside E
#   A0  A before the module is loaded (ROUNDS runs a depth, first): A/A0 is what the idle
#       module (loaded, option off) costs the event
# Every run prints one "run" line: its ns per call, then the ring buffer's own counters
# (bytes, entries, overrun, dropped events) and the module's (user_unwind_stats), as the
# run's deltas; a perf run, perf's own counts from its perf.data instead (records by type,
# the data size, lost records, wakeups) and for P1 whether the callchains were deferred.
# A perf run whose records are not what was asked for fails the benchmark here.
T=/sys/kernel/tracing
N=$1 ROUNDS=$2
shift 2
DEPTHS=$*
KO=/lib/modules/user_unwind.ko

ARMS="A B C D E Ac Ec Et P0 P1 P2"
# The programs' files were unpacked at boot into the rootfs, whose file system type has
# no multigrain timestamps (rootfs_fs_type, init/do_mounts.c): the module keeps nothing
# read from such a file until its change time is 2 s old (the settled rule, src/unwind.c).
sleep 3
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 65536 >$T/buffer_size_kb

# rb and uu: the ring buffer's and the module's counters (tests/guest/lib.sh).
. /lib/uu.sh

# A0: the event alone without the module, so that A/A0 is the idle module's cost. Its
# runs come first, one unmeasured run a depth before them (TCG translates new code once).
for d in $DEPTHS; do
	uu_bench 20 "$d" >/dev/null
	for r in $(seq "$ROUNDS"); do
		b0=$(rb bytes)
		echo 1 >$T/events/raw_syscalls/sys_enter/enable
		ns=$(uu_bench "$N" "$d" | awk '{print $2}')
		echo 0 >$T/events/raw_syscalls/sys_enter/enable
		echo "run round=$r arm=A0 depth=$d ns=$ns bytes=$(($(rb bytes) - b0))"
	done
done
echo >$T/trace
insmod $KO || exit 1
TK=/sys/module/user_unwind/parameters/table_kib
KIB0=$(cat $TK)

PERF=/usr/bin/perf PD=/tmp/perf.data
[ -x $PERF ] || { echo "bench: no $PERF in the guest" >&2; exit 1; }

arm_on() {
	case $1 in P*) return ;; esac
	echo 1 >$T/events/raw_syscalls/sys_enter/enable
	case $1 in
	B) echo 1 >$T/options/userstacktrace ;;
	C) echo 1 >$T/options/userstacktrace_delay
	   echo 0 >$T/events/user_unwind/user_unwind_stack/enable
	   echo 0 >$T/events/user_unwind/file_cache/enable ;;
	D) echo fp >/sys/module/user_unwind/parameters/unwinder
	   echo 1 >$T/options/userstacktrace_delay ;;
	E) echo 1 >$T/options/userstacktrace_delay ;;
	Ec) echo 0 >$TK
	    echo "$SEARCH_KIB" >$TK
	    echo 1 >$T/options/userstacktrace_delay ;;
	Et) echo 1 >$T/options/userstacktrace_delay
	    uu_bench_cold $((UU_COLD_FNS / ($2 - 5) + 1)) "$2" >/dev/null ;;
	esac
}

arm_off() {
	echo 0 >$T/options/userstacktrace
	echo 0 >$T/options/userstacktrace_delay
	echo 0 >$T/events/raw_syscalls/sys_enter/enable
	echo eh_frame >/sys/module/user_unwind/parameters/unwinder
	echo "$KIB0" >$TK
}

# The workload of arm $1.
prog() {
	case $1 in
	E | P2) echo uu_bench_nofp ;;
	Ac | Ec | Et) echo uu_bench_cold ;;
	*) echo uu_bench ;;
	esac
}

# die MESSAGE: a perf run whose records are not what the arm asked for ends the benchmark.
die() {
	echo "bench: $*" >&2
	exit 1
}

# perf_run ARM DEPTH: the workload under perf record, then perf's own counts of what it
# recorded. The perf buffer holds the whole run (twice what it writes, rounded up to a
# power of two), so that perf is woken only when the workload ends and does not copy data
# out while the workload runs on the same CPU (the ftrace arms leave their data in the
# ring buffer too); "wakeups" says whether that held.
perf_run() {
	case $1 in
	P0) cg= per=256 ;;
	P1) cg="--call-graph fp,defer --user-callchains" per=$((256 + 8 * $2)) ;;
	P2) cg="--call-graph dwarf --user-callchains" per=8704 ;;
	esac
	mb=1
	while [ $((mb * 1024 * 1024)) -lt $((2 * N * per)) ]; do mb=$((mb * 2)); done
	rm -f $PD
	# shellcheck disable=SC2086 # $cg is a list of options
	ns=$($PERF record -o $PD -m "${mb}M" -c 1 -B -N -e raw_syscalls:sys_enter \
		--filter 'id == 110' $cg -- "$(prog "$1")" "$N" "$2" 2>/tmp/perf.err |
		awk '{print $2}')
	[ -n "$ns" ] || { cat /tmp/perf.err >&2; die "perf record $1 failed"; }
	wakeups=$(sed -n 's/.*Woken up \([0-9]*\) times.*/\1/p' /tmp/perf.err)
	data=$($PERF report -i $PD --header-only 2>/dev/null | awk '$2 == "data" && $3 == "size" {print $5}')
	$PERF report -i $PD --stats --stdio 2>/dev/null >/tmp/perf.stats
	st() { awk -v f="$1" '$1 == f && $2 == "events:" {v = $3} END {print v + 0}' /tmp/perf.stats; }
	samples=$(st SAMPLE) deferred=$(st CALLCHAIN_DEFERRED)
	lost=$(($(st LOST) + $(st LOST_SAMPLES)))
	[ "$samples" = "$N" ] || die "perf $1 depth $2: $samples samples, not $N"
	[ "$lost" = 0 ] || die "perf $1 depth $2: $lost LOST records"
	extra=
	if [ "$1" = P1 ]; then
		# Deferred as asked: the attribute stayed on (perf clears it in silence when the
		# kernel refuses it), and a deferred callchain record came for every sample (a
		# request that fails falls back to a synchronous user chain, in silence).
		$PERF evlist -v -i $PD 2>/dev/null | grep -q 'defer_callchain: 1' ||
			die "perf P1 depth $2: the event has no defer_callchain"
		[ "$deferred" = "$samples" ] ||
			die "perf P1 depth $2: $deferred deferred callchains for $samples samples"
		extra="deferred=$deferred defer_attr=1"
		[ "$r" != 1 ] || extra="$extra $(perf_dump)"
	fi
	rm -f $PD
	echo "run round=$r arm=$1 depth=$2 ns=$ns data=$data samples=$samples" \
		"lost=$lost wakeups=$wakeups mmap_mb=$mb $extra"
}

# perf_dump: P1's records one by one (perf report -D, in the first round of a depth: it
# prints every record, which takes a while): the samples' callchains must hold the
# deferred marker and no user frame, and the deferred records' sizes and frames.
perf_dump() {
	$PERF report -i $PD -D 2>/dev/null | awk '
	function hex(s,  i, v) {
		s = tolower(s)
		sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++)
			v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	# "[CPU TIME] OFFSET [SIZE]: PERF_RECORD_TYPE(...": a record, its size in hex.
	/ \[0x[0-9a-f]+\]: PERF_RECORD_/ {
		for (i = 2; i <= NF && $i !~ /^PERF_RECORD_/; i++)
			;
		type = $i
		sub(/^PERF_RECORD_/, "", type)
		sub(/\(.*/, "", type)
		size = $(i - 1)
		gsub(/[^0-9a-fx]/, "", size)
		size = hex(size)
		if (type == "SAMPLE") { ns++; sbytes += size }
		if (type == "CALLCHAIN_DEFERRED") { nd++; dbytes += size }
	}
	/^\.\.\. FP chain: nr:/ {
		split($0, a, "nr:")
		if (type == "CALLCHAIN_DEFERRED") dframes += a[2]
	}
	/PERF_CONTEXT_USER_DEFERRED/ { if (type == "SAMPLE") marks++; next }
	/PERF_CONTEXT_USER\)/ { if (type == "SAMPLE") usersync++ }
	END {
		printf "dump_samples=%d dump_sample_bytes=%d dump_deferred=%d", ns, sbytes, nd
		printf " dump_deferred_bytes=%d dump_deferred_frames=%d", dbytes, dframes
		printf " dump_marks=%d dump_user_sync=%d\n", marks, usersync
	}'
}

run() {
	case $1 in P*) perf_run "$@"; return ;; esac
	s0=$(uu stacks) f0=$(uu frames) c0=$(uu file_cache) r0=$(uu requests)
	u0=$(uu cookies_unrecorded) o0=$(rb overrun) d0=$(rb "dropped events") b0=$(rb bytes)
	e0=$(rb entries) m0=$(uu unwind_row_misses) t0=$(uu unwind_truncated)
	p0=$(uu unwind_rows_parsed)
	arm_on "$1" "$2"
	ns=$($(prog "$1") "$N" "$2" | awk '{print $2}')
	arm_off
	# The last stacks are written on the way back to user space: read after the program.
	echo "run round=$r arm=$1 depth=$2 ns=$ns bytes=$(($(rb bytes) - b0))" \
		"entries=$(($(rb entries) - e0))" \
		"overrun=$(($(rb overrun) - o0)) dropped=$(($(rb "dropped events") - d0))" \
		"requests=$(($(uu requests) - r0)) stacks=$(($(uu stacks) - s0))" \
		"frames=$(($(uu frames) - f0)) file_cache=$(($(uu file_cache) - c0))" \
		"unrecorded=$(($(uu cookies_unrecorded) - u0))" \
		"row_misses=$(($(uu unwind_row_misses) - m0)) truncated=$(($(uu unwind_truncated) - t0))" \
		"parsed=$(($(uu unwind_rows_parsed) - p0)) table_bytes=$(uu unwind_table_bytes)"
}

# The functions of uu_bench_cold (tests/prog/Makefile), and what the files' tables of its
# stacks take with no more rows than a new table has room for: Ec's memory limit.
UU_COLD_FNS=8192
SEARCH_KIB=$(cold_search_kib)
echo "search_kib $SEARCH_KIB"

for r in $(seq "$ROUNDS"); do
	for d in $DEPTHS; do
		# A clear buffer for each depth's runs, and short D and E runs after the clear: a
		# buffer reset makes the next stack repeat its file_cache events, and E's first
		# stacks parse their rows, which is not the steady state measured. uu_bench_cold
		# runs once through all its functions unmeasured (under TCG the first run of new
		# code is its translation) and once under Ec for its file_cache events.
		echo >$T/trace
		arm_on D
		uu_bench 20 8 >/dev/null
		arm_off
		arm_on E
		uu_bench_nofp 20 "$d" >/dev/null
		arm_off
		uu_bench_cold 8192 "$d" >/dev/null
		arm_on Ec "$d"
		uu_bench_cold 20 "$d" >/dev/null
		arm_off
		# The arms in a rotated order: round r starts r places further on.
		order=$(echo $ARMS | awk -v r="$r" -v n="$(echo $ARMS | wc -w)" \
			'{for (i = 1; i <= n; i++) printf "%s ", $((r + i - 1) % n + 1)}')
		for a in $order; do
			run $a $d
		done
	done
done
