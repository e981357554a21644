// SPDX-License-Identifier: GPL-2.0
/*
 * A stack that names many files: the program maps one file N times (N opens, so N struct
 * files and N file cookies), then makes getppid() calls with a fake frame-pointer chain
 * whose return addresses lie one in each mapping, then UU_UNMAPPED frames in one unmapped
 * page. The module caps the new file_cache events of one stack; the rest must follow in
 * later stacks. The unmapped frames come out as raw addresses with file cookie 0.
 * Usage: uu_many N CALLS FILE
 *
 * uu_many -f CALLS FILE... maps each FILE once instead (a page of it, or a page past the
 * end of an empty one), and ends the chain with a return address in the kernel's half of
 * the address space: the unwinder hands it over as it is, and it must come out raw.
 *
 * uu_many -e loop|kernel|unmapped CALLS FILE makes a broken chain instead: three frames with
 * return addresses in FILE's mapping (at offsets 16, 17 and 18), the last one's saved frame
 * pointer looping back to the first, or pointing into the kernel's half, or at an unmapped
 * page. The unwinder stops there (kernel/unwind/user.c: a frame must lie above the last,
 * and be readable): the stack is the syscall's address and the three, nothing else.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MAPS 200
#define UU_UNMAPPED 3
/* A page below every mapping: mmap_min_addr keeps the first 64 KiB unmapped. */
#define UU_UNMAPPED_AT 0x1000UL
/* A return address no user mapping can hold. */
#define UU_KERNEL_AT 0xffffffff81000000UL

/* getppid() with %rbp pointing at @chain: the unwinder walks the chain, not the stack. */
static long uu_fake_chain_syscall(unsigned long *chain)
{
	long ret = SYS_getppid;

	asm volatile("push %%rbp\n\t"
		     "mov %1, %%rbp\n\t"
		     "syscall\n\t"
		     "pop %%rbp"
		     : "+a"(ret) : "r"(chain) : "rcx", "r11", "memory");
	return ret;
}

/* The three-frame chain of -e KIND, ending in a saved frame pointer of that kind. */
static int uu_broken_chain(const char *kind, int calls, const char *path)
{
	unsigned long frames[6];
	int fd = open(path, O_RDONLY), i;
	char *map;

	if (fd < 0)
		return 1;
	map = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return 1;
	for (i = 0; i < 3; i++) {
		frames[2 * i] = (unsigned long)&frames[2 * i + 2];
		frames[2 * i + 1] = (unsigned long)map + 16 + i;
	}
	if (!strcmp(kind, "loop"))
		frames[4] = (unsigned long)&frames[0];
	else if (!strcmp(kind, "kernel"))
		frames[4] = UU_KERNEL_AT;
	else if (!strcmp(kind, "unmapped"))
		frames[4] = UU_UNMAPPED_AT;
	else
		return 2;
	printf("uu_many pid %d\n", getpid());
	fflush(stdout);
	for (i = 0; i < calls; i++) {
		uu_fake_chain_syscall(frames);
		usleep(20000);
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* Frames at increasing addresses above the stack pointer, as the unwinder wants. */
	unsigned long frames[2 * (MAX_MAPS + UU_UNMAPPED + 1) + 2];
	int listed = argc > 1 && !strcmp(argv[1], "-f");
	int n = listed ? argc - 3 : argc > 1 ? atoi(argv[1]) : 40;
	int calls = argc > 2 ? atoi(argv[2]) : 5, i, end;
	const char *path = argc > 3 ? argv[3] : "/usr/lib/libuutest.so";

	if (argc > 4 && !strcmp(argv[1], "-e"))
		return uu_broken_chain(argv[2], atoi(argv[3]), argv[4]);
	if (n < 1 || n > MAX_MAPS)
		return 2;
	for (i = 0; i < n; i++) {
		int fd = open(listed ? argv[3 + i] : path, O_RDONLY);
		char *map;

		if (fd < 0)
			return 1;
		map = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
			return 1;
		close(fd);
		frames[2 * i] = (unsigned long)&frames[2 * i + 2];
		frames[2 * i + 1] = (unsigned long)map + 16 + i;
	}
	end = n + UU_UNMAPPED + listed;
	for (i = n; i < end; i++) {
		frames[2 * i] = (unsigned long)&frames[2 * i + 2];
		frames[2 * i + 1] = UU_UNMAPPED_AT + 8 * (i - n);
	}
	if (listed)
		frames[2 * (end - 1) + 1] = UU_KERNEL_AT;
	frames[2 * i] = 0;
	frames[2 * i + 1] = 0;
	printf("uu_many pid %d\n", getpid());
	fflush(stdout);
	for (i = 0; i < calls; i++) {
		uu_fake_chain_syscall(frames);
		usleep(20000);
	}
	return 0;
}
