#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make stress (and, short, a stage of make check): the module under load, churn and
# reloads on the debug test kernel, counted (tests/guest/stress.sh says what runs).
# Ends with one line
#   stress: requests=N cookies=N stacks=N exited=N lost=N missing=N
# requests: callbacks queued by unwind_deferred_request(); cookies: cookie events a buffer
# took; stacks: callbacks run; exited: of which in an exiting task; lost: cookie events no
# buffer took plus events the ring buffer lost in the checked windows; missing: cookies of
# the checked windows without their stack, plus file cookies of their stacks without a
# file_cache, less one for each event the window's ring buffer lost (a lost event can take
# a stack with it; a window that lost none must have every stack). Fails when missing is
# not 0, when every window lost events, when the guest's console has a splat or kmemleak
# finds a leak after the last unload, or when the .eh_frame unwinder (the default) unwound
# nothing; its counters are printed on the line before.
# All the while, NMIs are injected through QEMU's monitor (tests/nmi.py): the cookies the
# checked windows hold from NMI context are counted, and there must be some.
# Usage: scripts/stress.sh [CYCLES [SECONDS [CPUS [CHECK_EVERY]]]] (default 50 cycles of
# 5 s on 2 CPUs, the clean window checked in the first cycle and every fifth)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cycles=${1:-50} secs=${2:-5} cpus=${3:-2} every=${4:-5}
log=$(mktemp) out=$(mktemp) mon=$(mktemp -d)
trap 'rm -rf "$log" "$out" "$mon"' EXIT
status=0
python3 "$ROOT/tests/nmi.py" "$mon/monitor" "$log" >"$mon/nmi" 2>&1 &
nmi=$!
# The guest's watchdog: boot and kmemleak's scans, each cycle, and each checked window
# (the cycles tests/guest/stress.sh checks: the first and every `every`-th), whose trace
# printed on the debug kernel takes minutes.
windows=$((cycles / every + (every > 1 ? 1 : 0)))
UU_GUEST_TIMEOUT=$((cycles * (secs + 60) + windows * 150 + 600)) "$ROOT/scripts/run-guest.sh" --smp "$cpus" \
	--append kmemleak=on --log "$log" --monitor "$mon/monitor" \
	--add "$ROOT/tests/guest/stress.sh:/bin/stress.sh" -- \
	"/bin/stress.sh $cycles $secs $every" >"$out" || status=$?
nmi_status=0
wait "$nmi" || nmi_status=$?
cat "$out" "$mon/nmi"
rc=0
ROOT=$ROOT python3 - "$out" "$log" "$cycles" <<'PY' || rc=$?
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
from splat import splats as find_splats  # noqa: E402

out, log, cycles = open(sys.argv[1]).read(), open(sys.argv[2], errors="replace").read(), int(sys.argv[3])
total = dict.fromkeys(("requests", "cookies", "stacks", "exited", "lost", "missing"), 0)
done = windows = lossy = explained = 0
leaks = None
context = dict.fromkeys(("nmi", "hardirq"), 0)
unwinder = dict.fromkeys(("unwind_stacks", "unwind_cfi_frames", "unwind_fp_frames",
                          "unwind_cfi_errors", "unwind_truncated"), 0)
for line in out.splitlines():
    f = line.split()
    if f[:1] == ["cycle"] and "=" in line:
        v = dict(x.split("=") for x in f[2:])
        missing, lost = int(v["missing"]) + int(v["unexplained_files"]), int(v["lost"])
        # A window whose ring buffer lost events may have lost stacks or file_caches with
        # them (the oldest events of a CPU's buffer, a cookie's stack written on another
        # CPU): at most one a lost event. A window that lost nothing must have them all.
        if lost:
            lossy += 1
            explained += min(missing, lost)
            missing = max(0, missing - lost)
        total["missing"] += missing
        total["lost"] += lost
        for k in context:
            context[k] += int(v[k])
        windows += 1
    elif f[:1] == ["leaks"]:
        leaks = f[1:2]
    elif f[:1] == ["stats"]:
        done += 1
        v = dict(zip(f[2::2], f[3::2]))
        v = {k.rstrip(":"): int(x) for k, x in v.items()}
        total["requests"] += v["requests_queued"]
        total["cookies"] += v["requests"] - v["cookies_unrecorded"]
        total["stacks"] += v["callbacks"]
        total["exited"] += v["exit_callbacks"]
        total["lost"] += v["cookies_unrecorded"]
        for k in unwinder:
            unwinder[k] += v.get(k, 0)
splats = find_splats(log)
for l in splats[:20]:
    print("splat:", l)
ok = (done == cycles and windows > lossy and total["missing"] == 0 and not splats
      and total["stacks"] > 0 and context["nmi"] > 0 and leaks == ["0"]
      and unwinder["unwind_stacks"] > 0 and unwinder["unwind_cfi_frames"] > 0)
print(f"stress: kmemleak after the last unload: {' '.join(leaks or ['no report'])} leaks")
print(f"stress: {done} of {cycles} cycles ran, {windows} windows checked, their cookies "
      f"from NMI context {context['nmi']}, from hardirq context {context['hardirq']}")
print(f"stress: {windows - lossy} windows lost no event, {lossy} did ({explained} stacks or "
      "file_caches missing there, each with a lost event to explain it)")
# The .eh_frame unwinder (the default) took the stacks; its counters, summed over cycles.
print("stress: unwinder " + " ".join(f"{k}={v}" for k, v in unwinder.items()))
# The run's last line, as the documentation promises.
print("stress: " + " ".join(f"{k}={v}" for k, v in total.items()))
sys.exit(0 if ok else 1)
PY
[ "$status" -eq 0 ] || die "the guest failed (status $status)"
[ "$nmi_status" -eq 0 ] || die "no NMI was injected (tests/nmi.py, status $nmi_status)"
exit "$rc"
