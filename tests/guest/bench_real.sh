#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/bench-real.sh, in one boot. Usage: bench_real.sh ROUNDS PROGRAMS,
# PROGRAMS a file of lines "NAME<tab>EVENT<tab>COMMAND" (EVENT as SYSTEM/NAME, COMMAND run
# with sh -c).
#
# Per round, per program, each arm runs the program once, alone, in an order rotated every
# round so that drift hits all arms alike:
#   N   no tracing
#   A   the program's event (irq_vectors:local_timer_entry, the tick's interrupt, for a
#       sampled program: the test kernels' tick is periodic, not an hrtimer; every
#       raw_syscalls:sys_enter for a system-call bound one), no stacks
#   E   A with userstacktrace_delay, the module's default (.eh_frame) unwinder
#   D   E with unwinder=fp (the kernel's frame-pointer stack)
#   P1  perf record of the same event, --call-graph fp,defer --user-callchains
#   P2  perf record of the same event, --call-graph dwarf --user-callchains (8 KiB of user
#       stack copied into every sample)
# The ftrace arms trace the program and its children only (set_event_pid, with the
# event-fork option), as perf's per-task events do, and the module is loaded afresh for E
# and D: each run meets the program's files at first sight, as a user's first profile does.
# Every buffer holds the whole run and no reader runs beside the program (ftrace's data stays
# in its ring buffer, perf's buffer is sized past what it writes): what is measured is what
# tracing costs the program itself. uu_timeit times the program (under -icount, in
# instructions) and enables the event after writing its PID, so no other task is traced.
#
# Every run prints one "run" line: its ns and exit status, then the ring buffer's and the
# module's counters as the run's deltas, or perf's own counts from its perf.data. In the
# first round, each tracing arm's data follows in a "=== DATA PROGRAM ARM" section, gzip'ed
# in base64 (the module's as trace-cmd extract writes it, perf's perf.data), for the host to
# count the complete stacks.
. /lib/uu.sh
ROUNDS=$1 PROGRAMS=$2
KO=/lib/modules/user_unwind.ko
OPT=$T/options/userstacktrace_delay
UNWINDER=/sys/module/user_unwind/parameters/unwinder
PERF=/usr/bin/perf PD=/tmp/perf.data
ARMS="N A E D P1 P2"

fail() {
	echo "bench-real: $*" >&2
	exit 1
}
[ -r "$PROGRAMS" ] && [ -n "$ROUNDS" ] || fail "usage: bench_real.sh ROUNDS PROGRAMS"
[ -x $PERF ] || fail "no $PERF in the guest"

# The programs' files were unpacked at boot into the rootfs, whose file system type has
# no multigrain timestamps (rootfs_fs_type, init/do_mounts.c): the module keeps nothing
# read from such a file until its change time is 2 s old (the settled rule, src/unwind.c).
sleep 3
echo global >$T/trace_clock
echo 131072 >$T/buffer_size_kb
echo 1024 >$T/saved_cmdlines_size
echo 1 >$T/options/event-fork
# trace-cmd stores /proc/kallsyms in its file (megabytes the host does not read): an empty
# one keeps the file small.
: >/tmp/no-kallsyms
mount --bind /tmp/no-kallsyms /proc/kallsyms

# data PROGRAM ARM FILE: FILE to the host, in the first round.
data() {
	[ "$r" = 1 ] || return 0
	echo "=== DATA $1 $2"
	gzip -c "$3" | base64
	echo "=== END"
}

