// SPDX-License-Identifier: GPL-2.0
/*
 * Resolve the deferred-unwind API, which Linux 7.3 does not export to modules, and the few
 * other unexported symbols the module needs.
 *
 * As lttng-modules does (src/wrapper/kallsyms.c): a kprobe on kallsyms_lookup_name gives
 * that function's address; it then looks up the others. Each function is reached through a
 * static call (symbols.h), so every call is direct, IBT or not. On a kernel that exports the
 * unwind API, build with UU_DIRECT_UNWIND_API and those static calls point at the linked
 * functions; tracefs_remove() is still looked up (no kernel exports it).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <linux/trace_events.h>
#include <user_unwind.h>

#include "symbols.h"

DEFINE_STATIC_CALL_NULL(uu_unwind_deferred_init, unwind_deferred_init);
DEFINE_STATIC_CALL_NULL(uu_unwind_deferred_request, unwind_deferred_request);
DEFINE_STATIC_CALL_NULL(uu_unwind_deferred_cancel, unwind_deferred_cancel);
DEFINE_STATIC_CALL_NULL(uu_tracefs_remove, tracefs_remove);
DEFINE_STATIC_CALL_NULL(uu_kallsyms_lookup_name, kallsyms_lookup_name);

static int uu_kprobe_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

static void *uu_find_kallsyms_lookup_name(void)
{
	struct kprobe probe = {
		.symbol_name = "kallsyms_lookup_name",
		.pre_handler = uu_kprobe_pre,
	};
	void *addr;

	if (register_kprobe(&probe) < 0)
		return NULL;
	addr = probe.addr;
	unregister_kprobe(&probe);
	return addr;
}

/* The address of @name, or NULL with a message. */
static void *uu_lookup(const char *name)
{
	void *addr = (void *)static_call(uu_kallsyms_lookup_name)(name);

	if (!addr)
		pr_err("kernel symbol %s not found\n", name);
	return addr;
}

/**
 * uu_event_type - the entry type of a built-in trace event
 * @call: the name of its struct trace_event_call (event_<name>), a data symbol
 *
 * Context: task, after uu_symbols_init().
 * Return: the type, or 0 when the kernel has no such event (or no data symbols in kallsyms).
 */
unsigned short uu_event_type(const char *call)
{
	const struct trace_event_call *event;

	event = (void *)static_call(uu_kallsyms_lookup_name)(call);
	return event ? READ_ONCE(event->event.type) : 0;
}

/* Points static call @name at the kernel function @sym found through kallsyms. */
#define uu_resolve(name, sym) ({					\
	void *__addr = uu_lookup(#sym);					\
									\
	if (__addr)							\
		static_call_update(name, (typeof(&sym))__addr);		\
	__addr;								\
})

/**
 * uu_symbols_init - point the static calls at the kernel's functions
 *
 * Context: task, may sleep.
 * Return: 0; -EOPNOTSUPP without CONFIG_UNWIND_USER or kprobes, -ENOENT when a symbol
 * cannot be found.
 */
int uu_symbols_init(void)
{
	void *lookup;

	if (!IS_ENABLED(CONFIG_UNWIND_USER)) {
		pr_err("kernel built without CONFIG_UNWIND_USER: no deferred unwinder\n");
		return -EOPNOTSUPP;
	}
	if (!IS_ENABLED(CONFIG_KPROBES)) {
		pr_err("kernel built without CONFIG_KPROBES: cannot resolve the unwind API\n");
		return -EOPNOTSUPP;
	}
	lookup = uu_find_kallsyms_lookup_name();
	if (!lookup) {
		pr_err("cannot find kallsyms_lookup_name through a kprobe\n");
		return -ENOENT;
	}
	static_call_update(uu_kallsyms_lookup_name, (typeof(&kallsyms_lookup_name))lookup);

#ifdef UU_DIRECT_UNWIND_API
	static_call_update(uu_unwind_deferred_init, unwind_deferred_init);
	static_call_update(uu_unwind_deferred_request, unwind_deferred_request);
	static_call_update(uu_unwind_deferred_cancel, unwind_deferred_cancel);
#else
	if (!uu_resolve(uu_unwind_deferred_init, unwind_deferred_init) ||
	    !uu_resolve(uu_unwind_deferred_request, unwind_deferred_request) ||
	    !uu_resolve(uu_unwind_deferred_cancel, unwind_deferred_cancel))
		return -ENOENT;
#endif
	if (!uu_resolve(uu_tracefs_remove, tracefs_remove))
		return -ENOENT;
	return 0;
}

#if IS_ENABLED(CONFIG_KUNIT)
/* Whether the x86 static call trampoline at @tramp is a direct jmp (rel32) to @target. */
static bool uu_jumps_to(const void *tramp, const void *target)
{
	const u8 *insn = tramp;
	s32 rel;

	/* Read through a register: a relocation into the trampoline's middle upsets objtool. */
	OPTIMIZER_HIDE_VAR(insn);
	if (insn[0] != 0xe9)
		return false;
	memcpy(&rel, insn + 1, sizeof(rel));
	return insn + 5 + rel == target;
}

/*
 * For the KUnit suite: every static call points at the address kallsyms gives for its
 * function, and its trampoline is a direct jump there (no indirect branch for IBT).
 * Return: the number that do not.
 */
int uu_test_static_calls(void)
{
	int bad = 0;

#define UU_CHECK(name, sym) \
	(bad += static_call_query(name) != uu_lookup(#sym) || \
		!uu_jumps_to(STATIC_CALL_TRAMP_ADDR(name), uu_lookup(#sym)))
#ifndef UU_DIRECT_UNWIND_API
	UU_CHECK(uu_unwind_deferred_init, unwind_deferred_init);
	UU_CHECK(uu_unwind_deferred_request, unwind_deferred_request);
	UU_CHECK(uu_unwind_deferred_cancel, unwind_deferred_cancel);
#endif
	UU_CHECK(uu_tracefs_remove, tracefs_remove);
#undef UU_CHECK
	return bad;
}
#endif
