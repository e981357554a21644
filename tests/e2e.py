#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host half of the end-to-end tests.

Boots the guest once with tests/guest/e2e.sh, then checks what it printed against ground
truth: the test program's own call chain (main -> uu_a -> uu_b -> uu_c -> uu_lib_syscall,
40 getppid calls), the binaries' symbol tables, the guest's list of kernel threads.
Prints one "ok"/"not ok" line per check, the KUnit results, and exits non-zero on failure.
"""
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from symbolize import Elf, clock_warning  # noqa: E402
from splat import splats  # noqa: E402
import hostile_cfi  # noqa: E402
import hostile_elf  # noqa: E402
import unwind  # noqa: E402
import identity  # noqa: E402
import review  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                  r"(?P<ts>[\d.]+):\s+(?P<event>\w+):\s*(?P<rest>.*)$")
# The arrays of a user_unwind_stack printed by its format: as the kernel's __print_array
# prints them ({0x1,0x2}) and as libtraceevent 1.7.1 does (1 2).
ARRAY = re.compile(r"\b(files|offs)=(\{[0-9a-fx,]*\}|[0-9 ]*?)(?= \w+=|$)")
PACKING = re.compile(r"\bidx_bits=(\d+) wide=(\d+)\b")
FILE_CACHE = re.compile(r"path=(?P<path>.*) build_id=(?P<id>[0-9a-f]*) build_id_len=(?P<len>\d+)")
FRAME = re.compile(r"^ => <([0-9a-f]+)> : 0x([0-9a-f]+)$")
CHAIN = ["uu_lib_syscall", "uu_c", "uu_b", "uu_a", "main"]
CHAIN_CALLS = 40

results = []


def check(name, ok, why=""):
    ok = bool(ok)
    results.append(ok)
    print(("ok - " if ok else "not ok - ") + name + ("" if ok else f": {why}"))
    sys.stdout.flush()


def sections(text):
    out, cur = collections.OrderedDict(), None
    for line in text.splitlines():
        if line.startswith("=== "):
            cur = line[4:].strip()
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out


def values(lines):
    return dict(line.split(" ", 1) for line in lines if " " in line)


def parse_arrays(rest):
    """The (value, file cookie) pairs of a user_unwind_stack printed by its format: the
    file table and a 32-bit word a frame (two in a wide record: the low halves, then the
    high halves), the frame's file index in the top idx_bits bits of its (last) word
    (Documentation/user_unwind.rst, "Events")."""
    packing = PACKING.search(rest)
    if not packing:
        return []
    bits, wide = int(packing.group(1)), packing.group(2) != "0"
    arrays = {}
    for name, text in ARRAY.findall(rest):
        text = text.strip("{}")
        arrays[name] = [int(x, 0) for x in (text.split(",") if "," in text else text.split())]
    files, offs = (arrays.get(k, []) for k in ("files", "offs"))
    nr = len(offs) // 2 if wide else len(offs)
    vmask = 0xffffffff >> bits
    frames = []
    for i in range(nr):
        word = offs[nr + i] if wide else offs[i]
        j = word >> (32 - bits) if bits else 0
        value = ((word & vmask) << 32 | offs[i]) if wide else word & vmask
        if wide and bits and value >> (63 - bits):
            # A wide value is signed: sign-extended from its 64 - bits bits.
            value |= ((1 << bits) - 1) << (64 - bits)
        frames.append((value, files[j] if j < len(files) else None))
    return frames


def parse_trace(lines):
    """Events in buffer order: dicts with comm, pid, event, rest and, for stacks, frames."""
    events = []
    for line in lines:
        m = LINE.match(line)
        if m:
            ev = m.groupdict()
            ev["pid"] = int(ev["pid"])
            ev["frames"] = []
            c = re.search(r"cookie=([0-9a-f]+)", ev["rest"])
            ev["cookie"] = int(c.group(1), 16) if c else None
            ev["frames"] = parse_arrays(ev["rest"])
            fc = FILE_CACHE.search(ev["rest"])
            if ev["event"] == "file_cache" and fc:
                ev["path"], ev["build_id"] = fc.group("path"), fc.group("id")
                ev["build_id_len"] = int(fc.group("len"))
            events.append(ev)
            continue
        f = FRAME.match(line)
        if f and events:
            events[-1]["frames"].append((int(f.group(1), 16), int(f.group(2), 16)))
    return events


def readelf_build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else ""


def resolve(events):
    """For each stack event: the file_cache (path, build_id) each frame's cookie stood for,
    the most recent one before the stack, or None."""
    latest, out = {}, []
    for e in events:
        if e["event"] == "file_cache" and "path" in e:
            latest[e["cookie"]] = e
        elif e["event"] == "user_unwind_stack":
            out.append((e, [latest.get(c) if c > 1 else "reserved" for _, c in e["frames"]]))
    return out


def check_file_cache(name, events, comm, reader_start=False, switched_on=False):
    """Every file cookie of `comm`'s stacks has a file_cache before the stack. A stack whose
    file_cache events were cut may instead be explained by the copies written right after
    it, before that task's next stack: with `reader_start`, one written in the moments after
    the reader started (its buffer reset may have cut them); with `switched_on`, each task's
    first stack (tracing was switched on while it was between its file_cache events and its
    stack, so the first ones were dropped)."""
    missing, stacks, after = 0, 0, 0
    t0 = float(events[0]["ts"]) if events else 0
    first = set()
    for stack, files in resolve(events):
        if stack["comm"] != comm:
            continue
        stacks += 1
        lost = {c for (_, c), f in zip(stack["frames"], files) if f is None}
        cut = ((reader_start and float(stack["ts"]) <= t0 + READER_START_GRACE)
               or (switched_on and stack["pid"] not in first))
        first.add(stack["pid"])
        if lost and cut:
            for e in events[events.index(stack) + 1:]:
                if e["pid"] != stack["pid"]:
                    continue
                if e["event"] == "user_unwind_stack":
                    break
                if e["event"] == "file_cache" and e["cookie"] in lost:
                    lost.discard(e["cookie"])
                    after += 1
        missing += len(lost)
    if reader_start or switched_on:
        print(f"# {name}: {after} cookies explained right after a stack whose file_cache "
              "events were cut")
    check(name, stacks and not missing, f"{missing} frames without file_cache in {stacks} stacks")


def check_chain_files(events, prog):
    """The file_cache events of the chain run name the right files and build-ids."""
    check_file_cache("file_cache precedes the first stack using each cookie", events, "uu_chain")
    resolved = [files for stack, files in resolve(events) if stack["comm"] == "uu_chain"]
    if not resolved:
        return
    files = resolved[0]
    want = [("/usr/lib/libuutest.so", os.path.join(prog, "libuutest.so")),
            ("/usr/bin/uu_chain", os.path.join(prog, "uu_chain"))]
    got = [(f["path"], f["build_id"]) if isinstance(f, dict) else f for f in files[:2]]
    check("file_cache paths and build-ids of the program and its library match readelf",
          got == [(p, readelf_build_id(h)) for p, h in want],
          f"got {got}, want {[(p, readelf_build_id(h)) for p, h in want]}")
    libc = [f for f in files if isinstance(f, dict) and f["path"].endswith("/libc.so.6")]
    check("file_cache of libc carries its build-id",
          libc and libc[0]["build_id"] == readelf_build_id(libc[0]["path"]) != "",
          f"libc file_cache {libc[:1]}")


# How long after a trace's first event a reader's start may still be resetting the buffer;
# a stack cut from its file_cache events by such a reset gets them right after it
# (src/files.rs: Report::needs_repeat).
READER_START_GRACE = 0.2


def check_steady(events):
    """Once the reader has started, a file_cache is not repeated (until the reminder, a
    second after the first one, which this 30 x 20 ms run does not reach)."""
    check_file_cache("steady run: file_cache precedes every cookie", events, "uu_chain")
    t0 = float(events[0]["ts"]) if events else 0
    late_caches = [e for e in events if e["event"] == "file_cache"
                   and float(e["ts"]) > t0 + READER_START_GRACE + 0.05]
    late_stacks = [e for e in events if e["event"] == "user_unwind_stack"
                   and float(e["ts"]) > t0 + READER_START_GRACE + 0.05]
    check("steady state: no file_cache once the reader has started",
          len(late_stacks) >= 10 and not late_caches,
          f"{len(late_stacks)} stacks and {len(late_caches)} file_cache after the start")


def check_dlopen(name, events, prog, min_stacks=60, one_cookie_each=True):
    exe = Elf(os.path.join(prog, "uu_dl"))
    libs = {"/usr/lib/libuua.so": Elf(os.path.join(prog, "libuua.so")),
            "/usr/lib/libuub.so": Elf(os.path.join(prog, "libuub.so"))}
    expect = {"uu_call_a": "uu_liba_syscall", "uu_call_b": "uu_libb_syscall"}
    wrong, seen, paths_by_cookie = [], 0, collections.defaultdict(set)
    for stack, files in resolve(events):
        if stack["comm"] != "uu_dl" or len(stack["frames"]) < 3:
            continue
        seen += 1
        callers = [exe.symbol(off, True) for off, _ in stack["frames"][1:4]]
        caller = next((c for c in callers if c in expect), None)
        f0 = files[0]
        if not isinstance(f0, dict) or f0["path"] not in libs:
            wrong.append(f"frame 0 resolves to {f0 and f0.get('path') if isinstance(f0, dict) else f0}")
            continue
        paths_by_cookie[stack["frames"][0][1]].add(f0["path"])
        got = libs[f0["path"]].symbol(stack["frames"][0][0])
        if caller is None or got != expect[caller]:
            wrong.append(f"{caller} -> {got} via {f0['path']}")
    reused = sum(len(p) > 1 for p in paths_by_cookie.values())
    cookies_by_path = collections.defaultdict(set)
    for cookie, paths in paths_by_cookie.items():
        for p in paths:
            cookies_by_path[p].add(cookie)
    print(f"# {name}: {seen} stacks, {len(paths_by_cookie)} library cookies, "
          f"{reused} naming both libraries")
    check(f"{name}: every library cookie resolves to the right library",
          seen >= min_stacks and not wrong, f"{len(wrong)} of {seen} wrong: {wrong[:3]}")
    # The cookie names the file, not its opening: each library keeps one cookie over all
    # its loads, and no cookie names both.
    if one_cookie_each:
        check(f"{name}: each library has one cookie over all its loads, no cookie two",
              sorted(len(c) for c in cookies_by_path.values()) == [1, 1] and not reused,
              f"{dict(cookies_by_path)}")


# The kernel half of the x86-64 address space (4-level paging; 5-level starts lower still
# in the same half).
KERNEL_HALF = 0xff00_0000_0000_0000


def iomem_ranges(lines):
    """The (name, first, last) ranges of /proc/iomem lines ("first-last : name")."""
    ranges = []
    for line in lines:
        span, _, name = line.strip().partition(" : ")
        first, _, last = span.partition("-")
        try:
            ranges.append((name, int(first, 16), int(last, 16)))
        except ValueError:
            pass
    return ranges


def check_no_kernel_addresses(events, kallsyms, iomem):
    """No field of the module's events holds a kernel address: no value lies within the
    kernel's symbols (vmlinux and modules, as root reads them in /proc/kallsyms) or the
    physical range of the kernel's image (/proc/iomem's "Kernel code", "rodata", "data" and
    "bss": a physical address of the kernel; the test files are all far smaller than the
    offset it starts at, so no frame offset lands there), no file cookie lies within the
    RAM's physical ranges, frame values and unwind cookies are never in the kernel half, and
    the file cookies are hashes (a pointer scheme would put every one of them in the kernel
    half; a 64-bit hash puts one in 2^8 there). The record holds 400 sleeps of uu_chain: at
    least 400 cookies, each in its cookie and its stack event, and their frames."""
    lo, hi = (int(a, 16) for a in (kallsyms[0], kallsyms[-1])) if len(kallsyms) >= 2 else (0, 0)
    ranges = iomem_ranges(iomem)
    image = [r for r in ranges if r[0].startswith("Kernel ")]
    ram = [r for r in ranges if r[0] == "System RAM"]
    ours = [e for e in events if e["event"] in ("user_unwind_cookie", "user_unwind_stack",
                                                "file_cache")]
    values_, file_cookies, bad = [], set(), []
    for e in ours:
        # A file_cache event's cookie is a file cookie (a hash, checked below), not an
        # unwind cookie.
        if e["event"] != "file_cache" and e["cookie"] is not None:
            values_.append(("cookie", e["cookie"]))
        for value, cookie in e["frames"]:
            values_.append(("frame", value))
            if cookie is not None and cookie > 1:
                file_cookies.add(cookie)
        if e["event"] == "file_cache":
            file_cookies.add(e["cookie"])
    for kind, v in values_ + [("file cookie", c) for c in file_cookies]:
        if lo <= v <= hi:
            bad.append(f"{kind} {v:#x} inside the kernel's symbols")
        elif any(first <= v <= last for _, first, last in image):
            bad.append(f"{kind} {v:#x} inside the kernel image's physical range")
        elif kind == "file cookie" and any(first <= v <= last for _, first, last in ram):
            bad.append(f"{kind} {v:#x} inside physical RAM")
        elif kind != "file cookie" and v >= KERNEL_HALF:
            bad.append(f"{kind} {v:#x} in the kernel half")
    high = sum(c >= KERNEL_HALF for c in file_cookies)
    check("no event field holds a kernel address",
          lo and len(image) >= 2 and ram and len(values_) >= 800 and len(file_cookies) >= 3
          and not bad and high < len(file_cookies) / 2,
          f"kallsyms {lo:#x}-{hi:#x}, iomem {len(image)} image and {len(ram)} RAM ranges, "
          f"{len(values_)} values, {len(file_cookies)} file cookies ({high} in the kernel "
          f"half): {bad[:3]}")


def check_hostile(events, hostile):
    """Each hostile file got its file_cache, with the build-id its image holds whole (none
    for the others), and the chain's return address in the kernel half came out raw (the
    unwinder ends the chain with the 0 it read after it)."""
    want = dict(line.split() for line in open(os.path.join(hostile, "expected")))
    got = {}
    for e in events:
        if e["event"] == "file_cache" and e.get("path", "").startswith("/hostile/"):
            got[e["path"][len("/hostile/"):]] = e["build_id"] or "-"
    wrong = [f"{n}: {got.get(n)} (want {w})" for n, w in want.items() if got.get(n) != w]
    check("hostile ELF files: the right build-id or none, for each", not wrong,
          f"{len(wrong)} of {len(want)}: {wrong[:4]}")
    stacks = [e for e in events if e["event"] == "user_unwind_stack" and e["comm"] == "uu_many"]
    # The kernel's frame-pointer walk records the 0 after it, the .eh_frame unwinder ends
    # the stack at it.
    tails = [s["frames"][-2:] if s["frames"][-1:] == [(0, 0)] else s["frames"][-1:] + [(0, 0)]
             for s in stacks]
    check("a return address in the kernel half comes out raw, with file cookie 0",
          tails and all(t == [(0xffffffff81000000, 0), (0, 0)] for t in tails), f"{tails[:3]}")


def check_named(events, exe, anon_names=True):
    """Frames in a named anonymous mapping and in the vdso resolve to their names; without
    anonymous VMA names in the kernel, the JIT frames are plain anonymous memory."""
    firsts = collections.Counter()
    wrong = []
    for stack, files in resolve(events):
        if stack["comm"] != "uu_named" or not stack["frames"]:
            continue
        f0 = files[0]
        name = f0["path"] if isinstance(f0, dict) else f0
        firsts[name] += 1
        if name == "[anon:uu_jit]":
            caller = exe.symbol(stack["frames"][1][0], True) if len(stack["frames"]) > 1 else None
            if caller != "uu_call_jit" or stack["frames"][0][0] % 4096 != 11:
                wrong.append(f"jit frame at {stack['frames'][0][0]:#x} called from {caller}")
    if not anon_names:
        print("# skipped (kernel without CONFIG_ANON_VMA_NAME): [anon:uu_jit] frames")
        check("vdso frames resolve to [vdso], unnamed JIT frames are anonymous memory",
              firsts["[vdso]"] == 5 and firsts["reserved"] == 5,
              f"innermost frames: {dict(firsts)}")
        return
    check("named anonymous mapping and vdso frames resolve to [anon:uu_jit] and [vdso]",
          firsts["[anon:uu_jit]"] == 5 and firsts["[vdso]"] == 5 and not wrong,
          f"innermost frames: {dict(firsts)}, {wrong[:2]}")


def check_instances(s):
    """What a reader of each instance sees (Documentation/user_unwind.rst, "Instances")."""
    def count(section, event, comm="uu_chain"):
        return [e for e in parse_trace(s[section]) if e["event"] == event and e["comm"] == comm]
    foo_cookies = count("INSTANCE_FOO", "user_unwind_cookie")
    foo_stacks = count("INSTANCE_FOO", "user_unwind_stack")
    foo_caches = [e for e in parse_trace(s["INSTANCE_FOO"]) if e["event"] == "file_cache"]
    top = [e for e in parse_trace(s["INSTANCE_TOP"]) if e["event"].startswith("user_unwind")]
    check("an event of one instance records cookies and stacks in the instance that "
          "enables user_unwind", len(foo_cookies) == 5 and len(foo_stacks) == 5
          and foo_caches and not top,
          f"foo: {len(foo_cookies)} cookies, {len(foo_stacks)} stacks, {len(foo_caches)} "
          f"file_cache; top: {len(top)} user_unwind events")
    cookies = collections.Counter(e["cookie"] for e in count("INSTANCE_BOTH", "user_unwind_cookie"))
    stacks = count("INSTANCE_BOTH", "user_unwind_stack")
    check("an event enabled in two instances gives each cookie twice and its stack once",
          len(cookies) == 5 and set(cookies.values()) == {2} and len(stacks) == 5,
          f"cookies {dict(cookies)}, {len(stacks)} stacks")


# New file_cache events one stack writes at most (src/files.rs: NEW_FILES_PER_STACK).
NEW_FILES_PER_STACK = 16


def check_many(events):
    """A stack of 41 files: its file_cache events spread over several stacks, at most
    NEW_FILES_PER_STACK a stack (first sightings, reminders and the repeats after it, all
    counted together), and the last stacks fully explained. A stack's file_cache events
    come between its cookie and it; those after it, before the next cookie, are its
    repeats, written when the first-sight cache began a new generation while the stack was
    written (src/stack.rs)."""
    mine = [e for e in events if e["comm"] == "uu_many"]
    per_stack, caches, repeats, resolved = [], 0, 0, []
    for e in mine:
        if e["event"] == "file_cache":
            caches += 1
        elif e["event"] == "user_unwind_stack":
            per_stack.append(caches)
            caches = 0
        elif e["event"] == "user_unwind_cookie" and per_stack:
            repeats += caches
            per_stack[-1] += caches
            caches = 0
    for stack, files in resolve(events):
        if stack["comm"] == "uu_many":
            resolved.append(sum(isinstance(f, dict) for f in files))
    stacks = [e["frames"] for e in mine if e["event"] == "user_unwind_stack"]
    frames = [len(f) for f in stacks]
    # Frame 0 is in uu_many, frames 1-40 in the 40 mappings, the next three in no mapping
    # (uu_many.c: UU_UNMAPPED at 0x1000); the unwinder may add the chain's final zero.
    unmapped = [f[41:44] for f in stacks]
    check("a 41-file stack writes at most 16 file_cache a stack, repeats included, then all",
          len(per_stack) == 6 and max(per_stack) <= NEW_FILES_PER_STACK and frames
          and min(frames) >= 44 and resolved[-1] == 41 and resolved[0] < 41,
          f"file_cache per stack {per_stack} ({repeats} repeated after them), frames "
          f"{frames}, resolved {resolved}")
    check("frames in no mapping are their raw address with file cookie 0",
          unmapped and all(u == [(0x1000, 0), (0x1008, 0), (0x1010, 0)] for u in unmapped),
          f"{unmapped[:2]}")


def check_broken_chains(s):
    """uu_many -e KIND: the syscall's address in uu_many, then the chain's three return
    addresses at offsets 16, 17 and 18 of libuutest.so's first page, and nothing after them,
    whether the chain loops back, points into the kernel or at an unmapped page."""
    for kind in ("loop", "kernel", "unmapped"):
        events = parse_trace(s[f"BROKEN_{kind}"])
        got = []
        for stack, files in resolve(events):
            if stack["comm"] != "uu_many":
                continue
            paths = [f["path"] if isinstance(f, dict) else f for f in files]
            got.append([(v, p) for (v, _), p in zip(stack["frames"], paths)])
        lib = "/usr/lib/libuutest.so"
        ok = len(got) == 3 and all(
            len(g) == 4 and g[0][1] == "/usr/bin/uu_many" and
            g[1:] == [(16, lib), (17, lib), (18, lib)] for g in got)
        check(f"a broken frame-pointer chain ({kind}) gives the unwinder's frames, no more",
              ok, f"{got[:2]}")


def check_filtered(s):
    events = parse_trace(s["FILTERED"])
    cookies = [e for e in events if e["event"] == "user_unwind_cookie"]
    stacks = [e for e in events if e["event"] == "user_unwind_stack" and e["comm"] == "uu_chain"]
    delta = int(values(s["UNRECORDED"]).get("delta", -1))
    check("cookie events no buffer takes are counted as cookies_unrecorded",
          not cookies and len(stacks) == 10 and delta >= 10,
          f"{len(cookies)} cookies, {len(stacks)} stacks, unrecorded +{delta}")


def check_memory(lines):
    """Thousands of files touched: the module's core plus what grew with the option on
    beyond the same workload's growth with it off stays within 4 MiB, and every file was
    seen (a file_cache each)."""
    v = values(lines)
    files, off, on, core, fc = (int(v.get(k, -1)) for k in (
        "files", "off_growth_kb", "on_growth_kb", "coresize", "file_cache_events"))
    held = core // 1024 + max(0, on - off)
    print(f"# memory over {files} files: module core {core // 1024} KiB, growth {on} KiB with "
          f"the option on, {off} KiB off, {fc} file_cache events")
    check(f"{files} files: the module holds at most 4 MiB (its core and any growth)",
          v.get("many_status") == "0" and files > 0 and core > 0 and fc >= files and
          held <= 4096, str(v))


def check_stats(lines):
    stats = {k.rstrip(":"): int(v) for k, v in (line.split() for line in lines if ": " in line)}
    print(f"# stats: {stats}")
    check("user_unwind_stats counts requests, stacks and file_cache events",
          stats.get("requests", 0) > 0 and stats.get("stacks", 0) > 0
          and stats.get("file_cache", 0) > 0 and "cookies_unrecorded" in stats
          and stats.get("file_cache_deferred", 0) > 0, str(stats))


def check_paths(events, deep_len):
    """A deleted executable keeps its mark; a path too long for the event is shortened
    visibly, at its start, keeping the file name."""
    paths = {e["comm"]: e["path"] for e in events if e["event"] == "file_cache"
             and "/" in e.get("path", "") and "uu_" in e["path"].rsplit("/", 1)[-1]}
    check("a deleted executable's file_cache path ends in (deleted)",
          paths.get("uu_gone") == "/tmp/uu_gone (deleted)", f"{paths}")
    check("control bytes in a path are escaped as in /proc/PID/maps",
          paths.get("uu_nl") == "/tmp/dir\\012forged: path=x/uu_nl", f"{paths}")
    deep = paths.get("uu_deep", "")
    check("a path longer than the event holds is shortened visibly",
          deep_len > 1100 and deep.startswith(".../") and deep.endswith("/uu_deep")
          and len(deep) < 1024, f"{deep[:80]}... ({len(deep)} bytes)")


def check_chain(events, exe, lib):
    cookies = [e for e in events if e["event"] == "user_unwind_cookie" and e["comm"] == "uu_chain"]
    stacks = [e for e in events if e["event"] == "user_unwind_stack" and e["comm"] == "uu_chain"]
    distinct = {e["cookie"] for e in cookies}
    check("one cookie per getppid call", len(distinct) == CHAIN_CALLS,
          f"{len(distinct)} distinct cookies for {CHAIN_CALLS} calls")
    by_cookie = collections.Counter(s["cookie"] for s in stacks)
    bad = [hex(c) for c in distinct if by_cookie[c] != 1]
    check("every cookie is followed by exactly one stack", not bad and distinct,
          f"cookies without exactly one stack: {bad[:5]}")
    order_ok = all(events.index(s) > min(events.index(c) for c in cookies
                                          if c["cookie"] == s["cookie"])
                   for s in stacks if s["cookie"] in distinct)
    check("each stack comes after its cookie", order_ok, "a stack precedes its cookie")
    wrong = []
    for s in stacks:
        fr = s["frames"]
        if len(fr) < len(CHAIN):
            wrong.append(f"{len(fr)} frames")
            continue
        names = [lib.symbol(fr[0][0])] + [exe.symbol(off, True) for off, _ in fr[1:len(CHAIN)]]
        libc, exec_c = fr[0][1], fr[1][1]
        if names != CHAIN:
            wrong.append(f"symbols {names}")
        elif libc in (0, 1) or exec_c in (0, 1) or libc == exec_c:
            wrong.append(f"file cookies {libc:x} {exec_c:x}")
        elif any(c != exec_c for _, c in fr[1:len(CHAIN)]):
            wrong.append("frames of one file with different cookies")
    check("stacks name main -> uu_a -> uu_b -> uu_c -> uu_lib_syscall", stacks and not wrong,
          f"{len(wrong)} of {len(stacks)} wrong, e.g. {wrong[:2]}")
    check("one file cookie per file for the whole run",
          len({s["frames"][0][1] for s in stacks}) == 1 and
          len({s["frames"][1][1] for s in stacks}) == 1, "file cookies vary")


def main():
    kernel = sys.argv[sys.argv.index("--kernel") + 1] if "--kernel" in sys.argv else "test"
    prog = subprocess.run(["bash", "-c", ". scripts/lib.sh; echo $PROG"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
    log = os.path.join(prog, f"e2e-console-{kernel}.log")
    # One folder a kernel: make check runs the two suites at once.
    hostile = os.path.join(prog, f"hostile-{kernel}")
    hostile_elf.main(hostile)
    hostile_tables = os.path.join(prog, f"hostile-cfi-{kernel}")
    hostile_cfi.main(hostile_tables)
    run = subprocess.run([os.path.join(ROOT, "scripts/run-guest.sh"), "--kernel", kernel,
                          "--log", log,
                          "--add", os.path.join(ROOT, "tests/guest/e2e.sh") + ":/bin/e2e.sh",
                          "--add", hostile + ":/hostile",
                          "--add", hostile_tables + ":/hostile-cfi",
                          "--", "/bin/e2e.sh"], capture_output=True, text=True,
                         # The whole suite: about 10 minutes on the debug kernel, beside
                         # another guest; a loaded machine needs more than run-guest's 900 s.
                         env={**os.environ,
                              "UU_GUEST_TIMEOUT": os.environ.get("UU_GUEST_TIMEOUT", "1800")})
    out = run.stdout
    with open(os.path.join(prog, f"e2e-output-{kernel}.txt"), "w") as f:
        f.write(out)
    s = sections(out)
    check("guest ran to the end", run.returncode == 0 and "END" in s,
          f"status {run.returncode}: {run.stderr[-2000:]}")
    if "END" not in s:
        return

    warning = clock_warning("\n".join(s["CLOCK"]))
    if warning:
        # The guest has one clock domain under TCG; a real reader should heed this.
        print(f"# {warning}")
    check("function_graph ran before the module was loaded (for lockdep's ftrace_lock -> "
          "tracepoints_mutex)", values(s["GRAPH"]).get("graph_tracer") == "function_graph",
          str(s["GRAPH"]))
    v = values(s["LOADFAIL"])
    check("insmod without tracefs fails with a message and leaves nothing behind",
          v.get("insmod_status") not in (None, "0") and v.get("in_modules") == "0"
          and v.get("events_dir") == "no" and int(v.get("message", 0)) >= 1, str(v))
    v = values(s["LOADFOREIGN"])
    check("insmod refuses an options path that is not tracefs's top instance's",
          v.get("tmpfs_status") not in (None, "0") and v.get("tmpfs_files") == "0"
          and v.get("bind_status") not in (None, "0") and v.get("bind_file") == "no"
          and v.get("in_modules") == "0" and int(v.get("message", 0)) >= 2, str(v))
    v = values(s["INSMOD"])
    check("insmod succeeds", v.get("insmod_status") == "0", str(v))
    check("events enabled before insmod (set_event :mod:) start requests once init is done",
          v.get("early_option") == "1" and int(v.get("early_cookies", 0)) > 0
          and int(v.get("early_stacks", 0)) > 0, str(v))
    if kernel == "debian":
        # The record comes from the KUnit suite, and Debian's kernel has no KUnit.
        print("# skipped on Debian's kernel (no CONFIG_KUNIT): a stack without frames")
    else:
        check("a stack without frames still gets its record (total=0)",
              v.get("empty_stack") == "1", str(v))
    with open(os.path.join(prog, f"kunit-{kernel}.log"), "w") as f:
        f.write("\n".join(s["KUNIT"]) + "\n")

    v = values(s["OPTION"])
    check("option file exists and starts at 0", v.get("exists") == "yes" and v.get("initial") == "0",
          str(v))
    check("bad writes are rejected and change nothing",
          "bad_write_accepted" not in v and v.get("after_bad") == "0", str(v))
    check("1 and 0 are accepted and read back",
          v.get("after_1") == "1" and v.get("after_0") == "0" and v.get("events_on") == "1", str(v))
    check("independent of the userstacktrace option", v.get("userstacktrace") == "0", str(v))
    check("bad writes while on change nothing", v.get("after_bad_1") == "1", str(v))
    check("concurrent writes leave the option and its events in one state",
          v.get("concurrent_consistent") == "yes" and v.get("after_concurrent_0") == "00", str(v))
    check("the option reads the events' state, and 1 switches them on again",
          v.get("after_events_off") == "0" and v.get("after_rewrite_1") == "1"
          and v.get("events_on_again") == "1", str(v))
    check("tracefs modes: option 0640, stats 0440 and not writable",
          v.get("mode") == "640" and v.get("stats_mode") == "440"
          and "stats_write_accepted" not in v, str(v))

    exe = Elf(os.path.join(prog, "uu_chain"))
    lib = Elf(os.path.join(prog, "libuutest.so"))
    chain = parse_trace(s["CHAIN"])
    check_chain(chain, exe, lib)
    check_chain_files(chain, prog)
    check_steady(parse_trace(s["STEADY"]))
    check_dlopen("dlopen/dlclose", parse_trace(s["DLOPEN"]), prog)
    check_dlopen("dlopen/dlclose, the option switched on and off",
                 parse_trace(s["DLOPEN_TOGGLED"]), prog, min_stacks=20)
    check_file_cache("tracing off, buffer cleared, on: file_cache precedes every cookie",
                     parse_trace(s["REOPEN"]), "uu_chain", switched_on=True)
    check_instances(s)
    check_many(parse_trace(s["MANY"]))
    check_hostile(parse_trace(s["HOSTILE"]), hostile)
    check_broken_chains(s)
    check_filtered(s)
    anon_names = values(s["ANON_NAMES"]).get("anon_names") == "0"
    check_named(parse_trace(s["NAMED"]), Elf(os.path.join(prog, "uu_named")), anon_names)
    check_paths(parse_trace(s["PATHS"]), int(values(s["PATHLEN"]).get("deep_path_length", 0)))
    statuses = {name: values(s[name]).get("status")
                for name in ("CHAIN", "STEADY", "DLOPEN", "DLOPEN_TOGGLED",
                             "MANY", "NAMED", "PATHS", "FILTERED")}
    check("the test programs ran and succeeded", set(statuses.values()) == {"0"}, statuses)
    check_file_cache("a late trace-cmd record finds a file_cache for every cookie",
                     parse_trace(s["LATE"]), "uu_chain", reader_start=True)

    kthreads = {int(p) for p in s["KTHREADS"] if p.strip().isdigit()}
    events = parse_trace(s["ALL"])
    cookies = [e for e in events if e["event"] == "user_unwind_cookie"]
    from_kthreads = [e for e in cookies if e["pid"] in kthreads or e["pid"] == 0]
    check("kernel threads produce no cookies", cookies and not from_kthreads,
          f"{len(cookies)} cookies, {len(from_kthreads)} from kernel threads, "
          f"e.g. {[e['comm'] for e in from_kthreads[:3]]}")
    check_no_kernel_addresses(events, s["KALLSYMS"], s["IOMEM"])
    identity.check_all(sys.modules[__name__], s, prog)
    v = values(s["STATS_WRITE"])
    check("writes to user_unwind_stats fail and change nothing",
          "stats_write" not in v and v.get("stats_unchanged") == "yes"
          and v.get("stats_mode") == "440", str(v))
    stacks = {e["cookie"] for e in events if e["event"] == "user_unwind_stack"}
    check("stacks of every task on every CPU carry a requested cookie",
          stacks and stacks <= {e["cookie"] for e in cookies},
          f"{len(stacks - {e['cookie'] for e in cookies})} stacks without a cookie")
    check("events were recorded on at least two CPUs",
          len({e["cpu"] for e in events}) >= 2, "one CPU only")

    v = values(s["TRACECMD"])
    report = s["REPORT"]
    check("trace-cmd record succeeds", v.get("record_status") == "0", str(v))
    failed = [line for line in report if "FAILED TO PARSE" in line]
    rc = sum("user_unwind_cookie:" in line and "uu_chain" in line for line in report)
    rs = [line for line in report if "user_unwind_stack:" in line and "uu_chain" in line]
    check("trace-cmd report parses every event", not failed and rs,
          f"{len(failed)} unparsed, {len(rs)} stacks: {failed[:2]}")
    check("trace-cmd report shows one cookie per call", rc == 20, f"{rc} cookies for 20 calls")
    stacks = [e for e in parse_trace(report) if e["event"] == "user_unwind_stack"
              and e["comm"] == "uu_chain"]
    total = [int(re.search(r"total=(\d+)", e["rest"]).group(1)) for e in stacks]
    check("trace-cmd report shows every frame of the stack fields",
          stacks and all(len(e["frames"]) == t >= len(CHAIN) for e, t in zip(stacks, total)),
          rs[:1])

    check_stats(s["STATS"])
    check_memory(s["MEMORY"])
    v = values(s["KEYS"])
    check("the same open file gets another cookie under another load of the module",
          v.get("cookie1") and v.get("cookie2") and v["cookie1"] != v["cookie2"], str(v))
    v = values(s["CYCLES"])
    check("insmod/rmmod cycles under load", v.get("rmmod_status") == "0" and
          v.get("cycles_done") == "6", str(v))
    check("unload leaves nothing behind",
          v.get("leftover_option") == "no" and v.get("leftover_events") == "no", str(v))
    unwind.check(s, prog, hostile=hostile_tables)
    review.check(s, prog)
    # The console, with the whole kernel log the guest prints at the end (tests/splat.py).
    with open(log, errors="replace") as f:
        found = splats(f.read())
    check("the console and the kernel log have no splat", not found, found[:5])


if __name__ == "__main__":
    main()
    print(f"e2e: {results.count(True)} passed, {results.count(False)} failed")
    sys.exit(0 if results and all(results) else 1)
