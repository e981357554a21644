#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make demo: set everything up, boot the guest, load the module and show what it records
# for the test program (main -> uu_a -> uu_b -> uu_c -> uu_lib_syscall -> getppid).
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
	tee "$out"

say "the same stacks, symbolized on the host from the binaries that ran in the guest:"
python3 - "$out" "$CACHE/prog" <<'PY'
import re, sys
sys.path.insert(0, "tests")
from symbolize import Elf
text, prog = open(sys.argv[1]).read(), sys.argv[2]
exe, lib = Elf(prog + "/uu_chain"), Elf(prog + "/libuutest.so")
for block in re.findall(r"user_unwind_stack: cookie=(\w+)\n((?: => .*\n)+)", text):
    print(f"cookie={block[0]}")
    for i, (off, fc) in enumerate(re.findall(r"<(\w+)> : 0x(\w+)", block[1])):
        off = int(off, 16)
        # Frame 0 is in libuutest.so, the next four in uu_chain, the rest in libc.
        name = (lib if i == 0 else exe).symbol(off, i > 0)
        print(f"  #{i} {off:#8x} file {fc[:8]}..  {name or '?'}")
PY
