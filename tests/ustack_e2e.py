#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""End-to-end test of tools/ustack.

Boots the guest once with tests/guest/ustack.sh: trace-cmd records the test programs in
each file format (v7 zstd, v7 uncompressed, v6, the global clock, the time of day with
--date) and prints its own
report of each, with and without the libtraceevent plugin. Then, on the host:
- the reader's oracle and plugin tests (tools/ustack/tests) run on these fresh files;
- the symbolized stacks of uu_chain must be exactly its known call chain, each frame at
  the source line of its call, found in the sources by text (tests/prog/uu_chain.c,
  uu_lib.c), and libc's frame named from libc6-dbg with llvm-symbolizer's file:line;
- kstack.dat (-T, sched_switch, uu_chain and uu_offcpu): every sample's kernel frames are
  trace-cmd report's naming of its event's kernel_stack, frame for frame, and uu_offcpu's
  off-CPU time per function is what the program measured around its calls;
- ustack record itself, run in the guest (the host binary, its libraries with it) on the
  real module and trace-cmd: on a command with -e, with -T --off-cpu, and on a running
  process with -p; each trace.dat is read back with complete stacks;
- ustack top, run in the guest beside uu_top (60:30:10 of its time and calls in hot_60,
  hot_30 and hot_10): its one frame after 3 s names the three with their self and children
  shares within 10 points of those, by the default timer event (on-CPU time) for its comm
  and by raw_syscalls:sys_enter (calls) for its pid; --off-cpu ended by SIGTERM; and every
  tracefs setting it changed (the option, the events, their filters, the buffer size, the
  clock) reads afterwards as before;
- uu_nofp, built without frame pointers, unwound by the module's .eh_frame unwinder: its
  complete stack, from _start through __libc_start_main, main, nf_a, nf_b and nf_c to
  getppid in libc, each of its own frames at the source line of its call (found by text in
  tests/prog/uu_nofp.c), and every frame, libc's too, named and placed as llvm-symbolizer
  names and places it.
Prints one "ok"/"not ok" line per check and "ustack-e2e: N passed, M failed".
"""
import base64
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from symbolize import Elf  # noqa: E402
from splat import splats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = subprocess.run(["bash", "-c", ". scripts/lib.sh; echo $PROG"], cwd=ROOT,
                      capture_output=True, text=True, check=True).stdout.strip()
USTACK = os.path.join(ROOT, "tools/ustack/target/release/ustack")
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
results = []


def check(name, ok, why=""):
    results.append(bool(ok))
    print(("ok - " if ok else "not ok - ") + name + ("" if ok else f": {why}"))
    sys.stdout.flush()


def line_of(path, pattern):
    """The 1-based line of the first line of `path` matching `pattern`."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if re.search(pattern, line):
                return n
    raise SystemExit(f"{path}: no line matches {pattern}")


def llvm_symbolizer(path, vaddr):
    """(function, file:line) of the outermost function at vaddr, by LLVM's symbolizer
    (binutils 2.40's addr2line names the wrong file for DWARF 5 code from headers)."""
    out = subprocess.run(["llvm-symbolizer-19", f"--obj={path}", hex(vaddr)], check=True,
                         capture_output=True, text=True).stdout.strip().split("\n")
    func, loc = out[-2], out[-1].rsplit(":", 1)[0]
    return func, os.path.basename(loc)


def expected_chain():
    """uu_chain's stack, root first, as `ustack --folded --lines` must print it."""
    src = os.path.join(ROOT, "tests/prog")
    chain = [
        ("main", "uu_chain.c", line_of(f"{src}/uu_chain.c", r"sum \+= uu_a\(\);")),
        ("uu_a", "uu_chain.c", line_of(f"{src}/uu_chain.c", r"return uu_b\(\) \+ 1;")),
        ("uu_b", "uu_chain.c", line_of(f"{src}/uu_chain.c", r"return uu_c\(\) \+ 1;")),
        ("uu_c", "uu_chain.c", line_of(f"{src}/uu_chain.c", r"return uu_lib_syscall\(")),
        # The innermost frame is the instruction after the syscall, still the asm's line.
        ("uu_lib_syscall", "uu_lib.c", line_of(f"{src}/uu_lib.c", r'asm volatile\("syscall"')),
    ]
    return [f"{f} ({file}:{line})" for f, file, line in chain]


