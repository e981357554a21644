#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/bench.sh, in one boot. Usage: bench.sh ITERATIONS ROUNDS DEPTH...
#
# Per round, per depth, each arm runs uu_bench once (ITERATIONS getppid calls with
# raw_syscalls:sys_enter on, filtered to getppid) in an order rotated every round, so that
# drift hits all arms alike:
#   A  the event alone
#   B  the kernel's userstacktrace option (synchronous, in the event)
#   C  userstacktrace_delay with user_unwind_stack and file_cache off: the deferred unwind
#      and the request hook, nothing translated
#   D  userstacktrace_delay with the kernel's frame-pointer stack (unwinder=fp)
#   E  userstacktrace_delay with the .eh_frame unwinder (the default), on uu_bench_nofp:
#      the same workload built without frame pointers, as Debian builds
# Every run prints one "run" line: its ns per call, then the ring buffer's own counters
# (bytes, entries, overrun, dropped events) and the module's (user_unwind_stats), as the
# run's deltas.
T=/sys/kernel/tracing
N=$1 ROUNDS=$2
shift 2
DEPTHS=$*
KO=/lib/modules/user_unwind.ko

insmod $KO || exit 1
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 65536 >$T/buffer_size_kb

# rb and uu: the ring buffer's and the module's counters (tests/guest/lib.sh).
. /lib/uu.sh

arm_on() {
	echo 1 >$T/events/raw_syscalls/sys_enter/enable
	case $1 in
	B) echo 1 >$T/options/userstacktrace ;;
	C) echo 1 >$T/options/userstacktrace_delay
	   echo 0 >$T/events/user_unwind/user_unwind_stack/enable
	   echo 0 >$T/events/user_unwind/file_cache/enable ;;
	D) echo fp >/sys/module/user_unwind/parameters/unwinder
	   echo 1 >$T/options/userstacktrace_delay ;;
	E) echo 1 >$T/options/userstacktrace_delay ;;
	esac
}

arm_off() {
	echo 0 >$T/options/userstacktrace
	echo 0 >$T/options/userstacktrace_delay
	echo 0 >$T/events/raw_syscalls/sys_enter/enable
	echo eh_frame >/sys/module/user_unwind/parameters/unwinder
}

run() {
	s0=$(uu stacks) f0=$(uu frames) c0=$(uu file_cache) r0=$(uu requests)
	u0=$(uu cookies_unrecorded) o0=$(rb overrun) d0=$(rb "dropped events") b0=$(rb bytes)
	e0=$(rb entries)
	arm_on "$1"
	prog=uu_bench
	[ "$1" != E ] || prog=uu_bench_nofp
	ns=$($prog "$N" "$2" | awk '{print $2}')
	arm_off
	# The last stacks are written on the way back to user space: read after the program.
	echo "run round=$r arm=$1 depth=$2 ns=$ns bytes=$(($(rb bytes) - b0))" \
		"entries=$(($(rb entries) - e0))" \
		"overrun=$(($(rb overrun) - o0)) dropped=$(($(rb "dropped events") - d0))" \
		"requests=$(($(uu requests) - r0)) stacks=$(($(uu stacks) - s0))" \
		"frames=$(($(uu frames) - f0)) file_cache=$(($(uu file_cache) - c0))" \
		"unrecorded=$(($(uu cookies_unrecorded) - u0))"
}

for r in $(seq "$ROUNDS"); do
	for d in $DEPTHS; do
		# A clear buffer for each depth's runs, and short D and E runs after the clear: a
		# buffer reset makes the next stack repeat its file_cache events, and E's first
		# stacks parse their rows, which is not the steady state measured.
		echo >$T/trace
		arm_on D
		uu_bench 20 8 >/dev/null
		arm_off
		arm_on E
		uu_bench_nofp 20 "$d" >/dev/null
		arm_off
		case $((r % 5)) in
		0) order="A B C D E" ;;
		1) order="B C D E A" ;;
		2) order="C D E A B" ;;
		3) order="D E A B C" ;;
		4) order="E A B C D" ;;
		esac
		for a in $order; do
			run $a $d
		done
	done
done
