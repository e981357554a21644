// SPDX-License-Identifier: GPL-2.0
/*
 * The .eh_frame unwinder against hostile call-frame tables (tests/hostile_cfi.py writes the
 * files and knows their layout). Each FILE is mapped whole at file offset 0, readable and
 * executable, as a shared object's segment would be, between PROT_NONE guards (a page below,
 * HC_GUARD above): what a table points at outside the file is unreadable. The program then
 * calls the function at HC_CODE in it, CALLS times with no callback (it makes the getppid
 * system call itself: the hostile frame is the innermost) and CALLS times with libc's
 * getppid as its callback (the hostile frame is getppid's caller). That function zeroes rbp,
 * and this program is built without frame pointers: only the file's own table can unwind
 * past its frame. The chain of every call: [getppid ->] FILE -> hc_call -> hc_run -> main.
 * Usage: uu_hostile_cfi CALLS FILE...
 *
 * uu_hostile_cfi -w CALLS FILE IMAGE... maps FILE shared instead, and a second thread
 * rewrites it (with pwrite, all but the code) with each IMAGE in turn, over and over, while
 * the calls run, a millisecond apart: the table changes while it is read.
 *
 * uu_hostile_cfi -r CALLS FILE A B maps FILE shared and, CALLS times, rewrites it whole
 * with A's bytes, then B's, in turn (code and table: two functions whose system call
 * returns at the same offset with different frames), each time calling its function with
 * no callback, with no pause: each content must be unwound with its own rows, however close
 * together the writes are.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* The images' size, and where their function starts (tests/hostile_cfi.py: SIZE, CODE). */
#define HC_SIZE 0x3000
#define HC_CODE 0x100
#define HC_PAGE 0x1000
/*
 * Above the file: more than the farthest read a hostile table asks for (a million table
 * entries, 8 MiB).
 */
#define HC_GUARD (16UL << 20)
#define HC_MAX_IMAGES 32

typedef long (*hc_fn)(pid_t (*cb)(void));

/* Maps @path at offset 0 between guards; returns its function, or NULL. */
static hc_fn hc_map(const char *path, int shared)
{
	size_t len = HC_PAGE + HC_SIZE + HC_GUARD;
	char *area = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			  -1, 0);
	int fd = open(path, O_RDONLY);
	char *file;

	if (area == MAP_FAILED || fd < 0)
		return NULL;
	file = mmap(area + HC_PAGE, HC_SIZE, PROT_READ | PROT_EXEC,
		    (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED, fd, 0);
	close(fd);
	return file == MAP_FAILED ? NULL : (hc_fn)(file + HC_CODE);
}

NOINLINE long hc_call(hc_fn fn, pid_t (*cb)(void))
{
	/* Not a tail call: this frame stays on the stack. */
	return fn(cb) + 1;
}

NOINLINE long hc_run(hc_fn fn, int calls, int pause, int callback)
{
	long sum = 0;

	for (int i = 0; i < calls; i++) {
		sum += hc_call(fn, NULL);
		if (callback)
			sum += hc_call(fn, getppid);
		if (pause)
			usleep(pause);
	}
	return sum;
}

static struct {
	const char *path;
	char *images[HC_MAX_IMAGES];
	int nr;
	pthread_t thread;
	volatile int stop;
	long writes;
} hc_flip;

/* Writes each image in turn over the mapped file, all but the code, until told to stop. */
static void *hc_flipper(void *arg)
{
	int fd = open(hc_flip.path, O_WRONLY);

	if (fd < 0)
		return (void *)1L;
	for (int i = 0; !hc_flip.stop; i = (i + 1) % hc_flip.nr) {
		char *img = hc_flip.images[i];

		if (pwrite(fd, img, HC_CODE, 0) != HC_CODE ||
		    pwrite(fd, img + 2 * HC_CODE, HC_SIZE - 2 * HC_CODE, 2 * HC_CODE) !=
			    HC_SIZE - 2 * HC_CODE)
			return (void *)1L;
		hc_flip.writes++;
		usleep(200);
	}
	close(fd);
	return NULL;
}

/*
 * Reads the images, maps @path shared and starts the thread that rewrites it; returns
 * the function, or NULL.
 */
static hc_fn hc_flip_start(const char *path, int nr, char **images)
{
	hc_fn fn;

	if (nr < 1 || nr > HC_MAX_IMAGES)
		return NULL;
	hc_flip.path = path;
	for (int i = 0; i < nr; i++) {
		int fd = open(images[i], O_RDONLY);

		hc_flip.images[i] = malloc(HC_SIZE);
		if (fd < 0 || !hc_flip.images[i] ||
		    read(fd, hc_flip.images[i], HC_SIZE) != HC_SIZE)
			return NULL;
		close(fd);
	}
	hc_flip.nr = nr;
	fn = hc_map(path, 1);
	if (!fn || pthread_create(&hc_flip.thread, NULL, hc_flipper, NULL))
		return NULL;
	return fn;
}

/*
 * -r: FILE rewritten whole with A and B in turn, a call after each write (in main's frame,
 * as the chain says).
 */
static inline __attribute__((always_inline)) int hc_rewrite(int calls, const char *path,
							       char **images)
{
	char *img[2];
	hc_fn fn;
	int fd;

	for (int i = 0; i < 2; i++) {
		int in = open(images[i], O_RDONLY);

		img[i] = malloc(HC_SIZE);
		if (in < 0 || !img[i] || read(in, img[i], HC_SIZE) != HC_SIZE)
			return 1;
		close(in);
	}
	fd = open(path, O_WRONLY);
	fn = hc_map(path, 1);
	if (fd < 0 || !fn)
		return 1;
	for (int i = 0; i < calls; i++) {
		if (pwrite(fd, img[i % 2], HC_SIZE, 0) != HC_SIZE)
			return 1;
		hc_run(fn, 1, 0, 0);
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 4 && !strcmp(argv[1], "-w")) {
		hc_fn fn = hc_flip_start(argv[3], argc - 4, argv + 4);
		void *ret;

		if (!fn)
			return 1;
		hc_run(fn, atoi(argv[2]), 1000, 1);
		hc_flip.stop = 1;
		if (pthread_join(hc_flip.thread, &ret) || ret)
			return 1;
		printf("flip writes %ld\n", hc_flip.writes);
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "-r"))
		return hc_rewrite(atoi(argv[2]), argv[3], argv + 4);
	if (argc < 3)
		return 2;
	for (int i = 2; i < argc; i++) {
		hc_fn fn = hc_map(argv[i], 0);

		if (!fn) {
			fprintf(stderr, "cannot map %s\n", argv[i]);
			return 1;
		}
		hc_run(fn, atoi(argv[1]), 0, 1);
	}
	return 0;
}
