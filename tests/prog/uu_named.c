// SPDX-License-Identifier: GPL-2.0
/*
 * Stacks whose innermost frame is in a mapping without a file:
 *  - "JIT" code copied into an anonymous mapping named "uu_jit" (PR_SET_VMA_ANON_NAME),
 *    which makes the getppid system call itself;
 *  - the vdso, through clock_gettime(CLOCK_PROCESS_CPUTIME_ID), which the vdso serves with
 *    a clock_gettime system call.
 * Usage: uu_named ITERATIONS
 * On a kernel without CONFIG_ANON_VMA_NAME (Debian's) the mapping stays unnamed, which the
 * program says on stdout ("uu_named: no anonymous VMA names"); its frames are then plain
 * anonymous memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* push %rbp; mov %rsp,%rbp; mov $110,%eax; syscall; pop %rbp; ret */
static const unsigned char uu_jit_code[] = {
	0x55, 0x48, 0x89, 0xe5, 0xb8, 0x6e, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x5d, 0xc3,
};

typedef long (*uu_jit_fn)(void);

__attribute__((noinline)) long uu_call_jit(uu_jit_fn fn)
{
	return fn() + 1;
}

__attribute__((noinline)) long uu_call_vdso(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_nsec + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1, sum = 0;
	void *jit = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (jit == MAP_FAILED)
		return 1;
	memcpy(jit, uu_jit_code, sizeof(uu_jit_code));
	if (mprotect(jit, 4096, PROT_READ | PROT_EXEC)) {
		perror("uu_named");
		return 1;
	}
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, jit, 4096, "uu_jit"))
		printf("uu_named: no anonymous VMA names\n");
	fflush(stdout);
	for (long i = 0; i < n; i++)
		sum += uu_call_jit((uu_jit_fn)jit) + uu_call_vdso();
	return sum == 0;
}
