// SPDX-License-Identifier: GPL-2.0
/*
 * The .eh_frame unwinder's access to the task (src/unwind.rs): its user registers, its
 * memory and its mappings, and the switch between the unwinders (the module parameter
 * "unwinder").
 *
 * Context: the deferred-unwind callback, task context of current on its way back to user
 * space, inside the unwinder's SRCU read side, which module unload waits for. So nothing
 * here waits for I/O, nor for a lock that can be held across I/O (Documentation/
 * user_unwind.rst, "What the callback can wait for"):
 *
 * - Only ordinary memory is read: never a VM_IO or VM_PFNMAP mapping (a device's
 *   registers, where a read may clear or pop what the program never asked to read);
 *   uu_unwind_ordinary() says where, and the Rust side asks it before it reads a mapping
 *   it has not checked in this stack.
 * - User memory is read without faulting (copy_from_user_nofault()). A page not mapped
 *   now is asked of the fetch thread (src/fetch.c), which faults it in, without waiting
 *   for its I/O, where the VMA is anonymous memory or a file of a local filesystem
 *   (block-backed, tmpfs, ramfs) and not registered with userfaultfd; the stack ends at
 *   that frame (reason "read") and a later stack gets the page.
 * - Unwind tables are read from the file's page cache (uu_unwind_object_*()), never from
 *   the process's mapping, which may hold its private copy-on-write copy: what the
 *   caches share is the file's content. Only folios cached and up to date are read (an
 *   RCU lookup, no folio lock); a page not cached is asked of the fetch thread (read
 *   ahead from a local filesystem) and the stack ends at that frame.
 * - Locks are tried, never waited for (mmap_read_trylock(), lock_vma_under_rcu()), except
 *   spinlocks and mutexes held for CPU work only.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfs2_ondisk.h>
#include <linux/highmem.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/moduleparam.h>
#include <linux/pagemap.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/string.h>
#include <linux/userfaultfd_k.h>
#include <linux/uaccess.h>
#include <asm/ptrace.h>
#include <asm/vdso.h>
#include <user_unwind.h>

enum {
	UU_UNWINDER_EH_FRAME,
	UU_UNWINDER_FP,
};

static int uu_unwinder = UU_UNWINDER_EH_FRAME;

static int uu_unwinder_set(const char *val, const struct kernel_param *kp)
{
	if (sysfs_streq(val, "eh_frame"))
		WRITE_ONCE(uu_unwinder, UU_UNWINDER_EH_FRAME);
	else if (sysfs_streq(val, "fp"))
		WRITE_ONCE(uu_unwinder, UU_UNWINDER_FP);
	else
		return -EINVAL;
	return 0;
}

static int uu_unwinder_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%s\n",
			 READ_ONCE(uu_unwinder) == UU_UNWINDER_FP ? "fp" : "eh_frame");
}

static const struct kernel_param_ops uu_unwinder_ops = {
	.set = uu_unwinder_set,
	.get = uu_unwinder_get,
};

module_param_cb(unwinder, &uu_unwinder_ops, NULL, 0644);
MODULE_PARM_DESC(unwinder,
		 "User stacks from the programs' .eh_frame (eh_frame, the default) or the kernel's frame-pointer walk (fp)");

/**
 * uu_unwind_regs - the user registers the .eh_frame unwinder starts from
 * @regs: filled with the instruction, stack and frame pointers and rbx of current's
 *        kernel entry
 *
 * Context: task, the deferred-unwind callback.
 * Return: true when the .eh_frame unwinder is selected and current runs 64-bit code;
 * false for the kernel's frame-pointer stack (32-bit tasks keep it).
 */
bool uu_unwind_regs(struct uu_regs *regs)
{
	struct pt_regs *pt = task_pt_regs(current);

	if (READ_ONCE(uu_unwinder) != UU_UNWINDER_EH_FRAME || !user_64bit_mode(pt))
		return false;
	regs->ip = pt->ip;
	regs->sp = pt->sp;
	regs->bp = pt->bp;
	regs->bx = pt->bx;
	return true;
}

