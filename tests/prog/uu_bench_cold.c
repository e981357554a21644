// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's workload with every stack at first sight (scripts/bench.sh, arms Ac and
 * Ec): like uu_bench_nofp (no frame pointers, DEPTH frames, ITERATIONS getppid calls, timed),
 * but each call comes down a chain of functions no recent stack went through, so that the
 * .eh_frame unwinder finds none of its rows cached and parses every frame's FDE.
 *
 * The chain is uu_lib_syscall (libuutest.so) <- uu_cold_K ... (DEPTH - 5 of the
 * UU_COLD_FNS generated functions, uu_cold_fns.h, each calling the next) <- uu_cold_at
 * (the timed loop) <- main <- libc's two start frames. Call i starts at function
 * i * (DEPTH - 5) modulo UU_COLD_FNS: consecutive stacks take consecutive runs of functions,
 * and a function comes round again only after all UU_COLD_FNS have, far more rows (one
 * per return address) than the module's row cache holds (ROW_SLOTS in
 * src/logic/unwinder.rs). The table of each function's file stays cached: that is a cost
 * once per file, not per stack. Prints "ns_per_call N". Usage: uu_bench_cold ITERATIONS [DEPTH]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long uu_lib_syscall(long nr);

#include "uu_cold_fns.h"

/* The frames of the chain that are not generated functions'. */
#define UU_FIXED_FRAMES 5

static long uu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) long uu_cold_at(long n, long chain)
{
	long t0 = uu_ns(), sum = 0, first = 0;

	for (long i = 0; i < n; i++) {
		sum += uu_cold_fns[first](chain - 1);
		first = (first + chain) % UU_COLD_FNS;
	}
	printf("ns_per_call %ld\n", (uu_ns() - t0) / (n ? n : 1));
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int depth = argc > 2 ? atoi(argv[2]) : 8;

	if (depth < UU_FIXED_FRAMES + 1 || depth - UU_FIXED_FRAMES > UU_COLD_FNS) {
		fprintf(stderr, "uu_bench_cold: DEPTH is from %d to %d\n", UU_FIXED_FRAMES + 1,
			UU_COLD_FNS + UU_FIXED_FRAMES);
		return 2;
	}
	return uu_cold_at(n, depth - UU_FIXED_FRAMES) == 0;
}
