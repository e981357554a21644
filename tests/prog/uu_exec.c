// SPDX-License-Identifier: GPL-2.0
/*
 * execve() from a known chain, main -> uu_a -> uu_b -> uu_c -> execve(): first of a path
 * that does not exist (it fails, and the program goes on: its stack is that chain), then
 * of /proc/self/exe with the argument "done". The event of that execve (raw_syscalls:
 * sys_enter, id 59) is traced before exec's point of no return, and its stack would be
 * taken after it, in the new program: the module must record it empty rather than the new
 * program's first stack. The new image exits at once.
 * Usage: uu_exec [done]
 */
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int uu_c(char *path)
{
	char *args[] = { path, "done", NULL };
	char *env[] = { NULL };

	return execve(path, args, env) + 1;
}

__attribute__((noinline)) int uu_b(char *self)
{
	return uu_c(self) + 1;
}

__attribute__((noinline)) int uu_a(char *self)
{
	return uu_b(self) + 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "done"))
		return 0;
	uu_a("/nonexistent/uu_exec");
	uu_a("/proc/self/exe");
	return 1;
}
