# SPDX-License-Identifier: GPL-2.0
"""Host half of the .eh_frame unwinder's end-to-end tests (tests/guest/unwind.sh): every
stack of the test programs built without frame pointers (tests/prog/uu_nofp.c) must be
exactly its known chain, symbolized against the binaries' own symbols (libc's and ld.so's
from their debug files, libc6-dbg), at least 95 % of them complete; bash's (a Debian
binary) must end in __libc_start_call_main -> __libc_start_main -> _start.

Run by tests/e2e.py (unwind.check), or alone on a saved guest output:
    python3 tests/unwind.py OUTPUT.txt PROG_DIR
"""
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_cfi  # noqa: E402

START = ["main", "__libc_start_call_main", "__libc_start_main", "_start"]
# The outermost frame of a complete stack: a program's _start, ld.so's (whose
# _dl_start_user calls the libraries' constructors), or a thread's start.
ROOTS = {"_start", "_dl_start_user", "clone3", "__clone3", "__clone"}
CHAINS = {
    "UNWIND_CHAIN": ["getppid", "nf_c", "nf_b", "nf_a"] + START,
    "UNWIND_THREAD": ["getppid", "nf_t1", "nf_thread", "start_thread", "clone3"],
    "UNWIND_SIGNAL": ["getppid", "nf_h1", "nf_handler", "__restore_rt", "kill", "nf_sig"]
    + START,
    # main -> nf_rec(100) -> ... -> nf_rec(0) -> getppid: 101 frames of nf_rec.
    "UNWIND_DEEP": ["getppid"] + ["nf_rec"] * 101 + START,
    # The IFUNC resolver, run by ld.so's lazy binding from the PLT entry of nf_ifunc.
    # (the trampoline ld.so picks for the CPU: QEMU's TCG has no XSAVEC).
    "UNWIND_PLT": ["nf_resolver", "_dl_fixup",
                   ("_dl_runtime_resolve_xsavec", "_dl_runtime_resolve_xsave",
                    "_dl_runtime_resolve_fxsave"), "nf_plt"] + START,
    "UNWIND_DL": ["getppid", "nf_dl_fn", "nf_dl"] + START,
}
# libuunofpdl.so and libuunofpdl2.so in turn, each where the other was closed.
CHAINS["UNWIND_DLSWAP"] = CHAINS["UNWIND_DL"]
# What the guest's files are on the host: the test programs, and the host's own libraries
# (build-initramfs.sh copies them).
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LDSO = "/lib64/ld-linux-x86-64.so.2"
GUEST_PROG = {"/usr/bin/uu_nofp": "uu_nofp", "/usr/lib/libuunofp.so": "libuunofp.so",
              "/usr/lib/libuunofpdl.so": "libuunofpdl.so",
              "/usr/lib/libuunofpdl2.so": "libuunofpdl2.so",
              "/usr/bin/uu_nofp_np": "uu_nofp_np", "/usr/bin/uu_nofp_np2": "uu_nofp_np2",
              "/usr/bin/uu_hostile_cfi": "uu_hostile_cfi"}


def _run(*args):
    return subprocess.run(args, capture_output=True, text=True).stdout


class Symbols:
    """File offset -> the names of the function there: program headers from the file,
    symbols from its debug file if libc6-dbg has one (found by build-id), else its own
    (.symtab, then .dynsym), a symbol without a size extending to the next one; and
    `_start` at the entry point of a binary stripped of it (Debian's bash)."""

    def __init__(self, path):
        self.segments = []
        for line in _run("readelf", "-lW", path).splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                self.segments.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
        m = re.search(r"Build ID: ([0-9a-f]+)", _run("readelf", "-n", path))
        sources = [path]
        if m:
            debug = f"/usr/lib/debug/.build-id/{m.group(1)[:2]}/{m.group(1)[2:]}.debug"
            if os.path.exists(debug):
                sources.insert(0, debug)
        syms = []
        for src in sources:
            for flags in ([], ["-D"]):
                for line in _run("nm", *flags, "-S", "--defined-only", src).splitlines():
                    f = line.split()
                    if len(f) == 4 and f[2] in "TtWw":
                        syms.append((int(f[0], 16), int(f[1], 16), f[3]))
                    elif len(f) == 3 and f[1] in "TtWw":
                        syms.append((int(f[0], 16), 0, f[2]))
        m = re.search(r"Entry point address:\s+0x([0-9a-f]+)", _run("readelf", "-h", path))
        if m and not any(n == "_start" for _, _, n in syms):
            syms.append((int(m.group(1), 16), 0x26, "_start"))
        starts = sorted({a for a, _, _ in syms})
        self.symbols = []
        for addr, size, name in syms:
            if not size:
                later = [s for s in starts if s > addr]
                size = (later[0] - addr) if later else 0x40
            self.symbols.append((addr, size, name.split("@")[0]))

    def names(self, offset, return_address):
        for off, vaddr, size in self.segments:
            if off <= offset < off + size:
                v = offset - off + vaddr - (1 if return_address else 0)
                return {n for a, s, n in self.symbols if a <= v < a + s}
        return set()


