#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where one stack of a benchmark arm spends its instructions, by kernel function, exactly.
#
#   scripts/insn-profile.sh [ARM [DEPTH [LESS MORE]]]   (default: Ec 8 2000 12000)
#   ANNOTATE=PATTERN scripts/insn-profile.sh ...   (also the module's functions whose
#                                                  names hold PATTERN, disassembled, each
#                                                  instruction with its count a stack)
#
# ARM is one of make bench's .eh_frame arms (tests/guest/bench.sh): E (rows cached), Ec
# (first sight) or Et (rows from the files' tables), at DEPTH. The production-config test
# kernel boots twice, with QEMU's TCG plugin tools/insn-count counting the instructions
# executed at every kernel address; the arm's workload runs LESS calls in one boot and MORE
# in the other, and tests/insn_profile.py prints, per function, what one more stack costs.
# Not sampled, unlike perf in a guest whose timer ticks in emulated time: the module's
# functions are counted exactly, the kernel's nearly (the guests run with -icount, so that
# the timer's work is the same for the same instructions; the boot's own timing still
# varies a little). The guests run one after the other; about a minute.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

arm=${1:-Ec} depth=${2:-8} less=${3:-2000} more=${4:-12000}
"$ROOT/scripts/setup.sh"
KDIR=prod "$ROOT/scripts/build-module.sh"
build_test_programs
out=$TREE_OUT/insn-profile
mkdir -p "$out"
plugin=$out/insn-count.so
gcc -O2 -Wall -shared -fPIC -o "$plugin" "$ROOT/tools/insn-count/insn-count.c" ||
	die "building the QEMU plugin failed"
for calls in "$less" "$more"; do
	say "insn-profile: $arm at depth $depth, $calls calls"
	"$ROOT/scripts/run-guest.sh" --kernel prod --smp 1 --icount \
		--plugin "$plugin,out=$out/$calls.counts" \
		--add "$ROOT/tests/guest/insn-profile.sh:/bin/insn-profile.sh" \
		-- "/bin/insn-profile.sh $arm $depth $calls" >"$out/$calls.log" ||
		{ cat "$out/$calls.log" >&2; die "the guest failed (its output above)"; }
done
python3 "$ROOT/tests/insn_profile.py" "$(KERNEL_FLAVOUR=prod kernel_build_dir)/System.map" \
	"$out/$less" "$out/$more" "${TOP:-40}" \
	${ANNOTATE:+"$(prod_module_dir)/user_unwind.ko" "$ANNOTATE"}
