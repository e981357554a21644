# SPDX-License-Identifier: GPL-2.0
# Guest half of the file-identity tests, sourced by e2e.sh with the module loaded and the
# option off; tests/identity.py checks the sections. A file cookie names the file's
# identity (device, inode, generation, change time), and a file_cache is remembered only
# when a buffer took it (Documentation/user_unwind.rst, "What a cookie means").

# id_begin FILTER: an empty top buffer, user stacks on for the system calls FILTER selects.
id_begin() {
	echo 0 >$T/tracing_on
	echo >$T/trace
	sys_enter_on "$1"
	echo 1 >$OPT
	echo 1 >$T/tracing_on
}

# id_end SECTION [STATUS]: stacks off, then section SECTION with the command's STATUS (if
# given) and the trace.
id_end() {
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	sys_enter_off
	section "$1"
	[ $# -lt 2 ] || result status "$2"
	cat $T/trace
}

# events/user_unwind/enable switches the events on in the order set_event lists them, which
# the compiler decides (GCC's build of the module lists the cookie event first, clang's
# file_cache): stacks may come before file_cache is on. Their file_cache events are not
# remembered as written, so the next stacks write them: with a program running throughout,
# every cookie of the trace must be explained.
echo 0 >$T/tracing_on
echo >$T/trace
sys_enter_on 'id == 110'
uu_chain 1000000 20000 >/dev/null &
order_pid=$!
echo 1 >$T/tracing_on
echo 1 >$T/events/user_unwind/enable
sleep 1
order=$(grep '^user_unwind:' $T/set_event | cut -d: -f2 | tr '\n' ' ')
echo 0 >$T/events/user_unwind/enable
echo 0 >$T/tracing_on
kill $order_pid
wait $order_pid 2>/dev/null
sys_enter_off
section ID_ORDER
result order "$order"
cat $T/trace

# A file deleted and another that takes its device and inode numbers: tmpfs numbers its
# inodes afresh in each mount, and a new mount takes the lowest free anonymous device
# number. The two files are the same library but for their build-id.
mkdir -p /mnt/reuse
mount -t tmpfs tmpfs /mnt/reuse
cp /usr/lib/libuuv1.so /mnt/reuse/libuuv.so
section ID_REUSE_NUMBERS
result first "$(stat -c '%d:%i' /mnt/reuse/libuuv.so)"
id_begin 'id == 110'
uu_dlone /mnt/reuse/libuuv.so 3 >/dev/null
umount /mnt/reuse
mount -t tmpfs tmpfs /mnt/reuse
cp /usr/lib/libuuv2.so /mnt/reuse/libuuv.so
result second "$(stat -c '%d:%i' /mnt/reuse/libuuv.so)"
uu_dlone /mnt/reuse/libuuv.so 3 >/dev/null
id_end ID_REUSE

# A library rewritten in place while a program has it mapped (same size, same code, the
# other build-id): the change time moves, so the frames after the rewrite get a new cookie
# and a file_cache with the new build-id.
cp /usr/lib/libuuv1.so /mnt/reuse/libuuw.so
rm -f /tmp/rw.go
id_begin 'id == 110'
uu_dlone /mnt/reuse/libuuw.so 3 /tmp/rw.go >/tmp/rw.out &
rw=$!
while ! grep -q waiting /tmp/rw.out 2>/dev/null; do sleep 0.05; done
dd if=/usr/lib/libuuv2.so of=/mnt/reuse/libuuw.so conv=notrunc 2>/dev/null
touch /tmp/rw.go
wait $rw
id_end ID_REWRITE $?
umount /mnt/reuse

# Two processes, one after the other, mapping the same libc and program: one cookie each
# file, one file_cache each.
id_begin 'id == 110'
uu_chain 3 >/dev/null
uu_chain 3 >/dev/null
id_end ID_SHARED

# A file_cache written where no buffer takes it must be written again by the next stack that
# needs it. Each case: a first run of uu_dlone while file_cache cannot land in the top
# buffer, then the obstacle removed and a second run (another process, the same files).
# The requests come from sys_enter in instance "req", so that masks on the top instance
# block the module's events without blocking the requests.
mkdir $T/instances/req
echo 'id == 110' >$T/instances/req/events/raw_syscalls/sys_enter/filter
echo 1 >$T/instances/req/events/raw_syscalls/sys_enter/enable
for how in filter soft cpumask pid full; do
	echo 0 >$T/tracing_on
	echo >$T/trace
	echo 1 >$OPT
	case $how in
	filter) echo 'cookie == 0' >$T/events/user_unwind/file_cache/filter ;;
	soft)
		echo 0 >$T/events/user_unwind/file_cache/enable
		echo 'enable_event:user_unwind:file_cache if id == 99999' \
			>$T/events/raw_syscalls/sys_exit/trigger
		;;
	cpumask) mask=$(cat $T/tracing_cpumask); echo 0 >$T/tracing_cpumask ;;
	pid) echo 1 >$T/set_event_pid ;;
	full)
		echo 0 >$T/options/overwrite
		kb=$(cat $T/buffer_size_kb)
		echo 16 >$T/buffer_size_kb
		echo 1 >$T/tracing_on
		# Fill every CPU's buffer.
		for cpu in $(seq 0 $(($(nproc) - 1))); do
			for i in $(seq 200); do
				taskset -c $cpu sh -c 'echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >'$T/trace_marker
			done 2>/dev/null
		done
		;;
	esac
	echo 1 >$T/tracing_on
	uu_dlone /usr/lib/libuuv1.so 2 >/dev/null
	section ID_BLOCKED_${how}_STATS
	result file_cache "$(uu file_cache)"
	result file_cache_dropped "$(uu file_cache_dropped)"
	case $how in
	filter) echo 0 >$T/events/user_unwind/file_cache/filter ;;
	soft)
		echo '!enable_event:user_unwind:file_cache' >$T/events/raw_syscalls/sys_exit/trigger
		echo 1 >$T/events/user_unwind/file_cache/enable
		;;
	cpumask) echo "$mask" >$T/tracing_cpumask ;;
	pid) echo >$T/set_event_pid ;;
	full)
		# A consuming read makes room without resetting the buffer.
		timeout 2 cat $T/trace_pipe >/dev/null
		;;
	esac
	uu_dlone /usr/lib/libuuv1.so 2 >/dev/null
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	section ID_BLOCKED_$how
	cat $T/trace
	if [ $how = full ]; then
		echo 1 >$T/options/overwrite
		echo "$kb" >$T/buffer_size_kb
	fi
