// SPDX-License-Identifier: GPL-2.0
/*
 * The files behind file cookies: their path and contents for file_cache, and the probes
 * that keep the first-sight cache honest.
 *
 * - __fput(), and any compiler clone of it (__fput.isra.0 and the like, found in kallsyms
 *   at load): the struct file is about to be freed, so a new file at the same address gets
 *   its own file_cache event. Armed only while stacks are requested (uu_files_arm()), so a
 *   loaded, idle module costs the system's fput() nothing; armed, it runs for every final
 *   fput(), in task or workqueue context (never NMI), and does one hash and one load (a
 *   compare-exchange only for a file in the cache). On x86 with CONFIG_KPROBES_ON_FTRACE
 *   it is an ftrace call, not an int3. While it is disarmed the cache is not trusted.
 * - The ring buffer switched on or reset, resized or re-enabled (tracing_on, echo > trace,
 *   trace-cmd starting, a reader of the trace file finishing): a reader may have lost the
 *   file_cache events written before, so the cache starts a new generation. Cold paths.
 *
 * When the __fput probe may have missed a call (kprobes disarmed globally through
 * debug/kprobes/enabled, or its nmissed count grew), uu_files_check() tells the callback
 * to clear the cache rather than trust it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/kprobes.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <user_unwind.h>

#include "wrapper/symbols.h"

/* __fput itself and at most this many clones of it. */
#define UU_FPUT_PROBES 4

static int uu_fput_pre(struct kprobe *p, struct pt_regs *regs)
{
	uu_rust_file_freed(regs_get_kernel_argument(regs, 0));
	return 0;
}

static struct kprobe uu_fput_probes[UU_FPUT_PROBES];
static struct kprobe *uu_fput_probe_ptrs[UU_FPUT_PROBES];
static char uu_fput_names[UU_FPUT_PROBES][KSYM_NAME_LEN];
static int uu_nr_fput_probes;
static int uu_nr_fput_symbols;
/* Every __fput probe is armed; written by uu_files_arm() only. */
static bool uu_fput_armed;

static int uu_reset_pre(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	uu_rust_files_reset();
	return 0;
}

/*
 * Entered and left: the generation moves before the buffer changes (so that a stack
 * written after the change knows its file_cache events may be gone) and after (so that a
 * file_cache written during the change is not remembered).
 */
#define UU_RESET_PROBE(sym) {						\
	.kp.symbol_name = #sym,						\
	.entry_handler = uu_reset_pre,					\
	.handler = uu_reset_pre,					\
}

static struct kretprobe uu_reset_probes[] = {
	UU_RESET_PROBE(ring_buffer_record_on),
	UU_RESET_PROBE(ring_buffer_record_enable),
	UU_RESET_PROBE(ring_buffer_reset_cpu),
	UU_RESET_PROBE(ring_buffer_reset_online_cpus),
	UU_RESET_PROBE(ring_buffer_reset),
	UU_RESET_PROBE(ring_buffer_resize),
};

static struct kretprobe *uu_reset_probe_ptrs[ARRAY_SIZE(uu_reset_probes)];
static bool uu_reset_probed;
static unsigned long uu_missed_seen;

static int uu_find_fput(void *data, const char *name, unsigned long addr)
{
	if (!uu_is_fput_symbol(name, strlen(name)))
		return 0;
	if (uu_nr_fput_symbols++ < UU_FPUT_PROBES)
		strscpy(uu_fput_names[uu_nr_fput_probes++], name, KSYM_NAME_LEN);
	return 0;
}

/**
 * uu_files_init - start following the end of struct file lifetimes and buffer resets
 *
 * Context: task, may sleep.
 * Return: 0, -ENOENT when no __fput is found, or the negative errno of register_kprobes().
 */
int uu_files_init(void)
{
	int i, ret;

	uu_nr_fput_probes = 0;
	uu_nr_fput_symbols = 0;
	uu_call(kallsyms_on_each_symbol)(uu_find_fput, NULL);
	if (!uu_nr_fput_probes) {
		pr_err("no __fput in kallsyms: file cookies could not be told apart\n");
		return -ENOENT;
	}
	if (uu_nr_fput_symbols > UU_FPUT_PROBES) {
		pr_err("%d copies of __fput, more than the %d the module probes\n",
		       uu_nr_fput_symbols, UU_FPUT_PROBES);
		uu_nr_fput_probes = 0;
		return -E2BIG;
	}
	for (i = 0; i < uu_nr_fput_probes; i++) {
		uu_fput_probes[i].symbol_name = uu_fput_names[i];
		uu_fput_probes[i].pre_handler = uu_fput_pre;
		/* Registered disarmed: uu_files_arm() arms them while stacks are requested. */
		uu_fput_probes[i].flags = KPROBE_FLAG_DISABLED;
		uu_fput_probe_ptrs[i] = &uu_fput_probes[i];
	}
	ret = register_kprobes(uu_fput_probe_ptrs, uu_nr_fput_probes);
	if (ret) {
		pr_err("cannot probe %s (%d): file cookies could not be told apart\n",
		       uu_fput_names[0], ret);
		return ret;
	}

	for (i = 0; i < ARRAY_SIZE(uu_reset_probes); i++) {
		uu_reset_probes[i].maxactive = max(2 * num_possible_cpus(), 16U);
		uu_reset_probe_ptrs[i] = &uu_reset_probes[i];
	}
	ret = register_kretprobes(uu_reset_probe_ptrs, ARRAY_SIZE(uu_reset_probes));
	uu_reset_probed = !ret;
	if (ret)
		pr_warn("cannot probe the ring buffer's resets (%d): late readers rely on the reminders\n",
			ret);
	return 0;
}

