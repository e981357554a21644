// SPDX-License-Identifier: GPL-2.0
/*
 * The request hook and the deferred-unwind callback.
 *
 * The hook is a trace_export (TRACE_EXPORT_EVENT): trace_event_buffer_commit() calls it for
 * every trace event of every instance, after filtering and just before the event is
 * committed. It runs with preemption disabled, in any context up to NMI, so it only asks the
 * deferred unwinder for the user stack and records the cookie; it never allocates, sleeps or
 * faults. The cookie event is a nested ring-buffer write: it lands right after the event that
 * triggered it (before it, when that event sits in the per-CPU buffered event of a
 * filtered file; a soft-disabled or filtered-out event is discarded before the export runs
 * and gets no cookie). The cookie event's own commit passes through the hook too, which is
 * how a cookie that no buffer took is counted (cookies_unrecorded).
 *
 * The hook is registered while the user_unwind_cookie event is enabled in some instance
 * (its reg/unreg callbacks) and the module's init has finished: the module's events exist
 * from the MODULE_STATE_COMING notifier on, before init runs, and can be enabled there
 * (set_event with ":mod:user_unwind", or a write to their enable file racing insmod). Such
 * an early enable only notes that the hook is wanted; uu_hook_start(), at the end of init,
 * arms it. The userstacktrace_delay option enables the events in the top instance.
 *
 * The callback runs in task context on the way back to user space and may fault and sleep;
 * it hands the stack to Rust, which translates and records it: by default Rust unwinds the
 * task itself from its user registers with the programs' .eh_frame (uu_rust_unwind_stack,
 * src/unwind.rs); with the module parameter unwinder=fp, and for 32-bit tasks, it records
 * the kernel's frame-pointer stack (uu_rust_stack).
 *
 * A request made before execve()'s point of no return is served after it, on the way back
 * to the new program: the unwinder would find the new program's first stack, not the one
 * the event was traced in. A probe on sched_process_exec, which every successful exec
 * passes after its point of no return and before the task returns to user space
 * (exec_binprm()), marks the kernel entry when the module's callback is pending for it:
 * it sets the bit of a second unwind_work in the task's unwind_mask, which
 * unwind_reset_info() clears with the rest on the way back to user space. The callback
 * finds the mark and records the entry's cookie with an empty stack (counted as
 * stacks_after_exec). Nothing is remembered per request, so nothing can be forgotten:
 * every exec with a request pending is seen. An exec that fails after its
 * point of no return kills the task (force_fatal_sig(), fs/exec.c); its callback runs from
 * get_signal(), which runs the task's work before it dequeues the SIGKILL
 * (kernel/signal.c), finds the half-built new address space and the old registers, and
 * records what it can unwind there.
 *
 * A request made after unwind_reset_info(), on the way out in exit_to_user_mode(), is served
 * at the task's next kernel exit, with the next entry's stack. Only two events fire there
 * (preemptirq's irq_enable, from trace_hardirqs_on_prepare(), and context tracking's
 * user_enter), and there the task's unwind id is always 0: those two events request
 * nothing while it is 0 (counted as requests_skipped). Elsewhere that only skips such an
 * event when it is the first of its kernel entry to be traced; the entry's later events,
 * and the irq_disable that precedes an irq_enable, carry its cookie. An NMI that hits the
 * few instructions after the reset still requests: documented, not detected.
 *
 * Lock order: uu_hook_lock (mutex) is taken inside event_mutex and tracepoints_mutex (from the
 * reg/unreg callbacks) and takes ftrace_export_lock; kprobe_mutex is never taken under it
 * (kprobe_mutex -> ftrace_lock -> tracepoints_mutex is a chain the kernel makes).
 */
#include <linux/delay.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/trace.h>
#include <linux/trace_events.h>
#include <linux/tracepoint.h>
#include <linux/unwind_deferred.h>
#include <user_unwind.h>

#include "events.h"
#include "wrapper/symbols.h"

struct linux_binprm;

