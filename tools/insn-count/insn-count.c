// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts the instructions the guest executes at each kernel
 * address, exactly (not sampled): every translation block that starts in the kernel half
 * of the address space gets an inline counter, and at exit each of its instructions is
 * written out with the block's count, one "ADDRESS COUNT" line each (hex, decimal), to
 * the file named by the plugin's "out=" argument. A block that several translations share
 * appears once per translation; whoever reads the file adds the lines up.
 *
 * Used by scripts/insn-profile.sh: two runs of a benchmark arm that differ only in their
 * number of calls give, line by line, what one more call costs at each address.
 *
 * Debian does not package QEMU's qemu-plugin.h: the few declarations used here are those
 * of its plugin API version 1 (QEMU 7.2 and later keep them), restated.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;

typedef struct {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_op {
	QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
					      enum qemu_plugin_op op, void *ptr,
					      uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* The kernel half of x86-64's address space. */
#define KERNEL_START 0xffff800000000000ull

/* A translated block: its count, and its instructions' addresses. */
struct block {
	uint64_t count;
	struct block *next;
	size_t n;
	uint64_t addr[];
};

static struct block *blocks;
static const char *out = "insn-count.out";

/* Context: QEMU's translator; the guest runs one vCPU thread at a time (thread=single). */
static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t i, n = qemu_plugin_tb_n_insns(tb);
	struct block *b;

	if (!n || qemu_plugin_tb_vaddr(tb) < KERNEL_START)
		return;
	b = calloc(1, sizeof(*b) + n * sizeof(b->addr[0]));
	if (!b)
		return;
	b->n = n;
	for (i = 0; i < n; i++)
		b->addr[i] = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
	b->next = blocks;
	blocks = b;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}

static void finished(qemu_plugin_id_t id, void *unused)
{
	struct block *b;
	FILE *f = fopen(out, "w");
	size_t i;

	if (!f) {
		perror(out);
		return;
	}
	for (b = blocks; b; b = b->next)
		for (i = 0; b->count && i < b->n; i++)
			fprintf(f, "%llx %llu\n", (unsigned long long)b->addr[i],
				(unsigned long long)b->count);
	fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, finished, NULL);
	return 0;
}
