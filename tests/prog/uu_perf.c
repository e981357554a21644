// SPDX-License-Identifier: GPL-2.0
/*
 * Opens a tracepoint with perf_event_open() as an unprivileged user (uid and gid 65534),
 * counting only, on the calling task, kernel and hypervisor excluded: what
 * perf_event_paranoid 2 allows for most events.
 * Prints "uu_perf ID ok" or "uu_perf ID ERRNO-NAME".
 * Usage (as root): uu_perf TRACEPOINT_ID...
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (setgid(65534) || setuid(65534)) {
		perror("uu_perf: setuid");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct perf_event_attr attr;
		long fd;

		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_TRACEPOINT;
		attr.config = strtoull(argv[i], NULL, 10);
		attr.exclude_kernel = 1;
		attr.exclude_hv = 1;
		fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
		if (fd < 0) {
			printf("uu_perf %s %s\n", argv[i], errno == EPERM ? "EPERM" :
			       errno == EACCES ? "EACCES" : strerror(errno));
		} else {
			printf("uu_perf %s ok\n", argv[i]);
			close(fd);
		}
	}
	return 0;
}
