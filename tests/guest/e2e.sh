#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest half of the end-to-end tests: runs the scenarios and prints their raw results in
# "=== NAME" sections; tests/e2e.py checks them on the host against the test binaries.
T=/sys/kernel/tracing
OPT=$T/options/userstacktrace_delay

. /lib/uu.sh
section() { echo "=== $1"; }

# Debian's kernel: its loop, dm-mod, ext4 and overlay modules, which the test kernel has
# built in (scripts/run-guest.sh).
if [ -f /lib/modules/extra/order ]; then
	for m in $(cat /lib/modules/extra/order); do
		insmod /lib/modules/extra/$m || echo "insmod $m failed"
	done
fi

# traced SECTION FILTER COMMAND...: run COMMAND with user stacks on for the system calls
# FILTER selects, then print section SECTION with the command's status and the trace.
traced() {
	name=$1 filter=$2
	shift 2
	echo 0 >$T/tracing_on
	echo >$T/trace
	sys_enter_on "$filter"
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	"$@" >/dev/null
	status=$?
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	sys_enter_off
	section "$name"
	result status $status
	cat $T/trace
}

# The function_graph tracer, once, on one function (patching every function takes minutes
# under TCG): it registers its sched_switch probe under ftrace_lock, which teaches lockdep
# ftrace_lock -> tracepoints_mutex. With kprobe_mutex -> ftrace_lock (any ftrace-based
# kprobe), a module that arms a kprobe while tracepoints_mutex is held (an event's reg
# callback), or under a lock taken there, closes a cycle, which the splat check then sees.
section GRAPH
echo do_nanosleep >$T/set_ftrace_filter
echo function_graph >$T/current_tracer
result graph_tracer "$(cat $T/current_tracer)"
echo nop >$T/current_tracer
echo >$T/set_ftrace_filter

# A kernel without what the module needs: here, no tracefs mounted. insmod must fail with
# a message and leave nothing behind.
section LOADFAIL
umount $T
insmod /lib/modules/user_unwind.ko 2>/dev/null
result insmod_status $?
mount -t tracefs tracefs $T
result in_modules "$(grep -c '^user_unwind ' /proc/modules)"
result events_dir "$([ -e $T/events/user_unwind ] && echo yes || echo no)"
result message "$(dmesg | grep -c 'user_unwind: tracefs options directory not found')"

# The events enabled before the module is loaded (set_event ":mod:", which enables them
# while the module is still COMING, before its init), with a task making traced system
# calls all along: requests must wait for init, then start by themselves.
# Another filesystem on the options path (a tmpfs, an instance's options bind-mounted):
# the module must not create tracefs files in it.
section CLOCK
echo "# trace_clock: $(cat $T/trace_clock)"

section LOADFOREIGN
mount -t tmpfs tmpfs $T/options
insmod /lib/modules/user_unwind.ko 2>/dev/null
result tmpfs_status $?
result tmpfs_files "$(ls $T/options | wc -l)"
umount $T/options
mkdir $T/instances/bar
mount -o bind $T/instances/bar/options $T/options
insmod /lib/modules/user_unwind.ko 2>/dev/null
result bind_status $?
result bind_file "$([ -e $T/instances/bar/options/userstacktrace_delay ] && echo yes || echo no)"
umount $T/options
rmdir $T/instances/bar
result in_modules "$(grep -c '^user_unwind ' /proc/modules)"
result message "$(dmesg | grep -c "is not the options directory of tracefs's top instance")"

# The kernel log so far, printed (the host scans the whole console for splats) and
# cleared, so that the KUnit report below is this load's.
section DMESG_BEFORE
dmesg -c
section INSMOD
sys_enter_on 'id == 110'
echo ':mod:user_unwind' >>$T/set_event
echo >$T/trace
echo 1 >$T/tracing_on
uu_chain 1000000000 1000 >/dev/null &
early=$!
sleep 0.2
insmod /lib/modules/user_unwind.ko
result insmod_status $?
sleep 0.5
result early_option "$(cat $OPT)"
result early_cookies "$(grep -c 'user_unwind_cookie:' $T/trace)"
result early_stacks "$(grep -c 'uu_chain.*user_unwind_stack:' $T/trace)"
# The KUnit suite records an empty stack (cookie 300000007) while the events are on. Found
# by its cookie alone: no deferred cookie of this 2-CPU guest has 7 in its low half (the
# CPU + 1), and the task's name may print as <...> once it left saved_cmdlines.
result empty_stack "$(grep -c 'user_unwind_stack: cookie=300000007 (no frames)$' $T/trace)"
kill $early
wait $early 2>/dev/null
echo 0 >$OPT
sys_enter_off
echo 0 >$T/tracing_on
echo >$T/trace
section KUNIT
dmesg | sed -n '/KTAP version/,$p'

