// SPDX-License-Identifier: GPL-2.0
/*
 * The .eh_frame unwinder's access to the task (src/unwind.rs): its user registers, its
 * memory and its mappings, and the switch between the unwinders (the module parameter
 * "unwinder").
 *
 * Context: the deferred-unwind callback, task context of current on its way back to user
 * space, where faults are allowed; inside the unwinder's SRCU read side, which module
 * unload waits for. So a read never waits for what user space controls: it is made
 * without faulting first, and faults a page in only where the mapping is anonymous memory
 * or a file of a local filesystem (block-backed, tmpfs, ramfs). Elsewhere (FUSE, NFS, any
 * filesystem whose fault may wait on a server) a page not already mapped is not read: the
 * frame falls back to the frame-pointer rule, and a later stack, after the program or
 * another reader touched the page, gets it. A mapping replaced between the check and the
 * faulting read (another thread's mmap(MAP_FIXED) racing the unwind) can still make that
 * one read wait for a fault; such a wait is killable, and FUSE bounds it with its request
 * timeout.
 */
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <asm/ptrace.h>
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

/* Whether a fault on @vma's pages can only wait for local I/O. */
static bool uu_vma_faultable(struct vm_area_struct *vma)
{
	const struct super_block *sb;

	if (vma->vm_flags & (VM_IO | VM_PFNMAP))
		return false;
	if (!vma->vm_file || vma_is_anonymous(vma))
		return true;
	sb = file_inode(vma->vm_file)->i_sb;
	return (sb->s_type->fs_flags & FS_REQUIRES_DEV) || sb->s_magic == TMPFS_MAGIC ||
	       sb->s_magic == RAMFS_MAGIC;
}

/* Whether [@addr, @addr + @len) lies in one VMA of current whose faults are local. */
static bool uu_range_faultable(unsigned long addr, size_t len)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	bool ok;

	if (!mm)
		return false;
	vma = lock_vma_under_rcu(mm, addr);
	if (vma) {
		ok = addr + len <= vma->vm_end && uu_vma_faultable(vma);
		vma_end_read(vma);
		return ok;
	}
	if (!mmap_read_trylock(mm))
		return false;
	vma = vma_lookup(mm, addr);
	ok = vma && addr + len <= vma->vm_end && uu_vma_faultable(vma);
	mmap_read_unlock(mm);
	return ok;
}

/**
 * uu_unwind_read - read current's user memory for the unwinder
 * @dst: destination
 * @addr: user address
 * @len: bytes
 *
 * Without faulting first; then, for a page not mapped yet, faulting where that can only
 * wait for local I/O (see the top of this file).
 *
 * Context: task, the deferred-unwind callback, may fault.
 * Return: 0, -EFAULT, or -EAGAIN when the page would need a fault this does not take.
 */
int uu_unwind_read(void *dst, u64 addr, size_t len)
{
	const void __user *src = (const void __user *)(unsigned long)addr;

	if (!copy_from_user_nofault(dst, src, len))
		return 0;
	if (addr >= TASK_SIZE_MAX || !len || len > PAGE_SIZE)
		return -EFAULT;
	if (!uu_range_faultable(addr, len)) {
		uu_stat_add(UU_STAT_UNWIND_READS_UNFAULTED, 1);
		return -EAGAIN;
	}
	return copy_from_user(dst, src, len) ? -EFAULT : 0;
}

static void uu_fill_region(struct vm_area_struct *vma, struct uu_region *r)
{
	r->start = vma->vm_start;
	r->end = vma->vm_end;
	r->pgoff = vma->vm_pgoff;
	r->kind = UU_REGION_ANON;
	if (uu_vma_file_id(vma, &r->id))
		r->kind = UU_REGION_FILE;
	else if (vma->vm_mm && vma->vm_start == (unsigned long)vma->vm_mm->context.vdso)
		r->kind = UU_REGION_VDSO;
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

/* VMAs walked back from a frame's to the one mapping its file at offset 0, at most. */
#define UU_BASE_WALK 16

/**
 * uu_unwind_elf_base - where offset 0 of the file mapped at @addr is mapped
 * @addr: a user address in a file mapping
 *
 * The VMA of the same file at page offset 0, found walking back over the VMAs just below
 * @addr's, which hold the object's other segments (ld.so maps an object in one piece).
 *
 * Context: task; tries mmap_lock.
 * Return: the address, or 0 when not found (or mmap_lock was taken).
 */
u64 uu_unwind_elf_base(u64 addr)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma, *prev;
	struct inode *inode;
	u64 base = 0;
	int i;

	if (!mm || !mmap_read_trylock(mm))
		return 0;
	vma = vma_lookup(mm, addr);
	if (!vma || !vma->vm_file)
		goto out;
	inode = file_inode(vma->vm_file);
	for (i = 0; i < UU_BASE_WALK; i++) {
		if (vma->vm_file && file_inode(vma->vm_file) == inode && !vma->vm_pgoff) {
			base = vma->vm_start;
			break;
		}
		if (vma->vm_file && file_inode(vma->vm_file) != inode)
			break;
		if (!vma->vm_start)
			break;
		prev = find_vma(mm, vma->vm_start - 1);
		if (!prev || prev == vma)
			break;
		vma = prev;
	}
out:
	mmap_read_unlock(mm);
	return base;
}
