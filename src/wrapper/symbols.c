// SPDX-License-Identifier: GPL-2.0
/*
 * Resolve the deferred-unwind API, which Linux 7.3 does not export to modules.
 *
 * As lttng-modules does (src/wrapper/kallsyms.c): a kprobe on kallsyms_lookup_name gives
 * that function's address; it then looks up the others. On a kernel that exports the
 * unwind API, build with UU_DIRECT_UNWIND_API and those calls link directly;
 * tracefs_remove(), kallsyms_on_each_symbol() and the kprobes_all_disarmed flag are still
 * looked up (no kernel exports them; the flag needs CONFIG_KALLSYMS_ALL).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/printk.h>
#include <linux/tracefs.h>
#include <linux/unwind_deferred.h>
#include <user_unwind.h>

#ifdef CONFIG_X86_KERNEL_IBT
#include <asm/cpufeature.h>
#endif

#include "symbols.h"

struct uu_symbols uu_sym;

#define UU_WANT(sym) { #sym, (void **)&uu_sym.sym }

static const struct {
	const char *name;
	void **addr;
} uu_wanted[] = {
#ifndef UU_DIRECT_UNWIND_API
	UU_WANT(unwind_deferred_init),
	UU_WANT(unwind_deferred_request),
	UU_WANT(unwind_deferred_cancel),
#endif
	UU_WANT(tracefs_remove),
	UU_WANT(kallsyms_on_each_symbol),
	UU_WANT(kprobes_all_disarmed),
};

static int uu_kprobe_pre(struct kprobe *p, struct pt_regs *regs)
{
	return 0;
}

static unsigned long (*uu_find_kallsyms_lookup_name(void))(const char *)
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

/**
 * uu_symbols_init - fill uu_sym
 *
 * Context: task, may sleep.
 * Return: 0; -EOPNOTSUPP without CONFIG_UNWIND_USER or kprobes, -ENOENT when a symbol cannot be found,
 * -EOPNOTSUPP when indirect branch tracking would trap the calls.
 */
int uu_symbols_init(void)
{
	unsigned long (*lookup)(const char *name);
	int i;

#ifdef UU_DIRECT_UNWIND_API
	uu_sym.unwind_deferred_init = unwind_deferred_init;
	uu_sym.unwind_deferred_request = unwind_deferred_request;
	uu_sym.unwind_deferred_cancel = unwind_deferred_cancel;
#endif
	if (!IS_ENABLED(CONFIG_UNWIND_USER)) {
		pr_err("kernel built without CONFIG_UNWIND_USER: no deferred unwinder\n");
		return -EOPNOTSUPP;
	}
#ifdef CONFIG_X86_KERNEL_IBT
	/*
	 * The functions below are never address-taken in the kernel, so IBT seals their
	 * ENDBR at boot and an indirect call to them traps. Refuse rather than crash.
	 */
	if (cpu_feature_enabled(X86_FEATURE_IBT)) {
		pr_err("indirect branch tracking is on: cannot call the unexported unwind API (boot with ibt=off)\n");
		return -EOPNOTSUPP;
	}
#endif
	if (!IS_ENABLED(CONFIG_KPROBES)) {
		pr_err("kernel built without CONFIG_KPROBES: cannot resolve the unwind API\n");
		return -EOPNOTSUPP;
	}
	lookup = uu_find_kallsyms_lookup_name();
	if (!lookup) {
		pr_err("cannot find kallsyms_lookup_name through a kprobe\n");
		return -ENOENT;
	}

	for (i = 0; i < ARRAY_SIZE(uu_wanted); i++) {
		*uu_wanted[i].addr = (void *)lookup(uu_wanted[i].name);
		if (!*uu_wanted[i].addr) {
			pr_err("kernel symbol %s not found\n", uu_wanted[i].name);
			return -ENOENT;
		}
	}
	return 0;
}
