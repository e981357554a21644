#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/stress.sh. Usage: stress.sh CYCLES SECONDS [CHECK_EVERY]
#
# Each cycle loads the module, switches userstacktrace_delay on with every system call
# (raw_syscalls:sys_enter, unfiltered: every task), a hardirq-context event
# (irq_vectors:local_timer_entry, the tick, which interrupts user tasks: the test kernels
# have no high-resolution timers, so timer:hrtimer_expire_entry rarely fires in a user
# task) and an NMI-context one
# (nmi:nmi_handler, for the NMIs the host injects, scripts/stress.sh) enabled, and runs for
# SECONDS:
#   - threads of work on every CPU: uu_bench at depths 40, 100 and 300 (one record holds 64
#     frames), getting SIGUSR1 on their way back to user space all the while;
#   - the same without frame pointers, for the .eh_frame unwinder's caches and table reads:
#     uu_bench_nofp at depth 100, signals and all;
#   - fork/exec/exit churn (uu_chain started over and over, exiting with its last unwind
#     pending) and dlopen/dlclose churn (uu_dl, and uu_nofp's dl mode: a library without
#     frame pointers opened and closed at shifting addresses, then a new process);
#   - the control side churning: the buffer cleared and resized, tracing switched off and
#     on, an instance created with the cookie event enabled in it and removed, set_event
#     rewritten, the option switched off and on.
# Then a clean window: the churn stops, the buffer is cleared, the load runs one more
# second, requests stop, the workers are killed (exiting with unwinds pending) and the
# stacks drain. The window's trace is checked here, with awk: every cookie event has its
# stack (the cookies before the window's end marker), and every file cookie of every stack
# has a file_cache in the window; the window's cookies from NMI and hardirq context are
# counted (the context column of the trace, z or Z, and h or H). Printing the window's
# trace is the slow part on the debug kernel, so only the first cycle and every
# CHECK_EVERY-th (default 1: all) have a window. Then the module is unloaded, while the
# workers of the next cycle are not yet running. After the last cycle kmemleak scans.
# Prints "cycle N of CYCLES" as it goes, then one "cycle" line per checked window and the
# module's counters per cycle, all at the end, after "uu-stress-nmi-stop" has told the host
# to stop injecting NMIs (whose console messages would cut into them).
T=/sys/kernel/tracing
OPT=$T/options/userstacktrace_delay
CYCLES=$1 SECS=$2 EVERY=${3:-1}
KO=/lib/modules/user_unwind.ko
EVENTS='raw_syscalls:sys_enter irq_vectors:local_timer_entry nmi:nmi_handler'
echo 8192 >$T/buffer_size_kb
. /lib/uu.sh

control() {
	i=0
	while [ ! -e /tmp/stop ]; do
		i=$((i + 1))
		case $((i % 6)) in
		0) echo >$T/trace ;;
		1) echo $((4096 + (i % 3) * 2048)) >$T/buffer_size_kb ;;
		2) echo 0 >$T/tracing_on; echo 1 >$T/tracing_on ;;
		3) mkdir $T/instances/stress 2>/dev/null &&
		   echo 1 >$T/instances/stress/events/user_unwind/user_unwind_cookie/enable &&
		   sleep 0.1; rmdir $T/instances/stress 2>/dev/null ;;
		4) echo "$EVENTS user_unwind:*" >$T/set_event ;;
		5) echo 0 >$OPT; echo 1 >$OPT ;;
		esac
		sleep 0.05
	done
}

workers() {
	benches=
	# SIGUSR1 ignored until each sets up its handler: a slow start (every system call
	# traced, on the debug kernel) must not die of the first signal.
	for d in 40 100 300; do
		(trap '' USR1; exec uu_bench 1000000000 $d >/dev/null) &
		benches="$benches $!"
	done
	(trap '' USR1; exec uu_bench_nofp 1000000000 100 >/dev/null) &
	benches="$benches $!"
	(while [ ! -e /tmp/stop ]; do uu_chain 3 >/dev/null; done) &
	loops=$!
	(while [ ! -e /tmp/stop ]; do uu_dl 5 >/dev/null; done) &
	loops="$loops $!"
	(while [ ! -e /tmp/stop ]; do uu_nofp dl 5 >/dev/null; done) &
	loops="$loops $!"
	# Once they have set up their SIGUSR1 handler.
	(sleep 0.5; while [ ! -e /tmp/stop ]; do kill -USR1 $benches; sleep 0.01; done) 2>/dev/null &
	loops="$loops $!"
}

