// SPDX-License-Identifier: GPL-2.0
/*
 * One library, its file's identity watched: dlopen LIB, call uu_libv_syscall(getppid)
 * from uu_call_v() CALLS times, then, if WAITFILE is given, print "uu_dlone waiting" and
 * wait until WAITFILE exists (the caller rewrites LIB in place meanwhile) and make CALLS
 * more calls through the same mapping.
 * Usage: uu_dlone LIB CALLS [WAITFILE]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*uu_fn)(long);

__attribute__((noinline)) long uu_call_v(uu_fn fn)
{
	return fn(SYS_getppid) + 1;
}

int main(int argc, char **argv)
{
	int calls = argc > 2 ? atoi(argv[2]) : 3;
	void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
	long sum = 0;
	uu_fn fn;

	if (!h) {
		fprintf(stderr, "uu_dlone: %s\n", dlerror());
		return 1;
	}
	fn = (uu_fn)dlsym(h, "uu_libv_syscall");
	for (int i = 0; i < calls; i++)
		sum += uu_call_v(fn);
	if (argc > 3) {
		printf("uu_dlone waiting\n");
		fflush(stdout);
		while (access(argv[3], F_OK))
			usleep(10000);
		for (int i = 0; i < calls; i++)
			sum += uu_call_v(fn);
	}
	return sum == 0;
}
