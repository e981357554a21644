// SPDX-License-Identifier: GPL-2.0
/*
 * The .eh_frame unwinder's test program, built -O2 without frame pointers as Debian builds
 * (tests/unwind.py knows each mode's chain). Every traced system call is getppid, made
 * through libc's wrapper (or, in the IFUNC resolver, directly).
 * Usage: uu_nofp MODE [N]
 *   chain   main -> nf_a -> nf_b -> nf_c -> getppid, N times
 *   thread  a second thread: start_thread -> nf_thread -> nf_t1 -> getppid, N times
 *   signal  kill() interrupted by SIGUSR1: nf_handler -> nf_h1 -> getppid, through
 *           __restore_rt into kill <- nf_sig <- main, N times
 *   deep    nf_rec recursing N levels (default 100), then getppid
 *   plt     the first call through the PLT of libuunofp.so's nf_ifunc (lazy binding): its
 *           IFUNC resolver, run by ld.so's lazy resolver, makes the system call
 *   dl      dlopen libuunofpdl.so, call nf_dl_fn -> getppid, dlclose; N times, the
 *           address space shifted between rounds
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

long nf_ifunc(void);

NOINLINE long nf_c(void)
{
	return getppid() + 1;
}

NOINLINE long nf_b(void)
{
	return nf_c() + 1;
}

NOINLINE long nf_a(void)
{
	return nf_b() + 1;
}

NOINLINE long nf_t1(void)
{
	return getppid() + 2;
}

NOINLINE void *nf_thread(void *arg)
{
	long n = (long)arg, sum = 0;

	for (long i = 0; i < n; i++)
		sum += nf_t1();
	return (void *)sum;
}

static volatile long handled;

NOINLINE long nf_h1(void)
{
	return getppid() + 3;
}

NOINLINE void nf_handler(int sig)
{
	handled += nf_h1() + sig;
}

NOINLINE long nf_sig(void)
{
	return kill(getpid(), SIGUSR1) + 1;
}

/* Through a volatile pointer, so that the compiler cannot turn the recursion into a loop. */
static long (*volatile nf_rec_ptr)(long);

NOINLINE long nf_rec(long depth)
{
	if (depth <= 0)
		return getppid();
	return nf_rec_ptr(depth - 1) + 1;
}

NOINLINE long nf_plt(void)
{
	return nf_ifunc() + 1;
}

NOINLINE long nf_dl(void)
{
	void *h = dlopen("libuunofpdl.so", RTLD_NOW | RTLD_LOCAL);
	long (*fn)(void);
	long ret;

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(1);
	}
	fn = (long (*)(void))dlsym(h, "nf_dl_fn");
	if (!fn)
		exit(1);
	ret = fn() + 1;
	dlclose(h);
	return ret;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "chain";
	long n = argc > 2 ? atol(argv[2]) : 1, sum = 0;

	nf_rec_ptr = nf_rec;
	if (!strcmp(mode, "chain")) {
		for (long i = 0; i < n; i++)
			sum += nf_a();
	} else if (!strcmp(mode, "thread")) {
		pthread_t t;
		void *ret;

		if (pthread_create(&t, NULL, nf_thread, (void *)n) || pthread_join(t, &ret))
			return 1;
		sum = (long)ret;
	} else if (!strcmp(mode, "signal")) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = nf_handler;
		sigaction(SIGUSR1, &sa, NULL);
		for (long i = 0; i < n; i++)
			sum += nf_sig();
	} else if (!strcmp(mode, "deep")) {
		sum = nf_rec(argc > 2 ? n : 100);
	} else if (!strcmp(mode, "plt")) {
		sum = nf_plt();
	} else if (!strcmp(mode, "dl")) {
		for (long i = 0; i < n; i++) {
			/* Shift the address space so that the library moves between rounds. */
			void *pad = mmap(NULL, (i % 4 + 1) << 16, PROT_NONE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			sum += nf_dl();
			if (i % 2)
				munmap(pad, (i % 4 + 1) << 16);
		}
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	return sum == 0;
}