def llvm_labels(path, vaddr):
    """The labels `ustack --folded --lines` gives the code at vaddr, root first, from
    llvm-symbolizer: the function, then the functions inlined into it marked _[i], each with
    the base name of its file and its line (none where the file is unknown)."""
    out = subprocess.run(["llvm-symbolizer-19", "--inlining", f"--obj={path}", hex(vaddr)],
                         check=True, capture_output=True, text=True).stdout.strip().split("\n")
    pairs = list(zip(out[0::2], out[1::2]))
    labels = []
    for i, (func, loc) in enumerate(reversed(pairs)):
        file, line = loc.split(":")[:2]
        label = func + ("_[i]" if i > 0 else "")
        if file != "??" and line != "0":
            label += f" ({os.path.basename(file)}:{line})"
        labels.append(label)
    return labels


def norm_label(label):
    """A function's name as both tools agree on it: llvm-symbolizer may give the symbol
    table's name where the debug info has glibc's internal one, the same function at the
    same line: the versioned alias (__libc_start_main@GLIBC_2.2.5 for
    __libc_start_main_impl) and the exported name (getppid for __GI_getppid)."""
    name, _, loc = label.partition(" (")
    name = name.split("@")[0].removesuffix("_impl").removeprefix("__GI_")
    return name + (f" ({loc}" if loc else "")


