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
 *   dlswap  the same with libuunofpdl.so and libuunofpdl2.so in turn, nothing shifted: each
 *           is mapped where the other was closed (two files, the same addresses, nf_dl_fn
 *           elsewhere with another frame); prints how many rounds found their library at
 *           the address of the round before
 *   exec    chain N times, then exec PROG (the third argument) with "chain N"
 *
 * Built as uu_nofp, and not position-independent as uu_nofp_np and, with UU_VARIANT (every
 * function after nf_pad moved, nf_b with a frame of its own), uu_nofp_np2: two programs
 * whose code lies at the same addresses, for exec.
 */
#define _GNU_SOURCE
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

#ifdef UU_VARIANT
NOINLINE long nf_pad(long x)
{
	volatile long pad[64];

	for (int i = 0; i < 64; i++)
		pad[i] = x + i;
	return pad[x & 63] + pad[(x + 7) & 63];
}
#endif

NOINLINE long nf_c(void)
{
	return getppid() + 1;
}

NOINLINE long nf_b(void)
{
#ifdef UU_VARIANT
	volatile char frame[200];

	frame[0] = 1;
	return nf_c() + frame[0] + nf_pad(frame[0]);
#else
	return nf_c() + 1;
#endif
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

/* The address libuunofpdl.so or libuunofpdl2.so was loaded at, last time. */
static void *nf_dl_base;

NOINLINE long nf_dl(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	long (*fn)(void);
	Dl_info info;
	long ret;

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(1);
	}
	fn = (long (*)(void))dlsym(h, "nf_dl_fn");
	if (!fn || !dladdr(fn, &info))
		exit(1);
	nf_dl_base = info.dli_fbase;
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

			sum += nf_dl("libuunofpdl.so");
			if (i % 2)
				munmap(pad, (i % 4 + 1) << 16);
		}
	} else if (!strcmp(mode, "dlswap")) {
		long same = 0;

		for (long i = 0; i < n; i++) {
			void *before = nf_dl_base;

			sum += nf_dl(i % 2 ? "libuunofpdl2.so" : "libuunofpdl.so");
			same += nf_dl_base == before;
		}
		printf("same_base %ld of %ld\n", same, n - 1);
	} else if (!strcmp(mode, "exec") && argc > 3) {
		char *args[] = { argv[3], "chain", argv[2], NULL };

		for (long i = 0; i < n; i++)
			sum += nf_a();
		execv(argv[3], args);
		perror("execv");
		return 1;
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	return sum == 0;
}
