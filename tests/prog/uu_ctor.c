// SPDX-License-Identifier: GPL-2.0
/*
 * A library constructor's system call, for LD_PRELOAD: ld.so runs constructors from
 * _dl_init, which its start-up code (_dl_start_user, glibc's RTLD_START) calls after
 * clearing rbp, a frame without an FDE just past its entry point. The stack, getppid <-
 * uu_ctor <- ... <- _dl_init, ends there: complete, by the ABI's rule for the outermost
 * frame. Built -O2 without frame pointers, as Debian builds.
 */
#include <unistd.h>

__attribute__((constructor, noinline)) static void uu_ctor(void)
{
	/* A volatile use keeps the call a call, not a tail call. */
	volatile pid_t ppid = getppid();

	(void)ppid;
}
