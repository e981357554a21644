#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write src/event_systems.txt: each trace event of a kernel tree and its system.

The text of /sys/kernel/tracing/trace names an event without its system (`sys_enter:`);
trace.dat names it `raw_syscalls:sys_enter`. ustack gives both the system-qualified name,
from this table. Usage: tools/event-systems.py KERNEL_SOURCE > src/event_systems.txt

Every header that defines TRACE_SYSTEM is read: the events (TRACE_EVENT*, DEFINE_EVENT*)
after each `#define TRACE_SYSTEM` belong to it. ftrace's own entries
(kernel/trace/trace_entries.h) are the `ftrace` system. A name defined in two systems is
ambiguous and left out; syscalls:sys_enter_* / sys_exit_* are made by SYSCALL_DEFINE and
recognised by their prefix in the code instead.
"""
import os
import re
import sys

root = sys.argv[1]
sysdef = re.compile(r"^\s*#\s*define\s+TRACE_SYSTEM\s+(\w+)\s*$", re.M)
event = re.compile(
    r"^\s*(?:TRACE_EVENT|TRACE_EVENT_FN|TRACE_EVENT_FN_COND|TRACE_EVENT_CONDITION|"
    r"TRACE_EVENT_SYSCALL|TRACE_EVENT_PERF_PERM)\s*\(\s*(\w+)\s*,"
    r"|^\s*(?:DEFINE_EVENT|DEFINE_EVENT_FN|DEFINE_EVENT_CONDITION|DEFINE_EVENT_PRINT|"
    r"DEFINE_EVENT_NOP)\s*\(\s*\w+\s*,\s*(\w+)\s*,",
    re.M,
)
systems = {}
for d, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".h"):
            continue
        try:
            text = open(os.path.join(d, f), errors="replace").read()
        except OSError:
            continue
        if "TRACE_SYSTEM" not in text:
            continue
        cuts = [(m.start(), m.group(1)) for m in sysdef.finditer(text)]
        if not cuts:
            continue
        for m in event.finditer(text):
            name = m.group(1) or m.group(2)
            system = None
            for pos, s in cuts:
                if pos < m.start():
                    system = s
            if system is None or system == "TRACE_SYSTEM":
                continue
            systems.setdefault(name, set()).add(system)
entries = open(os.path.join(root, "kernel/trace/trace_entries.h")).read()
for m in re.finditer(r"^FTRACE_ENTRY\w*\(\s*(\w+)\s*,", entries, re.M):
    systems.setdefault(m.group(1), set()).add("ftrace")
for name in sorted(systems):
    s = systems[name]
    if len(s) == 1 and not name.startswith(("sys_enter_", "sys_exit_")):
        print(f"{next(iter(s))}:{name}")
