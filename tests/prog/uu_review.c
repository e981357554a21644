// SPDX-License-Identifier: GPL-2.0
/*
 * The review's test program (tests/guest/review.sh, tests/review.py), built -O2 without
 * frame pointers as Debian builds. Every traced system call is getppid (110) or execve (59).
 * Usage: uu_review MODE ARGS...
 *   memo              pinned to CPU 0: main -> mm_a -> mm_b -> getppid, a 1.5 s sleep, the
 *                     same again
 *   exec N NICE TOTAL pinned to CPU 0, at nice NICE: main -> ex_a -> ex_b -> execve of
 *                     /proc/self/exe with N - 1, until N is 0; the last one prints
 *                     "exec pid PID execs TOTAL" (run it with TOTAL = N)
 *   storm SECONDS     pinned to CPU 0: main -> st_loop -> getppid as fast as it can, for
 *                     SECONDS; prints "storm calls N"
 *   poison N USEC     rewrites, in its own copy-on-write pages of libc's .eh_frame, each
 *                     CIE's DW_CFA_offset r16 (0x90, a one-byte ULEB offset) into
 *                     DW_CFA_undefined r16 (0x07 0x10), prints "poison cies C rewritten R",
 *                     then main -> po_a -> po_b -> getppid N times (0: until killed),
 *                     USEC microseconds apart
 *   devmem PATH N     maps a page of PATH (/dev/mem: a VM_IO | VM_PFNMAP mapping), copies a
 *                     "mov $110, %eax; syscall; ret" stub into anonymous executable memory
 *                     (no FDE) and calls it N times with rbp pointing into the device page,
 *                     on a stack of its own just below that page;
 *                     prints "devmem stub START END rbp ADDR words W0 W1" (W0, W1: the
 *                     words at rbp and rbp + 8)
 *   uffd N            registers 1 MiB of anonymous memory with userfaultfd (missing pages,
 *                     kernel faults allowed, never served) and makes getppid N times (0:
 *                     until killed), 10 ms apart, with its stack pointer in the middle of
 *                     that region (restored after); prints "uffd ready" before the first
 *                     and "uffd calls N" at the end
 *   mapstack PATH N   maps PATH (a file on a device the test suspends, its pages dropped)
 *                     and makes getppid N times, 10 ms apart, with its stack pointer in
 *                     the middle of that mapping, as uffd does; prints "mapstack ready"
 *                     and "mapstack calls N"
 *   vdso32 N          unmaps its vDSO and vvar, maps the 32-bit vDSO image in their place
 *                     (arch_prctl(ARCH_MAP_VDSO_32)) and makes getppid N times from a
 *                     stack whose return address points into it, as uffd does; prints
 *                     "vdso32 at ADDR calls N"
 *   vclock N          main -> vc_a -> vc_b -> clock_gettime(CLOCK_PROCESS_CPUTIME_ID) N
 *                     times: libc calls the vDSO, whose fallback makes the system call
 *                     (clock_gettime, 228) from the vDSO's own code
 *   errtable PATH SECTORS DEV
 *                     not traced: prints a device-mapper table of SECTORS sectors, DEV
 *                     mapped linearly but for the blocks of the whole pages of PATH's
 *                     .eh_frame_hdr (PATH on a filesystem on that table's device, at
 *                     sector 0 of DEV), which an error target answers (FIBMAP)
 *   pagecg PATH       not traced: for each page of PATH in the page cache, the memory
 *                     cgroup it is charged to (its mapping's page frame, from
 *                     /proc/self/pagemap, looked up in /proc/kpagecgroup); prints
 *                     "pagecg resident N" and a line "pagecg ino INO pages N" per cgroup
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Pointer encodings of .eh_frame_hdr's eh_frame_ptr (the LSB's DW_EH_PE_*). */
#define UU_PE_SDATA4 0x0b
#define UU_PE_SDATA8 0x0c
#define UU_PE_PCREL 0x10
#define UU_PE_DATAREL 0x30

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* memo */

NOINLINE long mm_b(void)
{
	return getppid() + 1;
}

NOINLINE long mm_a(void)
{
	return mm_b() + 1;
}

