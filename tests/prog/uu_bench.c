// SPDX-License-Identifier: GPL-2.0
/*
 * Times ITERATIONS getppid calls made through the same call chain as uu_chain and prints
 * the mean cost of one call: "ns_per_call N". Usage: uu_bench ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

long uu_lib_syscall(long nr);

__attribute__((noinline)) long uu_bench_c(void)
{
	return uu_lib_syscall(SYS_getppid);
}

__attribute__((noinline)) long uu_bench_b(void)
{
	return uu_bench_c() + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, sum = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		sum += uu_bench_b();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("ns_per_call %ld\n", ((t1.tv_sec - t0.tv_sec) * 1000000000L +
				     t1.tv_nsec - t0.tv_nsec) / (n ? n : 1));
	return sum == 0;
}
