// SPDX-License-Identifier: GPL-2.0
/*
 * The file mappings of the last stacks, per CPU, so that the next stack of the same
 * address space finds its VMAs without walking the maple tree and taking their locks: a
 * task traced over and over makes the same few lookups (its program, libc, ld.so) on
 * every stack. Also the last mapping found to be ordinary memory (the stack, which the
 * unwinder checks before it reads it).
 *
 * A memo holds an mm (mmgrab()ed, so no other mm can have its address while it is kept),
 * the mm's mmap_lock sequence count at the time its entries were noted, and up to
 * UU_MEMO_VMAS file mappings: range, page offset, identity, the user inode and the VMA's
 * file (no reference taken: the VMA holds one while the count is unchanged). Every
 * change of a VMA's range, offset or file write-locks the VMA, which needs mmap_lock for
 * writing, which moves the sequence count (include/linux/mmap_lock.h; uprobes' speculative
 * lookup relies on the same). So while the count is what it was, every entry still is
 * exactly what the VMA says, and its inode is alive. An entry is noted while its VMA is
 * locked (it cannot change) and only when the count is even (no writer); a memo whose count
 * moved is emptied by the next note. A lookup checks the count before and after reading an
 * entry, under RCU: an inode freed by a munmap racing the lookup is freed only after a grace
 * period (VFS inodes are RCU-freed), and the count check then rejects what was read.
 *
 * The count is 32 bits wide and moves by 2 a write cycle of mmap_lock: after 2^31 cycles it
 * reads the same again, and an equal count proves nothing (mm/mmap_lock.c accepts false
 * "locked" answers after a wrap, never false "unchanged" ones, because its users keep a
 * count for one short window). A memo's count is kept at most UU_MEMO_LIFE: each write
 * cycle of mmap_lock is a system call (mmap, munmap, mprotect, brk...) taking the
 * rwsem and the count's two writes, far more than a nanosecond, and 2^31 cycles even of
 * one nanosecond take 2.1 s, 21 times the bound. An older memo is not used (counted as
 * memo_expired) and the next note empties it.
 *
 * The change time is not in the VMA: a file rewritten in place keeps its mappings. A lookup
 * reads it afresh from the inode, so the identity is the file's as of now, as a lookup under
 * the VMA's lock would give it.
 *
 * Context: task, the deferred-unwind callback (preemption is disabled while a memo is
 * read or written). The memos are dropped by uu_vma_memo_exit() after the last callback.
 * Kernels without per-VMA locks have no sequence count to check: nothing is memoized.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/string.h>
#include <user_unwind.h>

/* File mappings a memo keeps: a program, its libraries and ld.so. */
#define UU_MEMO_VMAS 8
/* How long a memo's sequence count is trusted, in jiffies: 100 ms (see the top). */
#define UU_MEMO_LIFE max(HZ / 10, 1)

struct uu_memo_vma {
	u64 start;
	u64 end;
	u64 pgoff;
	const struct inode *inode;	/* file_inode() of the VMA's file (uu_vma_file_id()) */
	struct file *file;		/* the VMA's file, no reference held */
	struct uu_file_id id;
};

struct uu_memo {
	struct mm_struct *mm;		/* mmgrab()ed, or NULL */
	unsigned int seq;		/* mm->mm_lock_seq when the entries were noted */
	unsigned long noted;		/* jiffies when seq was read */
	unsigned int next;		/* the entry the next note replaces */
	struct uu_memo_vma vma[UU_MEMO_VMAS];
	u64 ordinary_start;		/* a mapping of ordinary memory (the stack), or empty */
	u64 ordinary_end;
};

static DEFINE_PER_CPU(struct uu_memo, uu_memos);

static bool uu_memo_expired(const struct uu_memo *m)
{
	return time_after(jiffies, m->noted + UU_MEMO_LIFE);
}

/**
 * uu_vma_memo_find - the file mapping of current that holds @addr, from this CPU's memo
 * @addr: a user address
 * @r: filled with the mapping's range, page offset and identity (kind UU_REGION_FILE)
 *
 * Context: task, current's deferred-unwind callback.
 * Return: 0, or -ENOENT when the memo does not know @addr as it is now.
 */
