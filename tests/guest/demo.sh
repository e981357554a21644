#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# What make demo shows in the guest.
T=/sys/kernel/tracing
set -x
insmod /lib/modules/user_unwind.ko
lsmod
dmesg | grep -E 'user_unwind|# Subtest|ok [0-9]+ ' | grep -v '^\s*$'
cat $T/options/userstacktrace_delay
# A clock coherent across CPUs keeps each file_cache before the stacks that use it.
echo global >$T/trace_clock
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 1 >$T/events/raw_syscalls/sys_enter/enable
echo 1 >$T/options/userstacktrace_delay
uu_chain 2
# Built -O2 without frame pointers, as Debian builds: the module's .eh_frame unwinder.
uu_nofp chain 1
echo 0 >$T/options/userstacktrace_delay
echo 0 >$T/events/raw_syscalls/sys_enter/enable
set +x
echo "---- cat $T/user_unwind_stats ----"
cat $T/user_unwind_stats
echo "---- cat $T/trace ----"
echo "# trace_clock: $(cat $T/trace_clock)"
grep -v '^#' $T/trace
