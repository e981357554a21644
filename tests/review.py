# SPDX-License-Identifier: GPL-2.0
"""Host half of the tests of the review's defects (issue 27) and of the unwind caches'
poisoning and fairness (issue 24), tests/guest/review.sh. Ground truth: the call chains of the test
programs (tests/prog/uu_review.c, tests/prog/uu_nofp.c) and the binaries' own symbols
(libc's and ld.so's from libc6-dbg), through tests/unwind.py's helpers.

Run by tests/e2e.py (review.check), or alone on a saved guest output:
    python3 tests/review.py OUTPUT.txt PROG_DIR
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unwind  # noqa: E402
from unwind import CHAINS, LDSO, START, cookies, match, show, stacks, symbolize  # noqa: E402
from unwind import truncations  # noqa: E402

# The guest's /usr/bin/uu_review is the host's build (tests/unwind.py's table of them), and
# the suspended device's libc a copy of the host's.
unwind.GUEST_PROG.setdefault("/usr/bin/uu_review", "uu_review")
unwind.GUEST_PROG.setdefault("/mnt/dm/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")
unwind.GUEST_PROG.setdefault("/usr/lib/libuuctor.so", "libuuctor.so")

MEMO_CHAIN = ["getppid", "mm_b", "mm_a"] + START
VCLOCK_CHAIN = ["clock_gettime", "vc_b", "vc_a"] + START
EXEC_CHAIN = ["execve", "ex_b", "ex_a"] + START
POISON_CHAIN = ["getppid", "po_b", "po_a"] + START
# The honest program of the poisoning tests: uu_nofp chain 40, then uu_nofp thread 40.
HONEST = (CHAINS["UNWIND_CHAIN"], CHAINS["UNWIND_THREAD"])
HONEST_CALLS = 40
BUSYBOX = "/bin/busybox"


def stats(lines):
    """The counters of a user_unwind_stats section; a counter the module lacks reads 0."""
    return {k.rstrip(":"): int(v) for k, v in (line.split() for line in lines
                                               if re.match(r"^\w+: \d+$", line))}


def grew(s, name, counter):
    """How much `counter` grew between sections NAME_BEFORE and NAME_AFTER (None: absent)."""
    after = stats(s.get(name + "_AFTER", []))
    if counter not in after:
        return None
    return after[counter] - stats(s.get(name + "_BEFORE", [])).get(counter, 0)


def by_cookie(events, comm):
    """[(cookie, frames)] of the whole stacks of `comm` (a name or a tuple of them), but for
    those with a frame in busybox: the trace names a task by its last comm, and the programs
    run under busybox's `timeout`, whose pid execs them (its getppid is one of them)."""
    comms = comm if isinstance(comm, tuple) else (comm,)
    return [(c, f) for c, (who, f) in zip(cookies(events, None), stacks(events))
            if who in comms and BUSYBOX not in (p for _, p in f)]


def is_chain(names, chain):
    return len(names) == len(chain) and all(match(w, n) for w, n in zip(chain, names))


def exact(events, comm, chains, prog, cache):
    """(complete, wrong): the stacks of `comm` that are one of `chains` exactly with no
    user_unwind_truncated, and the others, symbolized."""
    cut = truncations(events)
    pids = {e["cookie"]: e["pid"] for e in events if e["event"] == "user_unwind_stack"}
    complete, wrong = [], []
    for cookie, frames in by_cookie(events, comm):
        names = symbolize(frames, prog, cache)
        if cookie not in cut and any(is_chain(names, ch) for ch in chains):
            complete.append(names)
        else:
            # What a reader of a CI log needs to find the stack in the guest's output.
            where = [f"pid {pids.get(cookie)} cookie {cookie:x}",
                     " ".join(f"{off:x}@{os.path.basename(p or '?')}" for off, p in frames)]
            wrong.append(show(names) + ([f"truncated {cut[cookie]}"] if cookie in cut else [])
                         + where)
    return complete, wrong


