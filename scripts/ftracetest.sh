#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kernel's own ftrace selftests (tools/testing/selftests/ftrace/ftracetest of the kernel
# source the bench unpacks), in two boots of the debug test kernel with 1 CPU each, side by
# side: one without the module, one with it loaded, userstacktrace_delay on and a
# frame-pointer program making traced system calls. Fails when a test's result differs
# between the two arms or a guest's console has a splat; prints each arm's time and the tests
# that took the most extra time in the module's arm. (With 2 CPUs even the run without the module
# can die in function_graph's code patching under TCG: an int3 Oops, not the module's.)
# Usage: scripts/ftracetest.sh [TEST...] (default: test.d/00basic test.d/event
# test.d/instances test.d/trigger: here 57 minutes without the module and 108 with it,
# nearly all of the difference in basic2.tc, which switches every tracer on: that takes
# minutes under TCG and far longer with a program running on the one CPU, module or not)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tests=${*:-test.d/00basic test.d/event test.d/instances test.d/trigger}
# A bound for a hang, not a time limit: four hours for the default directories, an hour and
# a half for what a caller names (make check's one test takes minutes).
limit=5400
[ $# -gt 0 ] || limit=14400
SRC=$(kernel_src)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The two guests would otherwise both (re)build the test programs into the cache at once.
build_test_programs
# One arm in its own guest; both run at once, on the machine's two cores.
guest() {
	UU_GUEST_TIMEOUT=${UU_GUEST_TIMEOUT:-$limit} "$ROOT/scripts/run-guest.sh" --smp 1 \
		--log "$work/$1.log" --add "$ROOT/tests/guest/ftracetest.sh:/bin/ftracetest.sh" \
		--add "$SRC/tools/testing/selftests/ftrace:/ftrace" -- "/bin/ftracetest.sh $1 $tests" \
		>"$work/$1.out" 2>"$work/$1.err"
}
guest without &
without=$!
guest with &
with=$!
status_without=0 status_with=0
wait "$without" || status_without=$?
wait "$with" || status_with=$?
ROOT=$ROOT python3 - "$work" "$status_without" "$status_with" <<'PY'
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
from splat import splats as find_splats  # noqa: E402

work = sys.argv[1]
status = {"without": int(sys.argv[2]), "with": int(sys.argv[3])}
KTAP = re.compile(r"^(without|with): (not ok|ok) (\d+ .*?)(?: # (\w+))?$")
TIME = re.compile(r"^time: (without|with) (?:start )?([\d.]+)$")
# Results by "number name": two of the trigger tests share a description. Both arms run
# the same list, so a number names the same test in both.
runs = {"without": {}, "with": {}}
# Seconds each test took (from the uptime after the one before it), and each arm's total.
took = {"without": {}, "with": {}}
total = {}
splats = []
for arm in runs:
    out = open(os.path.join(work, arm + ".out"), errors="replace").read()
    last = name = None
    for line in out.splitlines():
        m, t = KTAP.match(line), TIME.match(line)
        if m and m.group(1) == arm:
            _, ok, name, directive = m.groups()
            runs[arm][name] = directive or ("PASS" if ok == "ok" else "FAIL")
        elif t and t.group(1) == arm:
            now = float(t.group(2))
            if last is None:
                start = now
            elif name is not None:
                took[arm][name] = now - last
            last = now
    if last is not None:
        total[arm] = last - start
    if arm == "with":
        counters = re.search(
            r"^module: requests=(?P<requests>\d+) stacks=(?P<stacks>\d+) "
            r"exited=(?P<exited>\d+) file_cache=(?P<file_cache>\d+)$", out, re.M)
    if status[arm]:
        err = open(os.path.join(work, arm + ".err"), errors="replace").read().splitlines()
        for line in err[-30:]:
            print(f"{arm}: {line}")
        print(f"the guest {arm} the module failed (status {status[arm]})")
    log = open(os.path.join(work, arm + ".log"), errors="replace").read()
    splats += [f"{arm}: {line}" for line in find_splats(log)]

for arm, res in runs.items():
    counts = {}
    for r in res.values():
        counts[r] = counts.get(r, 0) + 1
    minutes = f" in {total[arm] / 60:.1f} min" if arm in total else ""
    print(f"ftracetest {arm} the module: {len(res)} tests{minutes}, " +
          ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
# Where the module's arm spent its extra time (the two guests share the host, so a
# difference of a few seconds is noise).
slower = sorted(((took["with"][n] - took["without"][n], n) for n in took["with"]
                 if n in took["without"]), reverse=True)
for extra, n in slower[:5]:
    if extra >= 10:
        print(f"ftracetest longer with the module: {n}: {took['without'][n]:.0f} s without, "
              f"{took['with'][n]:.0f} s with")
diff = [f"{n}: {runs['without'].get(n)} without, {runs['with'].get(n)} with"
        for n in sorted(set(runs["without"]) | set(runs["with"]))
        if runs["without"].get(n) != runs["with"].get(n)]
for d in diff:
    print("differs:", d)
# The module must have done its work beside the tests, not only been loaded.
if counters:
    print(f"ftracetest with the module: {counters['requests']} requests, "
          f"{counters['stacks']} stacks, {counters['exited']} whose task exited first, "
          f"{counters['file_cache']} file_cache")
else:
    print("the guest did not report the module's counters")
for line in splats[:20]:
    print("splat:", line)
ok = (not any(status.values()) and runs["without"] and not diff and counters
      and int(counters["stacks"]) > 0 and not splats)
print("ftracetest: " + ("same results with and without the module" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
