#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""End-to-end test of tools/ustack.

Boots the guest once with tests/guest/ustack.sh: trace-cmd records the test programs in
each file format (v7 zstd, v7 uncompressed, v6, the global clock) and prints its own
report of each, with and without the libtraceevent plugin. Then, on the host:
- the reader's oracle and plugin tests (tools/ustack/tests) run on these fresh files;
- the symbolized stacks of uu_chain must be exactly its known call chain, each frame at
  the source line of its call, found in the sources by text (tests/prog/uu_chain.c,
  uu_lib.c), and libc's frame named from libc6-dbg with llvm-symbolizer's file:line.
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


def main():
    work = os.path.join(os.path.dirname(PROG), "ustack-e2e")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/plugins")
    subprocess.run(["make", "-s", "-C", f"{ROOT}/tools/ustack/plugin", f"OUT={work}/plugins"],
                   check=True)
    guest = subprocess.run(
        [f"{ROOT}/scripts/run-guest.sh", "--add", f"{ROOT}/tests/guest/ustack.sh:/bin/ustack.sh",
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
    want = {f"{n}.{k}" for n in ("v7-zstd", "v7-none", "v6", "v7-global")
            for k in ("dat", "report", "plugin-report")} | {"text.trace"}
    check("every file came out of the guest", want <= set(files), sorted(want - set(files)))
    if not want <= set(files):
        return

    # The reader against trace-cmd report, the plugin against the tool, on these files.
    tests = subprocess.run(["cargo", "test", "--release", "--quiet", "--test", "oracle",
                            "--test", "cli"], cwd=f"{ROOT}/tools/ustack",
                           env=dict(os.environ, USTACK_FIXTURES=work),
                           capture_output=True, text=True)
    check("the reader and the plugin pass their tests on the fresh recordings",
          tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:])

    chain = expected_chain()
    libc = Elf(LIBC)
    for name in ("v7-zstd.dat", "v7-none.dat", "v6.dat", "v7-global.dat", "text.trace"):
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
              frames[0] in ("raw_syscalls:sys_enter", "sys_enter"), frames[0])
        check(f"{name}: uu_chain's frames are its call chain at the lines of its calls",
              frames[-len(chain):] == chain, f"{frames[-len(chain):]} != {chain}")
        # libc's outermost frame (with the .eh_frame unwinder the stack goes on through
        # __libc_start_main to the program's _start; with frame pointers it ends at the
        # return into __libc_start_call_main): llvm-symbolizer on the debug file found by the
        # file's build-id is the ground truth for the first libc frame of the folded line.
        offs = re.findall(r"libc\.so\.6\+0x([0-9a-f]+)", subprocess.run(
            [USTACK, "--folded", "-", "--sysroot", "/nonexistent", f"{work}/{name}"],
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
    print(f"ustack-e2e: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
