// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's workload (scripts/bench.sh): ITERATIONS getppid calls made from the
 * bottom of a frame-pointer chain DEPTH frames deep, timed. The chain is uu_lib_syscall
 * (libuutest.so, which makes the call) <- uu_bench_at (the timed loop) <- uu_bench_down
 * repeated <- main <- libc's two start frames, DEPTH frames in all (at least 5).
 * Prints "ns_per_call N". Usage: uu_bench ITERATIONS [DEPTH]
 *
 * SIGUSR1 is caught (and counted), so that a stress test can deliver signals to it on
 * its way back to user space.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long uu_lib_syscall(long nr);

static volatile sig_atomic_t uu_signals;

static void uu_on_signal(int sig)
{
	uu_signals++;
}

/* The frames of the chain that are not uu_bench_down's. */
#define UU_FIXED_FRAMES 5

static long uu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) long uu_bench_at(long n)
{
	long t0 = uu_ns(), sum = 0;

	for (long i = 0; i < n; i++)
		sum += uu_lib_syscall(SYS_getppid);
	printf("ns_per_call %ld\n", (uu_ns() - t0) / (n ? n : 1));
	return sum;
}

__attribute__((noinline)) long uu_bench_down(int frames, long n)
{
	long ret = frames > 0 ? uu_bench_down(frames - 1, n) : uu_bench_at(n);

	/* Not a tail call: every level keeps its frame. */
	asm volatile("" : "+r"(ret));
	return ret + 1;
}

int main(int argc, char **argv)
{
	long n;

	signal(SIGUSR1, uu_on_signal);
	n = argc > 1 ? atol(argv[1]) : 100000;
	int depth = argc > 2 ? atoi(argv[2]) : 8;

	if (depth < UU_FIXED_FRAMES + 1) {
		fprintf(stderr, "uu_bench: DEPTH is at least %d\n", UU_FIXED_FRAMES + 1);
		return 2;
	}
	return uu_bench_down(depth - UU_FIXED_FRAMES - 1, n) == 0;
}