/* The end of the user address space. */
u64 uu_unwind_user_end(void)
{
	return TASK_SIZE_MAX;
}

/* Whether @vma is ordinary memory, which a read cannot disturb. */
static bool uu_vma_ordinary(struct vm_area_struct *vma)
{
	return !(vma->vm_flags & (VM_IO | VM_PFNMAP));
}

/*
 * Whether the block device or memory behind @sb serves every fault (no server, no daemon,
 * no cluster lock). fuseblk requires a device, but its daemon serves the reads; gfs2 and
 * ocfs2 read under a cluster lock their own paths take (gfs2_fault() holds the glock),
 * which the fetch thread's readahead would not: it could cache what another node has
 * since written.
 */
static bool uu_sb_local(const struct super_block *sb)
{
	switch (sb->s_magic) {
	case TMPFS_MAGIC:
	case RAMFS_MAGIC:
		return true;
	case FUSE_SUPER_MAGIC:
	case GFS2_MAGIC:
	case OCFS2_SUPER_MAGIC:
		return false;
	}
	return sb->s_type->fs_flags & FS_REQUIRES_DEV;
}

/*
 * Whether the fetch thread may fault @vma's pages (src/fetch.c): ordinary memory, of a
 * local filesystem or anonymous. Context: mmap_lock held.
 */
bool uu_vma_faultable(struct vm_area_struct *vma)
{
	if (!uu_vma_ordinary(vma) || userfaultfd_armed(vma))
		return false;
	if (!vma->vm_file || vma_is_anonymous(vma))
		return true;
	return uu_sb_local(file_inode(vma->vm_file)->i_sb);
}

/**
 * uu_unwind_ordinary - whether current's mapping at @addr is ordinary memory
 * @addr: a user address
 * @start: filled with the mapping's first address
 * @end: filled with the address after its last one
 *
 * From this CPU's memo (src/vma_memo.c) if it knows @addr, else looked up (and noted
 * there).
 *
 * Context: task; takes the VMA's lock, or tries mmap_lock.
 * Return: 0 for anonymous memory or a file's pages; -EPERM for a VM_IO or VM_PFNMAP
 * mapping (counted as unwind_reads_refused); -EFAULT without a mapping or when mmap_lock
 * was taken.
 */
int uu_unwind_ordinary(u64 addr, u64 *start, u64 *end)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	bool locked = false;
	int ret = -EFAULT;

	if (!mm)
		return -EFAULT;
	if (!uu_vma_memo_ordinary(addr, start, end))
		return 0;
	vma = lock_vma_under_rcu(mm, addr);
	if (!vma) {
		if (!mmap_read_trylock(mm))
			return -EFAULT;
		locked = true;
		vma = vma_lookup(mm, addr);
	}
	if (vma) {
		*start = vma->vm_start;
		*end = vma->vm_end;
		ret = uu_vma_ordinary(vma) ? 0 : -EPERM;
		if (!ret && !locked)
			uu_vma_memo_note_ordinary(vma);
	}
	if (locked)
		mmap_read_unlock(mm);
	else if (vma)
		vma_end_read(vma);
	if (ret == -EPERM)
		uu_stat_add(UU_STAT_UNWIND_READS_REFUSED, 1);
	return ret;
}

/**
 * uu_unwind_read - read current's user memory for the unwinder
 * @dst: destination
 * @addr: user address, in memory uu_unwind_ordinary() accepted
 * @len: bytes, at most a page
 *
 * Never faults: a page not mapped now is asked of the fetch thread (src/fetch.c), which
 * faults it in for a later stack (see the top of this file).
 *
 * Context: task, the deferred-unwind callback; never sleeps.
 * Return: 0, -EFAULT, or -EAGAIN when a page is not mapped now (unwind_reads_unfaulted).
 */
