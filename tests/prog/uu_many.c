// SPDX-License-Identifier: GPL-2.0
/*
 * A stack that names many files: the program maps N files (N FILEs given; or one FILE N
 * times, which is one file and one file cookie), then makes getppid() calls with a fake
 * frame-pointer chain whose return addresses lie one in each mapping, then UU_UNMAPPED
 * frames in one unmapped page. The module caps the file_cache events of one stack; the
 * rest must follow in later stacks. The unmapped frames come out as raw addresses with
 * file cookie 0.
 * Usage: uu_many N CALLS FILE...
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
 *
 * uu_many -m DIR FILES CALLS touches FILES distinct files: it creates DIR/0... (empty), and
 * one child for each MAX_MAPS of them makes CALLS calls with a frame in every one.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

static int uu_stack_of(int n, char **paths, int listed, int calls, int pause);

/* -m: FILES empty files in DIR, a child per MAX_MAPS of them. */
static int uu_many_files(const char *dir, int files, int calls)
{
	static char names[MAX_MAPS][64];
	char *paths[MAX_MAPS];
	int first, i, status, failed = 0;

	for (first = 0; first < files; first += MAX_MAPS) {
		int n = files - first < MAX_MAPS ? files - first : MAX_MAPS;
		pid_t pid;

		for (i = 0; i < n; i++) {
			int fd;

			snprintf(names[i], sizeof(names[i]), "%s/%d", dir, first + i);
			fd = open(names[i], O_CREAT | O_WRONLY, 0644);
			if (fd < 0)
				return 1;
			close(fd);
			paths[i] = names[i];
		}
		pid = fork();
		if (pid < 0)
			return 1;
		if (!pid)
			_exit(uu_stack_of(n, paths, 1, calls, 0));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	return failed;
}

/*
 * The chain through N mappings: of PATHS[i] each when LISTED (1: ending in a kernel
 * return address; 2: in UU_UNMAPPED frames), else of PATHS[0] N times, then UU_UNMAPPED
 * frames; CALLS calls, PAUSE microseconds apart.
 */
static int uu_stack_of(int n, char **paths, int listed, int calls, int pause)
{
	/* Frames at increasing addresses above the stack pointer, as the unwinder wants. */
	unsigned long frames[2 * (MAX_MAPS + UU_UNMAPPED + 1) + 2];
	int i, end;

	if (n < 1 || n > MAX_MAPS)
		return 2;
	for (i = 0; i < n; i++) {
		int fd = open(paths[listed ? i : 0], O_RDONLY);
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
	end = n + UU_UNMAPPED + (listed == 1);
	for (i = n; i < end; i++) {
		frames[2 * i] = (unsigned long)&frames[2 * i + 2];
		frames[2 * i + 1] = UU_UNMAPPED_AT + 8 * (i - n);
	}
	if (listed == 1)
		frames[2 * (end - 1) + 1] = UU_KERNEL_AT;
	frames[2 * i] = 0;
	frames[2 * i + 1] = 0;
	printf("uu_many pid %d\n", getpid());
	fflush(stdout);
	for (i = 0; i < calls; i++) {
		uu_fake_chain_syscall(frames);
		if (pause)
			usleep(pause);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char *lib[] = { "/usr/lib/libuutest.so" };

	if (argc > 4 && !strcmp(argv[1], "-e"))
		return uu_broken_chain(argv[2], atoi(argv[3]), argv[4]);
	if (argc > 4 && !strcmp(argv[1], "-m"))
		return uu_many_files(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc > 1 && !strcmp(argv[1], "-f"))
		return uu_stack_of(argc - 3, argv + 3, 1, argc > 2 ? atoi(argv[2]) : 5, 20000);
	if (argc > 4 && argc - 3 < atoi(argv[1]))
		return 2;
	return uu_stack_of(argc > 1 ? atoi(argv[1]) : 40, argc > 3 ? argv + 3 : lib,
			   argc > 4 ? 2 : 0, argc > 2 ? atoi(argv[2]) : 5, 20000);
}
