#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of scripts/bigprog.sh: profiles big Debian programs through the timer
# interrupt (irq_vectors:local_timer_entry, the tick: the test kernels' tick is periodic,
# not an hrtimer, so timer:hrtimer_expire_entry does not fire in a busy program) and user
# page faults (exceptions:page_fault_user),
# both filtered to the program's comm, with the module's default unwinder; tests/bigprog.py
# reads the result on the host. Usage: bigprog.sh PROGRAMS [IMAGE], PROGRAMS a file of
# lines "NAME<tab>COMM<tab>COMMAND" (COMMAND runs with sh -c).
#
# With IMAGE (scripts/bigprog.sh --cold), an ext4 image holding every file the programs
# use: it is mounted from a loop device and each COMMAND runs chrooted into it (so the
# paths the trace names are the host's), every page cache dropped first.
#
# Each program runs once with the module freshly loaded (its caches start empty, so every
# row miss is the program's own), in a "=== PROGRAM NAME" section: the module's counters
# before and after, the memory figures below, and its trace, extracted by trace-cmd before
# the module is unloaded (unloading clears a buffer holding the module's events), in base64
# in a "=== TRACE NAME" section.
. /lib/uu.sh
OPT=$T/options/userstacktrace_delay
EVENTS="irq_vectors/local_timer_entry exceptions/page_fault_user"
section() { echo "=== $1"; }
fail() {
	echo "bigprog: $*" >&2
	exit 1
}

# The uptime in hundredths of a second.
now() { awk '{sub(/\./, "", $1); print $1 + 0}' /proc/uptime; }

# memory NAME: NAME_meminfo_kb, Slab + VmallocUsed + Percpu of /proc/meminfo in kB (module
# code and static data are vmalloc memory), once RCU callbacks have run and every slab
# cache was shrunk (which also empties KASAN's quarantine of freed objects); never
# drop_caches, whose shrinkers would free the very caches measured. With a second
# argument, also every slab cache's objects (NAME_slabinfo CACHE ACTIVE TOTAL SIZE).
memory() {
	sleep 1
	for f in /sys/kernel/slab/*/shrink; do
		echo 1 >"$f"
	done 2>/dev/null
	result "${1}_meminfo_kb" \
		"$(awk '/^(Slab|VmallocUsed|Percpu):/ {s += $2} END {print s}' /proc/meminfo)"
	[ -z "$2" ] || [ ! -r /proc/slabinfo ] ||
		awk -v p="${1}_slabinfo" 'NR > 2 {print p, $1, $2, $3, $4}' /proc/slabinfo
}

[ -r "$1" ] || fail "usage: bigprog.sh PROGRAMS [IMAGE]"
run=
if [ -n "$2" ]; then
	# Debian's kernel has loop and ext4 as modules (scripts/run-guest.sh).
	if [ -f /lib/modules/extra/order ]; then
		for m in $(cat /lib/modules/extra/order); do
			insmod /lib/modules/extra/$m 2>/dev/null
		done
	fi
	C=/mnt/cold
	mkdir -p $C
	losetup /dev/loop0 "$2" || fail "losetup of $2 failed"
	mount -t ext4 -o ro /dev/loop0 $C || fail "mount of $2 failed"
	mount --bind /proc $C/proc && mount --bind /dev $C/dev && mount --bind /tmp $C/tmp ||
		fail "bind mounts into $C failed"
	run="chroot $C"
fi
for e in $EVENTS; do
	[ -d $T/events/$e ] || fail "this kernel has no event $e"
done
section SETUP
result boot_centiseconds "$(now)"
result kernel "$(uname -r)"
result cpus "$(grep -c ^processor /proc/cpuinfo)"
echo global >$T/trace_clock
echo 32768 >$T/buffer_size_kb
echo 1024 >$T/saved_cmdlines_size
# trace-cmd stores /proc/kallsyms in its file (megabytes the host does not read): an empty
# one keeps the file small.
: >/tmp/no-kallsyms
mount --bind /tmp/no-kallsyms /proc/kallsyms
# One load and unload first, and the events enabled once: what the kernel allocates for
# good the first time (module loading, the events' files, KUnit's run) is not counted as
# the module's.
insmod /lib/modules/user_unwind.ko || fail "insmod failed"
for e in $EVENTS; do
	echo 1 >$T/events/$e/enable
	echo 0 >$T/events/$e/enable
done
echo 1 >$OPT
echo 0 >$OPT
rmmod user_unwind || fail "rmmod failed"

tab=$(printf '\t')
while IFS=$tab read -r name comm cmd; do
	[ -n "$cmd" ] || fail "a line of $1 is not NAME<tab>COMM<tab>COMMAND"
	section "PROGRAM $name"
	result comm "$comm"
	result command "$cmd"
	echo 0 >$T/tracing_on
	echo >$T/trace
	if [ -n "$run" ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
	fi
	memory load_before
	t0=$(now)
	insmod /lib/modules/user_unwind.ko || fail "insmod failed"
	result insmod_centiseconds $(($(now) - t0))
	result unwinder "$(cat /sys/module/user_unwind/parameters/unwinder)"
	result coresize "$(cat /sys/module/user_unwind/coresize)"
	memory before
	sed 's/^/before_/' $T/user_unwind_stats
	for e in $EVENTS; do
		echo "comm == \"$comm\"" >$T/events/$e/filter
		echo 1 >$T/events/$e/enable
	done
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	t0=$(now)
	$run sh -c "$cmd" </dev/null >/dev/null
	status=$?
	t1=$(now)
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	for e in $EVENTS; do
		echo 0 >$T/events/$e/enable
		echo 0 >$T/events/$e/filter
	done
	result status $status
	result centiseconds $((t1 - t0))
	sed 's/^/after_/' $T/user_unwind_stats
	result overrun "$(rb overrun)"
	result dropped "$(rb "dropped events")"
	t0=$(now)
	trace-cmd extract -o /tmp/bigprog.dat >/tmp/extract.log 2>&1 || {
		cat /tmp/extract.log >&2
		fail "trace-cmd extract failed"
	}
	result extract_centiseconds $(($(now) - t0))
	memory after slabinfo
	rmmod user_unwind || fail "rmmod failed"
	memory unloaded slabinfo
	section "TRACE $name"
	base64 /tmp/bigprog.dat
	rm -f /tmp/bigprog.dat
done <"$1"
section END
echo local >$T/trace_clock
umount /proc/kallsyms
if [ -n "$run" ]; then
	umount $C/tmp $C/dev $C/proc $C
	losetup -d /dev/loop0
fi