static struct unwind_work uu_work;
/*
 * Never requested: its bit in a task's unwind_mask marks a kernel entry that exec'd with
 * a request of uu_work pending (uu_exec_probe()). unwind_reset_info() clears the whole
 * mask on the way back to user space, so the mark lasts exactly that entry.
 */
static struct unwind_work uu_exec_work;
static struct tracepoint *uu_exec_tp;	/* sched_process_exec, probed from init to exit */
/* The entry types of irq_enable and user_enter (0: not in this kernel); set at init. */
static unsigned short uu_exit_types[2];
static DEFINE_MUTEX(uu_hook_lock);
static bool uu_export_registered;	/* under uu_hook_lock */
static bool uu_hook_wanted;		/* under uu_hook_lock: the cookie event is enabled */
static bool uu_hook_ready;		/* under uu_hook_lock: init done, exit not begun */

/*
 * sched_process_exec's probe: current passed its exec's point of no return. If a callback
 * of uu_work is pending for this kernel entry, the entry is marked (uu_exec_work's bit),
 * and that callback records an empty stack (uu_entry_execed()).
 *
 * Context: task, current in exec_binprm(), preemption disabled (a tracepoint probe).
 */
static void uu_exec_probe(void *data, struct task_struct *p, pid_t old_pid,
			  struct linux_binprm *bprm)
{
	atomic_long_t *mask = &current->unwind_info.unwind_mask;
	int bit = READ_ONCE(uu_work.bit), mark = READ_ONCE(uu_exec_work.bit);

	if (bit < 0 || mark < 0 || !(atomic_long_read(mask) & BIT(bit)))
		return;
	atomic_long_or(BIT(mark), mask);
}

/* Whether current's kernel entry exec'd since the request of its pending callback. */
static bool uu_entry_execed(void)
{
	int mark = READ_ONCE(uu_exec_work.bit);

	return mark >= 0 && (atomic_long_read(&current->unwind_info.unwind_mask) & BIT(mark));
}

/* uu_exec_work's callback: the mark is all it is for. */
static void uu_exec_work_callback(struct unwind_work *work,
				  struct unwind_stacktrace *trace, u64 cookie)
{
}

static void uu_find_exec_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_process_exec"))
		uu_exec_tp = tp;
}

/* One bit per interrupt context level (task, softirq, hardirq, NMI) the hook runs in. */
static DEFINE_PER_CPU(unsigned int, uu_hook_busy);
/* Cookie events that reached trace_event_buffer_commit() on this CPU, per context level. */
static DEFINE_PER_CPU(unsigned long [4], uu_cookie_commits);

static void uu_export_write(struct trace_export *export, const void *entry,
			    unsigned int size)
{
	const struct trace_entry *ent = entry;
	unsigned int bit = 1U << interrupt_context_level();
	u64 cookie;
	int ret;

	/* No user stack to take (seed patch 1), or one that is going away. */
	if (current->flags & (PF_KTHREAD | PF_USER_WORKER | PF_EXITING))
		return;
	if (size < sizeof(*ent))
		return;
	/* The module's own events never trigger requests. */
	if (uu_is_own_event(ent->type)) {
		if (uu_is_cookie_event(ent->type))
			this_cpu_inc(uu_cookie_commits[interrupt_context_level()]);
		else if (uu_is_file_cache_event(ent->type))
			uu_file_cache_committed();
		return;
	}
	/* On the way out, after unwind_reset_info() (see the top of this file). */
	if ((ent->type == uu_exit_types[0] || ent->type == uu_exit_types[1]) &&
	    !READ_ONCE(current->unwind_info.id.id)) {
		uu_stat_add(UU_STAT_REQUESTS_SKIPPED, 1);
		return;
	}
	/*
	 * The hook is installed just before the cookie event's first probe: no request
	 * until its cookie can be recorded.
	 */
	if (!trace_user_unwind_cookie_enabled())
		return;
	/* Anything the cookie event itself may trigger. */
	if (__this_cpu_read(uu_hook_busy) & bit)
		return;

	__this_cpu_or(uu_hook_busy, bit);
	ret = uu_call(unwind_deferred_request)(&uu_work, &cookie);
	if (ret >= 0) {
		int level = interrupt_context_level();
		unsigned long commits = this_cpu_read(uu_cookie_commits[level]);

		uu_stat_add(UU_STAT_REQUESTS, 1);
		if (!ret)
			uu_stat_add(UU_STAT_REQUESTS_QUEUED, 1);
		trace_user_unwind_cookie(cookie);
		/*
		 * No instance's buffer took the cookie: filtered, pid-ignored, tracing off,
		 * a full buffer that does not overwrite, or the ring buffer's recursion guard
		 * (this write nests in the triggering event's; if that one already used the
		 * TRANSITION level, the nested reserve fails without a trace).
		 */
		if (this_cpu_read(uu_cookie_commits[level]) == commits)
			uu_stat_add(UU_STAT_COOKIES_UNRECORDED, 1);
	} else {
		uu_stat_add(UU_STAT_REQUESTS_FAILED, 1);
	}
	__this_cpu_and(uu_hook_busy, ~bit);
}