int uu_unwind_read(void *dst, u64 addr, size_t len)
{
	const void __user *src = (const void __user *)(unsigned long)addr;

	if (!copy_from_user_nofault(dst, src, len))
		return 0;
	if (addr >= TASK_SIZE_MAX || !len || len > PAGE_SIZE)
		return -EFAULT;
	uu_stat_add(UU_STAT_UNWIND_READS_UNFAULTED, 1);
	/* The first page that failed; the next stack asks for the other if need be. */
	if (copy_from_user_nofault(dst, src, 1))
		uu_fetch_user(addr);
	else
		uu_fetch_user(PAGE_ALIGN(addr + 1));
	return -EAGAIN;
}

/* Whether @vma is the vDSO: the special mapping that names itself so, as in /proc/PID/maps. */
static bool uu_vma_is_vdso(struct vm_area_struct *vma)
{
	const char *name;

	if (!vma->vm_ops || !vma->vm_ops->name)
		return false;
	name = vma->vm_ops->name(vma);
	return name && !strcmp(name, "[vdso]");
}

/*
 * The identity of the vDSO image @image: one special mapping named "[vdso]" serves the
 * 64-bit, 32-bit and x32 images (arch/x86/entry/vdso/vma.c), and a 64-bit task may swap
 * its own for the 32-bit one (arch_prctl(ARCH_MAP_VDSO_32)), so the name is no key. The
 * image (mm->context.vdso_image, set by map_vdso(), which vdso_fault() serves the
 * mapping's pages from) and its size are; the pointer is only hashed into a cache key
 * under the module's secret, never recorded.
 */
static void uu_vdso_id(struct uu_file_id *id, const struct vdso_image *image)
{
	memset(id, 0, sizeof(*id));
	id->ino = (unsigned long)image;
	id->ctime_sec = image ? image->size : 0;
}

static void uu_fill_region(struct vm_area_struct *vma, struct uu_region *r)
{
	r->start = vma->vm_start;
	r->end = vma->vm_end;
	r->pgoff = vma->vm_pgoff;
	r->kind = UU_REGION_ANON;
	if (uu_vma_file_id(vma, &r->id))
		r->kind = UU_REGION_FILE;
	else if (uu_vma_is_vdso(vma) && !vma->vm_pgoff) {
		r->kind = UU_REGION_VDSO;
		uu_vdso_id(&r->id, READ_ONCE(vma->vm_mm->context.vdso_image));
	}
}

/**
 * uu_unwind_region - the mapping of current that holds @addr
 * @addr: a user address
 * @r: filled with its range, page offset, kind and, for a file, its identity
 *
 * From this CPU's memo of the last stacks' file mappings (src/vma_memo.c) if it knows
 * @addr, else looked up (and a file mapping noted there).
 *
 * Context: task; takes the VMA's lock, or tries mmap_lock.
 * Return: 0, -ENOENT when no mapping holds @addr, -EBUSY when mmap_lock was taken.
 */
int uu_unwind_region(u64 addr, struct uu_region *r)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;

	if (!mm)
		return -ENOENT;
	if (!uu_vma_memo_find(addr, r))
		return 0;
	vma = lock_vma_under_rcu(mm, addr);
	if (vma) {
		uu_fill_region(vma, r);
		if (r->kind == UU_REGION_FILE)
			uu_vma_memo_note(vma, &r->id);
		vma_end_read(vma);
		return 0;
	}
	if (!mmap_read_trylock(mm))
		return -EBUSY;
	vma = vma_lookup(mm, addr);
	if (vma)
		uu_fill_region(vma, r);
	mmap_read_unlock(mm);
	return vma ? 0 : -ENOENT;
}

/*
 * How much older than now a change time must be on a filesystem without multigrain
 * timestamps: the coarsest such a filesystem keeps, FAT's 2 s.
 */
#define UU_SETTLE_SEC 2