/* exec */

NOINLINE long ex_b(long n, const char *nice_arg, const char *total)
{
	char count[32];
	char *args[] = { "uu_review", "exec", count, (char *)nice_arg, (char *)total, NULL };

	snprintf(count, sizeof(count), "%ld", n - 1);
	return execve("/proc/self/exe", args, environ) + 1;
}

NOINLINE long ex_a(long n, const char *nice_arg, const char *total)
{
	return ex_b(n, nice_arg, total) + 1;
}

/* storm */

NOINLINE long st_loop(double seconds)
{
	double end = now() + seconds;
	long calls = 0;

	while (now() < end)
		for (int i = 0; i < 64; i++, calls++)
			if (getppid() < 0)
				return -1;
	return calls;
}

/* poison */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	int shift = 0;

	while (*p < end) {
		uint8_t b = *(*p)++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static void skip_leb(const uint8_t **p, const uint8_t *end)
{
	while (*p < end && (*(*p)++ & 0x80))
		;
}

struct po_table {
	uint8_t *start, *end;	/* libc's .eh_frame, bounded by its segment's end */
	uintptr_t seg_start;	/* the segment holding it, and its protection */
	int seg_prot;
};

static int po_find(struct dl_phdr_info *info, size_t size, void *data)
{
	struct po_table *t = data;
	const ElfW(Phdr) *hdr = NULL;
	const uint8_t *h;
	uintptr_t eh;

	if (!strstr(info->dlpi_name, "libc.so.6"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = &info->dlpi_phdr[i];
	if (!hdr)
		return 0;
	h = (const uint8_t *)(info->dlpi_addr + hdr->p_vaddr);
	if (h[0] != 1)
		return 0;
	switch (h[1]) {
	case UU_PE_PCREL | UU_PE_SDATA4:
		eh = (uintptr_t)(h + 4) + *(const int32_t *)(h + 4);
		break;
	case UU_PE_PCREL | UU_PE_SDATA8:
		eh = (uintptr_t)(h + 4) + *(const int64_t *)(h + 4);
		break;
	case UU_PE_DATAREL | UU_PE_SDATA4:
		eh = (uintptr_t)h + *(const int32_t *)(h + 4);
		break;
	default:
		fprintf(stderr, "poison: eh_frame_ptr encoding %#x\n", h[1]);
		return 0;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type == PT_LOAD && lo <= eh && eh < hi) {
			t->start = (uint8_t *)eh;
			t->end = (uint8_t *)hi;
			t->seg_start = lo;
			t->seg_prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
				      (ph->p_flags & PF_W ? PROT_WRITE : 0) |
				      (ph->p_flags & PF_X ? PROT_EXEC : 0);
			return 1;
		}
	}
	return 0;
}

/*
 * Walks one CIE's initial instructions [p, end): with @write, rewrites each
 * DW_CFA_offset r16 whose offset is one byte; returns how many there are.
 */
static int po_cie_insns(uint8_t *p, const uint8_t *end, int write)
{
	int found = 0;

	while (p < end) {
		uint8_t op = *p;
		const uint8_t *q = p + 1;

		switch (op & 0xc0) {
		case 0x40:	/* advance_loc */
		case 0xc0:	/* restore */
			p++;
			continue;
		case 0x80:	/* offset: reg in the opcode, ULEB offset */
			if ((op & 0x3f) == 16 && q < end && !(*q & 0x80)) {
				found++;
				if (write) {
					p[0] = 0x07;	/* DW_CFA_undefined */
					p[1] = 16;
				}
			}
			skip_leb(&q, end);
			p = (uint8_t *)q;
			continue;
		}
		switch (op) {
		case 0x00:	/* nop */
		case 0x0a:	/* remember_state */
		case 0x0b:	/* restore_state */
			break;
		case 0x02: q += 1; break;	/* advance_loc1 */
		case 0x03: q += 2; break;	/* advance_loc2 */
		case 0x04: q += 4; break;	/* advance_loc4 */
		case 0x06: case 0x07: case 0x08: case 0x0d: case 0x0e: case 0x13:
			skip_leb(&q, end);
			break;
		case 0x05: case 0x09: case 0x0c: case 0x11: case 0x12: case 0x14: case 0x15:
			skip_leb(&q, end);
			skip_leb(&q, end);
			break;
		case 0x0f:	/* def_cfa_expression */
			q += uleb(&q, end);
			break;
		case 0x10: case 0x16:	/* expression, val_expression */
			skip_leb(&q, end);
			q += uleb(&q, end);
			break;
		default:
			return found;
		}
		p = (uint8_t *)q;
	}
	return found;
}

/* Walks every CIE of @t; returns the number of CIEs, *@found the rewritable rules. */
static int po_walk(const struct po_table *t, int write, int *found)
{
	uint8_t *p = t->start;
	int cies = 0;

	*found = 0;
	while (p + 8 <= t->end) {
		uint32_t len = *(uint32_t *)p, id;
		uint8_t *rec = p + 4, *next = rec + len;
		const uint8_t *q;
		const char *aug;

		if (len == 0 || len == 0xffffffff || next > t->end)
			break;
		id = *(uint32_t *)rec;
		if (id == 0) {
			uint8_t version = rec[4];

			cies++;
			aug = (const char *)rec + 5;
			q = (const uint8_t *)aug + strnlen(aug, next - (uint8_t *)aug) + 1;
			if (strstr(aug, "eh"))
				q += sizeof(void *);
			skip_leb(&q, next);	/* code alignment */
			skip_leb(&q, next);	/* data alignment */
			if (version == 1)
				q++;
			else
				skip_leb(&q, next);
			if (aug[0] == 'z')
				q += uleb(&q, next);
			if (q < next)
				*found += po_cie_insns((uint8_t *)q, next, write);
		}
		p = next;
	}
	return cies;
}

NOINLINE long po_b(void)
{
	return getppid() + 1;
}

NOINLINE long po_a(void)
{
	return po_b() + 1;
}

static int poison(long n, long usec)
{
	struct po_table t = { 0 };
	long page = sysconf(_SC_PAGESIZE), sum = 0;
	uintptr_t lo, hi;
	int cies, found, rewritten;

	if (!dl_iterate_phdr(po_find, &t)) {
		fprintf(stderr, "poison: libc's .eh_frame not found\n");
		return 1;
	}
	cies = po_walk(&t, 0, &found);
	lo = (uintptr_t)t.start & ~(page - 1);
	hi = ((uintptr_t)t.end + page - 1) & ~(page - 1);
	if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE)) {
		perror("poison: mprotect");
		return 1;
	}
	po_walk(&t, 1, &rewritten);
	if (mprotect((void *)lo, hi - lo, t.seg_prot)) {
		perror("poison: mprotect back");
		return 1;
	}
	po_walk(&t, 0, &found);
	/* Rewritten: none left to rewrite. */
	printf("poison cies %d rewritten %d left %d\n", cies, rewritten, found);
	fflush(stdout);
	for (long i = 0; n == 0 || i < n; i++) {
		sum += po_a();
		if (usec)
			usleep(usec);
	}
	return sum == 0;
}

