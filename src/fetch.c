// SPDX-License-Identifier: GPL-2.0
/*
 * Pages the deferred callback needed and did not find, brought in by a kernel thread of
 * the module (uu_fetch), so that the callback itself never waits for I/O, nor for a lock
 * that can be held across I/O: see "What the callback can wait for" in
 * Documentation/user_unwind.rst.
 *
 * The callback reads only what is there: user memory with copy_from_user_nofault(),
 * files' folios already cached and up to date. What it misses it asks for here
 * (uu_fetch_file(), uu_fetch_user()), ends the stack at that frame (reason "read") and
 * returns; a later stack finds the page. The thread starts the read and does not wait
 * for it to complete: readahead for a file's pages, a FOLL_NOWAIT fault for a task's
 * page (FAULT_FLAG_RETRY_NOWAIT: the readahead is started and the fault retried later).
 * Starting a read can still block (a filesystem that reads its metadata first, a frozen
 * queue, filemap_invalidate_lock_shared() behind a truncate that waits for a folio), and
 * so can the fault: where filemap_fault() reads no ahead (MADV_RANDOM, a file without
 * readahead) or finds a folio not up to date, it reads it and waits with the task's
 * mmap_lock held, which RETRY_NOWAIT does not drop (maybe_unlock_mmap_for_io()). Only
 * this thread waits then (and the task's own mmap and munmap, behind its mmap_lock; the
 * callback only tries that lock), and it holds a reference on the module while it works,
 * so that rmmod fails at once with -EWOULDBLOCK ("in use": try_stop_module()) rather
 * than waiting, and succeeds once the device answers.
 *
 * Context: uu_fetch_file() and uu_fetch_user() in task context, without sleeping (a
 * spinlock, reference counts, a wake-up). Lock order: uu_fetch_lock is a leaf.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/sched/mm.h>
#include <linux/spinlock.h>
#include <user_unwind.h>

/* Requests waiting at most: the callback drops one that does not fit (fetches_dropped). */
#define UU_FETCH_SLOTS 32
/* Pages read ahead from a file at once (128 KiB): a table's search bisects it. */
#define UU_FETCH_PAGES 32

/*
 * A file's pages from @index on (@file held), or a task's page at @addr (@mm grabbed:
 * its mm_struct, not its address space, which an exiting task frees as it would).
 */
struct uu_fetch {
	struct file *file;
	struct mm_struct *mm;
	unsigned long at;
};

static DEFINE_SPINLOCK(uu_fetch_lock);
static struct uu_fetch uu_fetch_queue[UU_FETCH_SLOTS];
static unsigned int uu_fetch_head, uu_fetch_len;
static struct task_struct *uu_fetch_task;

/* Whether @f already asks for what @file/@mm and @at ask for. */
static bool uu_fetch_same(const struct uu_fetch *f, struct file *file,
			  struct mm_struct *mm, unsigned long at)
{
	if (file)
		return f->file && f->file->f_mapping == file->f_mapping &&
		       at - f->at < UU_FETCH_PAGES;
	return f->mm == mm && f->at == at;
}

/* Queues a request for what @file/@mm and @at ask for, taking a reference on either. */
static void uu_fetch_push(struct file *file, struct mm_struct *mm, unsigned long at)
{
	struct uu_fetch *f;
	unsigned int i;

	scoped_guard(spinlock, &uu_fetch_lock) {
		if (!uu_fetch_task)
			return;
		for (i = 0; i < uu_fetch_len; i++)
			if (uu_fetch_same(&uu_fetch_queue[(uu_fetch_head + i) % UU_FETCH_SLOTS],
					  file, mm, at))
				return;
		if (uu_fetch_len == UU_FETCH_SLOTS) {
			uu_stat_add(UU_STAT_FETCHES_DROPPED, 1);
			return;
		}
		f = &uu_fetch_queue[(uu_fetch_head + uu_fetch_len++) % UU_FETCH_SLOTS];
		f->file = file ? get_file(file) : NULL;
		f->mm = mm;
		if (mm)
			mmgrab(mm);
		f->at = at;
		wake_up_process(uu_fetch_task);
	}
	uu_stat_add(UU_STAT_FETCHES_QUEUED, 1);
}

