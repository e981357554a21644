// SPDX-License-Identifier: GPL-2.0
/*
 * Off-CPU ground truth for `ustack --off-cpu`: three threads block for known times in
 * known functions, N times each: oc_a sleeps UNIT ms, oc_b 3 UNIT ms, oc_c waits 2 UNIT
 * ms in read() on a pipe that a fourth thread (oc_writer_wait) writes to every 2 UNIT
 * ms: 1:3:2 by design. Each thread also measures the time its calls took
 * (CLOCK_MONOTONIC around them), which it was off the CPU for all but the syscalls'
 * own work, and prints it at the end: "oc_a NS" ...
 *
 * Usage: uu_offcpu [N [UNIT]]   (default 10 rounds of 10 ms)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int rounds = 10;
static long unit = 10;
static int pipefd[2];
/* Nanoseconds each of oc_a, oc_b, oc_c took in all, as the thread measured it. */
static long long took[3];

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

__attribute__((noinline)) void oc_a(void)
{
	sleep_ms(unit);
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void oc_b(void)
{
	sleep_ms(3 * unit);
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void oc_c(void)
{
	char c;

	if (read(pipefd[0], &c, 1) != 1)
		exit(1);
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void oc_writer_wait(void)
{
	sleep_ms(2 * unit);
	asm volatile("" ::: "memory");
}

static void *run_a(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		long long t = now_ns();

		oc_a();
		took[0] += now_ns() - t;
	}
	return arg;
}

static void *run_b(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		long long t = now_ns();

		oc_b();
		took[1] += now_ns() - t;
	}
	return arg;
}

static void *run_c(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		long long t = now_ns();

		oc_c();
		took[2] += now_ns() - t;
	}
	return arg;
}

static void *run_writer(void *arg)
{
	for (int i = 0; i < rounds; i++) {
		oc_writer_wait();
		if (write(pipefd[1], "x", 1) != 1)
			exit(1);
	}
	return arg;
}

int main(int argc, char **argv)
{
	void *(*fn[])(void *) = { run_a, run_b, run_c, run_writer };
	pthread_t t[4];

	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		unit = atol(argv[2]);
	if (pipe(pipefd))
		return 1;
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, fn[i], NULL))
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("oc_a %lld\noc_b %lld\noc_c %lld\n", took[0], took[1], took[2]);
	return 0;
}
