// SPDX-License-Identifier: GPL-2.0
/*
 * The hoarder of the review suite's fairness test (tests/guest/review.sh, REVIEW_FAIR):
 * maps copies of libuuhoard.so (each a file identity of its own, each with a large table),
 * becomes UID (setresuid: the files' tables are charged to the real uid), and every
 * PERIOD_MS makes one getppid() through each copy, down a function of it that no recent
 * stack went through: each of its tables misses the row cache and so is in use, never
 * idle, while it runs. It stops after SECONDS or once the file STOP exists, and prints
 * "rounds N".
 *
 * Usage: uu_hoard UID SECONDS PERIOD_MS STOP LIB...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define UU_HOARD_LIBS 64

typedef long (*uu_hoard_fn)(long first, long depth);

static double uu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	uu_hoard_fn fns[UU_HOARD_LIBS];
	struct timespec period;
	double end;
	long rounds = 0;
	int n = 0;

	if (argc < 6 || argc - 5 > UU_HOARD_LIBS) {
		fprintf(stderr, "usage: uu_hoard UID SECONDS PERIOD_MS STOP LIB... (up to %d)\n",
			UU_HOARD_LIBS);
		return 2;
	}
	for (int i = 5; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);

		fns[n] = h ? (uu_hoard_fn)dlsym(h, "uu_hoard_call") : NULL;
		if (!fns[n]) {
			fprintf(stderr, "uu_hoard: %s: %s\n", argv[i], dlerror());
			return 1;
		}
		n++;
	}
	uid_t uid = atoi(argv[1]);

	if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) {
		perror("uu_hoard: setresuid");
		return 1;
	}
	end = uu_now() + atof(argv[2]);
	period.tv_sec = atol(argv[3]) / 1000;
	period.tv_nsec = atol(argv[3]) % 1000 * 1000000;
	while (uu_now() < end && access(argv[4], F_OK)) {
		for (int i = 0; i < n; i++)
			fns[i](rounds * 7 + i, 1);
		rounds++;
		nanosleep(&period, NULL);
	}
	printf("rounds %ld\n", rounds);
	return 0;
}