/*
 * Makes @o the object of @file, whose reference the caller took and @o now holds; @o->id
 * is already its identity. A file not to read (as uu_file_read(): regular files only,
 * never memory the kernel keeps from itself) is let go: -EINVAL.
 *
 * What is read is marked unsettled (o->writers) when a writer has the file open, and when
 * the identity's change time is not older than the time a write would stamp now
 * (current_time()): a write leaves the change time as it is when it falls in the tick
 * that time was stamped in (inode_needs_update_time()). On a multigrain filesystem
 * (ext4, xfs, btrfs, tmpfs: is_mgtime()) the identity's change time was queried
 * (uu_ctime()), so any later write stamps a later one, and a time older than the current
 * tick suffices. Elsewhere the time must be UU_SETTLE_SEC older: such a filesystem may
 * keep coarser times than its s_time_gran says (FAT declares 1 ns and truncates to 2 s
 * itself: fat_truncate_time()).
 */
static int uu_object_hold_file(struct uu_object *o, struct file *file)
{
	struct inode *inode = file_inode(file);
	struct timespec64 now = current_time(inode);
	struct timespec64 then = {
		.tv_sec = o->id.ctime_sec + (is_mgtime(inode) ? 0 : UU_SETTLE_SEC),
		.tv_nsec = o->id.ctime_nsec,
	};

	if (!S_ISREG(inode->i_mode) || inode->i_sb->s_magic == SECRETMEM_MAGIC ||
	    mapping_inaccessible(file->f_mapping)) {
		fput(file);
		return -EINVAL;
	}
	o->file = file;
	o->size = i_size_read(inode);
	o->writers = atomic_read(&inode->i_writecount) > 0 ||
		     timespec64_compare(&then, &now) >= 0;
	o->kind = UU_REGION_FILE;
	return 0;
}

/**
 * uu_unwind_object_open - hold the object mapped at @addr, to read its unwind table
 * @addr: a user address in a mapping uu_unwind_region() found of kind UU_REGION_FILE or
 *        UU_REGION_VDSO
 * @o: filled with the object: for a file, the file held (get_file()), its identity and
 *     whether it is open for writing; for the vDSO, its start and its image's bytes
 *
 * The file of a mapping this CPU's memo knows is taken from the memo (uu_vma_memo_file()),
 * with no maple tree walk and no lock.
 *
 * Context: task; takes the VMA's lock, or tries mmap_lock.
 * Return: 0; -ENOENT when the mapping at @addr is no object; -EINVAL when its file is not
 * one to read (not a regular file, or memory the kernel keeps from itself); -EBUSY when
 * mmap_lock was taken. On success uu_unwind_object_close() must follow.
 */
int uu_unwind_object_open(u64 addr, struct uu_object *o)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	const struct vdso_image *image;
	struct file *file;
	bool locked = false;
	int ret = -ENOENT;

	memset(o, 0, sizeof(*o));
	if (!mm)
		return -ENOENT;
	file = uu_vma_memo_file(addr, &o->id);
	if (file)
		return uu_object_hold_file(o, file);
	vma = lock_vma_under_rcu(mm, addr);
	if (!vma) {
		if (!mmap_read_trylock(mm))
			return -EBUSY;
		locked = true;
		vma = vma_lookup(mm, addr);
		if (!vma)
			goto out;
	}
	file = uu_vma_file_id(vma, &o->id);
	if (file) {
		ret = uu_object_hold_file(o, get_file(file));
	} else if (uu_vma_is_vdso(vma) && !vma->vm_pgoff) {
		image = READ_ONCE(mm->context.vdso_image);
		if (image) {
			o->start = vma->vm_start;
			o->vdso = image->data;
			o->size = image->size;
			o->kind = UU_REGION_VDSO;
			uu_vdso_id(&o->id, image);
			ret = 0;
		}
	}
out:
	if (locked)
		mmap_read_unlock(mm);
	else
		vma_end_read(vma);
	return ret;
}

