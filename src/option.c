// SPDX-License-Identifier: GPL-2.0
/*
 * options/userstacktrace_delay: the switch of the top-level trace instance.
 *
 * Writing 1 enables the user_unwind events in the top instance, which makes the cookie
 * event's reg callback install the request hook; writing 0 disables them. The file reads
 * back what was last written. Anything but "0" or "1" (with an optional newline) is
 * -EINVAL and changes nothing. Instances and trace-cmd enable the user_unwind events
 * themselves (trace-cmd record -e user_unwind), since trace-cmd's -O only knows the
 * kernel's built-in options.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/namei.h>
#include <linux/tracefs.h>
#include <linux/trace_events.h>
#include <linux/uaccess.h>
#include <user_unwind.h>

#include "wrapper/symbols.h"

static DEFINE_MUTEX(uu_option_lock);
static bool uu_option;			/* under uu_option_lock */
static struct dentry *uu_option_dentry;

static const char *const uu_options_dirs[] = {
	"/sys/kernel/tracing/options",
	"/sys/kernel/debug/tracing/options",
};

static int uu_option_set(bool on)
{
	int ret;

	guard(mutex)(&uu_option_lock);
	if (on == uu_option)
		return 0;
	ret = trace_set_clr_event("user_unwind", NULL, on);
	if (ret)
		return ret;
	uu_option = on;
	return 0;
}

static ssize_t uu_option_read(struct file *file, char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	char buf[2];

	scoped_guard(mutex, &uu_option_lock)
		buf[0] = uu_option ? '1' : '0';
	buf[1] = '\n';
	return simple_read_from_buffer(ubuf, count, ppos, buf, sizeof(buf));
}

static ssize_t uu_option_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	u8 buf[3];
	int val, ret;

	if (count == 0 || count > sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	val = uu_rust_parse_option(buf, count);
	if (val < 0)
		return val;
	ret = uu_option_set(val);
	if (ret)
		return ret;
	*ppos += count;
	return count;
}

static const struct file_operations uu_option_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = uu_option_read,
	.write = uu_option_write,
	.llseek = default_llseek,
};

/**
 * uu_option_init - create options/userstacktrace_delay
 * @enable: switch it on right away (the module parameter)
 *
 * Context: task, may sleep.
 * Return: 0, -ENOENT when tracefs is not mounted, or another negative errno; on error
 * nothing is left behind.
 */
int uu_option_init(bool enable)
{
	struct path path;
	int i, ret = -ENOENT;

	for (i = 0; i < ARRAY_SIZE(uu_options_dirs) && ret; i++)
		ret = kern_path(uu_options_dirs[i], LOOKUP_DIRECTORY, &path);
	if (ret) {
		pr_err("tracefs options directory not found: mount tracefs on /sys/kernel/tracing\n");
		return ret;
	}
	uu_option_dentry = tracefs_create_file("userstacktrace_delay", 0644,
					       path.dentry, NULL, &uu_option_fops);
	path_put(&path);
	if (IS_ERR_OR_NULL(uu_option_dentry)) {
		ret = uu_option_dentry ? PTR_ERR(uu_option_dentry) : -ENOMEM;
		uu_option_dentry = NULL;
		pr_err("cannot create options/userstacktrace_delay: %d\n", ret);
		return ret;
	}
	if (enable) {
		ret = uu_option_set(true);
		if (ret) {
			uu_option_exit();
			return ret;
		}
	}
	return 0;
}

/**
 * uu_option_exit - remove the option file and switch the events off
 *
 * Context: task, may sleep.
 */
void uu_option_exit(void)
{
	if (uu_option_dentry)
		uu_sym.tracefs_remove(uu_option_dentry);
	uu_option_dentry = NULL;
	uu_option_set(false);
}