int uu_vma_memo_find(u64 addr, struct uu_region *r)
{
	struct mm_struct *mm = current->mm;
	const struct uu_memo_vma *v;
	struct timespec64 ctime;
	struct uu_memo *m;
	unsigned int seq;
	int ret = -ENOENT;
	int i;

	if (!mm)
		return -ENOENT;
	guard(rcu)();
	m = get_cpu_ptr(&uu_memos);
	if (m->mm != mm || !mmap_lock_speculate_try_begin(mm, &seq) || seq != m->seq)
		goto out;
	if (uu_memo_expired(m)) {
		uu_stat_add(UU_STAT_MEMO_EXPIRED, 1);
		goto out;
	}
	for (i = 0; i < UU_MEMO_VMAS; i++) {
		v = &m->vma[i];
		if (addr < v->start || addr >= v->end)
			continue;
		ctime = uu_ctime(v->inode);
		*r = (struct uu_region) {
			.start = v->start,
			.end = v->end,
			.pgoff = v->pgoff,
			.id = v->id,
			.kind = UU_REGION_FILE,
		};
		r->id.ctime_sec = ctime.tv_sec;
		r->id.ctime_nsec = ctime.tv_nsec;
		if (!mmap_lock_speculate_retry(mm, seq))
			ret = 0;
		break;
	}
out:
	put_cpu_ptr(&uu_memos);
	return ret;
}

/**
 * uu_vma_memo_file - the file current maps at @addr, held, from this CPU's memo
 * @addr: a user address
 * @id: filled with the file's identity, its change time read now
 *
 * The count is checked under RCU before the file is touched: while it is the one of the
 * note, the VMA is unchanged and holds its reference on the file the memo names, so the
 * file is alive then. struct file is SLAB_TYPESAFE_BY_RCU (fs/file_table.c): freed after
 * that check, its memory stays a struct file until the read-side section ends, so
 * file_ref_get() on it is safe, and takes a reference on the memo's file or on another
 * file that reused its memory. The count is checked again after the reference is taken,
 * which tells the two apart, as the reloaded pointer does in __get_file_rcu() (fs/file.c);
 * a reference on another file is dropped. This spares the unwinder's object open
 * (uu_unwind_object_open()) the maple tree walk and the VMA's lock that uu_vma_memo_find()
 * spared the mapping's look-up.
 *
 * Context: task, current's deferred-unwind callback.
 * Return: the file with a reference taken (fput() it), or NULL when the memo does not
 * know @addr as it is now.
 */
struct file *uu_vma_memo_file(u64 addr, struct uu_file_id *id)
{
	struct mm_struct *mm = current->mm;
	struct file *file = NULL, *put = NULL;
	const struct uu_memo_vma *v;
	struct timespec64 ctime;
	struct uu_memo *m;
	unsigned int seq;
	int i;

	if (!mm)
		return NULL;
	rcu_read_lock();
	m = get_cpu_ptr(&uu_memos);
	if (m->mm != mm || !mmap_lock_speculate_try_begin(mm, &seq) || seq != m->seq ||
	    uu_memo_expired(m))
		goto out;
	for (i = 0; i < UU_MEMO_VMAS; i++) {
		v = &m->vma[i];
		if (addr < v->start || addr >= v->end || !v->file)
			continue;
		if (!file_ref_get(&v->file->f_ref))
			break;
		ctime = uu_ctime(v->inode);
		*id = v->id;
		id->ctime_sec = ctime.tv_sec;
		id->ctime_nsec = ctime.tv_nsec;
		if (mmap_lock_speculate_retry(mm, seq))
			put = v->file;
		else
			file = v->file;
		break;
	}
out:
	put_cpu_ptr(&uu_memos);
	rcu_read_unlock();
	if (put)
		fput(put);
	return file;
}

/*
 * Makes @m the memo of @mm at sequence count @seq: emptied unless it already was, and
 * younger than its bound. Returns the mm it held before, for the caller to mmdrop() once
 * preemption is enabled again, or NULL. Context: preemption disabled (@m is this CPU's).
 */
static struct mm_struct *uu_memo_take(struct uu_memo *m, struct mm_struct *mm,
				      unsigned int seq)
{
	struct mm_struct *drop = NULL;

	if (m->mm == mm && m->seq == seq && !uu_memo_expired(m))
		return NULL;
	if (m->mm != mm) {
		mmgrab(mm);
		drop = m->mm;
		m->mm = mm;
	}
	memset(m->vma, 0, sizeof(m->vma));
	m->ordinary_start = 0;
	m->ordinary_end = 0;
	m->seq = seq;
	m->noted = jiffies;
	m->next = 0;
	return drop;
}

