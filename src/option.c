// SPDX-License-Identifier: GPL-2.0
/*
 * options/userstacktrace_delay, the switch of the top-level trace instance, and
 * user_unwind_stats beside the options directory (src/stats.c).
 *
 * Writing 1 enables the user_unwind events in the top instance, which makes the cookie
 * event's reg callback install the request hook; writing 0 disables them. Every write
 * applies, whatever happened since the last one (trace-cmd or events/enable may have
 * switched the events meanwhile). The file reads 1 while the top instance records cookies
 * and stacks are being requested, 0 otherwise. Anything but "0" or "1" (with an optional
 * newline) is -EINVAL and changes nothing. Instances and trace-cmd enable the user_unwind
 * events themselves (trace-cmd record -e user_unwind), since trace-cmd's -O only knows the
 * kernel's built-in options.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/namei.h>
#include <linux/seq_file.h>
#include <linux/tracefs.h>
#include <linux/trace_events.h>
#include <linux/uaccess.h>
#include <user_unwind.h>

#include "wrapper/symbols.h"

/* As tracefs's own files: TRACE_MODE_WRITE and TRACE_MODE_READ (kernel/trace/trace.h). */
#define UU_MODE_WRITE	0640
#define UU_MODE_READ	0440

static DEFINE_MUTEX(uu_option_lock);
static struct dentry *uu_option_dentry;
static struct dentry *uu_stats_dentry;

static const char *const uu_options_dirs[] = {
	"/sys/kernel/tracing/options",
	"/sys/kernel/debug/tracing/options",
};

/*
 * The events one by one, in an order that never writes a stack whose file_cache events are
 * off: on, file_cache first and the cookie event (which starts the requests) last; off, the
 * other way round.
 */
static const char *const uu_option_events[] = {
	"file_cache", "user_unwind_truncated", "user_unwind_stack", "user_unwind_cookie",
};

static int uu_option_set(bool on)
{
	int i, n = ARRAY_SIZE(uu_option_events), ret = 0;

	guard(mutex)(&uu_option_lock);
	for (i = 0; i < n; i++) {
		const char *event = uu_option_events[on ? i : n - 1 - i];
		int err = trace_set_clr_event("user_unwind", event, on);

		ret = ret ?: err;
	}
	return ret;
}

/* Whether the top instance's user_unwind_cookie event is enabled. */
static bool uu_top_cookie_enabled(void)
{
	struct trace_event_file *file;
	bool on;

	file = trace_get_event_file(NULL, "user_unwind", "user_unwind_cookie");
	if (IS_ERR(file))
		return false;
	on = READ_ONCE(file->flags) & EVENT_FILE_FL_ENABLED;
	trace_put_event_file(file);
	return on;
}

static ssize_t uu_option_read(struct file *file, char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	char buf[2];

	buf[0] = uu_top_cookie_enabled() && uu_hook_requesting() ? '1' : '0';
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

/*
 * Only the top instance's options directory of a real tracefs: another filesystem mounted
 * on the path (a container's, a bind mount of an instance) must not get a tracefs file,
 * whose inode tracefs would then treat as its own.
 */
static bool uu_is_top_options(const struct path *path)
{
	const struct dentry *d = path->dentry;

	return d->d_sb->s_magic == TRACEFS_MAGIC && d->d_parent == d->d_sb->s_root &&
	       !strcmp(d->d_name.name, "options");
}

/**
 * uu_option_init - create options/userstacktrace_delay and user_unwind_stats
 * @enable: switch it on right away (the module parameter)
 *
 * Context: task, may sleep.
 * Return: 0, -ENOENT when tracefs is not mounted, -ENOTDIR when the path is not the top
 * instance's options directory of tracefs, or another negative errno; on error nothing is
 * left behind.
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
	if (!uu_is_top_options(&path)) {
		path_put(&path);
		pr_err("%s is not the options directory of tracefs's top instance\n",
		       uu_options_dirs[i - 1]);
		return -ENOTDIR;
	}
	uu_option_dentry = tracefs_create_file("userstacktrace_delay", UU_MODE_WRITE,
					       path.dentry, NULL, &uu_option_fops);
	if (IS_ERR_OR_NULL(uu_option_dentry)) {
		ret = uu_option_dentry ? PTR_ERR(uu_option_dentry) : -ENOMEM;
		uu_option_dentry = NULL;
		path_put(&path);
		pr_err("cannot create options/userstacktrace_delay: %d\n", ret);
		return ret;
	}
	/*
	 * From here on nothing fails: the option file exists, and an opener of it holds a
	 * reference on the module that a failed init would not wait for.
	 */
	uu_stats_dentry = tracefs_create_file("user_unwind_stats", UU_MODE_READ,
					      path.dentry->d_parent, NULL, &uu_stats_fops);
	path_put(&path);
	if (IS_ERR_OR_NULL(uu_stats_dentry)) {
		pr_warn("cannot create user_unwind_stats: %ld; loading without it\n",
			uu_stats_dentry ? PTR_ERR(uu_stats_dentry) : -ENOMEM);
		uu_stats_dentry = NULL;
	}
	if (enable) {
		ret = uu_option_set(true);
		if (ret)
			pr_warn("enable=1: cannot enable the events (%d); the option reads 0\n", ret);
	}
	return 0;
}

/**
 * uu_option_exit - remove the module's tracefs files and switch its events off in the top
 * instance
 *
 * Context: task, may sleep.
 */
void uu_option_exit(void)
{
	if (uu_stats_dentry)
		uu_call(tracefs_remove)(uu_stats_dentry);
	if (uu_option_dentry)
		uu_call(tracefs_remove)(uu_option_dentry);
	uu_stats_dentry = NULL;
	uu_option_dentry = NULL;
	uu_option_set(false);
}
