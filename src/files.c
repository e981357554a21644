// SPDX-License-Identifier: GPL-2.0
/*
 * The files behind file cookies: their identity, path and contents for file_cache, and the
 * probes that tell the first-sight cache when a reader may have lost what it was told.
 *
 * A file cookie hashes the file's identity (uu_vma_file_id()), which no other file takes
 * over, so nothing follows the lifetime of files.
 *
 * The ring buffer switched on or reset, resized or re-enabled (tracing_on, echo > trace,
 * trace-cmd starting, a reader of the trace file finishing): a reader may have lost the
 * file_cache events written before, so the cache starts a new generation. Cold paths.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/kprobes.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pagemap.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <user_unwind.h>

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

/**
 * uu_files_init - start following the ring buffer's resets
 *
 * Without the probes the module still works: a reader that starts late then finds the
 * file_cache of every file still in use at its reminder, within a second.
 *
 * Context: task, may sleep.
 * Return: 0.
 */
int uu_files_init(void)
{
	int i, ret;

	uu_tables_init();
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

void uu_files_exit(void)
{
	uu_vma_memo_exit();
	uu_tables_exit();
	if (uu_reset_probed)
		unregister_kretprobes(uu_reset_probe_ptrs, ARRAY_SIZE(uu_reset_probes));
	uu_reset_probed = false;
}

/* Whether the ring buffer's resets and switches reach uu_rust_files_reset(). */
bool uu_files_resets_probed(void)
{
	return uu_reset_probed;
}

/*
 * The change time of @inode, as the identity has it. On a filesystem with multigrain
 * timestamps (tmpfs, ext4, xfs, btrfs), a change within a clock tick of the last one keeps
 * the last change time unless it was queried since: a file rewritten in place twice within
 * a tick, with stacks taken in between, kept one identity, and the second content was
 * unwound with the first one's rows. So the time is read as stat() reads it
 * (fill_mg_cmtime() in fs/stat.c, whose ctime half this is, without its 200-byte kstat and
 * the mtime): the first read after a change marks it queried, and the next change of a
 * file the module has seen gets a time of its own, however soon it comes. Elsewhere the
 * filesystem's own granularity applies.
 */
struct timespec64 uu_ctime(const struct inode *inode)
{
	/* The queried mark is the one write, as any stat() of the file makes it. */
	atomic_t *pcn = (atomic_t *)&((struct inode *)inode)->i_ctime_nsec;
	struct timespec64 ctime;

	if (!is_mgtime(inode))
		return inode_get_ctime(inode);
	ctime.tv_sec = inode_get_ctime_sec(inode);
	ctime.tv_nsec = (u32)atomic_read(pcn);
	if (!(ctime.tv_nsec & I_CTIME_QUERIED))
		ctime.tv_nsec = (u32)atomic_fetch_or(I_CTIME_QUERIED, pcn);
	ctime.tv_nsec &= ~I_CTIME_QUERIED;
	return ctime;
}

/**
 * uu_vma_file_id - the identity of the file a VMA maps
 * @vma: a VMA whose lock (or mmap_lock) the caller holds
 * @id: filled with the file's identity when it has one
 *
 * The identity is that of the inode whose bytes the mapping holds and the unwinder reads
 * (file_inode() of vm_file): device and inode number, with the inode's generation and
 * change time, which tell apart an inode number reused by another file and a file
 * rewritten in place. For a file of a stacked filesystem (overlayfs, FUSE passthrough),
 * vm_file is the layer's real file (backing_file_mmap(), fs/backing-file.c), and that
 * is the inode named here, not the one user space sees (file_user_inode(), whose change
 * time overlayfs refreshes only for changes made through it): a layer's file rewritten
 * underneath is a new identity. /proc/PID/maps shows the overlay's device and inode.
 * The change time is read without the inode lock: a read that races a
 * change may mix the old and new time, which only makes a cookie no file_cache explains
 * yet, and the next stack reads it whole.
 *
 * Only a file a symbolizer can open by its path has an identity. Not one:
 * - anonymous memory with a vm_file: a private mapping of /dev/zero (vma_is_anonymous()),
 *   shared anonymous memory, anonymous huge pages and memfd files (files of a kernel-
 *   internal mount: shmem's, hugetlbfs's), whose frames are JIT code when they are code;
 * - VM_PFNMAP and VM_IO mappings: a copy-on-write remap_pfn_range() sets vm_pgoff to the
 *   page frame number, so their "file offset" would be a physical address.
 * Their frames are recorded as raw addresses, as perf records them.
 *
 * Context: task, VMA stabilised.
 * Return: the mapped file (valid while the VMA's lock is held), or NULL.
 */
struct file *uu_vma_file_id(struct vm_area_struct *vma, struct uu_file_id *id)
{
	struct file *file = vma->vm_file;
	const struct inode *inode;
	struct timespec64 ctime;

	if (!file || vma_is_anonymous(vma) || (vma->vm_flags & (VM_PFNMAP | VM_IO)) ||
	    (file_user_path(file)->mnt->mnt_flags & MNT_INTERNAL))
		return NULL;
	inode = file_inode(file);
	ctime = uu_ctime(inode);
	*id = (struct uu_file_id) {
		.ino = inode->i_ino,
		.ctime_sec = ctime.tv_sec,
		.dev = inode->i_sb->s_dev,
		.generation = inode->i_generation,
		.ctime_nsec = ctime.tv_nsec,
	};
	return file;
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
 * uu_vma_name - the name the kernel gives a VMA without a file identity
 * @vma: a VMA whose lock (or mmap_lock) the caller holds, for which uu_vma_file_id()
 *       found no identity
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