/**
 * uu_vma_memo_ordinary - the mapping of ordinary memory of current that holds @addr,
 * from this CPU's memo
 * @addr: a user address
 * @start: filled with the mapping's first address
 * @end: filled with the address after its last one
 *
 * A VMA's flags, like its range, change only under its write lock (mprotect() and
 * friends): while the sequence count is unchanged it is still ordinary memory.
 *
 * Context: task, current's deferred-unwind callback.
 * Return: 0, or -ENOENT when the memo does not know @addr as it is now.
 */
int uu_vma_memo_ordinary(u64 addr, u64 *start, u64 *end)
{
	struct mm_struct *mm = current->mm;
	struct uu_memo *m;
	unsigned int seq;
	int ret = -ENOENT;

	if (!mm)
		return -ENOENT;
	m = get_cpu_ptr(&uu_memos);
	if (m->mm == mm && mmap_lock_speculate_try_begin(mm, &seq) && seq == m->seq &&
	    !uu_memo_expired(m) && addr >= m->ordinary_start && addr < m->ordinary_end) {
		*start = m->ordinary_start;
		*end = m->ordinary_end;
		if (!mmap_lock_speculate_retry(mm, seq))
			ret = 0;
	}
	put_cpu_ptr(&uu_memos);
	return ret;
}

/**
 * uu_vma_memo_note_ordinary - remember a mapping of ordinary memory for the next stacks
 * @vma: a VMA of current's mm that is not VM_IO or VM_PFNMAP, locked by the caller
 *
 * Context: task, current's deferred-unwind callback.
 */
void uu_vma_memo_note_ordinary(struct vm_area_struct *vma)
{
	struct mm_struct *mm = vma->vm_mm, *drop;
	struct uu_memo *m;
	unsigned int seq;

	if (!mmap_lock_speculate_try_begin(mm, &seq))
		return;
	m = get_cpu_ptr(&uu_memos);
	drop = uu_memo_take(m, mm, seq);
	m->ordinary_start = vma->vm_start;
	m->ordinary_end = vma->vm_end;
	put_cpu_ptr(&uu_memos);
	if (drop)
		mmdrop(drop);
}

/**
 * uu_vma_memo_note - remember a file mapping for the next lookups in its address space
 * @vma: a VMA of current's mm mapping a file with an identity, locked by the caller (its
 *       lock or mmap_lock)
 * @id: its identity, as uu_vma_file_id() gave it
 *
 * Context: task, current's deferred-unwind callback.
 */
void uu_vma_memo_note(struct vm_area_struct *vma, const struct uu_file_id *id)
{
	struct mm_struct *mm = vma->vm_mm, *drop;
	struct uu_memo_vma *v;
	struct uu_memo *m;
	unsigned int seq;
	int i;

	/* Odd: a writer holds mmap_lock (not for this VMA, which is locked). */
	if (!mmap_lock_speculate_try_begin(mm, &seq))
		return;
	m = get_cpu_ptr(&uu_memos);
	drop = uu_memo_take(m, mm, seq);
	for (i = 0; i < UU_MEMO_VMAS; i++)
		if (m->vma[i].start == vma->vm_start && m->vma[i].end == vma->vm_end)
			goto out;
	v = &m->vma[m->next];
	m->next = (m->next + 1) % UU_MEMO_VMAS;
	*v = (struct uu_memo_vma) {
		.start = vma->vm_start,
		.end = vma->vm_end,
		.pgoff = vma->vm_pgoff,
		.inode = file_inode(vma->vm_file),
		.file = vma->vm_file,
		.id = *id,
	};
out:
	put_cpu_ptr(&uu_memos);
	if (drop)
		mmdrop(drop);
}

/* Drops every memo's mm. Context: task, module exit, after the last callback. */
void uu_vma_memo_exit(void)
{
	struct uu_memo *m;
	int cpu;

	for_each_possible_cpu(cpu) {
		m = per_cpu_ptr(&uu_memos, cpu);
		if (m->mm)
			mmdrop(m->mm);
		memset(m, 0, sizeof(*m));
	}
}