def check_loader(check_fn, s, parse_trace, values, prog, cache):
    """6: a dynamically linked program's stacks from its exec on, loader stacks included:
    each ends at an entry point (ld.so's `_start`, or its `_dl_start_user` that calls the
    constructors with rbp cleared, or the program's `_start` through libc), every frame
    named, none reported cut short."""
    status = values(s.get("REVIEW_LOADER", [])).get("status")
    events = parse_trace(s.get("REVIEW_LOADER", []))
    cut = truncations(events)
    mine = by_cookie(events, "uu_nofp")
    loader, bad = 0, []
    roots = {"_start", "_dl_start_user"}
    for cookie, frames in mine:
        names = symbolize(frames, prog, cache)
        unknown = [n for n in names if all(x.startswith("?") for x in n)]
        in_ldso = bool(frames) and frames[-1][1] == LDSO
        loader += in_ldso
        if not frames or unknown or not (names[-1] & roots) or cookie in cut:
            bad.append(show(names) + ([f"truncated {cut[cookie]}"] if cookie in cut else []))
    print(f"# review: loader: {len(mine)} stacks of uu_nofp from its exec on, {loader} of "
          f"them loader stacks (outermost frame in ld.so), {len(bad)} incomplete")
    check_fn("review: the loader's stacks (before main) are complete and none is reported "
             "cut short: every stack of a program from its exec on ends at an entry point",
             status == "0" and loader >= 5 and len(mine) > loader and not bad,
             f"status {status}, {len(mine)} stacks, {loader} loader stacks, {len(bad)} "
             f"incomplete, e.g. {bad[:3]}")


def check_ctor(check_fn, s, parse_trace, values, prog, cache):
    """A library constructor's stack, from ld.so's _dl_init, called by its start-up code
    (_dl_start_user) with rbp cleared and no FDE: complete, not cut short."""
    status = values(s.get("REVIEW_CTOR", [])).get("status")
    events = parse_trace(s.get("REVIEW_CTOR", []))
    cut = truncations(events)
    ctor = [(c, f) for c, f in by_cookie(events, "uu_nofp")
            if any(p == "/usr/lib/libuuctor.so" for _, p in f)]
    bad = []
    for cookie, frames in ctor:
        names = symbolize(frames, prog, cache)
        if not (len(names) >= 3 and match("getppid", names[0]) and match("uu_ctor", names[1])
                and frames[-1][1] == LDSO and "_dl_start_user" in names[-1]
                and cookie not in cut):
            bad.append(show(names) + ([f"truncated {cut[cookie]}"] if cookie in cut else []))
    check_fn("review: a library constructor's system call: getppid <- uu_ctor <- ... <- "
             "ld.so's _dl_start_user, complete (the ABI's root: rbp 0 in the start-up code)",
             status == "0" and len(ctor) == 1 and not bad,
             f"status {status}, {len(ctor)} stacks, e.g. {bad[:2]}")


def check_memo(check_fn, s, parse_trace, values, prog, cache):
    """3: two stacks 1.5 s apart on one CPU: the memo's entry is too old the second time."""
    status = values(s.get("REVIEW_MEMO", [])).get("status")
    events = parse_trace(s.get("REVIEW_MEMO", []))
    complete, wrong = exact(events, "uu_review", [MEMO_CHAIN], prog, cache)
    check_fn(f"review: memo: both stacks 1.5 s apart are the known chain {MEMO_CHAIN[:3]}...",
             status == "0" and len(complete) == 2 and not wrong,
             f"status {status}, {len(complete)} complete, wrong: {wrong[:2]}")
    expired = grew(s, "REVIEW_MEMO", "memo_expired")
    check_fn("review: memo: an entry older than the bound is not used (memo_expired grows)",
             expired is not None and expired >= 1,
             "no memo_expired counter" if expired is None else f"memo_expired grew {expired}")


