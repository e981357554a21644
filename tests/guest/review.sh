# SPDX-License-Identifier: GPL-2.0
# Guest half of the tests of the review's defects (issue 27) and of the unwind caches'
# poisoning (issue 24), sourced by tests/guest/e2e.sh after uu-unwind.sh (installed as
# /lib/uu-review.sh); tests/review.py checks the sections. Uses e2e.sh's section and traced.
# The module is loaded here with its default unwinder (eh_frame); the last test, a task whose
# stack lies in memory registered with userfaultfd, unloads it while that task is traced.
# Everything that could hang is under `timeout -s KILL`, and the uffd case runs last.
RS=$T/user_unwind_stats
# up: seconds since boot, to the hundredth.
up() { cut -d' ' -f1 /proc/uptime; }
# review_stats SECTION: the module's counters, as a section of their own.
review_stats() {
	section "$1"
	cat $RS
}
# review_begin FILTER / review_end SECTION: traced() for commands run in the background.
review_begin() {
	echo 0 >$T/tracing_on
	echo >$T/trace
	sys_enter_on "$1"
	echo 1 >$OPT
	echo 1 >$T/tracing_on
}
review_end() {
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	sys_enter_off
	section "$1"
}

insmod /lib/modules/user_unwind.ko
section REVIEW_LOAD
result insmod_status $?
result unwinder "$(cat /sys/module/user_unwind/parameters/unwinder 2>/dev/null)"
echo global >$T/trace_clock

# 4. Cache poisoning, first, while the caches are cold (the module was just loaded): a
# process rewrites its own copy-on-write copy of libc's CIEs (DW_CFA_offset r16 ->
# DW_CFA_undefined r16) and makes system calls through libc; then an honest program's
# stacks, after it and while it keeps going, must be the known chains.
traced REVIEW_POISON 'id == 110' sh -c 'timeout -s KILL 60 uu_review poison 100 0 >/tmp/poison.out'
section REVIEW_POISON_OUT
cat /tmp/poison.out
traced REVIEW_POISON_AFTER 'id == 110' sh -c 'timeout -s KILL 60 uu_nofp chain 40 &&
	timeout -s KILL 60 uu_nofp thread 40'
review_begin 'id == 110'
timeout -s KILL 120 uu_review poison 0 2000 >/tmp/poison2.out &
poisoner=$!
sleep 0.5
timeout -s KILL 60 uu_nofp chain 40 >/dev/null && timeout -s KILL 60 uu_nofp thread 40 >/dev/null
status=$?
kill $poisoner
wait $poisoner 2>/dev/null
review_end REVIEW_POISON_CONCURRENT
result status $status
result poisoner "$(cat /tmp/poison2.out)"
cat $T/trace
review_stats REVIEW_POISON_STATS

# The caches start afresh for the other tests (a module that kept the poisoned rows would
# spoil their stacks through libc).
rmmod user_unwind
t0=$(up)
insmod /lib/modules/user_unwind.ko
section REVIEW_RELOAD
result status $?
result insmod_seconds "$(awk -v a=$t0 -v b=$(up) 'BEGIN {print b - a}')"
echo global >$T/trace_clock

# 6. Every system call of a dynamically linked program built without frame pointers, from
# its exec on (the comm filter passes once the exec has named the task): the loader's own,
# before main, are unwound up to ld.so's entry point, the outermost frame.
traced REVIEW_LOADER 'comm == "uu_nofp"' timeout -s KILL 60 uu_nofp chain 5
# A library constructor's system call (fourth review): ld.so calls constructors from its
# start-up code, past its entry point, with rbp cleared; that stack is complete.
traced REVIEW_CTOR 'comm == "uu_nofp"' env LD_PRELOAD=/usr/lib/libuuctor.so \
	timeout -s KILL 60 uu_nofp chain 3

# 3. The mapping memo's age bound: one stack, 1.5 s with nothing traced on that CPU, the
# same stack again, from the same address space.
review_stats REVIEW_MEMO_BEFORE
traced REVIEW_MEMO 'id == 110' timeout -s KILL 60 uu_review memo
review_stats REVIEW_MEMO_AFTER

# 5. A frame pointer into a VM_IO | VM_PFNMAP mapping (a page of /dev/mem), from code
# without an FDE: the unwinder must not read device memory.
review_stats REVIEW_DEVMEM_BEFORE
traced REVIEW_DEVMEM 'id == 110' sh -c 'timeout -s KILL 60 uu_review devmem /dev/mem 5 >/tmp/devmem.out'
section REVIEW_DEVMEM_OUT
cat /tmp/devmem.out
review_stats REVIEW_DEVMEM_AFTER

