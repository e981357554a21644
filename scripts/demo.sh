#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make demo: set everything up, boot the guest, load the module and show what it records
# for the test programs: uu_chain, with frame pointers (main -> uu_a -> uu_b -> uu_c ->
# uu_lib_syscall -> getppid), and uu_nofp, built without them as Debian builds (main ->
# nf_a -> nf_b -> nf_c -> getppid, through libc, unwound with the programs' .eh_frame),
# then what tools/ustack makes of a trace-cmd recording, ending with an off-CPU profile
# with kernel frames.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build-kernel.sh"
"$ROOT/scripts/build-module.sh"
say "booting the guest (TCG, 2 CPUs)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$ROOT/scripts/run-guest.sh" --add "$ROOT/tests/guest/demo.sh:/bin/demo.sh" -- /bin/demo.sh |
	tee "$out" || die "the first guest run failed (above)"

say "the same stacks, symbolized on the host: each file cookie resolved through its"
say "file_cache event, each offset looked up in the very binaries that ran in the guest"
python3 "$ROOT/tests/symbolize.py" "$out" /usr/bin="$PROG" /usr/lib="$PROG"

# The host tool: trace-cmd records a workload in the guest, the trace.dat comes out over
# the console, and tools/ustack symbolizes it (libc from Debian's libc6-dbg, by build-id).
say "building tools/ustack"
(cd "$ROOT/tools/ustack" && cargo build --release --quiet)
say "trace-cmd record in the guest (uu_chain, uu_bench at depths 24 and 70, uu_nofp; 2 CPUs)"
DEMO=$TREE_OUT/demo
rm -rf "$DEMO"
mkdir -p "$DEMO"
"$ROOT/scripts/run-guest.sh" --add "$ROOT/tests/guest/ustack.sh:/bin/ustack.sh" -- \
	/bin/ustack.sh demo >"$out" || { cat "$out"; die "the guest's recording failed (its output above)"; }
! grep -E '^record .* failed|missing from the guest' "$out" || die "the guest's recording failed (above)"
# extract NAME FILE: the guest's file NAME, out of its console, into FILE; an absent or
# empty one stops the demo.
extract() {
	sed -n "/^=== FILE $1\$/,/^=== END\$/p" "$out" | sed '1d;$d' | base64 -d >"$2" ||
		die "$1 out of the guest: not base64"
	[ -s "$2" ] || die "no $1 came out of the guest"
}
extract demo.dat "$DEMO/trace.dat"
USTACK=$ROOT/tools/ustack/target/release/ustack
say "ustack: the top stacks of $DEMO/trace.dat"
"$USTACK" --map /usr/bin="$PROG" --map /usr/lib="$PROG" \
	--top 3 --report - --svg "$DEMO/flame.svg" --folded "$DEMO/stacks.folded" \
	--speedscope "$DEMO/speedscope.json" --pprof "$DEMO/profile.pb.gz" --task --lines \
	"$DEMO/trace.dat"
say "ustack: uu_nofp's stack, built without frame pointers, caller first, with its source lines"
"$USTACK" -q --map /usr/bin="$PROG" --map /usr/lib="$PROG" \
	--comm uu_nofp --top 1 -G --lines --report - "$DEMO/trace.dat"
say "flame graph: $DEMO/flame.svg (folded stacks, speedscope and pprof beside it)"
# Kernel frames above the user frames, and the time each thread spent blocked: uu_offcpu's
# threads sleep 1, 3 and 2 units in oc_a, oc_b and oc_c (and oc_c waits on a pipe). The
# recording holds the guest kernel's whole /proc/kallsyms, as any user's does.
extract kstack.dat "$DEMO/offcpu.dat"
say "ustack --off-cpu: where uu_offcpu's threads waited, kernel and user frames, by time blocked"
"$USTACK" -q --map /usr/bin="$PROG" --map /usr/lib="$PROG" \
	--off-cpu --comm uu_offcpu --top 3 --report - --svg "$DEMO/offcpu.svg" "$DEMO/offcpu.dat"
say "off-CPU flame graph (kernel frames marked _[k]): $DEMO/offcpu.svg"
