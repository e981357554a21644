// SPDX-License-Identifier: GPL-2.0
/*
 * The module's counters: per CPU, so that counting on the event path and in the callback
 * writes no shared cache line. Read as /sys/kernel/tracing/user_unwind_stats, one
 * "name: value" line each, like the ring buffer's per_cpu/cpuN/stats.
 *
 * Context: uu_stat_add() in any context, NMI included (this_cpu_add() is one instruction
 * on x86 and interrupt-safe everywhere).
 */
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/seq_file.h>
#include <user_unwind.h>

static DEFINE_PER_CPU(unsigned long [UU_STAT_NR], uu_stats);

static const char *const uu_stat_names[UU_STAT_NR] = {
	[UU_STAT_REQUESTS] = "requests",
	[UU_STAT_REQUESTS_FAILED] = "requests_failed",
	[UU_STAT_REQUESTS_QUEUED] = "requests_queued",
	[UU_STAT_CALLBACKS] = "callbacks",
	[UU_STAT_EXIT_CALLBACKS] = "exit_callbacks",
	[UU_STAT_COOKIES_UNRECORDED] = "cookies_unrecorded",
	[UU_STAT_STACKS] = "stacks",
	[UU_STAT_FRAMES] = "frames",
	[UU_STAT_EMPTY_STACKS] = "empty_stacks",
	[UU_STAT_FILE_CACHE] = "file_cache",
	[UU_STAT_FILE_CACHE_DEFERRED] = "file_cache_deferred",
	[UU_STAT_BUILD_ID_UNCACHED] = "build_id_uncached",
	[UU_STAT_CACHE_RESETS] = "cache_resets",
	[UU_STAT_FILE_CACHE_DROPPED] = "file_cache_dropped",
	[UU_STAT_LOOKUPS_CONTENDED] = "lookups_contended",
	[UU_STAT_STACKS_AFTER_EXEC] = "stacks_after_exec",
	[UU_STAT_UNWIND_STACKS] = "unwind_stacks",
	[UU_STAT_UNWIND_CFI_FRAMES] = "unwind_cfi_frames",
	[UU_STAT_UNWIND_FP_FRAMES] = "unwind_fp_frames",
	[UU_STAT_UNWIND_ROW_MISSES] = "unwind_row_misses",
	[UU_STAT_UNWIND_CFI_ERRORS] = "unwind_cfi_errors",
	[UU_STAT_UNWIND_TRUNCATED] = "unwind_truncated",
	[UU_STAT_UNWIND_READS_UNFAULTED] = "unwind_reads_unfaulted",
	[UU_STAT_UNWIND_TABLES_UNREAD] = "unwind_tables_unread",
	[UU_STAT_UNWIND_POOL_BUSY] = "unwind_pool_busy",
	[UU_STAT_REQUESTS_SKIPPED] = "requests_skipped",
	[UU_STAT_MEMO_EXPIRED] = "memo_expired",
	[UU_STAT_UNWIND_READS_REFUSED] = "unwind_reads_refused",
	[UU_STAT_UNWIND_TABLES_UNSTABLE] = "unwind_tables_unstable",
	[UU_STAT_UNWIND_ROWS_PARSED] = "unwind_rows_parsed",
	[UU_STAT_UNWIND_TABLES_MADE] = "unwind_tables_made",
	[UU_STAT_UNWIND_TABLES_DROPPED] = "unwind_tables_dropped",
	[UU_STAT_UNWIND_TABLES_REFUSED] = "unwind_tables_refused",
	[UU_STAT_FETCHES_QUEUED] = "fetches_queued",
	[UU_STAT_FETCHES_DROPPED] = "fetches_dropped",
	[UU_STAT_UNWIND_TABLES_EVICTED] = "unwind_tables_evicted",
};

void uu_stat_add(enum uu_stat stat, unsigned long n)
{
	if (WARN_ON_ONCE(stat >= UU_STAT_NR))
		return;
	this_cpu_add(uu_stats[stat], n);
}

u64 uu_stat_read(enum uu_stat stat)
{
	u64 sum = 0;
	int cpu;

	if (WARN_ON_ONCE(stat >= UU_STAT_NR))
		return 0;
	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu_ptr(&uu_stats, cpu)[0][stat]);
	return sum;
}

/* The name @stat has in user_unwind_stats, "" for none: KUnit checks src/stats.rs with it. */
const char *uu_stat_name(u32 stat)
{
	return stat < UU_STAT_NR ? uu_stat_names[stat] : "";
}

static int uu_stats_show(struct seq_file *m, void *v)
{
	unsigned long bytes, tables, users;
	int stat;

	for (stat = 0; stat < UU_STAT_NR; stat++)
		seq_printf(m, "%s: %llu\n", uu_stat_names[stat], uu_stat_read(stat));
	/* Not counters: what the files' tables take now. */
	uu_tables_memory(&bytes, &tables, &users);
	seq_printf(m, "unwind_tables: %lu\nunwind_table_bytes: %lu\nunwind_table_users: %lu\n",
		   tables, bytes, users);
	return 0;
}

static int uu_stats_open(struct inode *inode, struct file *file)
{
	return single_open(file, uu_stats_show, inode->i_private);
}

const struct file_operations uu_stats_fops = {
	.owner = THIS_MODULE,
	.open = uu_stats_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};
