// SPDX-License-Identifier: GPL-2.0
/*
 * Two chains, one after the other: main -> uu_a1 -> uu_a2 -> getpid, a millisecond of work
 * in user space, main -> uu_b1 -> uu_b2 -> getppid, a millisecond, ITERATIONS times. The
 * system calls are made here (uu_sys), so every frame is the program's. An event at the
 * end of the getpid entry must never carry the stack of the getppid that follows.
 * Usage: uu_ab ITERATIONS
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

__attribute__((noinline)) long uu_sys(long nr)
{
	/* A stack slot makes the compiler set up a frame even for this leaf function. */
	volatile long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(nr) : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) long uu_a2(void)
{
	return uu_sys(SYS_getpid) + 1;
}

__attribute__((noinline)) long uu_a1(void)
{
	return uu_a2() + 1;
}

__attribute__((noinline)) long uu_b2(void)
{
	return uu_sys(SYS_getppid) + 1;
}

__attribute__((noinline)) long uu_b1(void)
{
	return uu_b2() + 1;
}

/* About a millisecond of work in user space, without a system call. */
static void uu_spin(void)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 1000000);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1, sum = 0;

	for (long i = 0; i < n; i++) {
		sum += uu_a1();
		uu_spin();
		sum += uu_b1();
		uu_spin();
	}
	return sum == 0;
}