def check_nofp(work):
    """uu_nofp's complete stack through libc, without frame pointers."""
    src = os.path.join(ROOT, "tests/prog/uu_nofp.c")
    own = [f"{f} (uu_nofp.c:{line_of(src, pat)})" for f, pat in (
        ("main", r"sum \+= nf_a\(\);"),
        ("nf_a", r"return nf_b\(\) \+ 1;"),
        ("nf_b", r"return nf_c\(\) \+ 1;"),
        ("nf_c", r"return getppid\(\) \+ 1;"))]
    trace = f"{work}/nofp.dat"
    run = subprocess.run([USTACK, "--folded", "-", "--lines", "--map", f"/usr/bin={PROG}",
                          "--map", f"/usr/lib={PROG}", trace], capture_output=True, text=True)
    ours = [line.rsplit(" ", 1) for line in run.stdout.splitlines() if "uu_nofp.c" in line]
    check("nofp.dat: one stack for uu_nofp's 20 calls",
          len(ours) == 1 and ours[0][1] == "20", f"{ours}\n{run.stderr}")
    check("nofp.dat: nothing unresolved", "unresolved: 0 frames" in run.stderr, run.stderr)
    if len(ours) != 1:
        return
    frames = ours[0][0].split(";")
    print(f"# nofp.dat: {ours[0][0]}")
    at = [i for i in range(len(frames)) if frames[i:i + len(own)] == own]
    check("nofp.dat: main -> nf_a -> nf_b -> nf_c at the lines of their calls", at,
          f"{frames} has no {own}")
    # Every frame, from the trace's (file, offset): the same stack unsymbolized.
    raw = subprocess.run([USTACK, "--folded", "-", "--sysroot", "/nonexistent", "--sysroot-only", trace],
                         capture_output=True, text=True).stdout.splitlines()
    raw = [line.rsplit(" ", 1)[0].split(";") for line in raw
           if line.rsplit(" ", 1)[1] == "20" and "uu_nofp+0x" in line]
    check("nofp.dat: the stack unsymbolized", len(raw) == 1, raw)
    if len(raw) != 1:
        return
    bid = subprocess.run(["readelf", "-n", LIBC], capture_output=True,
                         text=True).stdout.split("Build ID: ")[1].split()[0]
    objs = {"libc.so.6": (Elf(LIBC), f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"),
            "uu_nofp": (Elf(f"{PROG}/uu_nofp"), f"{PROG}/uu_nofp")}
    want = [frames[0]]
    for i, f in enumerate(raw[0][1:], 1):
        m = re.fullmatch(r"(.+)\+0x([0-9a-f]+)", f)
        if not m or m.group(1) not in objs:
            want.append(f"(a frame in {f})")
            continue
        elf, obj = objs[m.group(1)]
        innermost = i == len(raw[0]) - 1
        want += llvm_labels(obj, elf.vaddr(int(m.group(2), 16)) - (0 if innermost else 1))
    check("nofp.dat: every frame as llvm-symbolizer names it, _start to getppid",
          [norm_label(f) for f in frames] == [norm_label(f) for f in want]
          and frames[1].startswith("_start") and "getppid" in frames[-1]
          and any(f.startswith("__libc_start_call_main ") for f in frames),
          f"\n  ustack:          {frames}\n  llvm-symbolizer: {want}")


def check_record(out):
    """ustack record run in the guest on the real module and trace-cmd."""
    runs = {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in re.finditer(
        r"^=== USTACK-RECORD (\S+)\n(.*?)^=== status (\d+)\n(.*?)^=== END$", out, re.S | re.M)}
    want = ("rec-cmd", "rec-offcpu", "rec-pid")
    check("ustack record ran in the guest three ways", all(r in runs for r in want),
          sorted(runs))
    for name in want:
        if name not in runs:
            continue
        said, status, folded = runs[name]
        m = re.search(r"recorded /tmp/\S+: (\d+) events, (\d+) samples with stacks", said)
        check(f"{name}: ustack record succeeded and read its trace.dat back",
              status == "0" and m and int(m.group(2)) > 0 and "warning" not in said, said)
        if name == "rec-cmd":
            # uu_nofp chain 5: five getppid calls, main -> nf_a -> nf_b -> nf_c.
            n = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()
                    if line.startswith("raw_syscalls:sys_enter;") and ";nf_a;nf_b;nf_c;" in line)
            check("rec-cmd: uu_nofp's five calls with their complete stacks", n == 5, folded)
        elif name == "rec-offcpu":
            # Every oc_b sample is a sched_switch; its sleeps block in do_nanosleep (a
            # preemption elsewhere in it has other kernel frames).
            lines = [line for line in folded.splitlines() if ";oc_b;" in line]
            check("rec-offcpu: oc_b's sleeps under sched_switch with kernel frames",
                  lines and all(line.startswith("sched:sched_switch;") for line in lines)
                  and any("do_nanosleep_[k]" in line for line in lines), folded)
        else:
            check("rec-pid: the running process's stacks, kernel frames above",
                  any("_[k]" in line and ";oc_" in line for line in folded.splitlines()),
                  folded)


def top_rows(frame):
    """The function rows of a ustack top frame: function to (children %, self %)."""
    rows = {}
    for m in re.finditer(r"^\s*([\d.]+)%\s+([\d.]+)%\s+\d+\s+(\S+)\s+\S+$", frame, re.M):
        rows[m.group(3)] = (float(m.group(1)), float(m.group(2)))
    return rows


