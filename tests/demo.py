#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make demo, run as a user runs it, and checked: every step succeeds, uu_nofp's stack (built
without frame pointers) is its whole known chain, caller first, from _start to getppid, and
the off-CPU profile of uu_offcpu names oc_a, oc_b and oc_c under kernel frames that are
trace-cmd report's own names for that recording's kernel stacks.

Prints one "ok"/"not ok" line per check and "demo: N passed, M failed".
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE_OUT = subprocess.run(["bash", "-c", ". scripts/lib.sh; echo $TREE_OUT"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
# uu_nofp's chain, caller first, as the demo's `ustack -G` section lists it.
NOFP_CHAIN = ["_start", "__libc_start_main", "__libc_start_call_main", "main", "nf_a", "nf_b",
              "nf_c", "getppid"]
results = []


def check(name, ok, why=""):
    results.append(bool(ok))
    print(("ok - " if ok else "not ok - ") + name + ("" if ok else f": {why}"))
    sys.stdout.flush()


def section(out, title):
    """The lines of the demo's output after the "==> TITLE..." line, up to the next "==>"."""
    lines, inside = [], False
    for line in out.splitlines():
        if line.startswith("==> "):
            inside = line[4:].startswith(title)
        elif inside:
            lines.append(line)
    return lines


def caller_first(lines):
    """The function names of the first caller-first stack ("---" then one frame a line)."""
    names, inside = [], False
    for line in lines:
        if "---" in line:
            inside = True
            line = line.split("---", 1)[1]
        elif inside and not line.strip():
            break
        if inside:
            names.append(line.split()[0])
    return names


def norm(name):
    """glibc's internal names as the exported ones (__GI_getppid, __libc_start_main_impl)."""
    return name.removeprefix("__GI_").removesuffix("_impl")


def main():
    # Its progress lines ("==> ...", on stderr) in order with what they introduce.
    run = subprocess.run(["make", "-s", "demo"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = run.stdout
    with open(os.path.join(TREE_OUT, "demo.log"), "w") as f:
        f.write(out)
    check("make demo succeeds", run.returncode == 0, "\n".join(out.splitlines()[-30:]))
    print("# the demo's last 30 lines:")
    for line in out.splitlines()[-30:]:
        print("#   " + line)

    nofp = caller_first(section(out, "ustack: uu_nofp's stack"))
    check("the demo shows uu_nofp's whole stack, caller first, _start to getppid",
          [norm(n) for n in nofp] == NOFP_CHAIN, f"{nofp} != {NOFP_CHAIN}")

    offcpu = section(out, "ustack --off-cpu")
    text = "\n".join(offcpu)
    check("the off-CPU profile is in ms and names oc_a, oc_b and oc_c",
          re.search(r"^# Off-CPU time: [0-9.]+ ms", text, re.M)
          and all(re.search(rf"\b{f}\b", text) for f in ("oc_a", "oc_b", "oc_c")),
          "\n".join(offcpu[:20]))
    # The name before "[kernel.kallsyms]", in the table and in the call graph alike.
    kernel = {line.split()[-2].removeprefix("---") for line in offcpu
              if line.strip().endswith("[kernel.kallsyms]") and not line.lstrip().startswith("#")}
    dat = os.path.join(TREE_OUT, "demo", "offcpu.dat")
    report = subprocess.run(["trace-cmd", "report", "-i", dat], capture_output=True, text=True)
    named = set(re.findall(r"^\s*=> (\S+)", report.stdout, re.M))
    check("every kernel frame of the off-CPU profile is named as trace-cmd report names it",
          kernel and report.returncode == 0 and kernel <= named,
          f"{len(kernel)} names, not in trace-cmd report's: {sorted(kernel - named)[:10]}")
    check("the futex wait is reached from the futex system call",
          re.search(r"^\s+futex_wait  \[kernel\.kallsyms\]\n\s+do_futex  \[kernel\.kallsyms\]\n"
                    r"\s+__se_sys_futex  \[kernel\.kallsyms\]$", text, re.M)
          and "do_timer_create" not in text, "\n".join(offcpu[:60]))
    print(f"demo: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
