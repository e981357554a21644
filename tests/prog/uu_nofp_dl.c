// SPDX-License-Identifier: GPL-2.0
/*
 * libuunofpdl.so: what uu_nofp dlopens and closes again; built without frame pointers.
 * libuunofpdl2.so (UU_VARIANT) has nf_dl_fn elsewhere and with another frame, so that a row
 * of one applied to the other would unwind wrong: the guest rewrites one file in place with
 * each in turn (tests/guest/unwind.sh, UNWIND_REWRITE).
 */
#include <unistd.h>

#ifdef UU_VARIANT
__attribute__((noinline)) long nf_dl_pad(long x)
{
	volatile long pad[40];

	for (int i = 0; i < 40; i++)
		pad[i] = x + i;
	return pad[x & 31];
}

__attribute__((noinline)) long nf_dl_fn(void)
{
	volatile char frame[200];

	frame[0] = 1;
	return getppid() + frame[0] + nf_dl_pad(3);
}
#else
__attribute__((noinline)) long nf_dl_fn(void)
{
	return getppid() + 4;
}
#endif
