# SPDX-License-Identifier: GPL-2.0
# user_unwind: `make demo` and `make check` set everything up (scripts/setup.sh) and run.
# `make module KDIR=debian` builds for Debian's stock kernel (scripts/stock-kernel.sh);
# `make module KDIR=/path/to/prepared/kernel` builds against your own kernel tree.

KDIR ?=

.PHONY: all setup module check demo stress host-test bench bench-real bench-host ustack \
	ustack-bench ustack-pictures plugin-install clean

all: module

setup:
	@scripts/setup.sh
	@scripts/build-kernel.sh

module:
	@scripts/setup.sh
	@if [ -z "$(KDIR)" ]; then scripts/build-kernel.sh; fi
	@KDIR=$(KDIR) scripts/build-module.sh

host-test:
	cd host && cargo test

# The cost of a stack on the production-config test kernel, arms A-E, the first-sight
# arms and perf's (built from the kernel source: scripts/build-perf.sh) at depths 8, 32 and
# 128 (scripts/bench.sh, Documentation/performance.rst). BENCH_ARGS="ITERATIONS ROUNDS DEPTH..." overrides.
bench:
	@scripts/bench.sh $(BENCH_ARGS)

# What profiling costs real programs (Debian's cc1, python3, clang, sqlite3): this module
# and perf side by side, instructions counted (scripts/bench-real.sh). BENCH_REAL_ARGS=ROUNDS.
bench-real:
	@scripts/bench-real.sh $(BENCH_REAL_ARGS)

# Microbenchmarks of the pure logic on the host (criterion): translation per frame,
# SipHash, build-id parsing, first-sight lookups.
bench-host:
	cd host && cargo bench --bench logic

# tools/ustack: the host tool (Documentation/ustack.rst), its benchmark on a large
# synthetic trace.dat, and its libtraceevent plugin for trace-cmd report.
ustack:
	cd tools/ustack && cargo build --release

ustack-bench: ustack
	tools/ustack/target/release/ustack --bench $(USTACK_BENCH_ARGS)

# README.md's and Documentation/ustack.rst's flame graphs, from a committed recording.
ustack-pictures: ustack
	USTACK=tools/ustack/target/release/ustack scripts/ustack-pictures.sh

plugin-install:
	$(MAKE) -C tools/ustack/plugin install

check:
	@scripts/check.sh

demo:
	@scripts/demo.sh

# The module's memory over 20000 files (scripts/memory.sh), the kernel's ftrace selftests
# with and without it (scripts/ftracetest.sh), then the module under load, churn, NMIs and
# 50 reloads on the debug kernel, counted (scripts/stress.sh), whose count is the last
# line; make check runs a short version of each. STRESS_ARGS="CYCLES SECONDS CPUS",
# MEMORY_ARGS="FILES", FTRACETEST_ARGS="TEST...".
stress: module
	@scripts/memory.sh $(MEMORY_ARGS)
	@scripts/ftracetest.sh $(FTRACETEST_ARGS)
	@scripts/stress.sh $(STRESS_ARGS)

clean:
	@scripts/build-module.sh clean
	rm -rf host/target tools/ustack/target
	rm -f tools/ustack/plugin/plugin_user_unwind.so
