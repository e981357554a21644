#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Injects NMIs into a running guest through QEMU's human monitor, for the stress run.

Usage: nmi.py SOCKET LOG [INTERVAL]

Connects to the unix socket SOCKET (run-guest.sh --monitor), waits until the guest's console
LOG shows the test command running ("UU-GUEST-BEGIN", so that no NMI lands in early boot),
then sends the monitor command "nmi" (an NMI on every vCPU) every INTERVAL seconds (default
0.05), until the guest prints "uu-stress-nmi-stop" or QEMU closes the socket (it exits with
QEMU, whenever that happens). Under TCG there is no PMU, so no perf event can raise an NMI;
these do, and every one runs the NMI_LOCAL handlers, whose nmi:nmi_handler trace event then
fires in NMI context. Each NMI nobody claims makes the kernel print "Uhhuh. NMI received for
unknown reason" (rate-limited) on the console, in the middle of whatever line the guest is
writing: the guest prints its summary after the stop. Prints how many it sent; exits 1 if
none.
"""
import socket
import sys
import time


class Console:
    """The console log, read as it grows."""

    def __init__(self, path):
        self.path, self.offset, self.tail = path, 0, b""

    def shows(self, marker):
        """Whether the text written since the last call (or the 64 bytes before it) holds
        marker, of at most 64 bytes."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
        except FileNotFoundError:
            return False
        self.offset += len(new)
        text = self.tail + new
        self.tail = text[-64:]
        return marker in text


def connect(path, deadline):
    """The monitor's connection, once QEMU has created its socket; None if it never does."""
    while time.monotonic() < deadline:
        try:
            mon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            mon.connect(path)
            mon.setblocking(False)
            return mon
        except OSError:
            time.sleep(0.2)
    return None


def closed(mon):
    """Whether QEMU closed the monitor (it exited). Reads what the monitor echoed, so that
    its buffer never fills."""
    try:
        return mon.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main(path, log, interval=0.05):
    console, sent = Console(log), 0
    mon = connect(path, time.monotonic() + 600)
    if mon is None:
        print("nmi: QEMU's monitor never appeared", file=sys.stderr)
        return 1
    while not console.shows(b"UU-GUEST-BEGIN"):
        if closed(mon):
            print("nmi: the guest ended before its command began", file=sys.stderr)
            return 1
        time.sleep(0.2)
    while not console.shows(b"uu-stress-nmi-stop"):
        try:
            mon.sendall(b"nmi\n")
        except OSError:
            break
        sent += 1
        time.sleep(interval)
        if closed(mon):
            break
    print(f"nmi: {sent} NMIs injected")
    return 0 if sent else 1


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], *(float(a) for a in sys.argv[3:])))
