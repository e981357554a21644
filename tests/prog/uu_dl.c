// SPDX-License-Identifier: GPL-2.0
/*
 * dlopen/dlclose churn: load libuua.so, call uu_liba_syscall(getppid) from uu_call_a(),
 * unload it; then the same with libuub.so from uu_call_b(); ITERATIONS times. The freed
 * struct file of one library is likely reused for the next, so its file cookie is too.
 * Usage: uu_dl ITERATIONS [MICROSECONDS]: MICROSECONDS of sleep after each library.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

typedef long (*uu_fn)(long);

static long uu_call(const char *lib, const char *fn)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	long ret;

	if (!h) {
		fprintf(stderr, "uu_dl: %s\n", dlerror());
		exit(1);
	}
	ret = ((uu_fn)dlsym(h, fn))(SYS_getppid);
	dlclose(h);
	return ret;
}

__attribute__((noinline)) long uu_call_a(void)
{
	return uu_call("/usr/lib/libuua.so", "uu_liba_syscall") + 1;
}

__attribute__((noinline)) long uu_call_b(void)
{
	return uu_call("/usr/lib/libuub.so", "uu_libb_syscall") + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1, sum = 0;
	long us = argc > 2 ? atol(argv[2]) : 0;
	struct timespec pause = { us / 1000000, us % 1000000 * 1000 };

	for (long i = 0; i < n; i++) {
		sum += uu_call_a();
		if (us)
			nanosleep(&pause, NULL);
		sum += uu_call_b();
		if (us)
			nanosleep(&pause, NULL);
	}
	return sum == 0;
}