# The file UNWIND_REWRITE rewrites in place with either build: told apart by build-id; and
# the same file in UNWIND_OVERLAY's overlay mount.
REWRITTEN = "/tmp/uulib/libuunofpdl.so"
OVERLAID = "/tmp/ovl/merged/libuunofpdl.so"
REWRITE_BUILDS = ("libuunofpdl.so", "libuunofpdl2.so")


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", _run("readelf", "-n", path))
    return m.group(1) if m else None


def host_path(path, prog):
    if path.startswith((REWRITTEN + "#", OVERLAID + "#")):
        want = path.split("#", 1)[1]
        for name in REWRITE_BUILDS:
            if build_id(os.path.join(prog, name)) == want:
                return os.path.join(prog, name)
        return None
    if path in GUEST_PROG:
        return os.path.join(prog, GUEST_PROG[path])
    return path if os.path.exists(path) else None


def stacks(events):
    """Whole stacks, in order: (comm, [(offset, path)]), their chunks joined by cookie and
    each frame's cookie resolved through the latest file_cache before it."""
    paths, parts, order, comm = {}, collections.defaultdict(list), [], {}
    for e in events:
        if e["event"] == "file_cache" and "path" in e:
            paths[e["cookie"]] = e["path"] + ("#" + e["build_id"]
                                              if e["path"] in (REWRITTEN, OVERLAID)
                                              else "")
        elif e["event"] == "user_unwind_stack":
            m = re.search(r"frames (\d+)-\d+ of \d+", e["rest"])
            start = int(m.group(1)) if m else 0
            if e["cookie"] not in parts:
                order.append(e["cookie"])
            comm[e["cookie"]] = e["comm"]
            parts[e["cookie"]].append((start, [(off, paths.get(c) if c > 1 else None)
                                               for off, c in e["frames"]]))
    out = []
    for c in order:
        frames = []
        for _, chunk in sorted(parts[c], key=lambda p: p[0]):
            frames += chunk
        out.append((comm[c], frames))
    return out


def truncations(events):
    """cookie -> (frames, reason) of every user_unwind_truncated event."""
    out = {}
    for e in events:
        m = re.search(r"frames=(\d+) reason=(\w+)", e["rest"])
        if e["event"] == "user_unwind_truncated" and m:
            out[e["cookie"]] = (int(m.group(1)), m.group(2))
    return out


def cookies(events, comm):
    """The cookies of the whole stacks of `comm` (of every stack: None), in the order of
    stacks()."""
    seen = []
    for e in events:
        if e["event"] == "user_unwind_stack" and e["cookie"] not in seen:
            seen.append(e["cookie"])
    return [c for c, (who, _) in zip(seen, stacks(events)) if comm is None or who == comm]


def symbolize(frames, prog, cache):
    out = []
    for i, (off, path) in enumerate(frames):
        hp = host_path(path, prog) if path else None
        if not hp:
            out.append({f"?{path or 'anon'}+{off:x}"})
            continue
        if hp not in cache:
            cache[hp] = Symbols(hp)
        # A return address at a function's first byte is a signal trampoline's
        # (__restore_rt, which the kernel's signal frame returns to): look it up as is.
        out.append(cache[hp].names(off, i > 0) or cache[hp].names(off, False)
                   or {f"?{os.path.basename(hp)}+{off:x}"})
    return out


def show(names):
    return [sorted(n)[0] for n in names]


def match(want, names):
    """Whether a frame's names are the chain's entry `want` (a name or alternatives)."""
    return any(w in names for w in (want if isinstance(want, tuple) else (want,)))