section OPTION
result exists "$([ -f $OPT ] && echo yes || echo no)"
result initial "$(cat $OPT)"
result mode "$(stat -c %a $OPT)"
for bad in bogus 2 10 " 1" "1 " "1\n\n"; do
	printf '%s' "$bad" >$OPT 2>/dev/null && result "bad_write_accepted" "'$bad'"
done
# Non-UTF-8, an embedded NUL, and more than a page.
printf '\377' >$OPT 2>/dev/null && result bad_write_accepted non-utf8
printf '1\000' >$OPT 2>/dev/null && result bad_write_accepted nul
head -c 8192 /dev/zero | tr '\0' 1 | dd of=$OPT bs=8192 2>/dev/null && result bad_write_accepted huge
result after_bad "$(cat $OPT)"
echo 1 >$OPT && result write_1 ok
result after_1 "$(cat $OPT)"
result events_on "$(cat $T/events/user_unwind/user_unwind_cookie/enable)"
for bad in bogus 2; do
	printf '%s' "$bad" >$OPT 2>/dev/null && result "bad_write_accepted" "'$bad'"
done
result after_bad_1 "$(cat $OPT)"
# Switched off behind the option's back: it says so, and a 1 switches it on again.
echo 0 >$T/events/user_unwind/enable
result after_events_off "$(cat $OPT)"
echo 1 >$OPT
result after_rewrite_1 "$(cat $OPT)"
result events_on_again "$(cat $T/events/user_unwind/user_unwind_cookie/enable)"
printf 0 >$OPT && result write_0 ok
result after_0 "$(cat $OPT)"
# Concurrent writers, good and bad: the last good write wins, whole, and the option says
# what the events are.
for w in 1 0 bogus 1; do
	(for i in $(seq 40); do printf '%s' $w >$OPT 2>/dev/null; done) &
done
wait
result concurrent_consistent "$([ "$(cat $OPT)" = "$(cat $T/events/user_unwind/user_unwind_cookie/enable)" ] &&
	[ "$(cat $OPT)" = "$(cat $T/events/user_unwind/file_cache/enable)" ] && echo yes || echo no)"
printf 0 >$OPT
result after_concurrent_0 "$(cat $OPT)$(cat $T/events/user_unwind/user_unwind_stack/enable)"
result userstacktrace "$(cat $T/options/userstacktrace)"
result stats_mode "$(stat -c %a $T/user_unwind_stats)"
echo 1 >$T/user_unwind_stats 2>/dev/null && result stats_write_accepted yes

# The known call chain, getppid only.
traced CHAIN 'id == 110' uu_chain 40

# Steady state: 30 calls 20 ms apart, well within the second after which a file seen
# again gets a reminder file_cache: after the first stack, no file_cache at all.
traced STEADY 'id == 110' uu_chain 30 20000

# dlopen/dlclose churn: each library keeps its cookie, whatever struct file maps it.
traced DLOPEN 'id == 110' uu_dl 30

# The same while the option is switched on and off.
echo >$T/trace
sys_enter_on 'id == 110'
echo 1 >$T/tracing_on
uu_dl 150 3000 &
toggled=$!
while kill -0 $toggled 2>/dev/null; do
	echo 1 >$OPT
	sleep 0.2
	echo 0 >$OPT
	sleep 0.1
done
wait $toggled
status=$?
echo 0 >$T/tracing_on
sys_enter_off
section DLOPEN_TOGGLED
result status $status
cat $T/trace

# A reader that switches tracing off, clears the buffer and switches it on again while a
# task keeps running, with no stack in between: the files of its next stacks were seen
# before the clear, and must be explained again. A stack in flight as tracing comes back on
# may have lost its first file_cache events, and repeats them right after it.
sys_enter_on 'id == 110'
echo 1 >$OPT
echo 1 >$T/tracing_on
uu_chain 1000000 20000 >/dev/null &
reopen=$!
sleep 0.5
echo 0 >$T/tracing_on
echo >$T/trace
echo 1 >$T/tracing_on
sleep 0.5
echo 0 >$T/tracing_on
kill $reopen
wait $reopen 2>/dev/null
section REOPEN
cat $T/trace
echo 0 >$OPT
sys_enter_off