/* devmem */

/* mov $110, %eax; syscall; ret */
static const unsigned char dv_stub_code[] = { 0xb8, 0x6e, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3 };

NOINLINE long dv_call(void *stub, void *fp, void *sp)
{
	long ret;

	/*
	 * On a stack of its own at @sp, below the device page (an unwinder checks that a
	 * frame's CFA lies above the stack pointer), with rbp at @fp; both restored after.
	 */
	asm volatile("mov %%rsp, %%r12\n\t"
		     "mov %%rbp, %%r13\n\t"
		     "mov %%rdx, %%rsp\n\t"
		     "mov %%rdi, %%rbp\n\t"
		     "call *%%rsi\n\t"
		     "mov %%r12, %%rsp\n\t"
		     "mov %%r13, %%rbp"
		     : "=a"(ret)
		     : "D"(fp), "S"(stub), "d"(sp)
		     : "rcx", "r8", "r9", "r10", "r11", "r12", "r13", "memory", "cc");
	return ret;
}

static int devmem(const char *path, long n)
{
	int fd = open(path, O_RDONLY);
	unsigned char *dev, *stub, *stack;
	const size_t stack_size = 1 << 16;
	uint64_t w0, w1;
	long sum = 0;

	if (fd < 0) {
		perror(path);
		return 1;
	}
	dev = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (dev == MAP_FAILED) {
		perror("devmem: mmap");
		return 1;
	}
	/* Mapped right after the device page, so just below it (top-down), and populated. */
	stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (stack == MAP_FAILED)
		return 1;
	if (stack + stack_size > dev) {
		fprintf(stderr, "devmem: the stack %p is not below the device page %p\n", stack, dev);
		return 1;
	}
	stub = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stub == MAP_FAILED)
		return 1;
	memcpy(stub, dv_stub_code, sizeof(dv_stub_code));
	__builtin___clear_cache((char *)stub, (char *)stub + sizeof(dv_stub_code));
	memcpy(&w0, dev + 0x100, 8);
	memcpy(&w1, dev + 0x108, 8);
	printf("devmem stub %lx %lx rbp %lx words %lx %lx\n", (unsigned long)stub,
	       (unsigned long)stub + sizeof(dv_stub_code), (unsigned long)dev + 0x100,
	       (unsigned long)w0, (unsigned long)w1);
	fflush(stdout);
	for (long i = 0; i < n; i++)
		sum += dv_call(stub, dev + 0x100, stack + stack_size - 256);
	return sum == 0;
}

