// SPDX-License-Identifier: GPL-2.0
/*
 * Code in mappings that have a struct file but no file a symbolizer can open, each making
 * the getppid system call from a stub, called through uu_call_stub():
 *  - shared: MAP_SHARED | MAP_ANONYMOUS (a shmem file, "/dev/zero (deleted)");
 *  - zero: a private mapping of the character device DIR/zero (vma_is_anonymous());
 *  - memfd: a memfd mapped twice, written through one view and run through the other (the
 *    W^X double mapping of JIT compilers such as .NET's);
 *  - huge: MAP_HUGETLB | MAP_ANONYMOUS (a file on hugetlbfs's internal mount);
 *  - mem: a private mapping of the character device DIR/mem at physical address 0, written
 *    (copy-on-write) and run: a VM_PFNMAP mapping whose vm_pgoff is a page frame number.
 * DIR holds device nodes made by the caller (devtmpfs is mounted noexec). A kind that
 * cannot be mapped is skipped with a line saying so. For each stub it prints
 * "uu_maps KIND START END" and adds "START SIZE uu_stub_KIND" to /tmp/perf-PID.map, as a
 * JIT compiler would. Usage: uu_maps DIR CALLS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define UU_STUB_SIZE 4096
#define UU_HUGE_SIZE (2UL << 20)

/* push %rbp; mov %rsp,%rbp; mov $110,%eax; syscall; pop %rbp; ret */
static const unsigned char uu_stub_code[] = {
	0x55, 0x48, 0x89, 0xe5, 0xb8, 0x6e, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x5d, 0xc3,
};

typedef long (*uu_stub_fn)(void);

__attribute__((noinline)) long uu_call_stub(uu_stub_fn fn)
{
	return fn() + 1;
}

static FILE *uu_perf_map;

/* Writes the stub at @w, runs it from @x @calls times, and names it. */
static long uu_run(const char *kind, void *w, void *x, size_t size, int calls)
{
	long sum = 0;

	memcpy(w, uu_stub_code, sizeof(uu_stub_code));
	__builtin___clear_cache((char *)x, (char *)x + sizeof(uu_stub_code));
	printf("uu_maps %s %lx %lx\n", kind, (unsigned long)x, (unsigned long)x + size);
	fprintf(uu_perf_map, "%lx %zx uu_stub_%s\n", (unsigned long)x, sizeof(uu_stub_code),
		kind);
	fflush(stdout);
	fflush(uu_perf_map);
	for (int i = 0; i < calls; i++)
		sum += uu_call_stub((uu_stub_fn)x);
	return sum;
}

static void *uu_map(const char *kind, size_t size, int flags, int fd)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE | PROT_EXEC, flags, fd, 0);

	if (p == MAP_FAILED) {
		printf("uu_maps %s skipped: %m\n", kind);
		return NULL;
	}
	return p;
}

static int uu_open(const char *dir, const char *name, const char *kind)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR);
	if (fd < 0)
		printf("uu_maps %s skipped: %s: %m\n", kind, path);
	return fd;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/dev";
	int calls = argc > 2 ? atoi(argv[2]) : 3, fd;
	char name[64];
	void *p, *w;
	long sum = 0;

	snprintf(name, sizeof(name), "/tmp/perf-%d.map", getpid());
	uu_perf_map = fopen(name, "w");
	if (!uu_perf_map)
		return 1;

	p = uu_map("shared", UU_STUB_SIZE, MAP_SHARED | MAP_ANONYMOUS, -1);
	if (p)
		sum += uu_run("shared", p, p, UU_STUB_SIZE, calls);

	fd = uu_open(dir, "zero", "zero");
	if (fd >= 0) {
		p = uu_map("zero", UU_STUB_SIZE, MAP_PRIVATE, fd);
		if (p)
			sum += uu_run("zero", p, p, UU_STUB_SIZE, calls);
		close(fd);
	}

	fd = memfd_create("uu_jit", 0);
	if (fd < 0 || ftruncate(fd, UU_STUB_SIZE)) {
		printf("uu_maps memfd skipped: %m\n");
	} else {
		w = mmap(NULL, UU_STUB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		p = mmap(NULL, UU_STUB_SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
		if (w == MAP_FAILED || p == MAP_FAILED)
			printf("uu_maps memfd skipped: %m\n");
		else
			sum += uu_run("memfd", w, p, UU_STUB_SIZE, calls);
		close(fd);
	}

	p = uu_map("huge", UU_HUGE_SIZE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1);
	if (p)
		sum += uu_run("huge", p, p, UU_HUGE_SIZE, calls);

	fd = uu_open(dir, "mem", "mem");
	if (fd >= 0) {
		p = uu_map("mem", UU_STUB_SIZE, MAP_PRIVATE, fd);
		if (p)
			sum += uu_run("mem", p, p, UU_STUB_SIZE, calls);
		close(fd);
	}
	fclose(uu_perf_map);
	return sum == 0;
}
