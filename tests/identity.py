# SPDX-License-Identifier: GPL-2.0
"""Host half of the file-identity tests (tests/guest/identity.sh), called by tests/e2e.py.

A file cookie names the file's identity: the checks below state what that means from
ground truth the test knows (the build-ids readelf reads in the libraries it built, the
numbers stat printed, the addresses the programs printed), and what the second review of
the module asked for around it (issue 17: items B1-B9)."""
import os
import re
import subprocess
import tempfile

from symbolize import Elf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V1, V2 = "11" * 20, "22" * 20


def frame0(t, events, comm):
    """(pid, cookie, file_cache) of frame 0 of each stack of `comm`, in buffer order."""
    out = []
    for stack, files in t.resolve(events):
        if stack["comm"] == comm and stack["frames"]:
            out.append((stack["pid"], stack["frames"][0][1], files[0]))
    return out


def build_id(fc):
    return fc["build_id"] if isinstance(fc, dict) else None


def check_order(t, s):
    """Switched on by events/user_unwind/enable, in whatever order the compiler gave the
    events, every file cookie of the program's stacks is explained by a file_cache of the
    trace (one written before its first stack, or by a later stack when file_cache came on
    after the cookie event: an identity cookie never changes meaning)."""
    events = t.parse_trace(s["ID_ORDER"])
    explained = {e["cookie"] for e in events if e["event"] == "file_cache"}
    stacks = [e for e in events if e["event"] == "user_unwind_stack" and e["comm"] == "uu_chain"]
    missing = {c for e in stacks for _, c in e["frames"] if c > 1 and c not in explained}
    order = t.values(s["ID_ORDER"]).get("order", "")
    print(f"# events/user_unwind/enable order: {order}")
    t.check("identity: events/user_unwind/enable, in either order, leaves no cookie "
            "unexplained", len(stacks) >= 5 and not missing,
            f"{len(stacks)} stacks, unexplained cookies {sorted(hex(c) for c in missing)}")


def check_reuse(t, s):
    """Another file at the same device and inode numbers (tmpfs remounted) gets another
    cookie, explained by its own file_cache."""
    v = t.values(s["ID_REUSE_NUMBERS"])
    t.check("identity: the second library took the first's device and inode numbers",
            v.get("first") and v.get("first") == v.get("second"), str(v))
    runs = {}
    for pid, cookie, fc in frame0(t, t.parse_trace(s["ID_REUSE"]), "uu_dlone"):
        runs.setdefault(pid, set()).add((cookie, build_id(fc)))
    got = [sorted(r) for r in runs.values()]
    ok = (len(got) == 2 and all(len(r) == 1 for r in got)
          and got[0][0][0] != got[1][0][0] and [r[0][1] for r in got] == [V1, V2])
    t.check("identity: a reused inode number is another cookie, named with its own build-id",
            ok, f"per run (cookie, build-id): {got}")


def check_rewrite(t, s):
    """A library rewritten in place under a running program: the frames before carry the
    old cookie and build-id, those after a new cookie and the new build-id."""
    seen = [(c, build_id(fc)) for _, c, fc in frame0(t, t.parse_trace(s["ID_REWRITE"]),
                                                     "uu_dlone")]
    ok = (len(seen) == 6 and len(set(seen[:3])) == 1 and len(set(seen[3:])) == 1
          and seen[0][0] != seen[3][0] and seen[0][1] == V1 and seen[3][1] == V2)
    t.check("identity: a library rewritten in place gets a new cookie and its new build-id",
            ok and t.values(s["ID_REWRITE"]).get("status") == "0", f"{seen}")


