// SPDX-License-Identifier: GPL-2.0
/*
 * libuua.so / libuub.so: two libraries built from this file with different UU_FN names,
 * loaded and unloaded in turn by uu_dl. The system call is made here, so this function is
 * the innermost frame.
 */
__attribute__((noinline)) long UU_FN(long nr)
{
	/* A stack slot makes the compiler set up a frame even for this leaf function. */
	volatile long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(nr) : "rcx", "r11", "memory");
	return ret;
}