def check_overlay(check_fn, s, parse_trace, values, prog, cache):
    """UNWIND_OVERLAY: a layer's file rewritten underneath an overlay mount is a new file:
    the stacks through its new content are complete, under its new build-id."""
    v = values(s.get("UNWIND_OVERLAY_MOUNT", []))
    check_fn("unwinder: overlay: the library's layer is mounted", v.get("status") == "0", str(v))
    builds = {name: build_id(os.path.join(prog, name)) for name in REWRITE_BUILDS}
    for section, n, build in (("UNWIND_OVERLAY_V1", 10, REWRITE_BUILDS[0]),
                              ("UNWIND_OVERLAY_V2", 20, REWRITE_BUILDS[1])):
        events = parse_trace(s.get(section, []))
        check_chain(check_fn, f"overlay: {section}", events, CHAINS["UNWIND_DL"], prog, cache,
                    min_stacks=n)
        seen = {e["build_id"] for e in events
                if e["event"] == "file_cache" and e.get("path") == OVERLAID}
        check_fn(f"unwinder: overlay: {section}'s file_cache names {build}'s build-id",
                 seen == {builds[build]}, f"{seen} != {builds[build]}")


def check_chain(check, name, events, chain, prog, cache, comm="uu_nofp", min_stacks=10,
                keep=None):
    """Every stack of `comm` (a name or a tuple of them; with `keep`, those whose frames it
    keeps) is `chain`, or the chain cut short with its user_unwind_truncated."""
    comms = comm if isinstance(comm, tuple) else (comm,)
    mine = [(c, f) for c, (who, f) in zip(cookies(events, None), stacks(events))
            if who in comms and (keep is None or keep(f))]
    got = [f for _, f in mine]
    cut = truncations(events)
    complete, wrong = 0, []
    for cookie, frames in mine:
        names = symbolize(frames, prog, cache)
        ok = len(names) <= len(chain) and all(match(w, n) for w, n in zip(chain, names))
        if ok and len(names) == len(chain) and cookie not in cut:
            complete += 1
        elif not ok:
            wrong.append(show(names))
        elif cut.get(cookie, (None,))[0] != len(names):
            wrong.append(f"short of the chain without its user_unwind_truncated: {show(names)}")
    check(f"unwinder: {name}: every stack is the known chain {chain[:6]}...",
          len(got) >= min_stacks and not wrong,
          f"{len(got)} stacks, {len(wrong)} wrong, e.g. {wrong[:2]}")
    check(f"unwinder: {name}: at least 95 % of the stacks are complete",
          got and complete >= 0.95 * len(got), f"{complete} of {len(got)} complete")


def check_bash(check, events, prog, cache):
    """bash is stripped: only its entry point (_start) has a name; its stacks must end in
    libc's start, or, before main, in ld.so's. The stacks of its pid before the exec (the
    shell's child, in busybox) are left out."""
    bash = "/bin/bash"
    got = [f for c, f in stacks(events)
           if c == "bash" and f and all(p in (bash, LIBC, LDSO) for _, p in f)]
    tails = (["__libc_start_call_main", "__libc_start_main", "_start"],
             ["_dl_start", "_start"])
    complete, wrong = 0, []
    for frames in got:
        names = symbolize(frames, prog, cache)
        unknown = [n for (_, p), n in zip(frames, names)
                   if p != bash and all(x.startswith("?") for x in n)]
        ends = any(len(names) > len(t) and all(w in n for w, n in zip(t, names[-len(t):]))
                   for t in tails)
        if ends and not unknown:
            complete += 1
        else:
            wrong.append(show(names))
    check("unwinder: Debian's bash: stacks end in __libc_start_call_main -> "
          "__libc_start_main -> _start (ld.so's _start before main), at least 95 % of them",
          len(got) >= 20 and complete >= 0.95 * len(got),
          f"{complete} of {len(got)} complete, e.g. {wrong[:2]}")