def check_devmem(check_fn, s, parse_trace, values, prog, cache):
    """5: rbp in a /dev/mem mapping, from code without an FDE: the stack ends at the stub,
    reason read, and nothing read from the device page is in it."""
    out = " ".join(s.get("REVIEW_DEVMEM_OUT", []))
    m = re.search(r"devmem stub ([0-9a-f]+) ([0-9a-f]+) rbp ([0-9a-f]+) words ([0-9a-f]+) "
                  r"([0-9a-f]+)", out)
    status = values(s.get("REVIEW_DEVMEM", [])).get("status")
    check_fn("review: devmem: the program mapped a page of /dev/mem and ran its stub",
             m and status == "0", f"status {status}, {out!r}")
    if not m:
        return
    lo, hi, rbp, w0, w1 = (int(x, 16) for x in m.groups())
    page = rbp & ~0xfff
    events = parse_trace(s.get("REVIEW_DEVMEM", []))
    cut = truncations(events)
    mine = by_cookie(events, "uu_review")
    wrong = []
    for cookie, frames in mine:
        values_ = [v for v, _ in frames]
        leaked = [hex(v) for v in values_ if v in (w0, w1) or page <= v < page + 4096]
        ok = (len(frames) == 1 and frames[0][1] is None and lo <= frames[0][0] < hi
              and cut.get(cookie) == (1, "read") and not leaked)
        if not ok:
            wrong.append(([hex(v) for v in values_], cut.get(cookie), leaked))
    check_fn("review: devmem: a frame pointer into a VM_IO/VM_PFNMAP page ends the stack at "
             "the stub, truncated with reason read, no device word in it",
             len(mine) >= 5 and not wrong,
             f"stub {lo:x}, words {w0:x} {w1:x}: {len(mine)} stacks, {len(wrong)} wrong, "
             f"e.g. {wrong[:2]}")
    refused = grew(s, "REVIEW_DEVMEM", "unwind_reads_refused")
    check_fn("review: devmem: the read is refused (unwind_reads_refused grows)",
             refused is not None and refused >= 1,
             "no unwind_reads_refused counter" if refused is None else f"grew {refused}")


def check_exec(check_fn, s, parse_trace, values, prog, cache):
    """2: a self-execve loop and a storm on one CPU: no execve event's stack is the new
    program's; each is empty (the exec detected) or the pre-exec chain."""
    v = values(s.get("REVIEW_EXEC", []))
    m = re.match(r"exec pid (\d+) execs (\d+)", v.get("exec", ""))
    check_fn("review: exec: the self-execve loop ran to its end",
             v.get("status") == "0" and m, str(v))
    if not m:
        return
    pid, execs = int(m.group(1)), int(m.group(2))
    events = parse_trace(s.get("REVIEW_EXEC", []))
    frames_of = dict(zip(cookies(events, None), (f for _, f in stacks(events))))
    # The cookie of each execve entry: the cookie event next to it, before it when the
    # filtered event was buffered (hook.c), else after it.
    mine = [e for e in events if e["pid"] == pid
            and e["event"] in ("sys_enter", "user_unwind_cookie")]
    exec_cookies, used = [], set()
    for i, e in enumerate(mine):
        if e["event"] != "sys_enter" or not e["rest"].startswith("NR 59 "):
            continue
        for j in (i - 1, i + 1):
            if 0 <= j < len(mine) and mine[j]["event"] == "user_unwind_cookie" \
                    and j not in used:
                used.add(j)
                exec_cookies.append(mine[j]["cookie"])
                break
    empty, chain, leaked, missing = 0, 0, [], 0
    for c in exec_cookies:
        if c not in frames_of:
            missing += 1
            continue
        names = symbolize(frames_of[c], prog, cache)
        if not names:
            empty += 1
        elif is_chain(names, EXEC_CHAIN):
            chain += 1
        else:
            leaked.append(show(names))
    print(f"# review: exec: {len(exec_cookies)} execve cookies of pid {pid} ({execs} execs "
          f"from ex_b), {empty} empty, {chain} the pre-exec chain, {len(leaked)} another "
          f"stack, {missing} without a stack; storm events {v.get('storm_events')}, "
          f"overrun {v.get('overrun')}")
    check_fn("review: exec: no execve event's stack is the new program's (each is empty or "
             f"the pre-exec chain {EXEC_CHAIN[:3]}...)",
             len(exec_cookies) >= execs and not leaked,
             f"{len(exec_cookies)} execve cookies for {execs} execs, {len(leaked)} show "
             f"another stack, e.g. {leaked[:3]}")
    after = grew(s, "REVIEW_EXEC", "stacks_after_exec")
    check_fn("review: exec: stacks_after_exec counts every exec that had a pending request",
             after is not None and after >= len(exec_cookies) > 0,
             f"stacks_after_exec grew {after} for {len(exec_cookies)} execve requests")


