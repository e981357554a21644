// SPDX-License-Identifier: GPL-2.0
/*
 * libuunofp.so: nf_ifunc, an IFUNC whose resolver makes the traced system call itself, so
 * that the first call through the PLT of uu_nofp (lazy binding) is unwound through ld.so's
 * lazy resolver. Built without frame pointers.
 */
#include <sys/syscall.h>

static long nf_ifunc_impl(void)
{
	return 7;
}

__attribute__((noinline)) long (*nf_resolver(void))(void)
{
	long ret;

	asm volatile("syscall" : "=a"(ret) : "a"((long)SYS_getppid) : "rcx", "r11", "memory");
	return ret ? nf_ifunc_impl : nf_ifunc_impl;
}

long nf_ifunc(void) __attribute__((ifunc("nf_resolver")));
