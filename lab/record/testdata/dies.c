/*
 * dies makes COUNT mallocs of SIZE bytes, far fewer than would fill a
 * 64 KiB buffer of records, and then ends as its argument says:
 *
 *	segv	a store through a null pointer (SIGSEGV)
 *	abort	abort() (SIGABRT)
 *	kill	SIGKILL, sent to itself
 *	int	it ignores SIGINT and sleeps until it is killed
 *	many	it makes 100000 more malloc and free pairs (some 4 MB of
 *		records), and exits
 *	fork	a child it forks does as many, then the parent waits for it
 *		and exits
 *	rawfork	as fork, by the raw system call (no fork handlers run)
 *	exec	it replaces itself with itself run as many
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SIZE = 23456, COUNT = 7 };

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "";
	for (int i = 0; i < COUNT; i++) {
		char *p = malloc(SIZE);
		if (p == NULL)
			abort();
		memset(p, i, SIZE);
	}
	if (strcmp(how, "segv") == 0)
		*(volatile int *)0 = 1;
	if (strcmp(how, "abort") == 0)
		abort();
	if (strcmp(how, "kill") == 0)
		kill(getpid(), SIGKILL);
	if (strcmp(how, "exec") == 0)
		execl("/proc/self/exe", argv[0], "many", (char *)NULL);
	if (strcmp(how, "fork") == 0 || strcmp(how, "rawfork") == 0) {
		pid_t child = strcmp(how, "fork") == 0 ? fork() : (pid_t)syscall(SYS_fork);
		if (child == 0)
			how = "many";
		else
			waitpid(child, NULL, 0);
	}
	if (strcmp(how, "many") == 0)
		for (int i = 0; i < 100000; i++)
			free(malloc(SIZE + 1));
	if (strcmp(how, "int") == 0) {
		signal(SIGINT, SIG_IGN);
		write(1, "ready\n", 6);
		for (;;)
			pause();
	}
	return 0;
}