def check_honest(check_fn, name, events, prog, cache):
    complete, wrong = exact(events, "uu_nofp", HONEST, prog, cache)
    kinds = [sum(is_chain(n, ch) for n in complete) for ch in HONEST]
    check_fn(f"review: poisoning: {name}: 100 % of an honest program's stacks (main thread "
             "and a second thread) are the known chains, complete",
             kinds == [HONEST_CALLS, HONEST_CALLS] and not wrong,
             f"{len(complete)} of {len(complete) + len(wrong)} complete ({kinds}), wrong: "
             f"{wrong[:2]}")


def check_poison(check_fn, s, parse_trace, values, prog, cache):
    """4: libc's CIEs rewritten in a process's private copy: neither the honest program's
    stacks after it and beside it nor the poisoner's own stacks through libc change."""
    out = " ".join(s.get("REVIEW_POISON_OUT", []))
    m = re.search(r"poison cies (\d+) rewritten (\d+) left (\d+)", out)
    status = values(s.get("REVIEW_POISON", [])).get("status")
    check_fn("review: poisoning: the poisoner rewrote libc's DW_CFA_offset r16 rules in its "
             "own copy", status == "0" and m and int(m.group(2)) >= 1 and m.group(3) == "0",
             f"status {status}, {out!r}")
    events = parse_trace(s.get("REVIEW_POISON", []))
    complete, wrong = exact(events, "uu_review", [POISON_CHAIN], prog, cache)
    check_fn("review: poisoning: the poisoner's own stacks through libc are complete (the "
             f"file's tables, not its private copy): {POISON_CHAIN[:3]}...",
             len(complete) == 100 and not wrong,
             f"{len(complete)} of {len(complete) + len(wrong)} complete, wrong: {wrong[:2]}")
    v = values(s.get("REVIEW_POISON_AFTER", []))
    check_fn("review: poisoning: the honest program ran after the poisoner",
             v.get("status") == "0", str(v))
    check_honest(check_fn, "after the poisoner", parse_trace(s.get("REVIEW_POISON_AFTER", [])),
                 prog, cache)
    v = values(s.get("REVIEW_POISON_CONCURRENT", []))
    check_fn("review: poisoning: the honest program ran beside the looping poisoner",
             v.get("status") == "0" and "rewritten" in v.get("poisoner", ""), str(v))
    events = parse_trace(s.get("REVIEW_POISON_CONCURRENT", []))
    check_honest(check_fn, "beside the poisoner", events, prog, cache)
    complete, wrong = exact(events, "uu_review", [POISON_CHAIN], prog, cache)
    check_fn("review: poisoning: the looping poisoner's stacks are complete too",
             len(complete) >= 20 and not wrong,
             f"{len(complete)} of {len(complete) + len(wrong)} complete, wrong: {wrong[:2]}")