def check_top(out):
    """ustack top run in the guest beside uu_top, and tracefs before and after it."""
    m = re.search(r"^=== USTACK-TOP\n(.*?)^=== END$", out, re.S | re.M)
    check("ustack top ran in the guest", m, out[-2000:])
    if not m:
        return
    # "--- NAME" headers, each with the lines up to the next; a frame's status follows it.
    parts = re.findall(r"^--- (.+)\n((?:(?!--- ).*\n)*)", m.group(1), re.M)
    frames = {}
    for (head, body), (after, rest) in zip(parts, parts[1:] + [("", "")]):
        if head.startswith("frame "):
            frames[head[6:]] = (body, after.removeprefix("status "), rest)
    # The default event is the first timer event tracefs has (x86: the local timer).
    for name, events in (("timer", ("irq_vectors:local_timer_entry",
                                     "timer:hrtimer_expire_entry")),
                         ("syscalls", ("raw_syscalls:sys_enter",))):
        body, status, _ = frames.get(name, ("", "", ""))
        check(f"top {name}: exit status 0", status == "0", body)
        rows = top_rows(body)
        print(f"# top {name}: " + ", ".join(
            f"{f} {rows[f][1]:.1f}% self, {rows[f][0]:.1f}% children" for f in
            ("hot_60", "hot_30", "hot_10") if f in rows))
        shown = re.findall(r"^# Event: (\S+)  Samples: \d+", body, re.M)
        check(f"top {name}: the frame is one of {' or '.join(events)}",
              len(shown) == 1 and shown[0] in events, body)
        for f, share in (("hot_60", 60), ("hot_30", 30), ("hot_10", 10)):
            got = rows.get(f)
            check(f"top {name}: {f} has {share} % of the samples (self and children, within "
                  "10 points)", got and all(abs(g - share) <= 10 for g in got), body)
    _, status, count = frames.get("off-cpu", ("", "", ""))
    check("top --off-cpu: ended by SIGTERM with status 0, a frame a second",
          status == "0" and count.strip().isdigit() and int(count) >= 2, (status, count))
    parts = dict(parts)
    before, during, after = (parts.get(k, "") for k in ("before", "during", "after"))
    # While top runs: its option, the global clock, its buffer size, sched_switch on.
    check("tracefs while ustack top --off-cpu runs: the option on, sched_switch on, the "
          "global clock, the buffer grown to 4096 KiB",
          "userstacktrace_delay: 1" in during and "sched:sched_switch" in during
          and "[global]" in during and re.search(r"^buffer_size_kb: 4\d\d\d ", during, re.M),
          during)
    check("tracefs reads after ustack top as before (the option, no event left on, filters, "
          "buffer size, clock)", before and before == after and "userstacktrace_delay: 0" in
          after and "id == 110" in after and "[local]" in after,
          f"\nbefore:\n{before}\nafter:\n{after}")

