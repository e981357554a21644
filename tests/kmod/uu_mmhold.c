// SPDX-License-Identifier: GPL-2.0
/*
 * A test fixture, never loaded outside the guest tests: holds a task's mmap_lock for
 * writing, as a writer does that waits on an unanswered FUSE request with it held.
 *
 * Writing "PID MS" to /sys/kernel/debug/uu_mmhold takes the mmap_lock of PID's mm for
 * writing, keeps it MS milliseconds (at most a minute; a signal ends the wait early) and
 * releases it; the write returns then.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/uaccess.h>

static struct dentry *uu_mmhold_dentry;

static ssize_t uu_mmhold_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	struct task_struct *task;
	struct mm_struct *mm;
	unsigned int ms;
	struct pid *pid;
	char buf[32];
	int nr;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	if (sscanf(buf, "%d %u", &nr, &ms) != 2 || ms > 60000)
		return -EINVAL;
	pid = find_get_pid(nr);
	task = get_pid_task(pid, PIDTYPE_PID);
	put_pid(pid);
	if (!task)
		return -ESRCH;
	mm = get_task_mm(task);
	put_task_struct(task);
	if (!mm)
		return -ESRCH;
	if (mmap_write_lock_killable(mm)) {
		mmput(mm);
		return -EINTR;
	}
	msleep_interruptible(ms);
	mmap_write_unlock(mm);
	mmput(mm);
	return count;
}

static const struct file_operations uu_mmhold_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = uu_mmhold_write,
};

static int __init uu_mmhold_init(void)
{
	uu_mmhold_dentry = debugfs_create_file("uu_mmhold", 0200, NULL, NULL, &uu_mmhold_fops);
	return 0;
}

static void __exit uu_mmhold_exit(void)
{
	debugfs_remove(uu_mmhold_dentry);
}

module_init(uu_mmhold_init);
module_exit(uu_mmhold_exit);
MODULE_DESCRIPTION("Test fixture: hold a task's mmap_lock for writing");
MODULE_LICENSE("GPL");