def check_churn(check_fn, s, parse_trace, values, prog, cache):
    """Issue 24: a process making new file identities and thousands of rows under a low
    table memory limit, beside an honest program: the honest program's tables stay, so
    after the churn its stacks parse no row, though they miss the row cache."""
    v = values(s.get("REVIEW_CHURN", []))
    before = stats(s.get("REVIEW_CHURN_BEFORE", []))
    during = stats(s.get("REVIEW_CHURN_DURING", []))
    after = stats(s.get("REVIEW_CHURN_AFTER", []))

    def grown(a, b, name):
        return b.get(name, 0) - a.get(name, 0)
    made = grown(before, during, "unwind_tables_made")
    pressed = (grown(before, during, "unwind_tables_dropped")
               + grown(before, during, "unwind_tables_refused"))
    # A table each identity, and the honest program's own made again where they were
    # dropped: its tables (at most 4 files) look idle while its rows all hit the row cache,
    # so each run of the churner may take their memory once, and the honest program's next
    # miss makes them again. Never one a stack: a table grown by copying keeps its file,
    # and is not made again.
    check_fn("review: churn: six runs of a churner, each under a new identity, made a table "
             "each until the 1 MiB limit dropped or refused some",
             v.get("churn_runs") == "6" and 6 <= made <= 6 + 6 * 4 and pressed >= 1,
             f"{v}, tables made {made}, dropped or refused {pressed}")
    events = parse_trace(s.get("REVIEW_CHURN_HONEST", []))
    complete, wrong = exact(events, "uu_nofp", [CHAINS["UNWIND_CHAIN"]], prog, cache)
    misses = grown(during, after, "unwind_row_misses")
    parsed = grown(during, after, "unwind_rows_parsed")
    check_fn("review: churn: after it, the honest program's 40 stacks are complete, miss "
             "the row cache the churn filled, and parse no row",
             len(complete) == HONEST_CALLS and not wrong and misses >= 1 and parsed == 0,
             f"{len(complete)} complete, wrong {wrong[:2]}, row misses {misses}, rows "
             f"parsed {parsed}")
    v = values(s.get("REVIEW_CHURN_PARAM", []))
    check_fn("review: churn: a bad write to table_kib fails and changes nothing",
             v.get("bad_status") not in (None, "0") and v.get("value") == v.get("kib"),
             str(v))


# The honest program of the fairness test: its stacks (uu_honest 1000 512 16), and the
# most rows parsed per distinct frame address it may cost (the bigprog target).
FAIR_STACKS = 512
FAIR_RATIO = 1.2


def check_fair(check_fn, s, parse_trace, values, prog, cache):
    """Issue 35: a hoarder (uid 2000) whose ten large tables fill table_kib and are never
    idle, beside an honest program (uid 1000): the honest program, under its share, gets
    its table, so it parses about one row per distinct frame address; refused one (the
    limit held by tables in use), every row cache miss parses again, about two each."""
    v = values(s.get("REVIEW_FAIR", []))
    before = stats(s.get("REVIEW_FAIR_BEFORE", []))
    after = stats(s.get("REVIEW_FAIR_AFTER", []))
    full = before.get("unwind_table_bytes", 0) >= 768 << 10
    check_fn("review: fair: the hoarder (uid 2000) ran, and its tables filled the 1 MiB limit "
             "before the honest program started",
             v.get("hoarder_status") == "0" and v.get("hoarder", "").startswith("rounds ")
             and full and before.get("unwind_tables_refused", 0) >= 1,
             f"{v.get('hoarder_status')} {v.get('hoarder')}, tables "
             f"{before.get('unwind_tables')} of {before.get('unwind_table_bytes')} bytes, "
             f"refused {before.get('unwind_tables_refused')}")
    events = parse_trace(s.get("REVIEW_FAIR", []))
    mine = [e for e in events if e["event"] == "user_unwind_stack" and e["comm"] == "uu_honest"]
    deep = [e for e in mine if len(e["frames"]) >= 19]
    distinct = {f for e in mine for f in e["frames"]}
    def grown(name):
        return after.get(name, 0) - before.get(name, 0)
    parsed = grown("unwind_rows_parsed")
    ratio = parsed / len(distinct) if distinct else float("inf")
    print(f"# review: fair: the honest program: {len(mine)} stacks, {len(distinct)} distinct "
          f"frame addresses, {parsed} rows parsed while it ran: {ratio:.2f} a distinct address; "
          f"tables made {grown('unwind_tables_made')}, dropped {grown('unwind_tables_dropped')}, "
          f"evicted {grown('unwind_tables_evicted')}, refused {grown('unwind_tables_refused')}")
    check_fn("review: fair: beside the hoarder, the honest program (uid 1000) made its 512 "
             f"stacks, complete, at {FAIR_RATIO} rows parsed or less per distinct frame address",
             v.get("status") == "0" and len(mine) == FAIR_STACKS and len(deep) == len(mine)
             and len(distinct) >= 4096 and ratio <= FAIR_RATIO,
             f"status {v.get('status')}, {len(mine)} stacks ({len(deep)} of 19 frames or more), "
             f"{len(distinct)} distinct addresses, {parsed} rows parsed: {ratio:.2f} each, "
             f"overrun {v.get('overrun')}")


