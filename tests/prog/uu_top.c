// SPDX-License-Identifier: GPL-2.0
/*
 * Ground truth for `ustack top`: a busy loop whose time and calls split 60:30:10 between
 * three functions by construction. Each round calls hot_60 six times, hot_30 three times
 * and hot_10 once; every call spins the same SPIN iterations and makes one getppid system
 * call from its own body (no libc frame under it). So a timer's samples (on-CPU time) and
 * raw_syscalls:sys_enter's (calls) both fall 60 %, 30 % and 10 % on them, each the
 * innermost frame of its stacks. Prints its calls of each at the end: "hot_60 N" ...
 *
 * Usage: uu_top [SECONDS [SPIN]]   (default 10 s of rounds, 20000 iterations a call)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

static long spin = 20000;
static long calls[3];

/*
 * One call's work, in the function's own body: SPIN dependent steps, then the system
 * call. noipa keeps the three functions apart (no inlining, cloning or merging).
 */
#define HOT(name, i)							\
	__attribute__((noipa)) long name(long x)			\
	{								\
		long r;							\
									\
		for (long n = 0; n < spin; n++)				\
			asm volatile("imul $7, %0, %0\n\tadd %1, %0"	\
				     : "+r"(x) : "r"(n));		\
		asm volatile("syscall" : "=a"(r) : "a"((long)SYS_getppid) \
			     : "rcx", "r11", "memory");		\
		calls[i]++;						\
		return x + r;						\
	}

HOT(hot_60, 0)
HOT(hot_30, 1)
HOT(hot_10, 2)

int main(int argc, char **argv)
{
	long seconds = argc > 1 ? atol(argv[1]) : 10;
	time_t end = time(NULL) + seconds;
	long x = 1;

	if (argc > 2)
		spin = atol(argv[2]);
	while (time(NULL) < end) {
		for (int i = 0; i < 6; i++)
			x = hot_60(x);
		for (int i = 0; i < 3; i++)
			x = hot_30(x);
		x = hot_10(x);
	}
	printf("hot_60 %ld\nhot_30 %ld\nhot_10 %ld\n", calls[0], calls[1], calls[2]);
	return x == 42;
}
