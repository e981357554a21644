# SPDX-License-Identifier: GPL-2.0
# Guest half of the .eh_frame unwinder's tests, sourced by tests/guest/e2e.sh (installed as
# /lib/uu-unwind.sh); tests/unwind.py checks the sections on the host. Uses e2e.sh's
# section and traced. The module is loaded here with its default unwinder (eh_frame) and
# unloaded at the end.
insmod /lib/modules/user_unwind.ko
section UNWIND_LOAD
result insmod_status $?
result unwinder "$(cat /sys/module/user_unwind/parameters/unwinder)"
echo global >$T/trace_clock
export LD_BIND_NOW=
unset LD_BIND_NOW

traced UNWIND_CHAIN 'id == 110' uu_nofp chain 40
traced UNWIND_THREAD 'id == 110' uu_nofp thread 40
traced UNWIND_SIGNAL 'id == 110' uu_nofp signal 30
traced UNWIND_DEEP 'id == 110' sh -c 'for i in 1 2 3 4 5; do uu_nofp deep 100 || exit 1; done'
traced UNWIND_LIMIT 'id == 110' uu_nofp deep 600
traced UNWIND_PLT 'id == 110' sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do uu_nofp plt || exit 1; done'
traced UNWIND_DL 'id == 110' uu_nofp dl 40
# One library file rewritten in place (same inode, a new change time) between runs, with
# two builds in turn whose nf_dl_fn differ in place and frame: no row of one may serve the
# other.
mkdir -p /tmp/uulib
traced UNWIND_REWRITE 'id == 110' sh -c 'for i in 1 2 3 4 5 6; do
	if [ $((i % 2)) = 1 ]; then v=libuunofpdl.so; else v=libuunofpdl2.so; fi
	cat /usr/lib/$v >/tmp/uulib/libuunofpdl.so || exit 1
	sleep 0.05
	LD_LIBRARY_PATH=/tmp/uulib uu_nofp dl 5 || exit 1
done'
result rewrite_inode "$(stat -c %i /tmp/uulib/libuunofpdl.so)"
# The same library in the lower layer of an overlay mount (containers run on overlayfs),
# run through the mount while another process holds it open (the overlay inode stays
# cached), then rewritten in the layer underneath with the other build (dd conv=notrunc:
# the real inode's change time moves, the overlay inode's does not): the second run's
# stacks are the new build's, complete, under a file_cache with its build-id.
mkdir -p /tmp/ovl/a /tmp/ovl/b /tmp/ovl/merged
cat /usr/lib/libuunofpdl.so >/tmp/ovl/a/libuunofpdl.so
mount -t overlay overlay -o lowerdir=/tmp/ovl/a:/tmp/ovl/b /tmp/ovl/merged
section UNWIND_OVERLAY_MOUNT
result status $?
sleep 600 </tmp/ovl/merged/libuunofpdl.so &
holder=$!
traced UNWIND_OVERLAY_V1 'id == 110' env LD_LIBRARY_PATH=/tmp/ovl/merged uu_nofp dl 10
dd if=/usr/lib/libuunofpdl2.so of=/tmp/ovl/a/libuunofpdl.so conv=notrunc 2>/dev/null
traced UNWIND_OVERLAY_V2 'id == 110' env LD_LIBRARY_PATH=/tmp/ovl/merged uu_nofp dl 20
kill $holder
wait $holder 2>/dev/null
umount /tmp/ovl/merged
# Two different library files in turn in one process, each dlopened where the other was
# just closed; and a program that execs another whose code lies at the same addresses.
traced UNWIND_DLSWAP 'id == 110' sh -c 'uu_nofp dlswap 40 >/tmp/dlswap.out; true'
section UNWIND_DLSWAP_BASE
result dlswap "$(cat /tmp/dlswap.out)"
traced UNWIND_EXEC 'id == 110' uu_nofp_np exec 30 /usr/bin/uu_nofp_np2
# A Debian binary: bash's own system calls, builtins only (no fork, no exec).
traced UNWIND_BASH 'common_pid != 0' bash -c 'i=0; while [ $i -lt 30 ]; do i=$((i + 1)); echo $i >/dev/null; done'
# Debian's busybox-static, linked without .eh_frame_hdr: its table is made from its
# .eh_frame section. Its shell's system calls, builtins only (no fork, no exec).
traced UNWIND_BUSYBOX 'common_pid != 0' sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i + 1)); echo $i >/dev/null; done'

# Hostile call-frame tables (tests/hostile_cfi.py wrote them to /hostile-cfi), a frame in
# each; then one file rewritten with good and bad tables in turn while its stacks are taken.
section UNWIND_HOSTILE_BEFORE
cat $T/user_unwind_stats
traced UNWIND_HOSTILE 'id == 110' uu_hostile_cfi 2 $(cut -d' ' -f1 /hostile-cfi/expected | sed 's|^|/hostile-cfi/|')
cp /hostile-cfi/control /tmp/uu-flip
traced UNWIND_HOSTILE_FLIP 'id == 110' uu_hostile_cfi -w 150 /tmp/uu-flip $(sed 's|^|/hostile-cfi/|' /hostile-cfi/flip)
section UNWIND_HOSTILE_AFTER
cat $T/user_unwind_stats
# One file rewritten in place, code and table, with two functions in turn whose system
# call returns at the same offset with other frames, a stack after each write, no pause:
# writes closer together than the clock's tick must still give each content its own rows.
cp /hostile-cfi/control /tmp/uu-rewrite
traced UNWIND_HOSTILE_REWRITE 'id == 110' uu_hostile_cfi -r 100 /tmp/uu-rewrite /hostile-cfi/control /hostile-cfi/deep

# The switch: the kernel's frame-pointer stack, then back.
section UNWIND_SWITCH
result bad_value "$(echo bogus >/sys/module/user_unwind/parameters/unwinder 2>/dev/null && echo accepted || echo refused)"
echo fp >/sys/module/user_unwind/parameters/unwinder
result unwinder_fp "$(cat /sys/module/user_unwind/parameters/unwinder)"
traced UNWIND_FP 'id == 110' uu_nofp chain 10
echo eh_frame >/sys/module/user_unwind/parameters/unwinder
section UNWIND_SWITCH_BACK
result unwinder_back "$(cat /sys/module/user_unwind/parameters/unwinder)"

section UNWIND_STATS
cat $T/user_unwind_stats
echo local >$T/trace_clock
rmmod user_unwind
section UNWIND_UNLOAD
result rmmod_status $?
