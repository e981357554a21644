#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Injects NMIs into a running guest through QEMU's human monitor, for the stress run.

Usage: nmi.py SOCKET LOG [INTERVAL]

Waits until the guest's console LOG shows the test command running ("UU-GUEST-BEGIN", so no
NMI lands in early boot), then sends the monitor command "nmi" (an NMI on every vCPU) every
INTERVAL seconds (default 0.05) on the unix socket SOCKET (run-guest.sh --monitor), until
the guest prints "uu-stress-nmi-stop" or QEMU closes the socket. Each NMI nobody claims makes
the kernel print "Uhhuh. NMI received for unknown reason" (rate-limited) on the console, in
the middle of whatever line the guest is writing: the guest prints its summary after the
stop. Under TCG there is no PMU, so no perf event can raise an NMI; these do, and
every one runs the NMI_LOCAL handlers, whose nmi:nmi_handler trace event then fires in NMI
context. Prints how many it sent.
"""
import socket
import sys
import time


class Console:
    """The console log, read as it grows."""

    def __init__(self, path):
        self.path, self.offset, self.tail = path, 0, b""

    def shows(self, marker):
        """Whether the text written since the last call (or the marker's length before it)
        holds marker."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
        except FileNotFoundError:
            return False
        self.offset += len(new)
        text, self.tail = self.tail + new, (self.tail + new)[-len(marker):]
        return marker in text


def wait_for(console, marker, deadline):
    while time.monotonic() < deadline:
        if console.shows(marker):
            return True
        time.sleep(0.2)
    return False


def main(path, log, interval=0.05):
    console = Console(log)
    if not wait_for(console, b"UU-GUEST-BEGIN", time.monotonic() + 600):
        print("nmi: the guest never began its command", file=sys.stderr)
        return 1
    sent = 0
    try:
        mon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mon.connect(path)
        mon.setblocking(False)
        while not console.shows(b"uu-stress-nmi-stop"):
            mon.sendall(b"nmi\n")
            sent += 1
            time.sleep(interval)
            try:
                # The monitor echoes every command; read it so that its buffer never fills.
                if mon.recv(65536) == b"":
                    break
            except BlockingIOError:
                pass
    except OSError:
        # QEMU has exited: the socket is gone or the connection reset.
        pass
    print(f"nmi: {sent} NMIs injected")
    return 0 if sent else 1


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], *(float(a) for a in sys.argv[3:])))
