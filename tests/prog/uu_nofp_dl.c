// SPDX-License-Identifier: GPL-2.0
/* libuunofpdl.so: what uu_nofp dlopens and closes again; built without frame pointers. */
#include <unistd.h>

__attribute__((noinline)) long nf_dl_fn(void)
{
	return getppid() + 4;
}
