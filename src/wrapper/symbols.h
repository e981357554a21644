/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel functions a module needs but 7.3 does not export, resolved once at load by
 * symbols.c. Everything about reaching unexported symbols lives in this folder.
 */
#ifndef _USER_UNWIND_WRAPPER_SYMBOLS_H
#define _USER_UNWIND_WRAPPER_SYMBOLS_H

#include <linux/unwind_deferred.h>

struct uu_symbols {
	int (*unwind_deferred_init)(struct unwind_work *work, unwind_callback_t func);
	int (*unwind_deferred_request)(struct unwind_work *work, u64 *cookie);
	void (*unwind_deferred_cancel)(struct unwind_work *work);
	/* Drops the tracefs pin tracefs_create_file() took; simple_recursive_removal() does not. */
	void (*tracefs_remove)(struct dentry *dentry);
	/* Finds the compiler clones of __fput (kernel/kallsyms.c). */
	int (*kallsyms_on_each_symbol)(int (*fn)(void *data, const char *name,
						 unsigned long addr), void *data);
	/* Set while debug/kprobes/enabled is 0 (kernel/kprobes.c); a data symbol. */
	const bool *kprobes_all_disarmed;
};

/* Written once by uu_symbols_init() before anything else runs; read-only after. */
extern struct uu_symbols uu_sym;

#endif /* _USER_UNWIND_WRAPPER_SYMBOLS_H */
