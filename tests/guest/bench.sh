#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/bench.sh: the cost of one traced getppid (through a 5-frame user
# chain) with tracing off, with sys_enter recorded, with sys_enter plus cookies only (the
# kernel's deferred unwind runs, the module translates nothing), and with sys_enter plus
# deferred user stacks; each configuration run in turn, ROUNDS times, in one boot.
T=/sys/kernel/tracing
N=${1:-20000}
ROUNDS=${2:-3}
insmod /lib/modules/user_unwind.ko || exit 1
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 8192 >$T/buffer_size_kb
run() { uu_bench "$N" | sed "s/^/$1 /"; }
for r in $(seq "$ROUNDS"); do
	echo 0 >$T/events/raw_syscalls/sys_enter/enable
	run off
	echo 1 >$T/events/raw_syscalls/sys_enter/enable
	run sys_enter
	echo 1 >$T/events/user_unwind/user_unwind_cookie/enable
	run sys_enter+cookies
	echo 0 >$T/events/user_unwind/user_unwind_cookie/enable
	echo 1 >$T/options/userstacktrace_delay
	run sys_enter+user_unwind
	echo 0 >$T/options/userstacktrace_delay
	echo >$T/trace
done
echo "dropped_events $(grep -h 'dropped events' $T/per_cpu/cpu*/stats | awk '{s += $3} END {print s + 0}')"