# ftrace_run NAME ARM EVENT COMMAND
ftrace_run() {
	echo >$T/trace
	echo >$T/set_event_pid
	case $2 in
	E | D)
		insmod $KO || fail "insmod failed"
		[ "$2" = E ] || echo fp >$UNWINDER
		echo 1 >$OPT
		# The option enables the module's events; the program's event comes on with
		# uu_timeit. The module was loaded for this run: its counters are the run's.
		;;
	esac
	o0=$(rb overrun) d0=$(rb "dropped events") b0=$(rb bytes) e0=$(rb entries)
	set -- "$1" "$2" "$3" "$(uu_timeit --trace-pid $T/set_event_pid \
		--enable $T/events/$3/enable sh -c "exec >/dev/null 2>&1; $4" </dev/null)"
	echo 0 >$T/events/$3/enable
	echo >$T/set_event_pid
	line="run round=$r prog=$1 arm=$2 $4 bytes=$(($(rb bytes) - b0))"
	line="$line entries=$(($(rb entries) - e0)) overrun=$(($(rb overrun) - o0))"
	line="$line dropped=$(($(rb "dropped events") - d0))"
	case $2 in
	E | D)
		echo 0 >$OPT
		line="$line requests=$(uu requests) stacks=$(uu stacks) frames=$(uu frames)"
		line="$line file_cache=$(uu file_cache) unrecorded=$(uu cookies_unrecorded)"
		line="$line exited=$(uu exit_callbacks) truncated=$(uu unwind_truncated)"
		line="$line parsed=$(uu unwind_rows_parsed) fetches=$(uu fetches_queued)"
		line="$line table_bytes=$(uu unwind_table_bytes)"
		echo "$line"
		if [ "$r" = 1 ]; then
			echo "stats prog=$1 arm=$2 $(awk '{sub(/:$/, "", $1); printf "%s=%s ", $1, $2}' \
				$T/user_unwind_stats)"
			# Extracted before the module goes: unloading clears a buffer that holds
			# its events.
			trace-cmd extract -o /tmp/bench.dat </dev/null >/tmp/extract.log 2>&1 || {
				cat /tmp/extract.log >&2
				fail "trace-cmd extract failed"
			}
			data "$1" "$2" /tmp/bench.dat
			rm -f /tmp/bench.dat
		fi
		rmmod user_unwind || fail "rmmod failed"
		;;
	*) echo "$line" ;;
	esac
}

# perf_run NAME ARM EVENT COMMAND: perf's buffer holds the whole run, so that perf is
# woken only when the program ends ("wakeups" says whether that held).
perf_run() {
	case $2 in
	P1) cg="--call-graph fp,defer --user-callchains" mb=64 ;;
	P2) cg="--call-graph dwarf --user-callchains" mb=256 ;;
	esac
	rm -f $PD
	# shellcheck disable=SC2086 # $cg is a list of options
	out=$($PERF record -o $PD -m "${mb}M" -c 1 -B -N -e "$(echo "$3" | tr / :)" $cg -- \
		uu_timeit sh -c "exec >/dev/null 2>&1; $4" </dev/null 2>/tmp/perf.err)
	case $out in ns=*) ;; *) cat /tmp/perf.err >&2; fail "perf record $1 $2 failed" ;; esac
	wakeups=$(sed -n 's/.*Woken up \([0-9]*\) times.*/\1/p' /tmp/perf.err)
	size=$(wc -c <$PD)
	$PERF report -i $PD --stats --stdio 2>/dev/null >/tmp/perf.stats
	st() { awk -v f="$1" '$1 == f && $2 == "events:" {v = $3} END {print v + 0}' /tmp/perf.stats; }
	echo "run round=$r prog=$1 arm=$2 $out bytes=$size samples=$(st SAMPLE)" \
		"deferred=$(st CALLCHAIN_DEFERRED) lost=$(($(st LOST) + $(st LOST_SAMPLES)))" \
		"wakeups=$wakeups mmap_mb=$mb"
	data "$1" "$2" $PD
	rm -f $PD
}

run() {
	case $2 in
	N) echo "run round=$r prog=$1 arm=N $(uu_timeit sh -c "exec >/dev/null 2>&1; $4" </dev/null)" ;;
	P*) perf_run "$@" ;;
	*) ftrace_run "$@" ;;
	esac
}

tab=$(printf '\t')
# One unmeasured run of each program first: TCG translates new code once, and the
# page cache and dentries are warm for every arm alike.
while IFS=$tab read -r name event cmd; do
	[ -n "$cmd" ] || fail "a line of $PROGRAMS is not NAME<tab>EVENT<tab>COMMAND"
	[ -d $T/events/$event ] || fail "this kernel has no event $event"
	sh -c "$cmd" </dev/null >/dev/null 2>/tmp/err || {
		cat /tmp/err >&2
		fail "$name failed: $cmd"
	}
done <"$PROGRAMS"

n=$(echo $ARMS | wc -w)
for r in $(seq "$ROUNDS"); do
	while IFS=$tab read -r name event cmd; do
		order=$(echo $ARMS | awk -v r="$r" -v n="$n" \
			'{for (i = 1; i <= n; i++) printf "%s ", $((r + i - 1) % n + 1)}')
		for a in $order; do
			run "$name" "$a" "$event" "$cmd"
		done
	done <"$PROGRAMS"
done
echo "=== END"
umount /proc/kallsyms