def check_shared(t, s):
    """Two processes share libc's cookie and its one file_cache (and, where the second ran a
    second or more after it, the reminder the module writes for a file seen again that
    late: under load the two runs can be that far apart)."""
    events = t.parse_trace(s["ID_SHARED"])
    libc_cookies, pids = set(), set()
    for stack, files in t.resolve(events):
        if stack["comm"] != "uu_chain":
            continue
        pids.add(stack["pid"])
        for (_, c), f in zip(stack["frames"], files):
            if isinstance(f, dict) and f["path"].endswith("/libc.so.6"):
                libc_cookies.add(c)
    caches = [e for e in events if e["event"] == "file_cache"
              and e.get("path", "").endswith("/libc.so.6")]
    times = [float(e["ts"]) for e in caches]
    reminders = all(b - a >= 0.99 for a, b in zip(times, times[1:]))
    t.check("identity: two processes share one libc cookie and one file_cache",
            len(pids) == 2 and len(libc_cookies) == 1 and 1 <= len(caches) <= 2 and reminders,
            f"{len(pids)} processes, libc cookies {libc_cookies}, {len(caches)} file_cache at "
            f"{times}")


def check_blocked(t, s):
    """A file_cache no buffer took is written again by the next stack that needs it."""
    for how in ("filter", "soft", "cpumask", "pid", "full"):
        name = f"ID_BLOCKED_{how}"
        if name not in s:
            t.check(f"identity: file_cache blocked ({how}) then written again", False,
                    "section missing")
            continue
        events = t.parse_trace(s[name])
        pids = sorted({e["pid"] for e in events if e["comm"] == "uu_dlone"})
        last = pids[-1] if pids else None
        missing, stacks = 0, 0
        for stack, files in t.resolve(events):
            if stack["pid"] != last:
                continue
            stacks += 1
            missing += sum(f is None for f in files)
        stats = t.values(s[f"{name}_STATS"])
        t.check(f"identity: file_cache blocked ({how}), then the next stack writes it again",
                stacks >= 2 and not missing,
                f"{stacks} stacks of the second run, {missing} frames unexplained; {stats}")


def check_disabled(t, s):
    v = t.values(s["ID_NO_FILE_CACHE"])
    t.check("identity: with file_cache disabled, stacks write (and count) no file_cache",
            v.get("stacks_on") == "1" and v.get("file_cache_delta") == "0", str(v))


def check_maps(t, s, ustack):
    """Anonymous memory with a struct file, and a VM_PFNMAP mapping: raw addresses with the
    anonymous cookie, which ustack resolves through the program's perf map."""
    spans, skipped = {}, []
    for line in s["ID_MAPS_OUT"]:
        m = re.match(r"uu_maps (\w+) ([0-9a-f]+) ([0-9a-f]+)$", line)
        if m:
            spans[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
        elif "skipped" in line:
            skipped.append(line)
    if skipped:
        print("# " + "; ".join(skipped))
    events = t.parse_trace(s["ID_MAPS"])
    got = {}
    for stack in (e for e in events if e["event"] == "user_unwind_stack"
                  and e["comm"] == "uu_maps" and e["frames"]):
        value, cookie = stack["frames"][0]
        for kind, (lo, hi) in spans.items():
            if lo <= value < hi:
                got.setdefault(kind, set()).add((value - lo, cookie))
    # The return address of the stub's syscall instruction (tests/prog/uu_maps.c).
    want = {k: {(0xb, 1)} for k in spans}
    required = {"shared", "memfd", "zero"} <= set(spans)
    t.check("identity: code in anonymous memory with a file and in a VM_PFNMAP mapping is "
            "a raw address, cookie 1",
            required and got == want and t.values(s["ID_MAPS"]).get("status") == "0",
            f"mappings {sorted(spans)}, frame 0 as (offset in mapping, cookie): {got}")
    check_maps_ustack(t, s, spans, ustack)


def check_maps_ustack(t, s, spans, ustack):
    """ustack names each stub from /tmp/perf-PID.map."""
    if not os.path.exists(ustack):
        t.check("identity: ustack names the stubs from the perf map", False,
                f"{ustack} not built (make ustack)")
        return
    pid = next((e["pid"] for e in t.parse_trace(s["ID_MAPS"]) if e["comm"] == "uu_maps"),
               None)
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "maps.trace")
        with open(trace, "w") as f:
            f.write("\n".join(line for line in s["ID_MAPS"]
                              if not line.startswith("status ")) + "\n")
        pmap = os.path.join(d, f"perf-{pid}.map")
        with open(pmap, "w") as f:
            f.write("\n".join(s["ID_MAPS_PERF_MAP"]) + "\n")
        out = subprocess.run([ustack, "--perf-map", pmap, "--folded", "-", trace],
                             capture_output=True, text=True)
    named = {k for k in spans if f"uu_stub_{k}" in out.stdout}
    t.check("identity: ustack names the stubs from the perf map",
            out.returncode == 0 and named == set(spans),
            f"named {sorted(named)} of {sorted(spans)}: {out.stderr[-300:]}")