def check_uffd(check_fn, s, parse_trace, values, prog, cache):
    """1: the stack in memory registered with userfaultfd and never served: the system call
    returns, its stack cut short, the others' stacks complete; rmmod is bounded."""
    v = values(s.get("REVIEW_UFFD", []))
    check_fn("review: uffd: getppid with the stack pointer in an unserved userfaultfd region "
             "returns (20 calls, under a 15 s timeout)",
             v.get("status") == "0" and "uffd calls 20" in v.get("uffd", ""), str(v))
    events = parse_trace(s.get("REVIEW_UFFD", []))
    mine, wrong, cut = cut_at_uf_call(events, prog, cache)
    reasons = sorted({cut[c][1] for c, _ in mine if c in cut})
    check_fn("review: uffd: each of its stacks ends at uf_call, cut short with its "
             "user_unwind_truncated", len(mine) >= 20 and not wrong,
             f"{len(mine)} stacks, {len(wrong)} wrong, e.g. {wrong[:2]}; reasons {reasons}")
    unfaulted = grew(s, "REVIEW_UFFD", "unwind_reads_unfaulted")
    check_fn("review: uffd: the unwinder did not fault the page in (unwind_reads_unfaulted "
             "grows)", unfaulted is not None and unfaulted >= 1, f"grew {unfaulted}")
    complete, wrong = exact(events, "uu_nofp", [CHAINS["UNWIND_CHAIN"]], prog, cache)
    check_fn("review: uffd: another task's stacks taken meanwhile are complete",
             v.get("other_status") == "0" and len(complete) == 40 and not wrong,
             f"status {v.get('other_status')}, {len(complete)} complete, wrong: {wrong[:2]}")
    v = values(s.get("REVIEW_UFFD_RMMOD", []))
    seconds = float(v.get("seconds", "inf"))
    check_fn("review: uffd: rmmod while such a task is traced returns within 5 s",
             v.get("returned") == "yes" and seconds <= 5 and v.get("rmmod_status") == "0"
             and v.get("in_modules") == "0" and "uffd ready" in v.get("uffd", ""), str(v))


def cut_at_uf_call(events, prog, cache, reason=None):
    """(stacks, wrong, cut): uu_review's stacks, those of them that do not end at uf_call
    with a user_unwind_truncated there (of `reason`, if given), and the truncations."""
    cut = truncations(events)
    mine = by_cookie(events, "uu_review")
    wrong = []
    for cookie, frames in mine:
        names = symbolize(frames, prog, cache)
        if not (names and "uf_call" in names[0] and cookie in cut
                and cut[cookie][0] == len(names) and reason in (None, cut[cookie][1])):
            wrong.append((show(names), cut.get(cookie)))
    return mine, wrong, cut


