// SPDX-License-Identifier: GPL-2.0
/*
 * Wrappers around static inline kernel functions and types that Rust cannot call or name
 * from an out-of-tree module.
 */
#include <linux/ftrace.h>
#include <linux/mm_types.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/siphash.h>
#include <linux/timekeeping.h>
#include <linux/trace.h>
#include <user_unwind.h>

/*
 * current->mm, read in C. The Rust bindings of this kernel build place task_struct::mm 48
 * bytes before where C has it (a layout mismatch between bindgen and clang somewhere
 * between sched_class and sched_info), so kernel::current!().mm() reads another field.
 */
struct mm_struct *uu_current_mm(void)
{
	return current->mm;
}

void uu_get_random_key(u64 key[2])
{
	get_random_bytes(key, 2 * sizeof(u64));
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

/* Whether the top-level instance records: a file_cache written while it does not is lost. */
bool uu_tracing_on(void)
{
	return tracing_is_on();
}

/* Offsets of the vm_area_struct fields Rust reads, for the KUnit suite to compare. */
void uu_vma_layout(size_t out[4])
{
	out[0] = offsetof(struct vm_area_struct, vm_start);
	out[1] = offsetof(struct vm_area_struct, vm_end);
	out[2] = offsetof(struct vm_area_struct, vm_pgoff);
	out[3] = offsetof(struct vm_area_struct, vm_file);
}

u64 uu_now_ns(void)
{
	return ktime_get_mono_fast_ns();
}