def check_busybox(check, events):
    """Debian's busybox-static has no .eh_frame_hdr: the module makes its table from its
    .eh_frame section. That section has FDEs for the libc linked in, none for busybox's own
    code (620 KB of its 1.5 MB), which has no frame pointers either. So the stacks wholly in
    busybox (its shell's, the test's own shell's) must go past their first frame (a libc
    function, by its FDE: before, they ended there), at least 95 % of them, and one cut
    short must end only at a frame no FDE covers."""
    busybox = "/bin/busybox"
    cut = truncations(events)
    got = [(c, f) for c, (_, f) in zip(cookies(events, None), stacks(events))
           if f and all(p == busybox for _, p in f)]
    loads = [(int(f[1], 16), int(f[2], 16), int(f[4], 16))
             for f in (line.split() for line in _run("readelf", "-lW", busybox).splitlines())
             if f and f[0] == "LOAD"]
    fdes = [(int(a, 16), int(b, 16)) for a, b in
            re.findall(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                       _run("readelf", "-wf", busybox))]

    def covered(i, off):
        vaddr = next((off - o + v for o, v, n in loads if o <= off < o + n), None)
        pc = vaddr - 1 if vaddr is not None and i > 0 else vaddr
        return pc is not None and any(a <= pc < b for a, b in fdes)

    deeper = sum(1 for _, f in got if len(f) >= 2)
    wrong = [(cut[c], f"{f[-1][0]:x}") for c, f in got
             if c in cut and covered(len(f) - 1, f[-1][0])]
    check("unwinder: busybox-static (no .eh_frame_hdr): its stacks go past their first frame "
          "(at least 95 % of them), and end cut short only where no FDE covers a frame",
          len(fdes) > 1000 and len(got) >= 20 and deeper >= 0.95 * len(got) and not wrong,
          f"{len(fdes)} FDEs; {deeper} of {len(got)} stacks past their first frame, "
          f"{len(got) - len([c for c, _ in got if c in cut])} complete; cut at a frame an FDE "
          f"covers: {wrong[:3]}")


def nm_address(path, name):
    for line in _run("nm", path).splitlines():
        f = line.split()
        if len(f) == 3 and f[2] == name:
            return int(f[0], 16)
    return None


def check_swap_and_exec(check_fn, s, parse_trace, values, prog, cache):
    """UNWIND_DLSWAP: both libraries seen, one loaded where the other was closed (the
    stacks themselves are checked with CHAINS). UNWIND_EXEC: the two programs load at the
    same addresses with their functions elsewhere (ground truth from their files), and the
    stacks before and after the exec, one process, are each exactly the chain."""
    events = parse_trace(s.get("UNWIND_DLSWAP", []))
    libs = {e["path"] for e in events if e["event"] == "file_cache"
            and e.get("path", "").startswith("/usr/lib/libuunofpdl")}
    base = values(s.get("UNWIND_DLSWAP_BASE", [])).get("dlswap", "")
    m = re.match(r"same_base (\d+) of (\d+)", base)
    check_fn("unwinder: UNWIND_DLSWAP: both library files were unwound, most rounds at the "
             "address the other one had",
             libs == {"/usr/lib/libuunofpdl.so", "/usr/lib/libuunofpdl2.so"}
             and m and 2 * int(m.group(1)) >= int(m.group(2)), f"{libs}, {base!r}")
    one, two = (os.path.join(prog, n) for n in ("uu_nofp_np", "uu_nofp_np2"))
    types = {re.search(r"Type:\s+(\w+)", _run("readelf", "-h", p)).group(1) for p in (one, two)}
    moved = [nm_address(one, f) != nm_address(two, f) for f in ("nf_a", "nf_b", "nf_c")]
    check_fn("unwinder: UNWIND_EXEC's programs load at one fixed address, their nf_a, nf_b "
             "and nf_c elsewhere", types == {"EXEC"} and all(moved), f"{types} {moved}")
    status = values(s.get("UNWIND_EXEC", [])).get("status")
    check_fn("unwinder: UNWIND_EXEC ran", status == "0", f"status {status}")
    # The trace names a task by its comm when read, after the exec: the stacks of each
    # program are told apart by the file of their frames.
    events = parse_trace(s.get("UNWIND_EXEC", []))
    pids = {e["pid"] for e in events if e["event"] == "user_unwind_stack"}
    check_fn("unwinder: UNWIND_EXEC: one process before and after its exec", len(pids) == 1,
             str(pids))
    for exe in ("uu_nofp_np", "uu_nofp_np2"):
        path = "/usr/bin/" + exe
        check_chain(check_fn, f"exec: {exe}", events, CHAINS["UNWIND_CHAIN"], prog, cache,
                    comm=("uu_nofp_np", "uu_nofp_np2"), min_stacks=20,
                    keep=lambda f, path=path: path in [p for _, p in f])