static struct trace_export uu_export = {
	.write = uu_export_write,
	.flags = TRACE_EXPORT_EVENT,
};

/*
 * Also called from do_exit() for a request made before the task began to exit (its
 * exit_group, say), while the task still has its mm: that stack is recorded too.
 */
/*
 * Callbacks running now, and whether the module is going: see uu_hook_exit(). A callback
 * increments the count, then looks at uu_going; uu_hook_exit() sets uu_going, then waits
 * for the count to drop to 0: a full barrier on each side makes sure that either exit sees
 * the callback running or the callback sees the module going.
 */
static atomic_t uu_callbacks_running = ATOMIC_INIT(0);
static bool uu_going;

static void uu_record_stack(struct unwind_stacktrace *trace, u64 cookie)
{
	struct uu_regs regs;

	uu_stat_add(UU_STAT_CALLBACKS, 1);
	if (current->flags & PF_EXITING)
		uu_stat_add(UU_STAT_EXIT_CALLBACKS, 1);
	/* Nobody records stacks, only cookies: nothing to translate. */
	if (!trace_user_unwind_stack_enabled())
		return;
	if (uu_entry_execed()) {
		uu_stat_add(UU_STAT_STACKS_AFTER_EXEC, 1);
		uu_rust_stack(NULL, 0, cookie);
		return;
	}
	if (uu_unwind_regs(&regs))
		uu_rust_unwind_stack(&regs, trace->entries, trace->nr, cookie);
	else
		uu_rust_stack(trace->entries, trace->nr, cookie);
}

static void uu_unwind_callback(struct unwind_work *work,
			       struct unwind_stacktrace *trace, u64 cookie)
{
	atomic_inc(&uu_callbacks_running);
	/* Counted before uu_going is read (pairs with the smp_mb() in uu_hook_exit()). */
	smp_mb__after_atomic();
	if (!READ_ONCE(uu_going))
		uu_record_stack(trace, cookie);
	/* Done with everything of the module's before the count says so. */
	smp_mb__before_atomic();
	atomic_dec(&uu_callbacks_running);
}

/* Registers or unregisters the export as wanted and ready say. */
static int uu_hook_update(void)
{
	bool on = uu_hook_wanted && uu_hook_ready;
	int ret = 0;

	lockdep_assert_held(&uu_hook_lock);
	if (on && !uu_export_registered) {
		ret = register_ftrace_export(&uu_export);
		uu_export_registered = !ret;
	} else if (!on && uu_export_registered) {
		unregister_ftrace_export(&uu_export);
		uu_export_registered = false;
	}
	return ret;
}

/**
 * uu_hook_enable - start requesting stacks; the cookie event's reg callback
 *
 * Before uu_hook_start() (the events enabled while the module is still loading) it only
 * notes that requests are wanted.
 *
 * Context: task, event_mutex and tracepoints_mutex held.
 * Return: 0 or a negative errno from register_ftrace_export().
 */
