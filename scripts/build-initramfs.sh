#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the guest's base initramfs tree: busybox, bash, trace-cmd with its libraries, the
# test programs (frame pointers) and the module at /lib/modules/user_unwind.ko.
# Usage: build-initramfs.sh OUTDIR MODULE.ko
set -euo pipefail
. "$(dirname "$0")/lib.sh"

OUT=${1:?usage: build-initramfs.sh OUTDIR MODULE.ko}
KO=${2:?usage: build-initramfs.sh OUTDIR MODULE.ko}
[ -f "$KO" ] || die "module $KO not found: run make module"

rm -rf "$OUT" && mkdir -p "$OUT"/{bin,sbin,usr/bin,usr/lib,lib/modules,proc,sys,dev,tmp,root,etc}

# Copy a binary and every library ldd lists for it, at the same paths.
copy_with_libs() {
	local bin=$1 dest=$2 lib
	install -D -m 0755 "$bin" "$OUT$dest"
	for lib in $(ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' || true); do
		[ -e "$OUT$lib" ] || install -D -m 0755 "$lib" "$OUT$lib"
	done
}

install -m 0755 /bin/busybox "$OUT/bin/busybox"
copy_with_libs "$(command -v trace-cmd)" /usr/bin/trace-cmd
# The kernel's ftrace selftests (scripts/ftracetest.sh) want bash.
copy_with_libs /bin/bash /bin/bash

build_test_programs
for lib in libuutest.so libuua.so libuub.so libuuv1.so libuuv2.so; do
	install -m 0755 "$PROG/$lib" "$OUT/usr/lib/$lib"
done
copy_with_libs "$PROG/uu_chain" /usr/bin/uu_chain
copy_with_libs "$PROG/uu_dl" /usr/bin/uu_dl
copy_with_libs "$PROG/uu_bench" /usr/bin/uu_bench
copy_with_libs "$PROG/uu_named" /usr/bin/uu_named
copy_with_libs "$PROG/uu_many" /usr/bin/uu_many
for lib in libuunofp.so libuunofpdl.so libuunofpdl2.so libuuctor.so; do
	install -m 0755 "$PROG/$lib" "$OUT/usr/lib/$lib"
done
copy_with_libs "$PROG/uu_nofp" /usr/bin/uu_nofp
copy_with_libs "$PROG/uu_nofp_np" /usr/bin/uu_nofp_np
copy_with_libs "$PROG/uu_nofp_np2" /usr/bin/uu_nofp_np2
copy_with_libs "$PROG/uu_hostile_cfi" /usr/bin/uu_hostile_cfi
copy_with_libs "$PROG/uu_bench_nofp" /usr/bin/uu_bench_nofp
copy_with_libs "$PROG/uu_review" /usr/bin/uu_review
copy_with_libs "$PROG/uu_bench_cold" /usr/bin/uu_bench_cold
copy_with_libs "$PROG/uu_hoard" /usr/bin/uu_hoard
copy_with_libs "$PROG/uu_honest" /usr/bin/uu_honest
install -m 0755 "$PROG/libuuhoard.so" "$OUT/usr/lib/libuuhoard.so"
install -m 0644 "$ROOT/tests/guest/unwind.sh" "$OUT/lib/uu-unwind.sh"
install -m 0644 "$ROOT/tests/guest/review.sh" "$OUT/lib/uu-review.sh"
for prog in uu_maps uu_exec uu_perf uu_dlone uu_ab uu_offcpu uu_top; do
	copy_with_libs "$PROG/$prog" /usr/bin/$prog
done
# The suspended-device test (tests/guest/review.sh): an ext4 image holding a copy of libc,
# mounted in the guest through a device-mapper target over a loop device, and dmsetup.
mkdir -p "$OUT/tmp/uu-dm"
cp -L /lib/x86_64-linux-gnu/libc.so.6 "$OUT/tmp/uu-dm/libc.so.6"
mkfs.ext4 -q -F -d "$OUT/tmp/uu-dm" "$OUT/lib/uu-dm.img" 8M >/dev/null ||
	die "mkfs.ext4 of the test image failed"
rm -rf "$OUT/tmp/uu-dm"
copy_with_libs "$(command -v dmsetup)" /sbin/dmsetup
install -m 0644 "$KO" "$OUT/lib/modules/user_unwind.ko"
install -m 0644 "$ROOT/tests/guest/lib.sh" "$OUT/lib/uu.sh"
install -m 0755 "$ROOT/tests/guest/memory.sh" "$OUT/usr/bin/memory.sh"
install -m 0644 "$ROOT/tests/guest/identity.sh" "$OUT/lib/uu-identity.sh"

cat >"$OUT/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/bin:/bin:/sbin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
echo UU-GUEST-BEGIN
cd /root
/bin/sh -c "$(cat /cmd)" </dev/null
echo "UU-GUEST-EXIT=$?"
# The whole kernel log, for the host's splat scan (tests/splat.py): the console shows only
# errors, and a WARNING or a lockdep report is printed below that level.
echo UU-GUEST-DMESG
dmesg
sync
reboot -f
INIT
chmod 0755 "$OUT/init"
