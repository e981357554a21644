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
 * filtered or soft-disabled file).
 *
 * The hook is registered while the user_unwind_cookie event is enabled in some instance
 * (its reg/unreg callbacks); the userstacktrace_delay option enables it in the top instance.
 *
 * The callback runs in task context on the way back to user space and may fault and sleep;
 * it hands the stack to Rust (uu_rust_stack), which translates and records it.
 *
 * Lock order: uu_hook_lock (mutex) is taken inside event_mutex and tracepoints_mutex (from the
 * reg/unreg callbacks) and takes ftrace_export_lock.
 */
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/trace.h>
#include <linux/trace_events.h>
#include <linux/unwind_deferred.h>
#include <user_unwind.h>

#include "events.h"
#include "wrapper/symbols.h"

static struct unwind_work uu_work;
static DEFINE_MUTEX(uu_hook_lock);
static bool uu_export_registered;	/* under uu_hook_lock */
static bool uu_dying;			/* under uu_hook_lock */

/* One bit per interrupt context level (task, softirq, hardirq, NMI) the hook runs in. */
static DEFINE_PER_CPU(unsigned int, uu_hook_busy);

static void uu_export_write(struct trace_export *export, const void *entry,
			    unsigned int size)
{
	const struct trace_entry *ent = entry;
	unsigned int bit = 1U << interrupt_context_level();
	u64 cookie;

	/* No user stack to take (seed patch 1), or one that is going away. */
	if (current->flags & (PF_KTHREAD | PF_USER_WORKER | PF_EXITING))
		return;
	/* The module's own events never trigger requests. */
	if (size < sizeof(*ent) || uu_is_own_event(ent->type))
		return;
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
	if (uu_sym.unwind_deferred_request(&uu_work, &cookie) >= 0)
		trace_user_unwind_cookie(cookie);
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
static void uu_unwind_callback(struct unwind_work *work,
			       struct unwind_stacktrace *trace, u64 cookie)
{
	/* Nobody records stacks, only cookies: nothing to translate. */
	if (!trace_user_unwind_stack_enabled())
		return;
	uu_rust_stack(trace->entries, trace->nr, cookie);
}

/**
 * uu_hook_enable - start requesting stacks; the cookie event's reg callback
 *
 * Context: task, event_mutex and tracepoints_mutex held.
 * Return: 0 or a negative errno from register_ftrace_export().
 */
int uu_hook_enable(void)
{
	int ret = 0;

	guard(mutex)(&uu_hook_lock);
	if (!uu_export_registered && !uu_dying) {
		ret = register_ftrace_export(&uu_export);
		uu_export_registered = !ret;
	}
	return ret;
}

/**
 * uu_hook_disable - stop requesting stacks; the cookie event's unreg callback
 *
 * Context: task. A hook call already running may finish after this returns.
 */
void uu_hook_disable(void)
{
	guard(mutex)(&uu_hook_lock);
	if (uu_export_registered)
		unregister_ftrace_export(&uu_export);
	uu_export_registered = false;
}

/**
 * uu_hook_init - register the deferred-unwind work
 *
 * Context: task, may sleep.
 * Return: 0, or -EBUSY when every unwind_work slot of the kernel is taken.
 */
int uu_hook_init(void)
{
	return uu_sym.unwind_deferred_init(&uu_work, uu_unwind_callback);
}

/**
 * uu_hook_exit - stop the hook and the callbacks for good
 *
 * After it returns no hook call and no callback of this module runs: the export is gone
 * (synchronize_rcu() waits for preempt-disabled callers, NMI included) and
 * unwind_deferred_cancel() waits for running callbacks and clears pending ones.
 *
 * Context: task, may sleep.
 */
void uu_hook_exit(void)
{
	scoped_guard(mutex, &uu_hook_lock)
		uu_dying = true;
	uu_hook_disable();
	synchronize_rcu();
	uu_sym.unwind_deferred_cancel(&uu_work);
}
