// SPDX-License-Identifier: GPL-2.0
/*
 * The honest program of the review suite's fairness test (tests/guest/review.sh,
 * REVIEW_FAIR): becomes UID (setresuid), then makes STACKS getppid() calls, each from
 * DEPTH frames of one function with UU_HONEST_SITES call sites (uu_honest_sites.h): a
 * stack's frames are consecutive sites, and every site comes round again only after all of
 * them have, more return addresses than the module's row cache holds. With its file's
 * table, a row cache miss is a look-up in memory; without it, every miss parses the
 * function's FDE again. The program also has the UU_COLD_FNS functions of uu_cold_fns.h,
 * never called: they make its table's search table as large as one of the hoarder's
 * tables, so that it needs more memory than the hoarder's last table leaves free under the
 * limit. Prints "stacks N".
 *
 * Usage: uu_honest UID STACKS [DEPTH]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

long uu_honest_leaf(long j);
long uu_lib_syscall(long nr);

#include "uu_cold_fns.h"
#include "uu_honest_sites.h"

__attribute__((noinline)) long uu_lib_syscall(long nr)
{
	return syscall(nr);
}

__attribute__((noinline)) long uu_honest_leaf(long j)
{
	long r = syscall(SYS_getppid);

	asm volatile("" : "+r"(r));
	return r + j;
}

int main(int argc, char **argv)
{
	long stacks = argc > 2 ? atol(argv[2]) : 0, depth = argc > 3 ? atol(argv[3]) : 16, sum = 0;
	uid_t uid = argc > 1 ? atoi(argv[1]) : 0;

	if (argc < 3 || depth < 1 || depth > UU_HONEST_SITES) {
		fprintf(stderr, "usage: uu_honest UID STACKS [DEPTH, 1 to %d]\n", UU_HONEST_SITES);
		return 2;
	}
	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) {
		perror("uu_honest: setresuid");
		return 1;
	}
	/* Never called: they are there for the size of the program's table. */
	(void)uu_cold_fns;
	for (long i = 0; i < stacks; i++)
		sum += uu_honest_sites(i * depth, depth - 1);
	printf("stacks %ld\n", stacks);
	return sum == 1;
}