# 2. Exec detection: a self-execve loop (main -> ex_a -> ex_b -> execve) at nice 5 and a
# getppid storm, both pinned to CPU 0: the storm's requests fill that CPU between each
# execve's request and its callback, after the exec. The storm's system calls are traced in
# an instance of their own, its stacks filtered out of the top buffer (its requests are made
# all the same): the top buffer keeps the execs' events, and file_cache.
uu_filter() { for e in user_unwind_cookie user_unwind_stack user_unwind_truncated; do
	echo "$1" >$T/events/user_unwind/$e/filter
done; }
mkdir $T/instances/storm
echo 'id == 110' >$T/instances/storm/events/raw_syscalls/sys_enter/filter
echo 1 >$T/instances/storm/events/raw_syscalls/sys_enter/enable
review_stats REVIEW_EXEC_BEFORE
review_begin 'id == 59'
timeout -s KILL 60 sh -c 'sleep 0.5; exec uu_review storm 30' >/dev/null &
storm=$!
uu_filter "common_pid != $storm"
sleep 0.8
timeout -s KILL 60 uu_review exec 10 5 10 >/tmp/exec.out
status=$?
kill $storm
wait $storm 2>/dev/null
review_end REVIEW_EXEC
uu_filter 0
echo 0 >$T/instances/storm/events/raw_syscalls/sys_enter/enable
result status $status
result exec "$(cat /tmp/exec.out)"
result storm_events "$(cat $T/instances/storm/per_cpu/cpu*/stats |
	awk '$1 == "entries:" || $1 == "overrun:" {s += $2} END {print s + 0}')"
result overrun "$(rb overrun)"
rmdir $T/instances/storm
cat $T/trace
review_stats REVIEW_EXEC_AFTER

# Issue 24: the files' tables are fair. Their memory limit lowered to 1 MiB, a process
# makes a new file identity before each of its runs (a chmod of its own copy of
# uu_bench_cold: 8192 functions, a 140 KiB search table) and thousands of new rows (which
# fill the row cache), while an honest program runs every 0.1 s. The honest program's
# tables, in use whenever its rows miss the row cache, are never dropped for the
# churner's: after the churn its stacks miss the row cache and parse no row. Each run starts after the
# last run's table has been idle for a second (UU_TABLE_IDLE), so it may be dropped for the
# new one: without the pause, a run shorter than a second (Debian's kernel) is refused a
# table throughout, as designed, and makes none.
P=/sys/module/user_unwind/parameters/table_kib
kib=$(cat $P)
echo 1024 >$P
cp /usr/bin/uu_bench_cold /tmp/churn
rm -f /tmp/churn.done
traced REVIEW_CHURN_WARM 'id == 110' timeout -s KILL 60 uu_nofp chain 40
review_stats REVIEW_CHURN_BEFORE
review_begin 'id == 110'
(while [ ! -e /tmp/churn.done ]; do uu_nofp chain 4 >/dev/null; sleep 0.1; done) &
honest=$!
churn=0
for i in 1 2 3 4 5 6; do
	chmod $((i % 2 ? 755 : 775)) /tmp/churn
	timeout -s KILL 120 /tmp/churn 60 64 >/dev/null && churn=$((churn + 1))
	sleep 1.2
done
touch /tmp/churn.done
wait $honest
review_end REVIEW_CHURN
result churn_runs $churn
review_stats REVIEW_CHURN_DURING
traced REVIEW_CHURN_HONEST 'id == 110' timeout -s KILL 60 uu_nofp chain 40
review_stats REVIEW_CHURN_AFTER
echo "$kib" >$P
echo 1m >$P 2>/dev/null
bad=$?
section REVIEW_CHURN_PARAM
result bad_status $bad
result value "$(cat $P)"
result kib "$kib"

# Issue 35: each user's fair share of the files' tables. Their memory limit lowered to
# 1 MiB and every table dropped, a hoarder running as uid 2000 maps ten copies of
# libuuhoard.so (8192 functions: a 145 KiB table each) and every 0.1 s makes a system call
# through each copy, down a function no recent stack went through: its tables fill the
# limit and, each missed every 0.1 s, are never idle. Beside it, an honest program running
# as uid 1000 makes 512 stacks of 16 frames from one function's 4096 call sites (two
# rounds of them, more addresses than the row cache holds; its table, as large as one of
# the hoarder's, does not fit in what the hoarder leaves free): with a table of its own,
# each FDE is parsed once; refused one, every row cache miss parses again.
# tests/review.py divides the rows parsed while it runs by its distinct frame addresses.
echo 0 >$P
echo 1024 >$P
mkdir -p /tmp/hoard
for i in 0 1 2 3 4 5 6 7 8 9; do
	cp /usr/lib/libuuhoard.so /tmp/hoard/lib$i.so
