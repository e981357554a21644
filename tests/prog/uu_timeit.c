// SPDX-License-Identifier: GPL-2.0
/*
 * The clock around a command, for make bench-real (tests/guest/bench_real.sh): runs COMMAND
 * with its arguments as a child, waits for it and prints "ns=N status=S": the
 * CLOCK_MONOTONIC nanoseconds from before the fork to after the wait (under QEMU's -icount,
 * the instructions the guest executed meanwhile), and the child's exit status. With
 * --trace-pid FILE it first writes its own PID to FILE (tracefs's set_event_pid, with the
 * event-fork option on: the command and its children are traced, nothing else), then "1"
 * to each --enable FILE (an event's enable file): events are on for no other task.
 *
 * Usage: uu_timeit [--trace-pid FILE] [--enable FILE]... COMMAND [ARG...]
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int write_file(const char *file, const char *text)
{
	size_t len = strlen(text);
	int fd, ok;

	fd = open(file, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -1;
	ok = write(fd, text, len) == (ssize_t)len;
	return close(fd) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	long long t0, t1;
	int arg = 1, status;
	char text[32];
	pid_t pid;

	snprintf(text, sizeof(text), "%d\n", (int)getpid());
	while (arg + 1 < argc && (!strcmp(argv[arg], "--trace-pid") ||
				  !strcmp(argv[arg], "--enable"))) {
		if (write_file(argv[arg + 1], argv[arg][2] == 't' ? text : "1")) {
			perror(argv[arg + 1]);
			return 2;
		}
		arg += 2;
	}
	if (arg >= argc || argv[arg][0] == '-') {
		fprintf(stderr,
			"usage: uu_timeit [--trace-pid FILE] [--enable FILE]... COMMAND [ARG...]\n");
		return 2;
	}
	t0 = now_ns();
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[arg], argv + arg);
		perror(argv[arg]);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid) {
		perror("waitpid");
		return 2;
	}
	t1 = now_ns();
	printf("ns=%lld status=%d\n", t1 - t0,
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}
