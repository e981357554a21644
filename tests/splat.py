#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What in a guest's console log fails a run: one definition for every guest test.

The console shows only errors (run-guest.sh boots with loglevel=4), and a WARN() or a
lockdep report is printed at KERN_WARNING, below that: so the guest's init prints the whole
kernel log after the command (after "UU-GUEST-EXIT=", scripts/build-initramfs.sh), and the
log is scanned whole. `splat.py LOG...` prints the splats it finds (at most 20 per log) and
exits 1 if there is any.
"""
import re
import sys

SPLAT = re.compile(
    r"BUG:|WARNING:|Oops|KASAN|UBSAN|circular locking|recursive locking|inconsistent lock|"
    r"sleeping function|rcu_.*stall|blocked for more than|Call Trace|unreferenced object|"
    r"kernel panic|general protection fault")


def splats(text):
    """The lines of a console log that report a splat."""
    return [line for line in text.replace("\r", "").splitlines() if SPLAT.search(line)]


def main(paths):
    found = 0
    for path in paths:
        with open(path, errors="replace") as f:
            lines = splats(f.read())
        for line in lines[:20]:
            print(f"splat: {path}: {line}")
        found += len(lines)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