int uu_hook_enable(void)
{
	guard(mutex)(&uu_hook_lock);
	uu_hook_wanted = true;
	return uu_hook_update();
}

/**
 * uu_hook_disable - stop requesting stacks; the cookie event's unreg callback
 *
 * Context: task. A hook call already running may finish after this returns.
 */
void uu_hook_disable(void)
{
	guard(mutex)(&uu_hook_lock);
	uu_hook_wanted = false;
	uu_hook_update();
}

/**
 * uu_hook_requesting - whether stacks are being requested
 *
 * Context: task.
 */
bool uu_hook_requesting(void)
{
	guard(mutex)(&uu_hook_lock);
	return uu_export_registered;
}

/**
 * uu_hook_init - register the deferred-unwind works and the exec probe
 *
 * Context: task, may sleep.
 * Return: 0, -EBUSY when the kernel has no unwind_work slot left, -ENOENT without the
 * sched_process_exec tracepoint, or the error of its probe's registration.
 */
int uu_hook_init(void)
{
	int ret;

	uu_exit_types[0] = uu_event_type("event_irq_enable");
	uu_exit_types[1] = uu_event_type("event_user_enter");
	for_each_kernel_tracepoint(uu_find_exec_tp, NULL);
	if (!uu_exec_tp)
		return -ENOENT;
	ret = uu_call(unwind_deferred_init)(&uu_work, uu_unwind_callback);
	if (ret)
		return ret;
	ret = uu_call(unwind_deferred_init)(&uu_exec_work, uu_exec_work_callback);
	if (ret)
		goto cancel_work;
	ret = tracepoint_probe_register(uu_exec_tp, uu_exec_probe, NULL);
	if (ret)
		goto cancel_exec_work;
	return 0;

cancel_exec_work:
	uu_call(unwind_deferred_cancel)(&uu_exec_work);
cancel_work:
	uu_call(unwind_deferred_cancel)(&uu_work);
	return ret;
}

/**
 * uu_hook_start - allow requests: the last step of module init
 *
 * Arms the hook if the cookie event was enabled before (or during) init.
 *
 * Context: task, may sleep.
 * Return: 0 or a negative errno from register_ftrace_export().
 */
int uu_hook_start(void)
{
	guard(mutex)(&uu_hook_lock);
	uu_hook_ready = true;
	return uu_hook_update();
}

/**
 * uu_hook_exit - stop the hook and the callbacks for good
 *
 * After it returns no hook call and no callback of this module runs: the export is gone
 * (synchronize_rcu() waits for preempt-disabled callers, NMI included), the callbacks in
 * flight have finished, and unwind_deferred_cancel() waits for the kernel's callers of
 * callbacks and clears pending ones.
 *
 * Context: task, may sleep.
 */
void uu_hook_exit(void)
{
	scoped_guard(mutex, &uu_hook_lock) {
		uu_hook_ready = false;
		uu_hook_update();
	}
	synchronize_rcu();
	/*
	 * 7.3's unwind_deferred_cancel() marks the work cancelled (work->bit = -1) before it
	 * waits for the callers of callbacks, and process_unwind_deferred() reads work->bit
	 * again after the callback returns (BIT(-1): UBSAN reports a shift out of bounds) or,
	 * preempted between the list walk and its test_bit(), before calling it. Callbacks
	 * in flight finish first, and the ones that start from now on return at once, which
	 * narrows the kernel's window to a few instructions; it cannot be closed from here.
	 */
	WRITE_ONCE(uu_going, true);
	/* Going before the count is read (pairs with uu_unwind_callback()). */
	smp_mb();
	while (atomic_read(&uu_callbacks_running))
		usleep_range(1000, 2000);
	uu_call(unwind_deferred_cancel)(&uu_work);
	tracepoint_probe_unregister(uu_exec_tp, uu_exec_probe, NULL);
	tracepoint_synchronize_unregister();
	uu_call(unwind_deferred_cancel)(&uu_exec_work);
}
