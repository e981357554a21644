#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Big real programs profiled in the guest (issue 24, "How it is checked"): three large
# programs from Debian's packages, none of the project's own, sampled through the timer
# interrupt (irq_vectors:local_timer_entry, the tick) and user page faults
# (exceptions:page_fault_user), unwound by the module's default (.eh_frame) unwinder:
#
#   cc1      GCC 12's compiler proper (the host's, from Debian's cpp-12: 33 MB, stripped,
#            no frame pointers), run by `gcc -O2 -S` on a real C file, the kernel source's
#            scripts/dtc/livetree.c, preprocessed on the host;
#   python3  Debian's python3.11 running two scripts of its standard library, `python3 -m
#            tokenize` and `python3 -m ast`, over its typing.py;
#   clang    Debian's clang 19 compiling the same file (preprocessed by clang): 190 MB of
#            LLVM libraries, whose C++ constructors run from ld.so's _dl_start_user.
#
# The binaries, their libraries and the standard library files the workload loads go into
# the guest at their host paths (scripts/real-programs.sh), so that the host symbolizes each
# frame in the very file that ran. tests/guest/bigprog.sh runs the programs in one guest,
# each with the module freshly loaded; tests/bigprog.py prints for each its stacks, the share
# rooted at _start (or ld.so's _dl_start_user, or a thread's clone3), their depth, the
# module's counters before and after, the distinct (file, offset) frame addresses of the
# trace, rows parsed per distinct address, and the module's memory.
# Targets are marked PASS or MISS; the exit status is non-zero only when the run itself
# failed. About 3 minutes of guest time under TCG on the debug kernel.
#
# Usage: scripts/bigprog.sh [--kernel test|debian] [--no-build] [--cold]
#   --no-build  use the module already built (scripts/build-module.sh, with KDIR=debian for
#               Debian's kernel; or $UU_MODULE) instead of building it from the tree first.
#   --cold      the programs run from a cold page cache: their files are on ext4 on a block
#               device (a loop device over an image in the guest's memory), mounted and
#               chrooted into, and every page cache is dropped before each program; the
#               first stacks then miss the files' pages, which the callback does not wait
#               for (Documentation/user_unwind.rst, "What the callback can wait for"), and
#               the report gives the share cut with reason read in the first second and
#               after. A real disk is slower than this one: its first second cuts more.
# The guest's output, its console, each program's trace.dat and folded stacks stay in
# $TREE_OUT/bigprog/KERNEL/ (KERNEL-cold/ with --cold).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$ROOT/scripts/real-programs.sh"

usage() { die "usage: scripts/bigprog.sh [--kernel test|debian] [--no-build] [--cold]"; }
kernel=test build=1 cold=0
while (($#)); do
	case $1 in
	--kernel) [ $# -ge 2 ] || usage; kernel=$2; shift 2 ;;
	--no-build) build=0; shift ;;
	--cold) cold=1; shift ;;
	*) usage ;;
	esac
done
case $kernel in test | debian) ;; *) usage ;; esac

if ((build)); then
	if [ "$kernel" = debian ]; then
		KDIR=debian "$ROOT/scripts/build-module.sh"
	else
		"$ROOT/scripts/build-kernel.sh"
		"$ROOT/scripts/build-module.sh"
	fi
fi

command -v gcc >/dev/null || die "gcc is not installed (Debian's gcc-12 has the cc1 profiled)"
CC1=$(gcc -print-prog-name=cc1)
DRIVER=$(readlink -f "$(command -v gcc)")
[ -x "$CC1" ] || die "gcc has no cc1 ($CC1)"

suffix=
((cold == 0)) || suffix=-cold
OUT=$TREE_OUT/bigprog/$kernel$suffix
STAGE=$TREE_OUT/bigprog/stage
mkdir -p "$OUT" "$STAGE"

# What goes into the guest, at the host's paths (scripts/real-programs.sh).
CLANG=/usr/bin/clang-19
[ -x "$CLANG" ] || die "Debian's clang-19 is not installed"
adds=(--add "$ROOT/tests/guest/bigprog.sh:/bin/bigprog.sh" --add "$DRIVER:/usr/bin/gcc")
stage_c_inputs "$STAGE"
stage_c_inputs "$STAGE" clang-19
stage_python "$STAGE"
add_binaries "$CC1" "$DRIVER" "$CLANG"

# The programs file: NAME, COMM (what the events are filtered on), COMMAND.
inputs=$(for f in $CC_FILES; do printf '/root/bigprog/%s ' "$(basename "${f%.c}")"; done)
cc="for f in $inputs; do gcc -O2 -S -o /tmp/out.s \$f.i || exit 1; done"
clang="for f in $inputs; do clang-19 -O2 -S -o /tmp/out.s \$f.clang-19.i || exit 1; done"
py="for m in $PY_MODULES; do python3 -m tokenize $PYLIB/\$m.py >/dev/null &&"
py+=" python3 -m ast $PYLIB/\$m.py >/dev/null || exit 1; done"
printf 'cc1\tcc1\t%s\npython3\tpython3\t%s\nclang\tclang-19\t%s\n' "$cc" "$py" "$clang" \
	>"$STAGE/programs"
adds+=(--add "$STAGE/programs:/root/programs")
guest_args=(/root/programs)
if ((cold)); then
	# Every file the programs use, at its guest path, on an ext4 image with busybox for the
	# chroot's shell; the guest gets the image instead of the files.
	say "making the cold run's ext4 image"
	root=$STAGE/cold-root
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/tmp"
	install -m 0755 /bin/busybox "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	files=()
	for ((i = 0; i < ${#adds[@]}; i += 2)); do
		pair=${adds[i + 1]} host=${pair%%:*} guest=${pair#*:}
		case $guest in
		/bin/bigprog.sh | /root/programs) files+=(--add "$pair") ;;
		*) mkdir -p "$root$(dirname "$guest")"; cp -rL "$host" "$root$guest" ;;
		esac
	done
	kib=$(du -sk "$root" | cut -f1)
	rm -f "$STAGE/cold.img"
	mkfs.ext4 -q -F -d "$root" "$STAGE/cold.img" "$((kib * 5 / 4 + 32768))k" >/dev/null ||
		die "mkfs.ext4 of the cold run's image failed"
	rm -rf "$root"
	adds=("${files[@]}" --add "$STAGE/cold.img:/root/cold.img")
	guest_args+=(/root/cold.img)
fi

kargs=()
[ "$kernel" = debian ] && kargs=(--kernel debian)
say "profiling cc1, python3 and clang in the guest ($kernel kernel)"
start=$SECONDS
status=0
UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-900} "$ROOT/scripts/run-guest.sh" "${kargs[@]}" \
	--log "$OUT/console.log" "${adds[@]}" -- sh /bin/bigprog.sh "${guest_args[*]}" \
	>"$OUT/out.txt" || status=$?
wall=$((SECONDS - start))
if [ "$status" != 0 ]; then
	grep -v '^[A-Za-z0-9+/=]*$' "$OUT/out.txt" | tail -n 30 >&2
	die "the guest run failed (status $status; console in $OUT/console.log)"
fi
python3 "$ROOT/tests/bigprog.py" --kernel "$kernel" ${suffix:+--cold} --wall "$wall" --keep "$OUT" \
	"$OUT/out.txt" || die "the analysis failed (guest output in $OUT/out.txt)"
