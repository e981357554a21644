// SPDX-License-Identifier: GPL-2.0
/*
 * libuutest.so: the shared-library end of the test program's call chain. The system call
 * is made right here (not through libc, which has no frame pointers), so this function is
 * the innermost frame of every stack the call produces.
 */
#include <sys/syscall.h>

__attribute__((noinline)) long uu_lib_syscall(long nr)
{
	/* A stack slot makes the compiler set up a frame even for this leaf function. */
	volatile long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(nr) : "rcx", "r11", "memory");
	return ret;
}
