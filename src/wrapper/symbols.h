/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel functions a module needs but 7.3 does not export, resolved once at load by
 * symbols.c. Everything about reaching unexported symbols lives in this folder.
 *
 * Each function is called through a static call, which symbols.c points at the address
 * kallsyms gives: the call site (or the static call's trampoline) becomes a direct call or
 * jump to the function. No indirect branch reaches these functions, so kernel IBT, which
 * seals the ENDBR of functions that are never address-taken (all of these), cannot trap
 * the calls.
 */
#ifndef _USER_UNWIND_WRAPPER_SYMBOLS_H
#define _USER_UNWIND_WRAPPER_SYMBOLS_H

#include <linux/kallsyms.h>
#include <linux/static_call.h>
#include <linux/tracefs.h>
#include <linux/unwind_deferred.h>

DECLARE_STATIC_CALL(uu_unwind_deferred_init, unwind_deferred_init);
DECLARE_STATIC_CALL(uu_unwind_deferred_request, unwind_deferred_request);
DECLARE_STATIC_CALL(uu_unwind_deferred_cancel, unwind_deferred_cancel);
/* Drops the tracefs pin tracefs_create_file() took; simple_recursive_removal() does not. */
DECLARE_STATIC_CALL(uu_tracefs_remove, tracefs_remove);

/* A call to one of the functions above, e.g. uu_call(tracefs_remove)(dentry). */
#define uu_call(name) static_call(uu_##name)

unsigned short uu_event_type(const char *call);

#endif /* _USER_UNWIND_WRAPPER_SYMBOLS_H */