/* uffd */

/* getppid with the stack pointer at @sp and rbp 0; both restored after. */
NOINLINE long uf_call(void *sp)
{
	long ret;

	asm volatile("mov %%rsp, %%r12\n\t"
		     "mov %%rbp, %%r13\n\t"
		     "mov %%rdi, %%rsp\n\t"
		     "xor %%ebp, %%ebp\n\t"
		     "mov $110, %%eax\n\t"
		     "syscall\n\t"
		     "mov %%r12, %%rsp\n\t"
		     "mov %%r13, %%rbp"
		     : "=a"(ret)
		     : "D"(sp)
		     : "rcx", "r11", "r12", "r13", "memory", "cc");
	return ret;
}

static int uffd(long n)
{
	const size_t size = 1 << 20;
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { 0 };
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK), calls = 0;
	unsigned char *region;

	if (fd < 0) {
		perror("userfaultfd");
		return 3;
	}
	if (ioctl(fd, UFFDIO_API, &api)) {
		perror("UFFDIO_API");
		return 3;
	}
	region = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 3;
	reg.range.start = (unsigned long)region;
	reg.range.len = size;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(fd, UFFDIO_REGISTER, &reg)) {
		perror("UFFDIO_REGISTER");
		return 3;
	}
	printf("uffd ready\n");
	fflush(stdout);
	for (; n == 0 || calls < n; calls++) {
		if (uf_call(region + size / 2) < 0)
			return 1;
		usleep(10000);
	}
	printf("uffd calls %ld\n", calls);
	return 0;
}

/* mapstack */

static int mapstack(const char *path, long n)
{
	long fd = open(path, O_RDONLY), calls = 0;
	off_t size;
	unsigned char *map;

	if (fd < 0) {
		perror(path);
		return 3;
	}
	size = lseek(fd, 0, SEEK_END);
	map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (size < 2 * 4096 || map == MAP_FAILED)
		return 3;
	printf("mapstack ready\n");
	fflush(stdout);
	for (; calls < n; calls++) {
		if (uf_call(map + (size / 2 & ~4095L)) < 0)
			return 1;
		usleep(10000);
	}
	printf("mapstack calls %ld\n", calls);
	return 0;
}

/* vdso32 */

#define UU_ARCH_MAP_VDSO_32 0x2002

/*
 * Unmaps every mapping /proc/self/maps names NAME (with @unmap), or finds the first one's
 * start (into *@start); the number of them, or -1.
 */