done
rm -f /tmp/hoard.stop
review_begin 'id == 110'
timeout -s KILL 120 uu_hoard 2000 100 100 /tmp/hoard.stop /tmp/hoard/lib*.so >/tmp/hoard.out 2>&1 &
hoarder=$!
sleep 3
review_stats REVIEW_FAIR_BEFORE
timeout -s KILL 100 uu_honest 1000 512 16 >/tmp/honest.out 2>&1
status=$?
review_stats REVIEW_FAIR_AFTER
touch /tmp/hoard.stop
wait $hoarder
hoarded=$?
review_end REVIEW_FAIR
result status $status
result hoarder_status $hoarded
result honest "$(cat /tmp/honest.out)"
result hoarder "$(cat /tmp/hoard.out)"
result overrun "$(rb overrun)"
cat $T/trace
echo "$kib" >$P
rm -rf /tmp/hoard /tmp/hoard.stop

# 7. The 32-bit vDSO (fourth review): with the caches fresh, a 64-bit task swaps its vDSO
# for the 32-bit image and makes system calls from a stack whose return address points
# into it (the first vDSO the unwinder looks up); then an honest program's system calls
# made from the vDSO's own code (its clock_gettime fallback): its vDSO frames are unwound
# by the 64-bit image's CFI, never by the frame-pointer rule.
rmmod user_unwind
insmod /lib/modules/user_unwind.ko
echo global >$T/trace_clock
traced REVIEW_VDSO32 'id == 110' sh -c 'timeout -s KILL 60 uu_review vdso32 20 >/tmp/vdso32.out 2>&1'
section REVIEW_VDSO32_OUT
result out "$(tr '\n' ' ' </tmp/vdso32.out)"
review_stats REVIEW_VCLOCK_BEFORE
traced REVIEW_VCLOCK 'id == 228' timeout -s KILL 60 uu_review vclock 40
review_stats REVIEW_VCLOCK_AFTER