def check_exec(t, s, prog):
    """The stack of an execve's request is empty, never the new program's first stack; a
    failed execve keeps its own. In buffer order: the shell's execve of uu_exec, uu_exec's
    failed one, its execve of itself (tests/prog/uu_exec.c)."""
    stacks = [e for e in t.parse_trace(s["ID_EXEC"]) if e["event"] == "user_unwind_stack"]
    exe = Elf(os.path.join(prog, "uu_exec"))
    chain = ("uu_c", "uu_b", "uu_a", "main")
    got = [[n for n in (exe.symbol(v, True) for v, _ in e["frames"][1:]) if n in chain]
           for e in stacks]
    # uu_c calls libc's execve(), which keeps no frame pointer: a frame-pointer walk goes
    # from execve() to uu_b, and an unwind by the unwind tables through uu_c.
    failed = (["uu_b", "uu_a", "main"], ["uu_c", "uu_b", "uu_a", "main"])
    v = t.values(s["ID_EXEC_STATS"])
    t.check("identity: a request served after execve records an empty stack, counted; a "
            "failed execve keeps its chain",
            len(got) == 3 and got[0] == got[2] == [] and got[1] in failed
            and not stacks[0]["frames"] and not stacks[2]["frames"]
            and int(v.get("stacks_after_exec", 0)) == 2, f"{got}, {v}")


def check_exit_window(t, s, prog):
    """No event on the way out of a getpid shows the stack of the getppid after it: between
    a sys_exit of getpid and the next sys_enter of getppid (a millisecond of user-space work
    apart), the run of events that follows the sys_exit without a pause of 0.5 ms (the
    program's user-space work), within the first half, is the getpid entry's way out. (The
    midpoint alone misplaced the start of a slow getppid entry under TCG: its events, 2 ms
    before its sys_enter, carry its own stack by right.)"""
    lines = s["ID_EXIT_WINDOW"]
    if any(line.startswith("# skipped") for line in lines):
        print("# skipped: requests on the way out (no preemptirq events in this kernel)")
        return
    exe = Elf(os.path.join(prog, "uu_ab"))
    events = t.parse_trace(lines)
    chain = {}
    for e in events:
        if e["event"] == "user_unwind_stack":
            names = {exe.symbol(v, True) for v, _ in e["frames"]}
            chain[e["cookie"]] = "A" if "uu_a2" in names else "B" if "uu_b2" in names else "?"
    # Each event with the cookie written right after it.
    triggered = []
    for prev, e in zip(events, events[1:]):
        if e["event"] == "user_unwind_cookie" and prev["event"] != "user_unwind_cookie":
            triggered.append((prev, e["cookie"]))
    nr = lambda e: int(re.search(r"NR (\d+)", e["rest"]).group(1))  # noqa: E731
    calls = [e for e in events if e["event"] in ("sys_enter", "sys_exit")]
    wrong, windows, in_window = [], 0, 0
    for ex, en in zip(calls, calls[1:]):
        if not (ex["event"] == "sys_exit" and nr(ex) == 39 and en["event"] == "sys_enter"
                and nr(en) == 110):
            continue
        windows += 1
        t1, t2 = float(ex["ts"]), float(en["ts"])
        end = t1
        for ts in sorted(float(e["ts"]) for e in events if t1 < float(e["ts"]) < t2):
            if ts - end > 0.0005:
                break
            end = ts
        end = min(end, (t1 + t2) / 2)
        for ev, cookie in triggered:
            if t1 < float(ev["ts"]) <= end:
                in_window += ev["event"] == "irq_enable"
                if chain.get(cookie) == "B":
                    wrong.append(f"{ev['event']}@{ev['ts']}")
    irq_after_exit = sum(1 for ex, nx in zip(events, events[1:])
                         if ex["event"] == "sys_exit" and nx["event"] == "irq_enable")
    v = t.values(lines)
    t.check("identity: no event on the way out of getpid carries the next getppid's stack",
            windows >= 10 and not wrong and int(v.get("skipped", 0)) > 0,
            f"{windows} getpid-getppid gaps, {len(wrong)} events with the wrong stack "
            f"{wrong[:3]}, {in_window} requesting irq_enable in them, {irq_after_exit} "
            f"irq_enable after a sys_exit, {v.get('skipped')} skipped")


