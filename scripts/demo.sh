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

say "the same stacks, symbolized on the host: each file cookie resolved through its"
say "file_cache event, each offset looked up in the very binaries that ran in the guest"
python3 "$ROOT/tests/symbolize.py" "$out" /usr/bin="$CACHE/prog" /usr/lib="$CACHE/prog"
