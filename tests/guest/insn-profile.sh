#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/insn-profile.sh. Usage: insn-profile.sh ARM DEPTH CALLS
#
# Sets up ARM as tests/guest/bench.sh does (E: uu_bench_nofp, rows cached; Ec: first
# sight, the files' tables limited to their search tables; Et: every row in the tables),
# then runs CALLS calls of its workload at DEPTH, and prints the module's counters for
# them and the kernel's and the module's symbols (the host reads the counts QEMU's plugin
# wrote and attributes them). ASLR is off: each run of a program gets the same layout, so
# that two runs differ only in their number of calls.
T=/sys/kernel/tracing
ARM=$1 D=$2 N=$3
. /lib/uu.sh
echo 0 >/proc/sys/kernel/randomize_va_space
echo 0 >/proc/sys/kernel/kptr_restrict
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 65536 >$T/buffer_size_kb
insmod /lib/modules/user_unwind.ko || exit 1
TK=/sys/module/user_unwind/parameters/table_kib
SEARCH_KIB=$(cold_search_kib)
uu_bench_cold 8192 "$D" >/dev/null
echo 1 >$T/events/raw_syscalls/sys_enter/enable
case $ARM in
E) prog=uu_bench_nofp ;;
Ec) echo 0 >$TK
    echo "$SEARCH_KIB" >$TK
    prog=uu_bench_cold ;;
Et) echo 1 >$T/options/userstacktrace_delay
    uu_bench_cold $((8192 / (D - 5) + 1)) "$D" >/dev/null
    prog=uu_bench_cold ;;
*) echo "insn-profile: no arm $ARM" >&2; exit 1 ;;
esac
echo 1 >$T/options/userstacktrace_delay
$prog 20 "$D" >/dev/null
echo >$T/trace
m0=$(uu unwind_row_misses) s0=$(uu stacks)
$prog "$N" "$D" >/dev/null
echo 0 >$T/options/userstacktrace_delay
echo "insn-profile stacks=$(($(uu stacks) - s0)) row_misses=$(($(uu unwind_row_misses) - m0))"
grep -w '_text' /proc/kallsyms | sed 's/^/insn-profile ksym /'
grep '\[user_unwind\]' /proc/kallsyms | sed 's/^/insn-profile ksym /'
