// SPDX-License-Identifier: GPL-2.0
/*
 * The hoarder's library (uu_hoard.c; the review suite's fairness test): the UU_COLD_FNS
 * functions of uu_cold_fns.h, each calling the next, so that its .eh_frame_hdr search
 * table, and a file's table made from it, are large. The hoarder maps copies of it under
 * distinct file identities. Only uu_hoard_call is exported: the functions call one another
 * directly, not through the PLT.
 */
#include <sys/syscall.h>
#include <unistd.h>

#define UU_HIDDEN __attribute__((visibility("hidden")))

UU_HIDDEN long uu_lib_syscall(long nr);

#include "uu_cold_fns.h"

UU_HIDDEN __attribute__((noinline)) long uu_lib_syscall(long nr)
{
	long r = syscall(nr);

	asm volatile("" : "+r"(r));
	return r;
}

/* A system call from DEPTH frames of the chain, the first uu_cold_FIRST. */
__attribute__((visibility("default"))) long uu_hoard_call(long first, long depth)
{
	return uu_cold_fns[first % UU_COLD_FNS](depth);
}
