# SPDX-License-Identifier: GPL-2.0
# What the guest scripts share; build-initramfs.sh installs it as /lib/uu.sh.
T=/sys/kernel/tracing

# rb KEY: KEY ("bytes", "overrun", "dropped events") summed over every CPU's ring-buffer
# stats (per_cpu/cpuN/stats, "KEY: N" lines).
rb() { cat $T/per_cpu/cpu*/stats | awk -v f="$1" 'index($0, f ":") == 1 {s += $NF} END {print s + 0}'; }