def main():
    work = os.path.join(os.path.dirname(PROG), "ustack-e2e")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/plugins")
    subprocess.run(["make", "-s", "-C", f"{ROOT}/tools/ustack/plugin", f"OUT={work}/plugins"],
                   check=True)
    # The host's ustack runs in the guest (ustack record, for real): without its debug
    # lines, with the one library the initramfs lacks.
    subprocess.run(["objcopy", "--strip-debug", USTACK, f"{work}/ustack"], check=True)
    libgcc = "/lib/x86_64-linux-gnu/libgcc_s.so.1"
    guest = subprocess.run(
        [f"{ROOT}/scripts/run-guest.sh", "--add", f"{ROOT}/tests/guest/ustack.sh:/bin/ustack.sh",
         "--add", f"{work}/ustack:/bin/ustack", "--add", f"{libgcc}:{libgcc}",
         "--add", f"{work}/plugins/plugin_user_unwind.so:/plugins/plugin_user_unwind.so",
         "--log", f"{work}/console.log", "--", "/bin/ustack.sh"],
        capture_output=True, text=True)
    check("the guest records every format", guest.returncode == 0 and "failed" not in guest.stdout,
          guest.stderr[-2000:] + guest.stdout[-500:])
    with open(f"{work}/console.log", errors="replace") as f:
        found = splats(f.read())
    check("the console and the kernel log have no splat", not found, found[:5])
    files = {}
    for m in re.finditer(r"^=== FILE (\S+)\n(.*?)^=== END$", guest.stdout, re.S | re.M):
        files[m.group(1)] = base64.b64decode("".join(m.group(2).split()))
        with open(f"{work}/{m.group(1)}", "wb") as f:
            f.write(files[m.group(1)])
    want = {f"{n}.{k}" for n in ("v7-zstd", "v7-none", "v6", "v7-global", "v7-date")
            for k in ("dat", "report", "plugin-report")} | {"text.trace", "nofp.dat",
                                                              "kstack.dat", "kstack.report",
                                                              "kstack.offcpu"}
    check("every file came out of the guest", want <= set(files), sorted(want - set(files)))
    if not want <= set(files):
        return

    # The reader against trace-cmd report, the plugin against the tool, on these files.
    tests = subprocess.run(["cargo", "test", "--release", "--quiet", "--test", "oracle",
                            "--test", "cli", "--test", "kernel"], cwd=f"{ROOT}/tools/ustack",
                           env=dict(os.environ, USTACK_FIXTURES=work, USTACK_PROG=PROG),
                           capture_output=True, text=True)
    check("the reader, the plugin, the kernel frames (against trace-cmd report, frame for "
          "frame) and off-CPU time (against uu_offcpu's own measurement) pass their tests "
          "on the fresh recordings",
          tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:])

    chain = expected_chain()
    libc = Elf(LIBC)
    for name in ("v7-zstd.dat", "v7-none.dat", "v6.dat", "v7-global.dat", "v7-date.dat",
                 "text.trace"):
        t0 = time.monotonic()
        run = subprocess.run([USTACK, "--folded", "-", "--lines", "--map", f"/usr/bin={PROG}",
                              "--map", f"/usr/lib={PROG}", f"{work}/{name}"],
                             capture_output=True, text=True)
        took = time.monotonic() - t0
        stacks = {}
        for line in run.stdout.splitlines():
            stack, n = line.rsplit(" ", 1)
            stacks[stack] = stacks.get(stack, 0) + int(n)
        ours = [(s, n) for s, n in stacks.items() if "uu_chain.c" in s]
        check(f"{name}: one stack for uu_chain's 20 calls", len(ours) == 1 and ours[0][1] == 20,
              f"{ours}\n{run.stderr}")
        if len(ours) != 1:
            continue
        frames = ours[0][0].split(";")
        check(f"{name}: the root is the triggering event",
              frames[0] == "raw_syscalls:sys_enter", frames[0])
        check(f"{name}: uu_chain's frames are its call chain at the lines of its calls",
              frames[-len(chain):] == chain, f"{frames[-len(chain):]} != {chain}")
        # libc's outermost frame (with the .eh_frame unwinder the stack goes on through
        # __libc_start_main to the program's _start; with frame pointers it ends at the
        # return into __libc_start_call_main): llvm-symbolizer on the debug file found by the
        # file's build-id is the ground truth for the first libc frame of the folded line.
        offs = re.findall(r"libc\.so\.6\+0x([0-9a-f]+)", subprocess.run(
            [USTACK, "--folded", "-", "--sysroot", "/nonexistent", "--sysroot-only",
             f"{work}/{name}"],
            capture_output=True, text=True).stdout)
        if offs:
            vaddr = libc.vaddr(int(offs[0], 16)) - 1
            bid = subprocess.run(["readelf", "-n", LIBC], capture_output=True,
                                 text=True).stdout.split("Build ID: ")[1].split()[0]
            dbg = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
            func, loc = llvm_symbolizer(dbg, vaddr)
            want_libc = f"{func} ({loc})"
            # The debug info names glibc's function __libc_start_main_impl, where
            # llvm-symbolizer may give the versioned alias in the symbol table
            # (__libc_start_main@GLIBC_2.2.5): the same function, at the same line.
            def norm(fn):
                return fn.split("@")[0].removesuffix("_impl")
            named = [f for f in frames[1:3] if f.endswith(f"({loc})")
                     and norm(f.rsplit(" (", 1)[0]) == norm(func)]
            check(f"{name}: libc's frame is named from libc6-dbg", named,
                  f"{frames[1:3]} has no {want_libc} (llvm-symbolizer)")
        else:
            check(f"{name}: libc's frame is in the stack", False, ours[0][0])
        check(f"{name}: nothing unresolved", "unresolved: 0 frames" in run.stderr, run.stderr)
        print(f"# {name}: symbolized in {took:.3f} s")
    check_nofp(work)
    check_record(guest.stdout)
    check_top(guest.stdout)
    print(f"ustack-e2e: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
