# SPDX-License-Identifier: GPL-2.0
# What the guest scripts share; build-initramfs.sh installs it as /lib/uu.sh.
T=/sys/kernel/tracing

# rb KEY: KEY ("bytes", "overrun", "dropped events") summed over every CPU's ring-buffer
# stats (per_cpu/cpuN/stats, "KEY: N" lines).
rb() { cat $T/per_cpu/cpu*/stats | awk -v f="$1" 'index($0, f ":") == 1 {s += $NF} END {print s + 0}'; }

# uu NAME: the module's counter NAME, from user_unwind_stats (0 when it has none).
uu() { awk -v f="$1:" '$1 == f {v = $2} END {print v + 0}' $T/user_unwind_stats 2>/dev/null; }

result() { echo "$1 $2"; }	# NAME VALUE

# sys_enter_on FILTER, sys_enter_off: the top instance's raw_syscalls:sys_enter, filtered.
sys_enter_on() {
	echo "$1" >$T/events/raw_syscalls/sys_enter/filter
	echo 1 >$T/events/raw_syscalls/sys_enter/enable
}
sys_enter_off() {
	echo 0 >$T/events/raw_syscalls/sys_enter/enable
	echo 0 >$T/events/raw_syscalls/sys_enter/filter
}

# cold_search_kib: what the files' tables of uu_bench_cold's stacks take with no more rows
# than a new table has room for (FIRST_ROWS of src/logic/ftable.rs), in KiB: the first-sight
# arm Ec's memory limit (bench.sh, insn-profile.sh). The tables dropped, then one stack at
# depth 8 through raw_syscalls:sys_enter (its filter set by the caller); the event, the
# option and the limit are left as they were.
cold_search_kib() {
	tk=/sys/module/user_unwind/parameters/table_kib
	kib=$(cat $tk)
	echo 0 >$tk
	echo "$kib" >$tk
	echo 1 >$T/events/raw_syscalls/sys_enter/enable
	echo 1 >$T/options/userstacktrace_delay
	uu_bench_cold 1 8 >/dev/null
	echo 0 >$T/options/userstacktrace_delay
	echo 0 >$T/events/raw_syscalls/sys_enter/enable
	echo $((($(uu unwind_table_bytes) + 1023) / 1024))
}

# leaks: the objects kmemleak reports unreferenced over two scans (5 s old at least), as
# "leaks N" (N is "unavailable" without kmemleak), then the start of its report.
leaks() {
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	if [ ! -e /sys/kernel/debug/kmemleak ]; then
		result leaks unavailable
		return
	fi
	echo scan >/sys/kernel/debug/kmemleak
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	result leaks "$(grep -c 'unreferenced object' /sys/kernel/debug/kmemleak)"
	head -n 60 /sys/kernel/debug/kmemleak
}