def check_vdso32(check_fn, s, parse_trace, values, prog, cache):
    """7: a 64-bit task's 32-bit vDSO does not change how other tasks' vDSO frames unwind."""
    out = values(s.get("REVIEW_VDSO32_OUT", [])).get("out", "")
    check_fn("review: vdso32: a task maps the 32-bit vDSO and makes 20 calls from a stack "
             "whose return address points into it", re.search(r"vdso32 at \w+ calls 20", out),
             out)
    events = parse_trace(s.get("REVIEW_VCLOCK", []))
    mine = by_cookie(events, "uu_review")
    cut = truncations(events)
    done = [f for c, f in mine if c not in cut]
    # The vDSO's frame, then the program's chain from libc's clock_gettime out.
    good = [f for f in done if f and f[0][1] == "[vdso]"
            and is_chain(symbolize(f[1:], prog, cache), VCLOCK_CHAIN)]
    check_fn("review: vdso32: then clock_gettime's system calls from the vDSO, 40 stacks, "
             "each complete through the vDSO to _start", len(mine) >= 40
             and len(good) == len(mine),
             f"{len(mine)} stacks, {len(good)} good, cut {len(mine) - len(done)}; e.g. "
             f"{[show(symbolize(f, prog, cache)) for _, f in mine[:1]]}")
    grown = grew(s, "REVIEW_VCLOCK", "unwind_fp_frames")
    check_fn("review: vdso32: after it, no frame of the honest program is unwound by the "
             "frame-pointer rule (unwind_fp_frames does not grow)", grown == 0, f"grew {grown}")


def check_dm(check_fn, s, parse_trace, values, prog, cache):
    """8: a stack that needs a page of a file on a suspended device: the call returns, the
    stack is cut there (reason read), rmmod returns, and stacks are complete once resumed."""
    v = values(s.get("REVIEW_DM_SETUP", []))
    check_fn("review: dm: libc's copy on ext4 over a device-mapper target over a loop device "
             "is mounted", v.get("status") == "0", str(v))
    if v.get("status") != "0":
        return
    v = values(s.get("REVIEW_DM", []))
    check_fn("review: dm: getppid with the stack pointer in an uncached page of a file on the "
             "suspended target returns (20 calls, within 10 s)",
             v.get("returned") == "yes" and v.get("status") == "0"
             and "mapstack calls 20" in v.get("out", ""), str(v))
    mine, wrong, _ = cut_at_uf_call(parse_trace(s.get("REVIEW_DM", [])), prog, cache, "read")
    check_fn("review: dm: each of its stacks ends at uf_call, cut short with reason read",
             len(mine) >= 20 and not wrong, f"{len(mine)} stacks, {len(wrong)} wrong, "
             f"e.g. {wrong[:2]}")
    queued = grew(s, "REVIEW_DM", "fetches_queued")
    check_fn("review: dm: the missing page was asked of the fetch thread (fetches_queued "
             "grows)", queued is not None and queued >= 1, f"grew {queued}")
    v = values(s.get("REVIEW_DM_RMMOD", []))
    stacks_now = values(s.get("REVIEW_DM_RMMOD_STACKS", []))
    seconds = float(v.get("seconds", "inf"))
    done = v.get("rmmod_status") == "0" and v.get("in_modules") == "0"
    # Refused while the fetch thread waits for the device (it holds a module reference),
    # then done once the device answers.
    refused = (v.get("rmmod_status") not in ("0", "hung") and v.get("in_modules") == "1"
               and "uu_fetch_thread" in stacks_now.get("fetch", "")
               and v.get("rmmod_resumed") == "0" and v.get("in_modules_resumed") == "0")
    check_fn("review: dm: rmmod while such calls go on returns within 5 s: unloaded, or "
             "refused while the fetch thread waits for the device and unloaded once it is "
             "resumed", v.get("returned") == "yes" and seconds <= 5 and (done or refused),
             f"{v}; {stacks_now}")
    print(f"# review: dm: rmmod on the suspended target: {'unloaded' if done else 'refused'} "
          f"in {seconds} s")
    def chains(name):
        """Section NAME's status, uu_nofp's stacks, its cuts and the complete chains."""
        events = parse_trace(s.get(name, []))
        cut = truncations(events)
        mine = list(by_cookie(events, "uu_nofp"))
        complete = [c for c, f in mine if c not in cut
                    and is_chain(symbolize(f, prog, cache), CHAINS["UNWIND_CHAIN"])]
        return values(s.get(name, [])).get("status"), mine, cut, complete

    status, mine, cut, complete = chains("REVIEW_DM_RESUMED")
    others = sorted({cut.get(c, (0, "complete"))[1] for c, _ in mine if c not in complete})
    last = [c for c, _ in mine[-10:]]
    check_fn("review: dm: resumed, a program whose libc is that copy (its pages dropped): "
             "its stacks are complete once the pages are in (the last 10), the others cut "
             "with reason read", status == "0" and len(mine) == 40
             and set(last) <= set(complete) and others in ([], ["read"]),
             f"status {status}, {len(mine)} stacks, {len(complete)} complete, others {others}")
    print(f"# review: dm: resumed with libc's pages dropped: {len(complete)} of {len(mine)} "
          "stacks complete, the others cut with reason read while the pages came in")
    v = values(s.get("REVIEW_DM_EIO", []))
    _, errored, cut, _ = chains("REVIEW_DM_EIO")
    eio = [c for c, _ in errored if cut.get(c, (0, ""))[1] == "read"]
    status, mine, cut, complete = chains("REVIEW_DM_REREAD")
    check_fn("review: dm: libc's search table behind an error target cuts stacks with reason "
             "read; once the device answers, the folios the failed reads left are read again "
             "and the last 10 stacks are complete",
             v.get("table_status") == "0" and v.get("linear_status") == "0" and eio
             and status == "0" and len(mine) == 40
             and {c for c, _ in mine[-10:]} <= set(complete),
             f"table {v.get('table')!r} status {v.get('table_status')}, {len(eio)} cut with "
             f"read on errors; then status {status}, {len(mine)} stacks, {len(complete)} "
             f"complete, {sorted(set(cut[c][1] for c, _ in mine if c in cut))} cut")
    print(f"# review: dm: after read errors: {len(complete)} of {len(mine)} stacks complete")
    cg = values(s.get("REVIEW_DM_CGROUP", []))
    if cg.get("cgroup", "none") == "none":
        print("# review: dm: no memory cgroups in this kernel: the fetch thread's charges "
              "are not checked")
        return
    lines = s.get("REVIEW_DM_CGROUP", [])
    resident = next((int(x.split()[2]) for x in lines if x.startswith("pagecg resident ")), 0)
    pages = {int(x.split()[2]): int(x.split()[4]) for x in lines if x.startswith("pagecg ino ")}
    own = pages.get(int(cg.get("cgroup_ino", "0")), 0)
    fetched = stats(s.get("REVIEW_DM_RESUMED_STATS", [])).get("fetches_queued", 0)
    check_fn("review: dm: the pages of that libc the program and the fetch thread read for "
             "its stacks are all charged to the program's memory cgroup, none to the root's",
             resident > 0 and own == resident and fetched > 0,
             f"{resident} resident, by cgroup inode {pages}, the program's "
             f"{cg.get('cgroup_ino')}, the root's {cg.get('root_ino')}; "
             f"fetches_queued {fetched}")