def check_perf(t, s):
    """Refused for the module's events where perf's own rules allow sys_enter. With
    perf_event_paranoid above 2 (Debian's default is 3) perf refuses every unprivileged
    open by itself, and the test can only see that."""
    lines = [line.split() for line in s["ID_PERF"] if line.startswith("uu_perf ")]
    ids = [r[2] for r in lines]
    paranoid = int(t.values(s["ID_PERF"]).get("paranoid", 2))
    refused = all(r in ("EPERM", "EACCES") for r in ids[1:])
    if paranoid > 2:
        print(f"# perf_event_paranoid {paranoid}: perf refuses unprivileged opens itself")
    ok = len(ids) >= 4 and refused and (ids[0] == "ok" or paranoid > 2)
    t.check("identity: an unprivileged perf_event_open of the module's events is refused "
            "(and allowed for sys_enter)", ok, f"{s['ID_PERF']}")


def check_mmap_held(t, s):
    lines = s["ID_MMAP_HELD"]
    if any(line.startswith("# skipped") for line in lines):
        print("# skipped: mmap_lock held for writing (no test fixture for this kernel)")
        return
    v = t.values(lines)
    ok = (v.get("rmmod_status") == "0" and v.get("dstate") == "0"
          and int(v.get("contended", 0)) > 0 and v.get("held_after_rmmod") == "yes")
    t.check("identity: mmap_lock held for writing: no task in D state, rmmod returns at once",
            ok, str(v))


def check_no_collision(t, s):
    """Over every trace the guest printed, a cookie stands for one file (path and
    build-id) or one name: no two files share a cookie, and no cookie changes meaning."""
    meaning = {}
    for name, lines in s.items():
        for e in t.parse_trace(lines):
            if e["event"] != "file_cache" or "path" not in e:
                continue
            path = e["path"].removesuffix(" (deleted)")
            meaning.setdefault(e["cookie"], set()).add((path, e["build_id"]))
    two = {hex(c): m for c, m in meaning.items() if len(m) > 1}
    t.check("identity: over the whole run, every cookie stands for one file",
            len(meaning) > 20 and not two, f"{len(meaning)} cookies, {len(two)} with two "
            f"meanings: {list(two.items())[:3]}")


def check_all(t, s, prog):
    ustack = os.path.join(ROOT, "tools/ustack/target/release/ustack")
    for check in (check_order, check_reuse, check_rewrite, check_shared, check_blocked, check_disabled,
                  check_perf, check_mmap_held):
        check(t, s)
    check_exec(t, s, prog)
    check_exit_window(t, s, prog)
    check_no_collision(t, s)
    check_maps(t, s, ustack)