/*
 * Holds in @o the folio of its file that holds @offset, if its page cache has it up to
 * date (a lookup under RCU: no lock, no wait); else asks the fetch thread to read it, for
 * a later stack, and fails. Successive reads of a table mostly fall in one folio, which is
 * then found without a page cache lookup.
 */
static int uu_object_folio(struct uu_object *o, u64 offset)
{
	struct address_space *mapping = o->file->f_mapping;
	struct folio *folio = o->folio;
	pgoff_t index = offset >> PAGE_SHIFT;

	if (folio && offset >= folio_pos(folio) && offset - folio_pos(folio) < folio_size(folio))
		return 0;
	if (folio)
		folio_put(folio);
	o->folio = NULL;
	folio = filemap_get_folio(mapping, index);
	if (!IS_ERR(folio) && !folio_test_uptodate(folio)) {
		folio_put(folio);
		folio = ERR_PTR(-EAGAIN);
	}
	if (IS_ERR(folio)) {
		if (uu_sb_local(file_inode(o->file)->i_sb) && mapping->a_ops->read_folio)
			uu_fetch_file(o->file, index);
		return -EAGAIN;
	}
	o->folio = folio;
	return 0;
}

/**
 * uu_unwind_object_read - read the object uu_unwind_object_open() holds
 * @o: the object
 * @offset: a file offset
 * @buf: destination
 * @len: bytes
 *
 * A file is read from its page cache, never from the process's mapping; a page not
 * cached or not up to date is not read now: the fetch thread reads it ahead
 * (src/fetch.c) and this read fails. The vDSO is read from its image, not where it is
 * mapped (a debugger's breakpoint or another image's pages there are the task's own).
 *
 * Context: task, the deferred-unwind callback; never waits for I/O.
 * Return: 0; -EFAULT past the end of the file (its size when it was opened) or of the
 * vDSO; -EAGAIN when a page is not cached and not read; or another negative errno.
 */
int uu_unwind_object_read(struct uu_object *o, u64 offset, void *buf, size_t len)
{
	size_t n, at;
	int ret;

	if (offset > o->size || len > o->size - offset)
		return -EFAULT;
	if (o->kind == UU_REGION_VDSO) {
		memcpy(buf, o->vdso + offset, len);
		return 0;
	}
	while (len) {
		ret = uu_object_folio(o, offset);
		if (ret)
			return ret;
		at = offset - folio_pos(o->folio);
		n = min(len, folio_size(o->folio) - at);
		memcpy_from_folio(buf, o->folio, at, n);
		buf += n;
		offset += n;
		len -= n;
	}
	return 0;
}

/**
 * uu_unwind_object_settled - whether what was read from @o is its settled content
 * @o: the object uu_unwind_object_open() holds
 *
 * Context: task.
 * Return: whether what was read from it is content that caches shared by every process
 * may keep: for a file, no writer had it open when it was opened nor has now (a write
 * changes the change time before the data, file_modified(), so the identity alone cannot
 * tell a half-written table), and its change time is the one of its identity; the vDSO
 * is read from its image, the kernel's own bytes, always settled.
 */
bool uu_unwind_object_settled(struct uu_object *o)
{
	struct timespec64 ctime;

	if (o->kind != UU_REGION_FILE)
		return o->kind == UU_REGION_VDSO;
	ctime = uu_ctime(file_inode(o->file));
	return !o->writers && atomic_read(&file_inode(o->file)->i_writecount) <= 0 &&
	       ctime.tv_sec == o->id.ctime_sec && ctime.tv_nsec == o->id.ctime_nsec;
}

/**
 * uu_unwind_object_close - let go of the object uu_unwind_object_open() held
 * @o: the object
 *
 * Context: task.
 */
void uu_unwind_object_close(struct uu_object *o)
{
	if (o->kind == UU_REGION_FILE) {
		if (o->folio)
			folio_put(o->folio);
		fput(o->file);
	}
	memset(o, 0, sizeof(*o));
}
