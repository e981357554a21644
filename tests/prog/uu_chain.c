// SPDX-License-Identifier: GPL-2.0
/*
 * The test program with a known call chain:
 *   main -> uu_a -> uu_b -> uu_c -> uu_lib_syscall (libuutest.so) -> getppid()
 * Usage: uu_chain [ITERATIONS [MICROSECONDS]]: ITERATIONS calls, sleeping MICROSECONDS
 * between them; prints its pid first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long uu_lib_syscall(long nr);

__attribute__((noinline)) long uu_c(void)
{
	return uu_lib_syscall(SYS_getppid) + 1;
}

__attribute__((noinline)) long uu_b(void)
{
	return uu_c() + 1;
}

__attribute__((noinline)) long uu_a(void)
{
	return uu_b() + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1, sum = 0;
	long us = argc > 2 ? atol(argv[2]) : 0;
	struct timespec pause = { us / 1000000, us % 1000000 * 1000 };

	printf("uu_chain pid %d\n", getpid());
	fflush(stdout);
	for (long i = 0; i < n; i++) {
		sum += uu_a();
		if (us)
			nanosleep(&pause, NULL);
	}
	return sum == 0;
}
