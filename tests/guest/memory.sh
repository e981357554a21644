#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The module's memory under many files. Usage: memory.sh FILES
#
# uu_many -m maps FILES empty files, 200 to a child, a frame in every mapping: once to warm
# the kernel's caches, once with userstacktrace_delay off (the workload's own cost), once
# on. What the module holds beyond its core (where the first-sight cache is a static table)
# is what grew with the option on beyond that cost. Prints NAME VALUE lines, checked by
# tests/e2e.py (check_memory); loads the module if it is not loaded, and leaves tracing on.
# 4000 files take about a minute on the debug kernel under TCG (e2e), 20000 five (make
# stress, scripts/memory.sh).
. /lib/uu.sh
OPT=$T/options/userstacktrace_delay
files=$1
grep -q '^user_unwind ' /proc/modules || insmod /lib/modules/user_unwind.ko || exit 1
result files "$files"
mkdir -p /tmp/mem
# Slab, vmalloc and per-CPU memory in kB, after dropping the reclaimable caches.
mem_kb() {
	sync
	echo 2 >/proc/sys/vm/drop_caches
	awk '/^(Slab|VmallocUsed|Percpu):/ {s += $2} END {print s}' /proc/meminfo
}
sys_enter_on 'id == 110'
echo 1 >$T/tracing_on
uu_many -m /tmp/mem "$files" 13 >/dev/null
m0=$(mem_kb)
uu_many -m /tmp/mem "$files" 13 >/dev/null
m1=$(mem_kb)
fc0=$(uu file_cache)
echo 1 >$OPT
m2=$(mem_kb)
uu_many -m /tmp/mem "$files" 13 >/dev/null
result many_status $?
m3=$(mem_kb)
echo 0 >$OPT
sys_enter_off
result off_growth_kb $((m1 - m0))
result on_growth_kb $((m3 - m2))
result coresize "$(cat /sys/module/user_unwind/coresize)"
result file_cache_events $(($(uu file_cache) - fc0))
rm -rf /tmp/mem
