#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make stress: the module's memory under a workload touching FILES distinct files (default
# 20000) on the debug test kernel (tests/guest/memory.sh), about five minutes. Passes when
# the module's core plus what grew with the option on beyond the workload's own growth stays
# within 4 MiB, every file got its file_cache and the console has no splat. kmemleak stays
# off here: its own metadata is slab memory that blurs the measurement, and it makes the
# workload five times slower; scripts/stress.sh scans with it after its last unload.
# make check's e2e runs the same workload over 4000 files.
# Usage: scripts/memory.sh [FILES]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

files=${1:-20000}
log=$(mktemp) out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
UU_GUEST_TIMEOUT=$((files / 10 + 900)) "$ROOT/scripts/run-guest.sh" --log "$log" -- \
	"memory.sh $files && rmmod user_unwind" >"$out" ||
	{ tail -n 30 "$out"; die "the guest failed"; }
cat "$out"
ROOT=$ROOT python3 - "$out" "$log" <<'PY'
import os
import sys

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
import e2e  # noqa: E402
from splat import splats  # noqa: E402

out, log = open(sys.argv[1]).read(), open(sys.argv[2], errors="replace").read()
lines = out.splitlines()
e2e.check_memory(lines)
found = splats(log)
e2e.check("the console has no splat", not found, found[:20])
sys.exit(0 if all(e2e.results) else 1)
PY
