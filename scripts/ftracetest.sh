#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kernel's own ftrace selftests (tools/testing/selftests/ftrace/ftracetest of the kernel
# source the bench unpacks), in one boot of the debug test kernel with 1 CPU: once without
# the module, once with it loaded, userstacktrace_delay on and a frame-pointer program
# making traced system calls. Fails when a test's result differs between the two runs or
# the guest's console has a splat. (With 2 CPUs even the run without the module can die in
# function_graph's code patching under TCG: an int3 Oops, not the module's.)
# Usage: scripts/ftracetest.sh [TEST...] (default: test.d/00basic test.d/event
# test.d/instances test.d/trigger: on this 2-core machine 30 to 45 minutes without the
# module and more than an hour and three quarters with it, since switching function_graph
# on takes minutes under TCG and longer with a program running on the one CPU)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tests=${*:-test.d/00basic test.d/event test.d/instances test.d/trigger}
# A bound for a hang, not a time limit: four hours for the default directories, an hour and
# a half for what a caller names (make check's one test takes minutes).
limit=5400
[ $# -gt 0 ] || limit=14400
SRC=$(kernel_src)
log=$(mktemp) out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-$limit} "$ROOT/scripts/run-guest.sh" --smp 1 --log "$log" \
	--add "$ROOT/tests/guest/ftracetest.sh:/bin/ftracetest.sh" \
	--add "$SRC/tools/testing/selftests/ftrace:/ftrace" -- "/bin/ftracetest.sh $tests" >"$out" ||
	{ tail -n 30 "$out"; die "the guest failed"; }
ROOT=$ROOT python3 - "$out" "$log" <<'PY'
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
from splat import splats as find_splats  # noqa: E402

out, log = open(sys.argv[1]).read(), open(sys.argv[2], errors="replace").read()
KTAP = re.compile(r"^(without|with): (not ok|ok) \d+ (.*?)(?: # (\w+))?$")
runs = {"without": {}, "with": {}}
for line in out.splitlines():
    m = KTAP.match(line)
    if m:
        arm, ok, name, directive = m.groups()
        runs[arm][name] = directive or ("PASS" if ok == "ok" else "FAIL")
for arm, res in runs.items():
    counts = {}
    for r in res.values():
        counts[r] = counts.get(r, 0) + 1
    print(f"ftracetest {arm} the module: {len(res)} tests, " +
          ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
diff = [f"{n}: {runs['without'].get(n)} without, {runs['with'].get(n)} with"
        for n in sorted(set(runs["without"]) | set(runs["with"]))
        if runs["without"].get(n) != runs["with"].get(n)]
for d in diff:
    print("differs:", d)
# The module must have done its work beside the tests, not only been loaded.
counters = re.search(r"^module: requests=(\d+) stacks=(\d+) file_cache=(\d+)$", out, re.M)
if counters:
    requests, stacks, file_cache = counters.groups()
    print(f"ftracetest with the module: {requests} requests, {stacks} stacks, "
          f"{file_cache} file_cache")
else:
    print("the guest did not report the module's counters")
splats = find_splats(log)
for l in splats[:20]:
    print("splat:", l)
ok = runs["without"] and not diff and counters and int(stacks) > 0 and not splats
print("ftracetest: " + ("same results with and without the module" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