static int named(const char *name, int unmap, unsigned long *start_out)
{
	char line[512];
	unsigned long start, end;
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strrchr(line, ' ');

		if (p && !strncmp(p + 1, name, strlen(name)) && p[1 + strlen(name)] == '\n' &&
		    sscanf(line, "%lx-%lx", &start, &end) == 2) {
			if (unmap && munmap((void *)start, end - start))
				return -1;
			if (!n && start_out)
				*start_out = start;
			n++;
		}
	}
	fclose(f);
	return n;
}

static int vdso32(long n)
{
	unsigned long stack[64] = { 0 }, base = 0;
	long calls = 0;

	if (named("[vdso]", 1, NULL) != 1 || named("[vvar]", 1, NULL) < 0 ||
	    named("[vvar_vclock]", 1, NULL) < 0) {
		fprintf(stderr, "vdso32: unmapping the vDSO failed\n");
		return 3;
	}
	/* From here on libc must not call into the vDSO: raw system calls only. */
	if (syscall(SYS_arch_prctl, UU_ARCH_MAP_VDSO_32, 0x7f0000000000UL) < 0) {
		perror("ARCH_MAP_VDSO_32");
		return 3;
	}
	/* It returns the image's size: where it went, /proc/self/maps says. */
	if (named("[vdso]", 0, &base) != 1) {
		fprintf(stderr, "vdso32: no [vdso] mapped\n");
		return 3;
	}
	/*
	 * A return address inside the 32-bit image's text, in every word above the stack
	 * pointer: wherever uf_call's CFA puts it (past the registers it saves).
	 */
	for (int i = 32; i < 64; i++)
		stack[i] = base + 0x400;
	for (; calls < n; calls++)
		if (uf_call(&stack[32]) < 0)
			return 1;
	printf("vdso32 at %lx calls %ld\n", base, calls);
	return 0;
}

/* vclock */

NOINLINE long vc_b(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_nsec + 1;
}

NOINLINE long vc_a(void)
{
	return vc_b() + 1;
}

/* errtable */

struct et_run {
	unsigned long long start, len;	/* in 512-byte sectors */
};

static int et_cmp(const void *a, const void *b)
{
	const struct et_run *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int errtable(const char *path, unsigned long long sectors, const char *dev)
{
	long fd = open(path, O_RDONLY), page = sysconf(_SC_PAGESIZE);
	unsigned long long from = 0, to = 0, at = 0, off, sec;
	struct et_run runs[256];
	int bsz, n = 0, i;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    ioctl(fd, FIGETBSZ, &bsz) || bsz < 512 || bsz % 512) {
		perror("errtable");
		return 3;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof(ph))
			return 3;
		if (ph.p_type == PT_GNU_EH_FRAME) {
			from = (ph.p_offset + page - 1) / page * page;
			to = (ph.p_offset + ph.p_filesz) / page * page;
		}
	}
	if (from >= to) {
		fprintf(stderr, "errtable: no whole page of .eh_frame_hdr in %s\n", path);
		return 3;
	}
	/* The blocks of [from, to), as runs of sectors, merged where adjacent. */
	for (off = from; off < to; off += bsz) {
		int blk = off / bsz;

		if (ioctl(fd, FIBMAP, &blk) || !blk) {
			perror("errtable: FIBMAP");
			return 3;
		}
		sec = (unsigned long long)blk * (bsz / 512);
		if (n && runs[n - 1].start + runs[n - 1].len == sec) {
			runs[n - 1].len += bsz / 512;
		} else if (n < 256) {
			runs[n].start = sec;
			runs[n++].len = bsz / 512;
		} else {
			return 3;
		}
	}
	qsort(runs, n, sizeof(runs[0]), et_cmp);
	for (i = 0; i < n; i++) {
		if (runs[i].start < at || runs[i].start + runs[i].len > sectors)
			return 3;
		if (runs[i].start > at)
			printf("%llu %llu linear %s %llu\n", at, runs[i].start - at, dev, at);
		printf("%llu %llu error\n", runs[i].start, runs[i].len);
		at = runs[i].start + runs[i].len;
	}
	if (at < sectors)
		printf("%llu %llu linear %s %llu\n", at, sectors - at, dev, at);
	return 0;
}