# 8. A device that never answers (fourth review): a copy of libc on ext4 over a device-
# mapper target, its pages dropped, the target suspended; a task makes getppid with its
# stack pointer in an uncached page of that file. The call returns, its stack cut at that
# frame (reason read); rmmod returns within 5 s while such calls go on; after the target
# is resumed, stacks through that libc (loaded from the device) are complete. A task
# stuck anyway (the module waiting for the device) is released by resuming the target
# after 10 s, so that the run goes on and says so.
# ended PID: whether PID has ended (gone, or a zombie the shell has not reaped yet).
ended() { [ ! -e /proc/$1 ] || [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" = Z ]; }
# dm_wait PID SECONDS: whether PID ended within SECONDS ("yes" or "no").
dm_wait() {
	i=0
	while ! ended "$1" && [ $i -lt $(($2 * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	ended "$1" && echo yes || echo no
}
DM=/mnt/dm
mkdir -p $DM
dm_status=missing
if [ -f /lib/uu-dm.img ]; then
	[ -e /dev/mapper/control ] || { mkdir -p /dev/mapper; mknod /dev/mapper/control c 10 236; }
	losetup /dev/loop0 /lib/uu-dm.img &&
		dmsetup --noudevsync --noudevrules create uu \
			--table "0 $(($(stat -c %s /lib/uu-dm.img) / 512)) linear /dev/loop0 0" &&
		mount -t ext4 -o ro "$(ls /dev/dm-* | head -n1)" $DM && dm_status=0
fi
section REVIEW_DM_SETUP
result status $dm_status
# stuck NAME COMM: the kernel stacks of the tasks named COMM, which did not return in time.
stuck() {
	for c in /proc/[0-9]*/comm; do
		[ "$(cat $c 2>/dev/null)" = "$2" ] &&
			result "$1" "$(cat ${c%comm}stack 2>/dev/null | tr '\n' ' ')"
	done
}
if [ "$dm_status" = 0 ]; then
	# The file's pages dropped, its inode and dentry kept (the test is not about open()).
	stat $DM/libc.so.6 >/dev/null
	echo 1 >/proc/sys/vm/drop_caches
	dmsetup --noudevsync suspend --noflush --nolockfs uu
	review_stats REVIEW_DM_BEFORE
	review_begin 'id == 110'
	timeout -s KILL 15 uu_review mapstack $DM/libc.so.6 20 >/tmp/dm.out 2>&1 &
	pid=$!
	t0=$(up)
	returned=$(dm_wait $pid 10)
	t1=$(up)
	if [ "$returned" != yes ]; then
		section REVIEW_DM_STUCK
		stuck task uu_review
		stuck fetch user_unwind_fetch
		dmsetup --noudevsync resume uu
	fi
	wait $pid
	status=$?
	review_end REVIEW_DM
	result returned $returned
	result status $status
	result seconds "$(awk -v a=$t0 -v b=$t1 'BEGIN {print b - a}')"
	result out "$(tr '\n' ' ' </tmp/dm.out)"
	cat $T/trace
	review_stats REVIEW_DM_AFTER
	# rmmod while a task keeps making such calls (the target still suspended): it returns
	# at once, done, or refused ("in use") while the fetch thread waits for the device.
	echo 1 >/proc/sys/vm/drop_caches
	dmsetup --noudevsync suspend --noflush --nolockfs uu 2>/dev/null
	review_begin 'id == 110'
	timeout -s KILL 30 uu_review mapstack $DM/libc.so.6 300 >/tmp/dm2.out 2>&1 &
	pid=$!
	sleep 1
	t0=$(up)
	rmmod user_unwind &
	rm=$!
	returned=$(dm_wait $rm 5)
	t1=$(up)
	section REVIEW_DM_RMMOD_STACKS
	stuck rmmod rmmod
	stuck task uu_review
	stuck fetch user_unwind_fetch
	dmsetup --noudevsync resume uu
	rmstatus=hung
	[ "$(dm_wait $rm 10)" = yes ] && { wait $rm; rmstatus=$?; }
	in_modules=$(grep -c '^user_unwind ' /proc/modules)
	# Resumed, the fetch thread's read completes: rmmod succeeds.
	rm2=skipped
	if [ "$in_modules" != 0 ]; then
		sleep 1
		rmmod user_unwind & rm=$!
		rm2=$(dm_wait $rm 5)
		[ "$rm2" = yes ] && { wait $rm; rm2=$?; }
	fi
	echo 0 >$T/tracing_on
	[ ! -e $OPT ] || echo 0 >$OPT
	sys_enter_off
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	section REVIEW_DM_RMMOD
	result returned $returned
	result seconds "$(awk -v a=$t0 -v b=$t1 'BEGIN {print b - a}')"
	result rmmod_status $rmstatus
	result in_modules $in_modules
	result rmmod_resumed $rm2
	result in_modules_resumed "$(grep -c '^user_unwind ' /proc/modules)"
	# Resumed: a program whose libc is that copy, its pages dropped once more, five calls
	# at a time, 0.2 s apart: the fetch thread reads the pages the first stacks miss.
	dmsetup --noudevsync resume uu 2>/dev/null
	grep -q '^user_unwind ' /proc/modules || insmod /lib/modules/user_unwind.ko
	echo global >$T/trace_clock
	# The program runs in a cgroup of its own where the kernel has memory cgroups (Debian's):
	# the pages the fetch thread reads for its stacks are charged to that cgroup, as the
	# program's own are (fourth review's low finding 8); none to the root's.
	cg=
	mkdir -p /sys/fs/cgroup
	if mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null; then
		if grep -qw memory /sys/fs/cgroup/cgroup.controllers &&
			echo '+memory +io' >/sys/fs/cgroup/cgroup.subtree_control &&
			mkdir /sys/fs/cgroup/uu; then
			cg=/sys/fs/cgroup/uu
		else
			umount /sys/fs/cgroup
		fi
	fi
	echo 1 >/proc/sys/vm/drop_caches
	traced REVIEW_DM_RESUMED 'id == 110' sh -c '[ -z "$1" ] || echo $$ >$1/cgroup.procs
		for i in 1 2 3 4 5 6 7 8; do
		LD_LIBRARY_PATH=/mnt/dm timeout -s KILL 60 uu_nofp chain 5 || exit 1
		sleep 0.2
	done' sh "$cg"
	review_stats REVIEW_DM_RESUMED_STATS
	section REVIEW_DM_CGROUP
	result cgroup "${cg:-none}"
	if [ -n "$cg" ]; then
		result cgroup_ino "$(stat -c %i $cg)"
		result root_ino "$(stat -c %i /sys/fs/cgroup)"
		uu_review pagecg $DM/libc.so.6
		# Its last tasks leave it as they are released.
		for i in 1 2 3 4 5 6 7 8 9 10; do
			rmdir $cg 2>/dev/null && break
			sleep 0.2
		done
		umount /sys/fs/cgroup
	fi
	# A read that failed (fourth review's low finding 7): the whole pages of that libc's
	# .eh_frame_hdr answered by an error target while a program's stacks need them, so that
	# the fetch thread's reads fail and leave their folios cached, not up to date; then the
	# device answers again, and later stacks must be complete: readahead passes over a
	# cached folio, so the thread must read those again. The module is loaded afresh, so
	# that no table of that libc is kept from the stacks before.
	rmmod user_unwind && insmod /lib/modules/user_unwind.ko
	echo global >$T/trace_clock
	sectors=$(($(stat -c %s /lib/uu-dm.img) / 512))
	echo 1 >/proc/sys/vm/drop_caches
	uu_review errtable $DM/libc.so.6 $sectors /dev/loop0 >/tmp/errtable &&
		dmsetup --noudevsync load uu /tmp/errtable &&
		dmsetup --noudevsync resume uu
	eio=$?
	traced REVIEW_DM_EIO 'id == 110' sh -c 'for i in 1 2 3; do
		LD_LIBRARY_PATH=/mnt/dm timeout -s KILL 60 uu_nofp chain 5 || exit 1
		sleep 0.3
	done'
	result table_status $eio
	result table "$(tr '\n' ';' </tmp/errtable)"
	dmsetup --noudevsync load uu --table "0 $sectors linear /dev/loop0 0" &&
		dmsetup --noudevsync resume uu
	result linear_status $?
	traced REVIEW_DM_REREAD 'id == 110' sh -c 'for i in 1 2 3 4 5 6 7 8; do
		LD_LIBRARY_PATH=/mnt/dm timeout -s KILL 60 uu_nofp chain 5 || exit 1
		sleep 0.2
	done'
	umount $DM
	dmsetup --noudevsync remove uu
	losetup -d /dev/loop0
fi

# 1. userfaultfd: a task makes getppid with its stack pointer in anonymous memory registered
# with userfaultfd (missing pages, never served): the call must return, its stack cut
# short, while another task's stacks stay complete. Then rmmod while such a task is traced
# must return within seconds. Today the first hangs until killed, the second until the task
# is killed: both are bounded here.
review_stats REVIEW_UFFD_BEFORE
review_begin 'id == 110'
timeout -s KILL 15 uu_review uffd 20 >/tmp/uffd.out 2>&1 &
uf=$!
t0=$(up)
sleep 0.3
timeout -s KILL 60 uu_nofp chain 40 >/dev/null
other=$?
wait $uf
status=$?
t1=$(up)
review_end REVIEW_UFFD
result status $status
result other_status $other
result seconds "$(awk -v a=$t0 -v b=$t1 'BEGIN {print b - a}')"
result uffd "$(tr '\n' ' ' </tmp/uffd.out)"
cat $T/trace
review_stats REVIEW_UFFD_AFTER

review_begin 'id == 110'
timeout -s KILL 60 uu_review uffd 0 >/tmp/uffd2.out 2>&1 &
uf=$!
sleep 1
t0=$(up)
rmmod user_unwind &
rm=$!
i=0
while kill -0 $rm 2>/dev/null && [ $i -lt 60 ]; do
	sleep 0.1
	i=$((i + 1))
done
t1=$(up)
returned=$(kill -0 $rm 2>/dev/null && echo no || echo yes)
# Then release the task (and today's rmmod with it), and give rmmod time to end.
kill -9 $uf 2>/dev/null
wait $uf 2>/dev/null
i=0
while kill -0 $rm 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
rmstatus=hung
kill -0 $rm 2>/dev/null || { wait $rm; rmstatus=$?; }
echo 0 >$T/tracing_on
[ ! -e $OPT ] || echo 0 >$OPT
sys_enter_off
section REVIEW_UFFD_RMMOD
result returned $returned
result seconds "$(awk -v a=$t0 -v b=$t1 'BEGIN {print b - a}')"
result rmmod_status $rmstatus
result uffd "$(tr '\n' ' ' </tmp/uffd2.out)"
result in_modules "$(grep -c '^user_unwind ' /proc/modules)"
echo local >$T/trace_clock