done
echo 0 >$T/instances/req/events/raw_syscalls/sys_enter/enable
rmdir $T/instances/req

# file_cache disabled while the stacks are on: no stack does file_cache's work.
echo 1 >$OPT
echo 0 >$T/events/user_unwind/file_cache/enable
sys_enter_on 'id == 110'
before=$(uu file_cache)
uu_dlone /usr/lib/libuuv1.so 3 >/dev/null
section ID_NO_FILE_CACHE
result stacks_on "$(cat $T/events/user_unwind/user_unwind_stack/enable)"
result file_cache_delta $(($(uu file_cache) - before))
sys_enter_off
echo 0 >$OPT

# Code in anonymous memory that has a struct file (shared anonymous memory, a private
# /dev/zero mapping, a memfd double mapping, anonymous huge pages) and in a VM_PFNMAP
# copy-on-write mapping of /dev/mem: raw addresses, as perf records them. Device nodes of
# our own: devtmpfs is mounted noexec.
mkdir -p /root/devs
mknod /root/devs/zero c 1 5 2>/dev/null
mknod /root/devs/mem c 1 1 2>/dev/null
echo 4 >/proc/sys/vm/nr_hugepages 2>/dev/null
rm -f /tmp/perf-*.map
id_begin 'id == 110'
uu_maps /root/devs 3 >/tmp/maps.out
id_end ID_MAPS $?
section ID_MAPS_OUT
cat /tmp/maps.out
section ID_MAPS_PERF_MAP
cat /tmp/perf-*.map

