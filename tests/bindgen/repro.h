/* SPDX-License-Identifier: GPL-2.0 */
/* struct sched_statistics with CONFIG_SCHEDSTATS=n, inside task_struct: the reproducer. */
struct empty { } __attribute__((__aligned__(64)));
struct outer { char c; struct empty e; long after; };
