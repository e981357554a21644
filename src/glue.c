// SPDX-License-Identifier: GPL-2.0
/*
 * Wrappers around static inline kernel functions and types that Rust cannot call or name
 * from an out-of-tree module.
 */
#include <linux/bug.h>
#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/ftrace.h>
#include <linux/mm_types.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/siphash.h>
#include <linux/timekeeping.h>
#include <linux/trace.h>
#include <user_unwind.h>

/*
 * Waits for the CRNG: a module loaded from an initramfs may run before it is ready, and a
 * predictable key would let anyone forge or invert cookies.
 */
int uu_get_random_key(u64 key[2])
{
	return get_random_bytes_wait(key, 2 * sizeof(u64));
}

u64 uu_kernel_siphash(const void *data, size_t len, const u64 key[2])
{
	const siphash_key_t k = { { key[0], key[1] } };

	return siphash(data, len, &k);
}

u64 uu_kernel_siphash_1u64(u64 value, const u64 key[2])
{
	const siphash_key_t k = { { key[0], key[1] } };

	return siphash_1u64(value, &k);
}

/*
 * The layout of what the Rust side reads through the bindings, or relies on the kernel
 * crate to read, as C has it; src/layout.rs compares it with the bindings' at load. The
 * order is UU_LAYOUT_* in include/user_unwind.h.
 */
int uu_layout(size_t *out, size_t n)
{
	if (WARN_ON_ONCE(n != UU_LAYOUT_NR))
		return -EINVAL;
	out[UU_LAYOUT_TASK_SIZE] = sizeof(struct task_struct);
	out[UU_LAYOUT_TASK_MM] = offsetof(struct task_struct, mm);
	out[UU_LAYOUT_TASK_PID] = offsetof(struct task_struct, pid);
	out[UU_LAYOUT_TASK_TGID] = offsetof(struct task_struct, tgid);
	out[UU_LAYOUT_TASK_GROUP_LEADER] = offsetof(struct task_struct, group_leader);
	out[UU_LAYOUT_VMA_SIZE] = sizeof(struct vm_area_struct);
	out[UU_LAYOUT_VMA_START] = offsetof(struct vm_area_struct, vm_start);
	out[UU_LAYOUT_VMA_END] = offsetof(struct vm_area_struct, vm_end);
	out[UU_LAYOUT_VMA_PGOFF] = offsetof(struct vm_area_struct, vm_pgoff);
	out[UU_LAYOUT_VMA_FILE] = offsetof(struct vm_area_struct, vm_file);
	out[UU_LAYOUT_VMA_MM] = offsetof(struct vm_area_struct, vm_mm);
	out[UU_LAYOUT_VMA_FLAGS] = offsetof(struct vm_area_struct, vm_flags);
	out[UU_LAYOUT_FILE_SIZE] = sizeof(struct file);
	out[UU_LAYOUT_FILE_ID_SIZE] = sizeof(struct uu_file_id);
	return 0;
}

u64 uu_now_ns(void)
{
	return ktime_get_mono_fast_ns();
}