/**
 * uu_files_arm - arm or disarm the __fput probes
 * @on: arm them
 *
 * Stacks are requested only while they are armed; a stack recorded while they are not (one
 * requested just before) finds uu_files_check() true and trusts nothing the cache says.
 * The cache starts a new generation after every change: files freed while the probes were
 * disarmed are forgotten, and a stack whose file_cache events were decided across the
 * change repeats them after it.
 *
 * Context: task, may sleep, holding none of the locks an event's reg callback runs under
 * (enable_kprobe() takes kprobe_mutex: see src/hook.c); called only by the hook's work item
 * and, after it is cancelled, by uu_hook_exit(), which serialises the calls.
 */
void uu_files_arm(bool on)
{
	int i, ret = 0;

	if (on == uu_fput_armed)
		return;
	if (!on)
		WRITE_ONCE(uu_fput_armed, false);
	for (i = 0; i < uu_nr_fput_probes; i++) {
		if (!on) {
			disable_kprobe(&uu_fput_probes[i]);
			continue;
		}
		ret = enable_kprobe(&uu_fput_probes[i]);
		if (ret)
			break;
	}
	if (ret) {
		pr_warn_once("cannot arm %s (%d): every stack rewrites its file_cache events\n",
			     uu_fput_names[i], ret);
		while (i--)
			disable_kprobe(&uu_fput_probes[i]);
	}
	uu_rust_files_reset();
	if (on && !ret)
		WRITE_ONCE(uu_fput_armed, true);
}

void uu_files_exit(void)
{
	if (uu_reset_probed)
		unregister_kretprobes(uu_reset_probe_ptrs, ARRAY_SIZE(uu_reset_probes));
	uu_reset_probed = false;
	unregister_kprobes(uu_fput_probe_ptrs, uu_nr_fput_probes);
	uu_nr_fput_probes = 0;
}

/* Whether the ring buffer's resets and switches reach uu_rust_files_reset(). */
bool uu_files_resets_probed(void)
{
	return uu_reset_probed;
}

/**
 * uu_files_check - whether the __fput probes may have missed a call since the last check
 *
 * True while the module keeps them disarmed (no stacks requested), while kprobes are
 * disarmed globally (debug/kprobes/enabled is 0) and when a probe counted a miss; the
 * caller then must not trust the first-sight cache. A global disarm and re-arm between two
 * checks is not seen: nothing the module can probe runs then.
 *
 * Context: task.
 */
bool uu_files_check(void)
{
	unsigned long missed = 0;
	int i;

	if (!READ_ONCE(uu_fput_armed))
		return true;
	for (i = 0; i < uu_nr_fput_probes; i++)
		missed += READ_ONCE(uu_fput_probes[i].nmissed);
	for (i = 0; uu_reset_probed && i < ARRAY_SIZE(uu_reset_probes); i++)
		missed += READ_ONCE(uu_reset_probes[i].nmissed) +
			  READ_ONCE(uu_reset_probes[i].kp.nmissed);
	if (READ_ONCE(*uu_sym.kprobes_all_disarmed) || missed != READ_ONCE(uu_missed_seen)) {
		WRITE_ONCE(uu_missed_seen, missed);
		uu_stat_add(UU_STAT_PROBE_MISSES, 1);
		return true;
	}
	return false;
}

static bool uu_needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '\\';
}

/*
 * Escapes, in place, the control bytes and backslashes of the NUL-terminated path at @p
 * inside @buf as \ooo, as /proc/PID/maps escapes a newline: a file name must not forge
 * lines or fields in the text output. Escaping grows the path towards the start of @buf,
 * where d_path() leaves room; without room a byte becomes '?'.
 */
