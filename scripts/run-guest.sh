#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Boot the test kernel, or Debian's stock kernel, under QEMU and run one command in it.
#
#   scripts/run-guest.sh [--kernel test|prod|debian] [--add HOST_PATH:GUEST_PATH]... [--smp N]
#                        [--log FILE] [--append KERNEL_ARGS] [--monitor SOCKET] [--icount]
#                        [--plugin PLUGIN[,ARGS]] -- COMMAND...
#
# --kernel debian boots Debian's own vmlinuz ($DEBIAN_KERNEL, scripts/stock-kernel.sh) with
# the module built for it (make module KDIR=debian); --kernel prod the production-config
# test kernel the benchmark measures on (build-module.sh KDIR=prod builds both).
# The guest has busybox, trace-cmd, the test programs, tracefs at /sys/kernel/tracing and the
# module at /lib/modules/user_unwind.ko (not inserted); with the test kernel, also the test
# fixture /lib/modules/uu_mmhold.ko (tests/kmod); with Debian's, its loop, dm-mod, ext4 and
# overlay modules in /lib/modules/extra, "order" listing them for insmod. COMMAND runs with /bin/sh -c; its
# output is printed and its exit status is this script's. The whole serial console goes to
# the --log file. A guest that hangs is killed after $UU_GUEST_TIMEOUT seconds (default 900).
# --monitor puts QEMU's human monitor on the unix socket SOCKET (the stress run injects NMIs
# through it, with its "nmi" command). --icount runs the guest with QEMU's instruction
# counter as its clock (-icount shift=0: one nanosecond an instruction), so that the guest's
# times count instructions, not the host's emulation speed. --plugin loads a QEMU TCG plugin
# (scripts/insn-profile.sh's instruction counter).
#
# TCG runs the vCPUs on one host thread ($UU_GUEST_TCG_THREAD, default single; multi runs one
# thread per vCPU): with multi-threaded TCG a vCPU can execute a stale int3 after the kernel's
# text_poke_bp() has replaced it and synced every CPU, which the kernel then reports as an
# int3 Oops in whatever code was patched (a static key flipped by enabling an event, a
# static call retargeted by a tracepoint probe). Seen here in 1 of 3 runs of the Debian
# suite, and with the kernel's own function_graph selftests without the module.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

usage() { die "usage: run-guest.sh [--kernel test|prod|debian] [--add HOST_PATH:GUEST_PATH]... [--smp N] [--log FILE] [--append KERNEL_ARGS] [--monitor SOCKET] [--icount] [--plugin PLUGIN[,ARGS]] -- COMMAND..."; }
adds=() smp=2 log= kernel=test append= extra=()
while (($#)); do
	case $1 in
	--kernel) [ $# -ge 2 ] || usage; kernel=$2; shift 2 ;;
	--add) [ $# -ge 2 ] || usage; adds+=("$2"); shift 2 ;;
	--smp) [ $# -ge 2 ] || usage; smp=$2; shift 2 ;;
	--log) [ $# -ge 2 ] || usage; log=$2; shift 2 ;;
	--append) [ $# -ge 2 ] || usage; append=" $2"; shift 2 ;;
	--monitor) [ $# -ge 2 ] || usage; extra+=(-monitor "unix:$2,server,nowait"); shift 2 ;;
	--icount) extra+=(-icount shift=0); shift ;;
	--plugin) [ $# -ge 2 ] || usage; extra+=(-plugin "$2"); shift 2 ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
(($#)) || usage

case $kernel in
test)
	KBUILD=$(kernel_build_dir)
	BZIMAGE=$KBUILD/arch/x86/boot/bzImage
	KO=${UU_MODULE:-$ROOT/user_unwind.ko}
	[ "$(cat "$KBUILD/.done" 2>/dev/null)" = "$(kernel_key)" ] ||
		die "test kernel not built or out of date: run make setup"
	[ -f "$KO" ] || die "module not built: run make module"
	# The guest tests' fixture, built with the module for this kernel only.
	[ ! -f "$ROOT/tests/kmod/uu_mmhold.ko" ] ||
		adds+=("$ROOT/tests/kmod/uu_mmhold.ko:/lib/modules/uu_mmhold.ko")
	;;
prod)
	KERNEL_FLAVOUR=prod
	KBUILD=$(kernel_build_dir)
	BZIMAGE=$KBUILD/arch/x86/boot/bzImage
	KO=${UU_MODULE:-$(prod_module_dir)/user_unwind.ko}
	[ "$(cat "$KBUILD/.done" 2>/dev/null)" = "$(kernel_key)" ] ||
		die "production-config kernel not built or out of date: run scripts/build-module.sh with KDIR=prod"
	[ -f "$KO" ] || die "module not built for it: run scripts/build-module.sh with KDIR=prod"
	;;
debian)
	BZIMAGE=$(stock_vmlinuz)
	KO=${UU_MODULE:-$(stock_module_dir)/user_unwind.ko}
	[ -f "$BZIMAGE" ] || die "Debian's kernel not fetched: run make module KDIR=debian"
	[ -f "$KO" ] || die "module not built for Debian's kernel: run make module KDIR=debian"
	# Debian's own modules the tests load, which the test kernel has built in.
	[ ! -f "$(stock_guest_modules)/order" ] ||
		adds+=("$(stock_guest_modules):/lib/modules/extra")
	;;
*) usage ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/uu-guest.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$ROOT/scripts/build-initramfs.sh" "$work/root" "$KO"
for a in "${adds[@]}"; do
	src=${a%%:*} dst=${a#*:}
	[ "$src" != "$a" ] && [ -n "$dst" ] && [ "${dst#/}" != "$dst" ] ||
		die "--add wants HOST_PATH:/GUEST_PATH, got '$a'"
	[ -e "$src" ] || die "--add: $src does not exist"
	mkdir -p "$work/root$(dirname "$dst")"
	cp -a "$src" "$work/root$dst"
done
printf '%s\n' "$*" >"$work/root/cmd"
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.cpio.gz"

[ -n "$log" ] || log=$work/console.log
status=0
timeout "${UU_GUEST_TIMEOUT:-900}" qemu-system-x86_64 -m 2G -smp "$smp" -nographic -no-reboot \
	-accel tcg,thread="${UU_GUEST_TCG_THREAD:-single}" "${extra[@]}" \
	-kernel "$BZIMAGE" -initrd "$work/initramfs.cpio.gz" \
	-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4$append" \
	</dev/null >"$log" 2>&1 || status=$?
tr -d '\r' <"$log" | sed -n '/^UU-GUEST-BEGIN$/,$p' | sed '1d;/^UU-GUEST-EXIT=/,$d'
code=$(tr -d '\r' <"$log" | sed -n 's/^UU-GUEST-EXIT=\([0-9]*\)$/\1/p' | tail -n1)
if [ -z "$code" ]; then
	tr -d '\r' <"$log" | tail -n 40 >&2
	if [ "$status" = 124 ]; then
		die "guest timed out after ${UU_GUEST_TIMEOUT:-900} s (console above)"
	fi
	die "guest ended without an exit status (qemu status $status; console above)"
fi
exit "$code"
