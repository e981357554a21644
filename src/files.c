// SPDX-License-Identifier: GPL-2.0
/*
 * The files behind file cookies: their path and contents for file_cache, and a probe on
 * __fput() that tells the first-sight cache when a struct file is freed, so that a new
 * file at the same address gets its own file_cache event.
 *
 * The probe runs for every final fput() in the system while the module is loaded, in task
 * or workqueue context (never NMI); it does one hash and at most one atomic compare.
 * On x86 with CONFIG_KPROBES_ON_FTRACE it is an ftrace call, not an int3.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/printk.h>
#include <user_unwind.h>

static int uu_fput_pre(struct kprobe *p, struct pt_regs *regs)
{
	uu_rust_file_freed(regs_get_kernel_argument(regs, 0));
	return 0;
}

static struct kprobe uu_fput_probe = {
	.symbol_name = "__fput",
	.pre_handler = uu_fput_pre,
};

/**
 * uu_files_init - start following the end of struct file lifetimes
 *
 * Context: task, may sleep.
 * Return: 0 or the negative errno of register_kprobe().
 */
int uu_files_init(void)
{
	int ret = register_kprobe(&uu_fput_probe);

	if (ret)
		pr_err("cannot probe __fput (%d): file cookies could not be told apart\n", ret);
	return ret;
}

void uu_files_exit(void)
{
	unregister_kprobe(&uu_fput_probe);
}

/**
 * uu_file_path - the path of @file as the current task sees it
 * @file: a file the caller holds a reference on
 * @buf: where the path is built
 * @len: size of @buf
 *
 * A deleted file keeps its " (deleted)" mark. A path that does not fit is shortened to its
 * last components behind a visible ".../".
 *
 * Context: task.
 * Return: the NUL-terminated path, inside @buf.
 */
const char *uu_file_path(struct file *file, char *buf, int len)
{
	char *p = d_path(file_user_path(file), buf, len);

	if (!IS_ERR(p))
		return p;
	snprintf(buf, len, ".../%pD4", file);
	return buf;
}

/**
 * uu_file_read - read the contents of a regular file
 * @file: a file the caller holds a reference on
 * @offset: where to read
 * @buf: destination
 * @len: at most this many bytes
 *
 * Only regular files are read: a mapped device file may have side effects on read.
 *
 * Context: task, may sleep.
 * Return: bytes read, 0 at the end, or a negative errno.
 */
long uu_file_read(struct file *file, u64 offset, u8 *buf, size_t len)
{
	loff_t pos = offset;

	if (!S_ISREG(file_inode(file)->i_mode) || offset > LLONG_MAX)
		return -EINVAL;
	return kernel_read(file, buf, len, &pos);
}

/**
 * uu_vma_name - the name the kernel gives a VMA without a file
 * @vma: a VMA whose lock (or mmap_lock) the caller holds
 * @buf: where the name is written, NUL-terminated
 * @len: size of @buf
 *
 * Special mappings name themselves ("[vdso]", "[vvar]"); anonymous memory may carry a
 * name given with prctl(PR_SET_VMA_ANON_NAME), shown as "[anon:name]" as in
 * /proc/PID/maps.
 *
 * Context: task, VMA stabilised.
 * Return: the length of the name, 0 when it has none.
 */
int uu_vma_name(struct vm_area_struct *vma, char *buf, int len)
{
	const char *name = NULL;

	if (vma->vm_file)
		return 0;
	if (vma->vm_ops && vma->vm_ops->name)
		name = vma->vm_ops->name(vma);
	if (name)
		return scnprintf(buf, len, "%s", name);
#ifdef CONFIG_ANON_VMA_NAME
	if (vma->anon_name)
		return scnprintf(buf, len, "[anon:%s]", vma->anon_name->name);
#endif
	return 0;
}