static const char *uu_escape_path(char *buf, char *p)
{
	size_t room = p - buf, need = 0, len = strlen(p), i;
	char *out = buf;

	for (i = 0; i < len; i++)
		need += uu_needs_escape(p[i]) ? 3 : 0;
	if (!need)
		return p;
	if (need > room) {
		for (i = 0; i < len; i++)
			if (uu_needs_escape(p[i]))
				p[i] = '?';
		return p;
	}
	/* Forward: the write position never passes the read one (need <= room). */
	for (i = 0; i <= len; i++) {
		unsigned char c = p[i];

		if (i < len && uu_needs_escape(c)) {
			*out++ = '\\';
			*out++ = '0' + (c >> 6);
			*out++ = '0' + ((c >> 3) & 7);
			*out++ = '0' + (c & 7);
		} else {
			*out++ = c;
		}
	}
	return buf;
}

/**
 * uu_file_path - the path of @file as the current task sees it, escaped
 * @file: a file the caller holds a reference on
 * @buf: where the path is built
 * @len: size of @buf
 *
 * A deleted file keeps its " (deleted)" mark. A path that does not fit is shortened to its
 * last components behind a visible ".../". Control bytes and backslashes are escaped as
 * \ooo (see uu_escape_path()).
 *
 * Context: task.
 * Return: the NUL-terminated path, inside @buf.
 */
const char *uu_file_path(struct file *file, char *buf, int len)
{
	const struct path *path = file_user_path(file);
	char *p = d_path(path, buf, len);

	if (IS_ERR(p)) {
		size_t n;

		/* The last four components, of the same path d_path() was given. */
		n = snprintf(buf, len, ".../%pd4", path->dentry);
		n = min_t(size_t, n, len - 1);
		p = buf + len - n - 1;
		memmove(p, buf, n + 1);
	}
	return uu_escape_path(buf, p);
}

/**
 * uu_file_read - read the contents of a regular file from the page cache only
 * @file: a file the caller holds a reference on
 * @offset: where to read
 * @buf: destination
 * @len: at most this many bytes
 *
 * As lib/buildid.c reads without faulting: only folios already cached and up to date,
 * never I/O, no LSM or fsnotify hook, no atime update, no FUSE or NFS round trip (the
 * callback runs on the task's way back to user space). Only regular files: a mapped
 * device may have side effects on read; and never memory the kernel keeps from itself
 * (memfd_secret(), guest_memfd).
 *
 * The guest tests cannot show the -EAGAIN path: the guest's root is an initramfs, whose
 * pages never leave the page cache, and the test kernel has no block device.
 *
 * Context: task.
 * Return: bytes read (at most up to the end of the page at @offset), 0 at the end of the
 * file, -EAGAIN when the page is not cached, or another negative errno.
 */
long uu_file_read(struct file *file, u64 offset, u8 *buf, size_t len)
{
	struct inode *inode = file_inode(file);
	struct folio *folio;
	loff_t size = i_size_read(inode);
	size_t in_folio;

	if (!S_ISREG(inode->i_mode) || inode->i_sb->s_magic == SECRETMEM_MAGIC ||
	    mapping_inaccessible(file->f_mapping) || offset > MAX_LFS_FILESIZE)
		return -EINVAL;
	if (offset >= size)
		return 0;
	len = min_t(u64, len, size - offset);
	len = min_t(size_t, len, PAGE_SIZE - offset_in_page(offset));

	folio = filemap_get_folio(file->f_mapping, offset >> PAGE_SHIFT);
	if (IS_ERR(folio))
		return -EAGAIN;
	if (!folio_test_uptodate(folio)) {
		folio_put(folio);
		return -EAGAIN;
	}
	in_folio = offset - folio_pos(folio);
	memcpy_from_folio((char *)buf, folio, in_folio, len);
	folio_put(folio);
	return len;
}

/**
 * uu_vma_name - the name the kernel gives a VMA without a file
 * @vma: a VMA whose lock (or mmap_lock) the caller holds
 * @buf: where the name is written, NUL-terminated
 * @len: size of @buf
 * @special: set when the name is a special mapping's, cleared for anonymous memory
 *
 * Special mappings name themselves ("[vdso]", "[vvar]"); anonymous memory may carry a
 * name given with prctl(PR_SET_VMA_ANON_NAME), shown as "[anon:name]" as in
 * /proc/PID/maps.
 *
 * Context: task, VMA stabilised.
 * Return: the length of the name, 0 when it has none.
 */
int uu_vma_name(struct vm_area_struct *vma, char *buf, int len, bool *special)
{
	const char *name = NULL;

	*special = false;
	if (vma->vm_file)
		return 0;
	if (vma->vm_ops && vma->vm_ops->name)
		name = vma->vm_ops->name(vma);
	if (name) {
		*special = true;
		return scnprintf(buf, len, "%s", name);
	}
#ifdef CONFIG_ANON_VMA_NAME
	if (vma->anon_name)
		return scnprintf(buf, len, "[anon:%s]", vma->anon_name->name);
#endif
	return 0;
}
