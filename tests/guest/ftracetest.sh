#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/ftracetest.sh: the kernel's ftrace selftests (at /ftrace), one arm
# of the comparison a boot: "without" the module, or "with" it loaded, userstacktrace_delay
# on and a frame-pointer program making traced system calls. Prints each test's KTAP result
# line as it ends, prefixed with the arm ("with: ok 3 ..."), each followed by the guest's
# uptime ("time: with 123.45"); the "with" arm ends with the module's counters
# ("module: ...").
# Usage: ftracetest.sh without|with TEST_DIR...
. /lib/uu.sh
arm=$1
shift
case $arm in without | with) ;; *) echo "usage: ftracetest.sh without|with TEST_DIR..."; exit 2 ;; esac
cd /ftrace || exit 1
# Under TCG, on the debug kernel, switching function_graph on for every function holds
# text_mutex for minutes while it patches them, and anything else that patches code (the
# option's writer below flipping an event's static key) waits for it: past the default 120
# s that is reported as a hung task. A real hang still is, after 20 minutes.
echo 1200 >/proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
if [ "$arm" = with ]; then
	insmod /lib/modules/user_unwind.ko enable=1 || exit 1
	# A traced call every 20 ms: the module's work beside the tests, not a load that
	# starves the one CPU they share (at every 2 ms, switching function_graph on took more
	# than three times as long as with neither module nor program).
	uu_chain 1000000000 20000 >/dev/null &
	chain=$!
	# Every test starts by resetting the tracing state, the module's events with the rest:
	# the option is switched back on all the while. The pause is a read of an empty FIFO
	# with a timeout, a shell builtin: sleep(1) would fork and exec twice a second, a cost of
	# the harness, not of the module, and a large one while every kernel function is traced.
	mkfifo /tmp/ftracetest.tick
	(
		exec 3<>/tmp/ftracetest.tick
		while [ ! -e /tmp/ftracetest.done ]; do
			echo 1 >$T/options/userstacktrace_delay
			read -t 0.5 _ <&3
		done
	) &
	keep=$!
fi
echo "time: $arm start $(cut -d' ' -f1 /proc/uptime)"
# KTAP: "ok N name", "not ok N name # UNRESOLVED", "ok N name # SKIP", ... printed as each
# test ends, so that a run cut short by the guest's time bound still shows how far it came.
bash ./ftracetest -K "$@" 2>&1 | while IFS= read -r line; do
	case $line in
	"ok "* | "not ok "*) echo "$arm: $line"; echo "time: $arm $(cut -d' ' -f1 /proc/uptime)" ;;
	"# Totals"*) echo "$arm: $line" ;;
	esac
done
[ "$arm" = with ] || exit 0
touch /tmp/ftracetest.done
wait $keep
kill $chain
wait $chain 2>/dev/null
echo "option $(cat $T/options/userstacktrace_delay 2>/dev/null)"
# What the module did beside the tests: the host wants stacks, not only a loaded module. (On
# the test kernel, stacks also counts the KUnit suite's empty record, written at insmod.) A
# request whose task exits before it returns to user space gets no stack: exited counts
# them.
echo "module: requests=$(uu requests_queued) stacks=$(uu stacks) exited=$(uu exit_callbacks) file_cache=$(uu file_cache)"
rmmod user_unwind