def check(s, prog, check_fn=None, parse_trace=None, values=None):
    # tests/e2e.py's check, parse_trace and values: it runs as __main__, or imported.
    main = sys.modules.get("e2e") or sys.modules["__main__"]
    check_fn = check_fn or main.check
    parse_trace = parse_trace or main.parse_trace
    values = values or main.values
    all_values = values

    def values(lines):
        """The "NAME VALUE" result lines of a section, not its trace's lines."""
        return all_values([x for x in lines if re.match(r"^\w+ ", x)])

    cache = {}
    v = values(s.get("REVIEW_LOAD", []))
    check_fn("review: the module loads with the .eh_frame unwinder",
             v.get("insmod_status") == "0" and v.get("unwinder") == "eh_frame", str(v))
    for fn in (check_loader, check_ctor, check_memo, check_devmem, check_exec, check_poison, check_churn,
               check_fair, check_vdso32, check_dm, check_uffd):
        fn(check_fn, s, parse_trace, values, prog, cache)


if __name__ == "__main__":
    import e2e
    with open(sys.argv[1]) as f:
        secs = e2e.sections(f.read())
    check(secs, sys.argv[2], e2e.check, e2e.parse_trace, e2e.values)
    print(f"review: {e2e.results.count(True)} passed, {e2e.results.count(False)} failed")
    sys.exit(0 if all(e2e.results) else 1)
