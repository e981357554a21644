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
# uu_chain and uu_offcpu (threads blocked 20, 60 and 40 ms: 1:3:2), recorded as a user
# records them, with the kernel's whole /proc/kallsyms. make demo (ustack.sh demo) shows
# that file. The tests' copy (kstack.dat, small enough for the console and the tree) is a
# second recording of the same workload under a /proc/kallsyms cut to the functions the
# first one's stacks hold, each with the symbol at the next higher address (where it
# ends); it is used only when trace-cmd report names no frame of it outside the first
# recording's names: a function the second recording meets and the first did not would be
# named after a symbol below it, which is then either one kept only as an end (not among
# the names) or a kept function whose end lies below the address. Otherwise the tests get
# the uncut recording. trace-cmd report's view of the file is the oracle of its frames.
krecord() {
	trace-cmd record -q -T -C global -o "$1" -e user_unwind -e raw_syscalls:sys_enter \
		-f 'id == 110' -e sched:sched_switch -F -c \
		sh -c "uu_chain 3 >/dev/null && uu_offcpu 10 20 >$1.offcpu" \
		>/dev/null 2>&1 || { echo "record $1 failed"; exit 1; }
	[ -s "$1" ] && [ -s "$1.offcpu" ] || { echo "record $1 failed: empty trace"; exit 1; }
}
# knames REPORT: the kernel functions REPORT's stacks name, sorted.
knames() {
	sed -n 's/^[[:space:]]*=> \([^ (]*\).*/\1/p' "$1" | sort -u
}
[ -x /usr/bin/uu_offcpu ] || { echo "uu_offcpu missing from the guest"; exit 1; }
krecord /tmp/kfull.dat
trace-cmd report -i /tmp/kfull.dat >/tmp/kfull.report 2>&1
knames /tmp/kfull.report >/tmp/knames
[ -s /tmp/knames ] || { echo "record /tmp/kfull.dat failed: no kernel stack"; exit 1; }
if [ "$1" = demo ]; then
	dump kstack.dat /tmp/kfull.dat
else
	# Each wanted function's line and the line of the next higher address (addresses are
	# 16 hex digits: sorted as text, they are sorted as numbers).
	sort /proc/kallsyms | awk 'NR == FNR { want[$1] = 1; next }
		($3 in want) { print; keep = 1; at = $1; next }
		keep && $1 != at { print; keep = 0 }' /tmp/knames - >/tmp/kallsyms.small
	mount --bind /tmp/kallsyms.small /proc/kallsyms
	krecord /tmp/kstack.dat
	umount /proc/kallsyms
	trace-cmd report -i /tmp/kstack.dat >/tmp/kstack.report 2>&1
	stray=$(knames /tmp/kstack.report | awk 'NR == FNR { had[$1] = 1; next }
		!($1 in had)' /tmp/knames -)
	if [ -n "$stray" ]; then
		echo "# kstack.dat: the cut kallsyms misnames frames as $(echo $stray):" \
			"the uncut recording instead"
		mv /tmp/kfull.dat /tmp/kstack.dat
		mv /tmp/kfull.dat.offcpu /tmp/kstack.dat.offcpu
		mv /tmp/kfull.report /tmp/kstack.report
	fi
	dump kstack.dat /tmp/kstack.dat
	dump kstack.report /tmp/kstack.report
	dump kstack.offcpu /tmp/kstack.dat.offcpu
fi
rm -f /tmp/kfull.dat

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
	# ustack record -p traces the threads the process has when it starts: its four
	# threads must be there (a loaded host starts them late: a recording of nothing).
	i=0
	while [ "$(ls /proc/$prog/task 2>/dev/null | wc -l)" -lt 5 ] && [ $i -lt 60 ]; do
		sleep 1
		i=$((i + 1))
	done
	# Stopped 8 s after trace-cmd has switched the event on (on a loaded host its start
	# alone can take seconds of the guest's time), or after 60 s without it.
	(i=0
	 while { ! pidof trace-cmd >/dev/null ||
		[ "$(cat $T/events/raw_syscalls/sys_enter/enable)" != 1 ]; } && [ $i -lt 60 ]; do
		sleep 1
		i=$((i + 1))
	 done
	 sleep 8
	 kill -INT $(pidof trace-cmd) 2>/dev/null) &
	urecord rec-pid -T -e raw_syscalls:sys_enter -p $prog
	kill $prog 2>/dev/null
	wait
fi

# ustack top, for real, beside uu_top (60:30:10 of its time and calls in hot_60, hot_30 and
# hot_10): one frame after 3 s of the default timer event (on-CPU samples) for its comm,
# one of raw_syscalls:sys_enter for its pid, and 4 s of --off-cpu ended by SIGTERM (its
# frames counted). The settings top changes are set away from its own first (a small
# buffer, the local clock, a filter on sys_enter), and what tracefs says of them is printed
# before, while --off-cpu runs, and after.
tracefs_state() {
	(cd $T && for f in tracing_on trace_clock buffer_size_kb per_cpu/cpu*/buffer_size_kb \
		trace_options set_event events/raw_syscalls/sys_enter/filter \
		events/irq_vectors/local_timer_entry/filter events/timer/hrtimer_expire_entry/filter \
		events/sched/sched_switch/filter options/userstacktrace_delay; do
		[ -e "$f" ] && echo "$f: $(tr '\n' ' ' <"$f")"
	done)
}
if [ -x /bin/ustack ] && [ "$1" != demo ]; then
	echo 1024 >$T/buffer_size_kb
	echo local >$T/trace_clock
	echo 'id == 110' >$T/events/raw_syscalls/sys_enter/filter
	echo "=== USTACK-TOP"
	echo "--- before"
	tracefs_state
	uu_top 60 >/dev/null &
	prog=$!
	sleep 1
	echo "--- frame timer"
	ustack top --duration 3 --once --comm uu_top 2>&1
	echo "--- status $?"
	echo "--- frame syscalls"
	ustack top --duration 3 --once -e raw_syscalls:sys_enter --pid $prog 2>&1
	echo "--- status $?"
	kill $prog
	wait $prog
	ustack top --off-cpu >/tmp/top-offcpu 2>&1 &
	top=$!
	sleep 4
	echo "--- during"
	tracefs_state
	kill -TERM $top
	wait $top
	status=$?
	echo "--- frame off-cpu"
	echo "--- status $status"
	grep -c ' events read, ' /tmp/top-offcpu
	echo "--- after"
	tracefs_state
	echo "=== END"
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