# A cookie event that no buffer takes (filtered out here) is counted.
unrecorded() { sed -n 's/^cookies_unrecorded: //p' $T/user_unwind_stats; }
before=$(unrecorded)
echo 'cookie == 0' >$T/events/user_unwind/user_unwind_cookie/filter
traced FILTERED 'id == 110' uu_chain 10
echo 0 >$T/events/user_unwind/user_unwind_cookie/filter
section UNRECORDED
result delta $(($(unrecorded) - before))

# Instances: the user_unwind events in instance "foo" only, the triggering event in the
# top instance only; then the triggering event in both.
mkdir $T/instances/foo
echo 1 >$T/instances/foo/events/user_unwind/enable
sys_enter_on 'id == 110'
echo >$T/trace
echo 1 >$T/tracing_on
uu_chain 5 >/dev/null
section INSTANCE_FOO
cat $T/instances/foo/trace
section INSTANCE_TOP
cat $T/trace
echo >$T/instances/foo/trace
echo >$T/trace
echo 'id == 110' >$T/instances/foo/events/raw_syscalls/sys_enter/filter
echo 1 >$T/instances/foo/events/raw_syscalls/sys_enter/enable
uu_chain 5 >/dev/null
echo 0 >$T/tracing_on
section INSTANCE_BOTH
cat $T/instances/foo/trace
echo 0 >$T/instances/foo/events/enable
rmdir $T/instances/foo
result instance_removed $?
sys_enter_off

# One stack naming 40 files (40 distinct files, a fake frame-pointer chain): at most 16
# file_cache events a stack, the rest in the next ones.
mkdir -p /tmp/many
for i in $(seq 0 39); do echo "$i" >/tmp/many/$i; done
traced MANY 'id == 110' uu_many 40 6 $(for i in $(seq 0 39); do echo /tmp/many/$i; done)

# Hostile ELF files (tests/hostile_elf.py wrote them to /hostile), a frame in each, and a
# return address in the kernel half at the end of the chain.
# Broken frame-pointer chains: a loop, a frame pointer into the kernel, one at an unmapped
# page. Each stack must be what the unwinder gives, nothing more.
for kind in loop kernel unmapped; do
	traced BROKEN_$kind 'id == 110' uu_many -e $kind 3 /usr/lib/libuutest.so
done
traced HOSTILE 'id == 110' uu_many -f 3 $(cut -d' ' -f1 /hostile/expected | sed 's|^|/hostile/|')

# Mappings without a file: a named anonymous "JIT" mapping, and the vdso.
section ANON_NAMES
result anon_names "$(uu_named 0 | grep -c 'no anonymous VMA names')"
traced NAMED 'id == 110 || id == 228' uu_named 5