/**
 * uu_fetch_file - have the pages of @file from @index on read into its page cache
 * @file: a regular file the caller holds
 * @index: the first page wanted
 *
 * Context: task, never sleeps.
 */
void uu_fetch_file(struct file *file, pgoff_t index)
{
	uu_fetch_push(file, NULL, index);
}

/**
 * uu_fetch_user - have current's page at @addr faulted in
 * @addr: a user address
 *
 * Context: task with an mm, never sleeps.
 */
void uu_fetch_user(unsigned long addr)
{
	/* An exiting task (its callback runs from do_exit()) has no later stack to help. */
	if (current->mm && !(current->flags & PF_EXITING))
		uu_fetch_push(NULL, current->mm, addr & PAGE_MASK);
}

static bool uu_fetch_pop(struct uu_fetch *f)
{
	guard(spinlock)(&uu_fetch_lock);
	if (!uu_fetch_len)
		return false;
	*f = uu_fetch_queue[uu_fetch_head];
	uu_fetch_head = (uu_fetch_head + 1) % UU_FETCH_SLOTS;
	uu_fetch_len--;
	return true;
}

static void uu_fetch_release(struct uu_fetch *f)
{
	if (f->file)
		fput(f->file);
	if (f->mm)
		mmdrop(f->mm);
}

/* Starts the read @f asks for. May block until the I/O is submitted, not completed. */
static void uu_fetch_one(struct uu_fetch *f)
{
	struct vm_area_struct *vma;

	if (f->file) {
		struct address_space *mapping = f->file->f_mapping;
		struct file_ra_state ra;

		file_ra_state_init(&ra, mapping);
		page_cache_sync_readahead(mapping, &ra, f->file, f->at, UU_FETCH_PAGES);
		return;
	}
	if (!mmget_not_zero(f->mm))
		return;
	mmap_read_lock(f->mm);
	vma = vma_lookup(f->mm, f->at);
	/* FOLL_NOWAIT: the fault starts readahead and retries later, never userfaultfd. */
	if (vma && uu_vma_faultable(vma))
		get_user_pages_remote(f->mm, f->at, 1, FOLL_NOWAIT, NULL, NULL);
	mmap_read_unlock(f->mm);
	mmput_async(f->mm);
}

static int uu_fetch_thread(void *unused)
{
	struct uu_fetch f;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			return 0;
		}
		if (!uu_fetch_pop(&f)) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		/*
		 * Pinned while it may block: rmmod refuses then, rather than waiting. Once
		 * rmmod has begun, try_module_get() fails and the request is only let go of;
		 * so it is while init runs (try_module_get() succeeds then, and an init that
		 * fails would wait for the read in uu_fetch_exit()).
		 */
		if (READ_ONCE(THIS_MODULE->state) == MODULE_STATE_LIVE &&
		    try_module_get(THIS_MODULE)) {
			uu_fetch_one(&f);
			module_put(THIS_MODULE);
		}
		uu_fetch_release(&f);
		cond_resched();
	}
}

/**
 * uu_fetch_init - start the thread that brings in what the callback missed
 *
 * Context: task, module init.
 * Return: 0 or a negative errno.
 */
int uu_fetch_init(void)
{
	struct task_struct *task = kthread_run(uu_fetch_thread, NULL, "user_unwind_fetch");

	if (IS_ERR(task))
		return PTR_ERR(task);
	scoped_guard(spinlock, &uu_fetch_lock)
		uu_fetch_task = task;
	return 0;
}

/**
 * uu_fetch_exit - stop the thread and let go of the requests left
 *
 * Called after the last callback (uu_hook_exit()). The thread holds no module reference
 * here (rmmod found none; a failed init never let it take one), so it is not in
 * uu_fetch_one(): kthread_stop() waits for CPU work only.
 *
 * Context: task, module exit.
 */
void uu_fetch_exit(void)
{
	struct task_struct *task;
	struct uu_fetch f;

	scoped_guard(spinlock, &uu_fetch_lock) {
		task = uu_fetch_task;
		uu_fetch_task = NULL;
	}
	if (task)
		kthread_stop(task);
	while (uu_fetch_pop(&f))
		uu_fetch_release(&f);
}