window() {
	# The clean window.
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	# Clearing the buffer resets its counters: they are read after it.
	echo >$T/trace
	o0=$(rb overrun) d0=$(rb "dropped events")
	sleep 0.5
	# The cookies before the marker are checked. New requests stop, and the stacks of the
	# pending ones (a shell waiting for its child, say) have a second to come.
	echo uu-stress-window-end >$T/trace_marker
	echo 0 >$T/events/user_unwind/user_unwind_cookie/enable
	kill $benches
	sleep 1
	echo 0 >$OPT
	echo 0 >$T/tracing_on
	wait $benches $loops
	overrun=$(($(rb overrun) - o0)) dropped=$(($(rb "dropped events") - d0))
	awk -v c="$c" -v lost=$((overrun + dropped)) '
	/uu-stress-window-end/ { ended = 1; next }
	/user_unwind_cookie: cookie=/ {
		if (!ended) { split($0, a, "cookie="); cookies[a[2]] = 1; line[a[2]] = $0 }
		# The context column: irqs-off, need-resched, then h/H hardirq, z/Z NMI.
		if (!ended && match($0, /\] [^ ][^ ][^ ][^ ][^ ] /)) {
			ctx = substr($0, RSTART + 4, 1)
			if (ctx ~ /[zZ]/) nmi++
			else if (ctx ~ /[hH]/) hardirq++
		}
		next
	}
	/user_unwind_stack: cookie=/ {
		split($0, a, "cookie="); split(a[2], b, " "); stacks[b[1]] = 1; nstacks++
		stack = $0
		next
	}
	/file_cache: cookie=/ { split($0, a, "cookie="); split(a[2], b, " "); files[b[1]] = 1; next }
	/^ => </ {
		v = $NF; sub(/^0x0*/, "", v)
		if (v != "" && v != "1" && !(v in used)) used[v] = stack " (" $0 ")"
	}
	END {
		for (k in cookies) {
			n++
			if (!(k in stacks)) { missing++; print "missing:", line[k] }
		}
		for (k in used) {
			if (k in files) continue
			unexplained++
			print "unexplained file cookie " k ", first in:", used[k]
		}
		printf "cycle %d cookies=%d stacks=%d missing=%d unexplained_files=%d lost=%d" \
			" nmi=%d hardirq=%d\n", c, n, nstacks, missing, unexplained, lost, nmi, hardirq
	}' $T/trace >>/tmp/summary
}

# Load that outlives every cycle: the module is unloaded and loaded under it.
uu_bench 1000000000 64 >/dev/null &
background=$!
(while [ ! -e /tmp/end ]; do uu_chain 2 >/dev/null; done) &

for c in $(seq "$CYCLES"); do
	insmod $KO || { echo "cycle $c insmod failed"; exit 1; }
	rm -f /tmp/stop
	echo "$EVENTS" >$T/set_event
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	workers
	control &
	sleep "$SECS"
	touch /tmp/stop
	wait $!
	if [ "$c" -eq 1 ] || [ $((c % EVERY)) -eq 0 ]; then
		window
	else
		kill $benches
		wait $benches $loops
	fi
	echo "stats $c $(tr '\n' ' ' <$T/user_unwind_stats)" >>/tmp/summary
	# Progress only (the host reads the summary): short, in case a console message cuts it.
	echo "cycle $c of $CYCLES"
	# Unloaded with requests being made and stacks pending.
	echo 1 >$T/tracing_on
	echo 1 >$OPT
	rmmod user_unwind || { echo "cycle $c rmmod failed"; exit 1; }
	echo 0 >$T/tracing_on
done
touch /tmp/end
kill $background
wait
echo uu-stress-nmi-stop
# NMI-context messages reach the console late, from irq_work.
sleep 2
cat /tmp/summary

leaks