# execve() from a known chain: the request of its sys_enter is served after the point of
# no return, in the new program, which must not lend it its stack.
before=$(uu stacks_after_exec)
id_begin 'id == 59'
uu_exec
id_end ID_EXEC
section ID_EXEC_STATS
result stacks_after_exec $(($(uu stacks_after_exec) - before))

# Events on the way out of the kernel, after the deferred unwinder forgot the entry
# (preemptirq's irq_enable in exit_to_user_mode()): a request there would be served at the
# next exit, with the next entry's stack. getpid from one chain, getppid from another.
section ID_EXIT_WINDOW
if [ -e $T/events/preemptirq/irq_enable ]; then
	before=$(uu requests_skipped)
	echo 0 >$T/tracing_on
	echo >$T/trace
	echo 'id == 39 || id == 110' >$T/events/raw_syscalls/sys_exit/filter
	echo 1 >$T/events/raw_syscalls/sys_exit/enable
	echo 1 >$T/events/preemptirq/irq_enable/enable
	sys_enter_on 'id == 39 || id == 110'
	echo 1 >$OPT
	echo 1 >$T/tracing_on
	sh -c "echo \$\$ >$T/set_event_pid; exec uu_ab 20"
	echo 0 >$T/tracing_on
	echo 0 >$OPT
	echo >$T/set_event_pid
	sys_enter_off
	echo 0 >$T/events/preemptirq/irq_enable/enable
	echo 0 >$T/events/raw_syscalls/sys_exit/enable
	echo 0 >$T/events/raw_syscalls/sys_exit/filter
	result skipped $(($(uu requests_skipped) - before))
	cat $T/trace
else
	echo "# skipped: no preemptirq events in this kernel"
fi

# perf_event_open() on the module's events by an unprivileged user: refused, where perf's
# own rules (perf_event_paranoid 2, counting on itself, kernel excluded) allow it for
# raw_syscalls:sys_enter.
section ID_PERF
result paranoid "$(cat /proc/sys/kernel/perf_event_paranoid)"
uu_perf $(cat $T/events/raw_syscalls/sys_enter/id) $(cat $T/events/user_unwind/*/id)

# mmap_lock held for writing by another task (as a mmap() waiting on an unanswered FUSE
# request holds it), while a traced task's chain has frames in no mapping: the callback
# must not wait for the lock, so rmmod returns at once and no task sleeps in D state.
section ID_MMAP_HELD
if insmod /lib/modules/uu_mmhold.ko 2>/dev/null; then
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	before=$(uu lookups_contended)
	sys_enter_on 'id == 110'
	echo 1 >$OPT
	uu_many 1 400 /usr/lib/libuutest.so >/dev/null &
	many=$!
	sleep 0.5
	echo "$many 8000" >/sys/kernel/debug/uu_mmhold &
	holder=$!
	sleep 1
	result dstate "$(grep -l '^State:.*D' /proc/$many/task/*/status 2>/dev/null | wc -l)"
	result contended $(($(uu lookups_contended) - before))
	echo 0 >$OPT
	sys_enter_off
	t0=$(cut -d' ' -f1 /proc/uptime)
	rmmod user_unwind
	result rmmod_status $?
	# Still holding: rmmod did not wait for the lock.
	result held_after_rmmod "$(kill -0 $holder 2>/dev/null && echo yes || echo no)"
	t1=$(cut -d' ' -f1 /proc/uptime)
	result rmmod_ms "$(echo "$t0 $t1" | awk '{printf "%d", ($2 - $1) * 1000}')"
	kill $many 2>/dev/null
	wait $holder
	wait $many 2>/dev/null
	rmmod uu_mmhold
	insmod /lib/modules/user_unwind.ko
else
	echo "# skipped: no test fixture uu_mmhold.ko for this kernel"
fi
