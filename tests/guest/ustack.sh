#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of the ustack tests and of make demo: trace-cmd records the test programs in
# each file format the tool reads, and each file comes out on the console in base64 between
# "=== FILE NAME" and "=== END", with trace-cmd report's view of it (the oracle), the same
# with the libtraceevent plugin if /plugins has it, and the text of the trace file.
# "ustack.sh demo" records the kernel-stack and off-CPU trace below and one trace.dat of a
# longer workload (frame-pointer programs and uu_nofp, built without frame pointers).
T=/sys/kernel/tracing
insmod /lib/modules/user_unwind.ko || exit 1

# dump NAME FILE: FILE on the console.
dump() {
	echo "=== FILE $1"
	base64 "$2"
	echo "=== END"
}

# Kernel stacks (-T, a kernel_stack after every event) and off-CPU time (sched_switch) of
# uu_chain and uu_offcpu (threads blocked 20, 60 and 40 ms: 1:3:2), recorded with a
# /proc/kallsyms cut to the functions their stacks hold, each with the symbol after it
# (where it ends): a first recording with the whole kallsyms names them, then the same
# workload is recorded again under the cut one, a file small enough for the console and
# the tree. trace-cmd report's view of it is the oracle of its kernel frames.
krecord() {
	trace-cmd record -q -T -C global -o "$1" -e user_unwind -e raw_syscalls:sys_enter \
		-f 'id == 110' -e sched:sched_switch -F -c \
		sh -c "uu_chain 3 >/dev/null && uu_offcpu 10 20 >$1.offcpu" \
		>/dev/null 2>&1 || echo "record $1 failed"
}
if [ -x /usr/bin/uu_offcpu ]; then
	krecord /tmp/kfull.dat
	trace-cmd report -i /tmp/kfull.dat 2>/dev/null |
		sed -n 's/^[[:space:]]*=> \([^ (]*\).*/\1/p' | sort -u >/tmp/knames
	awk 'NR == FNR { want[$1] = 1; next } ($3 in want) { print; keep = 1; next }
		keep { print; keep = 0 }' /tmp/knames /proc/kallsyms >/tmp/kallsyms.small
	rm -f /tmp/kfull.dat
	mount --bind /tmp/kallsyms.small /proc/kallsyms
	krecord /tmp/kstack.dat
	umount /proc/kallsyms
	trace-cmd report -i /tmp/kstack.dat >/tmp/kstack.report 2>&1
	dump kstack.dat /tmp/kstack.dat
	dump kstack.report /tmp/kstack.report
	dump kstack.offcpu /tmp/kstack.dat.offcpu
fi

# ustack record, for real: the host's ustack (its libraries come with it) runs the guest's
# trace-cmd on the real module: a command with -e, a command with -T and --off-cpu, and a
# running process (-p, stopped as Ctrl-C stops it: SIGINT to trace-cmd). What it says and
# the stacks ustack reads from each file come out as "USTACK-RECORD NAME" blocks.
urecord() {
	name=$1
	shift
	echo "=== USTACK-RECORD $name"
	ustack record -o /tmp/$name.dat "$@" 2>&1
	echo "=== status $?"
	ustack --folded - --sysroot / /tmp/$name.dat 2>&1
	echo "=== END"
}
if [ -x /bin/ustack ] && [ "$1" != demo ]; then
	urecord rec-cmd -e raw_syscalls:sys_enter -- uu_nofp chain 5
	urecord rec-offcpu -T --off-cpu -- uu_offcpu 3 10
	uu_offcpu 1000 10 >/dev/null &
	prog=$!
	(while ! pidof trace-cmd >/dev/null; do sleep 1; done
	 sleep 8
	 kill -INT $(pidof trace-cmd) 2>/dev/null) &
	urecord rec-pid -T -e raw_syscalls:sys_enter -p $prog
	kill $prog 2>/dev/null
	wait
fi

# trace-cmd stores /proc/kallsyms in every file (megabytes): an empty one keeps the other
# files small enough for the console and the tree.
: >/tmp/no-kallsyms
mount --bind /tmp/no-kallsyms /proc/kallsyms

# record NAME TRACE-CMD-OPTIONS...: the test programs' getppid calls (uu_chain's known
# chain, uu_bench's 100 frames split into two records), their cookies and stacks,
# recorded into /tmp/NAME.dat and printed with trace-cmd report's view of it.
record() {
	name=$1
	shift
	trace-cmd record -q -o /tmp/$name.dat "$@" -e user_unwind -e raw_syscalls:sys_enter \
		-f 'id == 110' sh -c "$WORKLOAD" >/dev/null 2>&1 || echo "record $name failed"
	dump $name.dat /tmp/$name.dat
	[ -n "$DEMO" ] && return
	trace-cmd report -i /tmp/$name.dat >/tmp/$name.report 2>&1
	dump $name.report /tmp/$name.report
	if [ -f /plugins/plugin_user_unwind.so ]; then
		TRACEEVENT_PLUGIN_DIR=/plugins trace-cmd report -i /tmp/$name.dat \
			>/tmp/$name.plugin-report 2>&1
		dump $name.plugin-report /tmp/$name.plugin-report
	fi
}

if [ "$1" = demo ]; then
	DEMO=1
	WORKLOAD='uu_chain 200 & uu_bench 100 24 & uu_nofp chain 100 & uu_bench 50 70; wait'
	record demo -C global
	exit 0
fi
WORKLOAD='uu_chain 20 && uu_bench 3 100'
record v7-zstd
record v7-none --compression none
record v6 --file-version 6
record v7-global -C global
# --date: the file maps the trace clock to the time of day, which report prints.
record v7-date --date -C global
# uu_nofp, built -O2 without frame pointers as Debian builds: the module's .eh_frame
# unwinder's complete stack, main -> nf_a -> nf_b -> nf_c -> getppid.
WORKLOAD='uu_nofp chain 20'
record nofp -C global

# The text of the trace file, for the same workload.
echo global >$T/trace_clock
echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
echo 1 >$T/events/raw_syscalls/sys_enter/enable
echo 1 >$T/options/userstacktrace_delay
uu_chain 20 >/dev/null
uu_bench 3 100 >/dev/null
echo 0 >$T/options/userstacktrace_delay
echo 0 >$T/events/raw_syscalls/sys_enter/enable
echo "# trace_clock: global" >/tmp/text.trace
cat $T/trace >>/tmp/text.trace
dump text.trace /tmp/text.trace
