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
 * The pages the thread reads are charged to the requesting task's memory cgroup
 * (set_active_memcg(), as the loop driver does for its workers), not to the root's. Its
 * I/O is not associated with the task's io cgroup (kthread_associate_blkcg()): the thread
 * serves every task in turn, and a cgroup whose I/O is throttled (iocost, io.max) would
 * put it to sleep in submit_bio() (ioc_rqos_throttle()) and delay every other cgroup's
 * reads behind its own. A request reads at most 1 MiB of a file its task maps.
 *
 * Context: uu_fetch_file() and uu_fetch_user() in task context, without sleeping (a
 * spinlock, reference counts, a wake-up). Lock order: uu_fetch_lock is a leaf.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/sched/mm.h>
#include <linux/spinlock.h>
#include <user_unwind.h>

/* Requests waiting at most: the callback drops one that does not fit (fetches_dropped). */
#define UU_FETCH_SLOTS 32
/*
 * Pages read ahead from a file for one request (1 MiB), from the page missed on: a table's
 * search bisects them, and its FDEs lie near one another, so that a cold file costs a few
 * cut stacks rather than one each 128 KiB. Read in requests of UU_FETCH_CHUNK pages, the
 * block layer's usual readahead size.
 */
#define UU_FETCH_PAGES 256
#define UU_FETCH_CHUNK 32

/*
 * A file's pages from @index on (@file held), or a task's page at @addr (@mm grabbed:
 * its mm_struct, not its address space, which an exiting task frees as it would), for a
 * requester in the memory cgroup @memcg (held; NULL without memory cgroups).
 */
struct uu_fetch {
	struct file *file;
	struct mm_struct *mm;
	unsigned long at;
	struct mem_cgroup *memcg;
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

/*
 * Queues a request for what @file/@mm and @at ask for, taking a reference on either and
 * on current's memory cgroup.
 */
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
		/* No sleep: RCU and css_tryget() (the root's count is not kept). */
		f->memcg = get_mem_cgroup_from_mm(current->mm);
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
	mem_cgroup_put(f->memcg);
}

/*
 * Readahead passes over a folio already cached: one a read left not up to date (an I/O
 * error) would stay so until evicted, and every stack that needs it would end there.
 * Starts the read of each such folio from @index to @end again, without waiting for it,
 * as filemap_update_page() does but for the wait: under the mapping's invalidate lock
 * (read_folio's rule: Documentation/filesystems/locking.rst; a hole punch holds it to keep
 * freed blocks from being read into the cache), tried, and the folio's lock, which the
 * read's completion releases. A folio locked by another is being read or written already;
 * a truncate or hole punch under way leaves the folios to a later request.
 */
static void uu_fetch_reread(struct file *file, pgoff_t index, pgoff_t end)
{
	struct address_space *mapping = file->f_mapping;
	struct folio *folio;

	if (!mapping->a_ops->read_folio || !filemap_invalidate_trylock_shared(mapping))
		return;
	while (index < end) {
		folio = filemap_get_folio(mapping, index);
		if (IS_ERR(folio)) {
			index++;
			continue;
		}
		index = folio_next_index(folio);
		if (!folio_test_uptodate(folio) && folio_trylock(folio)) {
			/* Truncated, or read by another, since the look-up. */
			if (folio->mapping != mapping || folio_test_uptodate(folio))
				folio_unlock(folio);
			else
				mapping->a_ops->read_folio(file, folio);
		}
		folio_put(folio);
	}
	filemap_invalidate_unlock_shared(mapping);
}

/* Starts the read @f asks for. May block until the I/O is submitted, not completed. */
static void uu_fetch_one(struct uu_fetch *f)
{
	struct vm_area_struct *vma;

	if (f->file) {
		struct address_space *mapping = f->file->f_mapping;
		pgoff_t end = DIV_ROUND_UP(i_size_read(mapping->host), PAGE_SIZE);
		struct file_ra_state ra = {};
		pgoff_t i;

		end = min(end, f->at + UU_FETCH_PAGES);
		file_ra_state_init(&ra, mapping);
		/*
		 * As a reader of the whole range would (a device with readahead off, or a
		 * congested io cgroup, reads one page a call: the rest at later requests).
		 */
		for (i = f->at; i < end; i += UU_FETCH_CHUNK)
			page_cache_sync_readahead(mapping, &ra, f->file, i, UU_FETCH_CHUNK);
		/* Not under the invalidate lock: readahead takes it. */
		uu_fetch_reread(f->file, f->at, end);
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
			struct mem_cgroup *old = set_active_memcg(f.memcg);

			uu_fetch_one(&f);
			set_active_memcg(old);
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