def check(s, prog, check_fn=None, parse_trace=None, values=None, hostile=None):
    # tests/e2e.py's check, parse_trace and values: it runs as __main__, or imported.
    main = sys.modules.get("e2e") or sys.modules["__main__"]
    check_fn = check_fn or main.check
    parse_trace = parse_trace or main.parse_trace
    values = values or main.values
    cache = {}
    v = values(s.get("UNWIND_LOAD", []))
    check_fn("unwinder: the module loads with the .eh_frame unwinder by default",
             v.get("insmod_status") == "0" and v.get("unwinder") == "eh_frame", str(v))
    for section, chain in CHAINS.items():
        events = parse_trace(s.get(section, []))
        status = values(s.get(section, [])).get("status")
        check_fn(f"unwinder: {section} ran", status == "0", f"status {status}")
        check_chain(check_fn, section, events, chain, prog, cache,
                    min_stacks=5 if section in ("UNWIND_DEEP", "UNWIND_PLT") else 20)
    events = parse_trace(s.get("UNWIND_REWRITE", []))
    check_fn("unwinder: UNWIND_REWRITE ran", values(s.get("UNWIND_REWRITE", [])).get(
        "status") == "0", str(values(s.get("UNWIND_REWRITE", []))))
    check_chain(check_fn, "a library rewritten in place between runs", events,
                CHAINS["UNWIND_DL"], prog, cache)
    versions = {(e["cookie"], e["build_id"]) for e in events
                if e["event"] == "file_cache" and e.get("path") == REWRITTEN}
    check_fn("unwinder: each content of the rewritten file has its own cookie, both builds seen",
             len({c for c, _ in versions}) >= 6 and len({b for _, b in versions}) == 2,
             f"{len(versions)} (cookie, build-id) pairs: {sorted(versions)[:8]}")
    check_overlay(check_fn, s, parse_trace, values, prog, cache)
    check_swap_and_exec(check_fn, s, parse_trace, values, prog, cache)
    check_bash(check_fn, parse_trace(s.get("UNWIND_BASH", [])), prog, cache)
    check_busybox(check_fn, parse_trace(s.get("UNWIND_BUSYBOX", [])))
    if hostile is None:
        # Alone on a saved output: the generator's expectations, written again.
        hostile = os.path.join(prog, "hostile-cfi-recheck")
        hostile_cfi.main(hostile)
    hostile_cfi.check(check_fn, s, prog, parse_trace, values, sys.modules[__name__], hostile)
    events = parse_trace(s.get("UNWIND_LIMIT", []))
    got, cut = stacks(events), truncations(events)
    deep = [(c, f) for c, (who, f) in zip(cookies(events, "uu_nofp"), got) if who == "uu_nofp"]
    check_fn("unwinder: a stack deeper than 511 frames is cut there and says so "
             "(user_unwind_truncated reason=limit)",
             deep and all(len(f) == 511 and cut.get(c) == (511, "limit") for c, f in deep),
             f"{[(len(f), cut.get(c)) for c, f in deep]}")
    v = values(s.get("UNWIND_SWITCH", []))
    back = values(s.get("UNWIND_SWITCH_BACK", []))
    fp = [f for c, f in stacks(parse_trace(s.get("UNWIND_FP", []))) if c == "uu_nofp"]
    short = [f for f in fp if len(f) < len(CHAINS["UNWIND_CHAIN"])]
    check_fn("unwinder: unwinder=fp selects the kernel's frame-pointer stack, and back",
             v.get("bad_value") == "refused" and v.get("unwinder_fp") == "fp"
             and back.get("unwinder_back") == "eh_frame" and fp and short,
             f"{v} {back}: {len(short)} of {len(fp)} stacks short of the chain")
    stats = {k.rstrip(":"): int(x) for k, x in (line.split() for line in s.get("UNWIND_STATS", [])
                                                   if ": " in line)}
    print(f"# unwinder stats: { {k: x for k, x in stats.items() if k.startswith('unwind')} }")
    check_fn("unwinder: stacks counted, warm rows reused",
             stats.get("unwind_stacks", 0) > 0 and stats.get("unwind_cfi_frames", 0)
             > 4 * stats.get("unwind_row_misses", 1), str(stats))
    check_fn("unwinder: the module unloads", values(s.get("UNWIND_UNLOAD", [])).get(
        "rmmod_status") == "0", str(s.get("UNWIND_UNLOAD")))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import e2e
    with open(sys.argv[1]) as f:
        secs = e2e.sections(f.read())
    check(secs, sys.argv[2], e2e.check, e2e.parse_trace, e2e.values)
    print(f"unwind: {e2e.results.count(True)} passed, {e2e.results.count(False)} failed")
    sys.exit(0 if all(e2e.results) else 1)