# Paths: a deleted executable, and one whose path does not fit the event.
cp /usr/bin/uu_chain /tmp/uu_gone
/tmp/uu_gone 1000000 20000 >/dev/null &
gone=$!
deep=/tmp
for i in $(seq 12); do deep=$deep/directory-name-of-one-hundred-bytes-to-make-the-path-long-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done
mkdir -p $deep && cp /usr/bin/uu_chain $deep/uu_deep
sleep 0.2
rm /tmp/uu_gone
nl=$(printf '/tmp/dir\nforged: path=x')
mkdir -p "$nl" && cp /usr/bin/uu_chain "$nl/uu_nl"
section PATHLEN
result deep_path_length ${#deep}
traced PATHS 'id == 110' sh -c "$deep/uu_deep 3; \"$nl/uu_nl\" 3; sleep 0.5"
kill $gone
wait $gone 2>/dev/null

# A reader that starts late: the files were seen (and cached) before it started.
echo >$T/trace
sys_enter_on 'id == 110'
uu_chain 1000000 20000 >/dev/null &
late=$!
echo 1 >$T/tracing_on
echo 1 >$OPT
sleep 1
echo 0 >$OPT
sys_enter_off
trace-cmd record -q -o /tmp/late.dat -e user_unwind -e raw_syscalls:sys_enter \
	-f 'id == 110' sleep 2 >/dev/null 2>&1
kill $late
wait $late 2>/dev/null
section LATE
trace-cmd report -i /tmp/late.dat 2>&1

# Every event of every task: kernel threads must not produce cookies.
echo >$T/trace
echo 1 >$T/events/sched/sched_switch/enable
echo 1 >$T/events/sched/sched_wakeup/enable
echo 1 >$OPT
echo 1 >$T/tracing_on
# Each call sleeps 1 ms: every one of the 2 x 200 sleeps is a sched_switch from a user
# task, so the record holds at least 400 cookies and their stacks, whatever else ran.
uu_chain 200 1000 >/dev/null &
uu_chain 200 1000 >/dev/null
wait
sleep 1
echo 0 >$T/tracing_on
echo 0 >$OPT
echo 0 >$T/events/sched/enable
section KTHREADS
# PF_KTHREAD (0x00200000) in the flags field of /proc/PID/stat.
for d in /proc/[0-9]*; do
	flags=$(sed 's/^.*) //' $d/stat 2>/dev/null | cut -d' ' -f7)
	[ -n "$flags" ] && [ $((flags & 0x200000)) -ne 0 ] && echo "${d#/proc/}"
done
section ALL
cat $T/trace

# The kernel's addresses as root sees them: the lowest and highest symbol in kallsyms
# (vmlinux and modules), for the check that no event field holds one.
section KALLSYMS
awk '$1 !~ /^0+$/ {print $1}' /proc/kallsyms | sort | sed -n '1p;$p'
# The physical ranges of the kernel's image and of the RAM, as root sees them.
section IOMEM
grep -E 'Kernel (code|rodata|data|bss)|System RAM' /proc/iomem

# The stats file is read-only, even for root: a write fails and changes nothing.
section STATS_WRITE
before=$(cat $T/user_unwind_stats | grep -v '^requests\|^cookies\|^callbacks\|^stacks\|^frames')
echo 0 >$T/user_unwind_stats 2>/dev/null && result stats_write accepted
printf 'requests: 0\n' >$T/user_unwind_stats 2>/dev/null && result stats_write accepted
result stats_unchanged "$([ "$before" = "$(cat $T/user_unwind_stats | grep -v '^requests\|^cookies\|^callbacks\|^stacks\|^frames')" ] && echo yes || echo no)"
result stats_mode "$(stat -c %a $T/user_unwind_stats)"

# trace-cmd drives the module through its events.
section TRACECMD
echo >$T/trace
trace-cmd record -q -o /tmp/uu.dat -e user_unwind -e raw_syscalls:sys_enter -f 'id == 110' \
	uu_chain 20 >/dev/null 2>&1
result record_status $?
section REPORT
trace-cmd report -i /tmp/uu.dat 2>&1

section STATS
cat $T/user_unwind_stats

# The file cookie as the file's identity, and what a second review found around it.
. /lib/uu-identity.sh

# Memory under many files (tests/guest/memory.sh): 4000 files, about a minute here;
# make stress runs 20000.
section MEMORY
memory.sh 4000
echo >$T/trace

# The cookie of one open file (a running uu_chain's executable) under two loads of the
# module: each load draws its own key, so the cookies differ.
section KEYS
uu_chain 1000000 20000 >/dev/null &
keys=$!
for i in 1 2; do
	echo >$T/trace
	sys_enter_on 'id == 110'
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	sleep 0.3
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	result cookie$i "$(sed -n 's/.*file_cache: cookie=\([0-9a-f]*\) path=\/usr\/bin\/uu_chain build_id=.*/\1/p' $T/trace | head -n1)"
	rmmod user_unwind && insmod /lib/modules/user_unwind.ko
done
kill $keys
wait $keys 2>/dev/null
sys_enter_off

# Load and unload while events fire on every CPU.
section CYCLES
rmmod user_unwind
result rmmod_status $?
echo 1 >$T/events/raw_syscalls/enable
echo 1 >$T/events/sched/enable
echo 1 >$T/tracing_on
for i in 1 2; do (uu_chain 1000000000 >/dev/null &) ; done
ok=0
for i in 1 2 3 4 5 6; do
	insmod /lib/modules/user_unwind.ko enable=1 || break
	sleep 0.3
	rmmod user_unwind || break
	ok=$((ok + 1))
done
result cycles_done "$ok"
killall uu_chain 2>/dev/null
echo 0 >$T/tracing_on
echo 0 >$T/events/enable
result leftover_option "$([ -e $OPT ] && echo yes || echo no)"
result leftover_events "$([ -e $T/events/user_unwind ] && echo yes || echo no)"

. /lib/uu-unwind.sh

# The review's defects and the unwind caches' poisoning (tests/guest/review.sh): last, its
# final test unloads the module under a task whose stack page user space never serves.
. /lib/uu-review.sh

section END
