#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Big real programs profiled in the guest (issue 24, "How it is checked"): two large programs
# from Debian's packages, none of the project's own, sampled through the timer interrupt
# (timer:hrtimer_expire_entry) and user page faults (exceptions:page_fault_user), unwound
# by the module's default (.eh_frame) unwinder:
#
#   cc1      GCC 12's compiler proper (the host's, from Debian's cpp-12: 33 MB, stripped,
#            no frame pointers), run by `gcc -O2 -S` on a real C file, the kernel source's
#            scripts/dtc/livetree.c, preprocessed on the host;
#   python3  Debian's python3.11 running two scripts of its standard library, `python3 -m
#            tokenize` and `python3 -m ast`, over its typing.py.
#
# The binaries, their libraries and the standard library files the workload loads go into
# the guest at their host paths, so that the host symbolizes each frame in the very file
# that ran. tests/guest/bigprog.sh runs the programs in one guest, each with the module
# freshly loaded; tests/bigprog.py prints for each its stacks, the share rooted at _start,
# their depth, the module's counters before and after, the distinct (file, offset) frame
# addresses of the trace, rows parsed per distinct address, and the module's memory.
# Targets are marked PASS or MISS; the exit status is non-zero only when the run itself
# failed. About 3 minutes of guest time under TCG on the debug kernel.
#
# Usage: scripts/bigprog.sh [--kernel test|debian] [--no-build]
#   --no-build  use the module already built (scripts/build-module.sh, with KDIR=debian for
#               Debian's kernel; or $UU_MODULE) instead of building it from the tree first.
# The guest's output, its console, each program's trace.dat and folded stacks stay in
# $TREE_OUT/bigprog/KERNEL/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

usage() { die "usage: scripts/bigprog.sh [--kernel test|debian] [--no-build]"; }
kernel=test build=1
while (($#)); do
	case $1 in
	--kernel) [ $# -ge 2 ] || usage; kernel=$2; shift 2 ;;
	--no-build) build=0; shift ;;
	*) usage ;;
	esac
done
case $kernel in test | debian) ;; *) usage ;; esac

# The workload, sized for about a minute each under TCG. cc1 compiles these files of the
# kernel source (user-space programs that build with the C library's headers alone) at -O2;
# python3 tokenizes, then parses and dumps the syntax tree of, these standard modules.
CC_FILES="scripts/dtc/livetree.c"
PY_MODULES="typing"
PY=/usr/bin/python3.11
PYLIB=/usr/lib/python3.11

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
[ -x "$PY" ] && [ -d "$PYLIB" ] || die "Debian's python3.11 is not installed ($PY, $PYLIB)"

OUT=$TREE_OUT/bigprog/$kernel
STAGE=$TREE_OUT/bigprog/stage
mkdir -p "$OUT" "$STAGE/src"

# The C files, preprocessed here with the host's headers: the guest has none.
say "preprocessing $CC_FILES"
src=$(kernel_src)
inputs=()
for f in $CC_FILES; do
	i=$STAGE/src/$(basename "${f%.c}").i
	gcc -E -I"$src/$(dirname "$f")" -I"$src/scripts/dtc/libfdt" -I"$src/scripts/include" \
		"$src/$f" -o "$i" || die "preprocessing $f failed"
	inputs+=("$i")
done

# Of Python's standard library, the files the workload loads (as the host's python3 -v
# shows them, sources and bytecode with their times, so that the bytecode stays valid), the
# landmark os.py and the modules read; a file the guest lacks is one it does not load.
say "listing the standard library files python3 loads for the workload"
rm -rf "$STAGE/py" && mkdir -p "$STAGE/py"
pyfiles=$(for m in $PY_MODULES; do
	for tool in tokenize ast; do
		"$PY" -v -m $tool "$PYLIB/$m.py" 2>&1 >/dev/null || die "$PY -m $tool $m.py failed"
	done
	echo "$PYLIB/$m.py"
done | grep -oE "$PYLIB/[^' ]+\.(py|pyc|so)" | sort -u)
for f in $pyfiles "$PYLIB/os.py"; do
	install -D -p -m 0644 "$f" "$STAGE/py$f" || die "copying $f failed"
done

# What goes into the guest, at the host's paths: each binary and every library ldd lists
# for it (the real file behind a symlink), as build-initramfs.sh installs trace-cmd.
adds=(--add "$ROOT/tests/guest/bigprog.sh:/bin/bigprog.sh"
	--add "$CC1:$CC1" --add "$DRIVER:/usr/bin/gcc"
	--add "$PY:$PY" --add "$STAGE/py$PYLIB:$PYLIB")
declare -A seen=()
for bin in "$CC1" "$DRIVER" "$PY" $(echo "$pyfiles" | grep '\.so$' || true); do
	for lib in $(ldd "$bin" | grep -oE '/[^ ]+' || true); do
		[ -z "${seen[$lib]:-}" ] || continue
		seen[$lib]=1
		adds+=(--add "$(readlink -f "$lib"):$lib")
	done
done
for i in "${inputs[@]}"; do
	adds+=(--add "$i:/root/bigprog/$(basename "$i")")
done

# The programs file: NAME, COMM (what the events are filtered on), COMMAND.
cc="for f in /root/bigprog/*.i; do gcc -O2 -S -o /tmp/out.s \$f || exit 1; done"
py="for m in $PY_MODULES; do python3 -m tokenize $PYLIB/\$m.py >/dev/null &&"
py+=" python3 -m ast $PYLIB/\$m.py >/dev/null || exit 1; done"
printf 'cc1\tcc1\t%s\npython3\tpython3\t%s\n' "$cc" "$py" >"$STAGE/programs"
ln -sf "$PY" "$STAGE/python3"
adds+=(--add "$STAGE/programs:/root/programs" --add "$STAGE/python3:/usr/bin/python3")

kargs=()
[ "$kernel" = debian ] && kargs=(--kernel debian)
say "profiling cc1 and python3 in the guest ($kernel kernel)"
start=$SECONDS
status=0
UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-900} "$ROOT/scripts/run-guest.sh" "${kargs[@]}" \
	--log "$OUT/console.log" "${adds[@]}" -- sh /bin/bigprog.sh /root/programs \
	>"$OUT/out.txt" || status=$?
wall=$((SECONDS - start))
if [ "$status" != 0 ]; then
	grep -v '^[A-Za-z0-9+/=]*$' "$OUT/out.txt" | tail -n 30 >&2
	die "the guest run failed (status $status; console in $OUT/console.log)"
fi
python3 "$ROOT/tests/bigprog.py" --kernel "$kernel" --wall "$wall" --keep "$OUT" \
	"$OUT/out.txt" || die "the analysis failed (guest output in $OUT/out.txt)"