/* pagecg */

static int pagecg(const char *path)
{
	long fd = open(path, O_RDONLY), pm = open("/proc/self/pagemap", O_RDONLY);
	long cg = open("/proc/kpagecgroup", O_RDONLY), page = sysconf(_SC_PAGESIZE);
	uint64_t inos[16], counts[16] = { 0 };
	long n = 0, resident = 0, i, j;
	unsigned char *map, *in;
	volatile unsigned char sink;
	off_t size;

	if (fd < 0 || pm < 0 || cg < 0) {
		perror("pagecg: open");
		return 3;
	}
	size = lseek(fd, 0, SEEK_END);
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	in = malloc(size / page + 1);
	if (map == MAP_FAILED || !in || mincore(map, size, in)) {
		perror("pagecg: mmap");
		return 3;
	}
	for (i = 0; i < (size + page - 1) / page; i++) {
		uint64_t entry, ino;

		if (!(in[i] & 1))
			continue;
		/* Maps the cached page (a fault that finds it charges nothing). */
		sink = map[i * page];
		(void)sink;
		if (pread(pm, &entry, 8, (uintptr_t)(map + i * page) / page * 8) != 8 ||
		    !(entry >> 63) ||
		    pread(cg, &ino, 8, (entry & ((1ULL << 55) - 1)) * 8) != 8) {
			perror("pagecg: pagemap");
			return 3;
		}
		resident++;
		for (j = 0; j < n && inos[j] != ino; j++)
			;
		if (j == n && n < 16)
			inos[n++] = ino;
		if (j < 16)
			counts[j]++;
	}
	printf("pagecg resident %ld\n", resident);
	for (j = 0; j < n; j++)
		printf("pagecg ino %llu pages %llu\n", (unsigned long long)inos[j],
		       (unsigned long long)counts[j]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long sum = 0;

	if (!strcmp(mode, "memo")) {
		struct timespec pause = { 1, 500000000 };

		pin_cpu0();
		sum += mm_a();
		nanosleep(&pause, NULL);
		sum += mm_a();
	} else if (!strcmp(mode, "exec") && argc > 4) {
		long n = atol(argv[2]);

		pin_cpu0();
		if (setpriority(PRIO_PROCESS, 0, atoi(argv[3])))
			perror("setpriority");
		if (n <= 0) {
			printf("exec pid %d execs %s\n", getpid(), argv[4]);
			return 0;
		}
		ex_a(n, argv[3], argv[4]);
		perror("execve");
		return 1;
	} else if (!strcmp(mode, "storm") && argc > 2) {
		long calls;

		pin_cpu0();
		calls = st_loop(atof(argv[2]));
		printf("storm calls %ld\n", calls);
		return calls < 0;
	} else if (!strcmp(mode, "poison") && argc > 3) {
		return poison(atol(argv[2]), atol(argv[3]));
	} else if (!strcmp(mode, "devmem") && argc > 3) {
		return devmem(argv[2], atol(argv[3]));
	} else if (!strcmp(mode, "uffd") && argc > 2) {
		return uffd(atol(argv[2]));
	} else if (!strcmp(mode, "mapstack") && argc > 3) {
		return mapstack(argv[2], atol(argv[3]));
	} else if (!strcmp(mode, "vdso32") && argc > 2) {
		return vdso32(atol(argv[2]));
	} else if (!strcmp(mode, "errtable") && argc > 4) {
		return errtable(argv[2], strtoull(argv[3], NULL, 0), argv[4]);
	} else if (!strcmp(mode, "pagecg") && argc > 2) {
		return pagecg(argv[2]);
	} else if (!strcmp(mode, "vclock") && argc > 2) {
		for (long i = atol(argv[2]); i > 0; i--)
			sum += vc_a();
	} else {
		fprintf(stderr, "usage: uu_review memo | exec N NICE TOTAL | storm SECONDS | "
			"poison N USEC | devmem PATH N | uffd N | mapstack PATH N | vdso32 N | "
			"vclock N | errtable PATH SECTORS DEV | pagecg PATH\n");
		return 2;
	}
	return sum == 0;
}
