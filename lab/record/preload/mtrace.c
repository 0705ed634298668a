/*
 * mtrace.c: the starter of glibc's mtrace for package record's "mtrace"
 * recorder. glibc logs allocations only after the program calls
 * mtrace(); this library, preloaded, calls it from its constructor, so
 * any program can be traced without a change.
 *
 * Since glibc 2.34, mtrace lives in libc_malloc_debug.so, which must be
 * preloaded before this library (libc's own mtrace() does nothing); the
 * Go side finds it and sets LD_PRELOAD.
 *
 * Processes. CARVE_RECORD_DIR names the directory of logs, and
 * MALLOC_TRACE a placeholder (see start). Each program
 * image that loads this library logs to its own file there,
 * <pid>-<k>.log (k the first number not taken), with the path of its
 * executable in <pid>-<k>.exe. glibc shares the log's stream with a
 * forked child, so the child's copy of the log descriptor is pointed at
 * /dev/null: forked children are not recorded (a child that execs is,
 * as a new image).
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mcheck.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The descriptor of mtrace's stream, found after mtrace() opened it. */
static int trace_fd = -1;

static void fork_child(void)
{
	if (trace_fd < 0)
		return;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup3(null, trace_fd, O_CLOEXEC);
		close(null);
	}
}

/* find_fd returns the descriptor open on the file st describes, or -1. */
static int find_fd(const struct stat *st)
{
	for (int fd = 0; fd < 4096; fd++) {
		struct stat got;
		if (fstat(fd, &got) == 0 && got.st_dev == st->st_dev && got.st_ino == st->st_ino)
			return fd;
	}
	return -1;
}

__attribute__((constructor)) static void start(void)
{
	const char *dir = getenv("CARVE_RECORD_DIR");
	char *trace = getenv("MALLOC_TRACE");
	char path[4096 + 64], saved[4096 + 64];
	if (dir == NULL || dir[0] == '\0' || strlen(dir) >= 4096 || trace == NULL || strlen(trace) >= sizeof saved)
		return;

	/* Claim <dir>/<pid>-<k>.log, and write the executable's path. */
	int n = -1, fd = -1;
	for (int k = 0; k < 1000 && fd < 0; k++) {
		n = snprintf(path, sizeof path, "%s/%d-%d.log", dir, (int)getpid(), k);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return;
	}
	if (fd < 0)
		return;
	close(fd);
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe);
	strcpy(path + n - 4, ".exe");
	int efd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (efd >= 0) {
		if (len > 0 && write(efd, exe, (size_t)len) < 0)
			len = 0;
		close(efd);
	}
	strcpy(path + n - 4, ".log");

	struct stat st;
	if (stat(path, &st) != 0 || strlen(trace) < (size_t)n)
		return;
	/* Registered before tracing starts: pthread_atfork allocates. */
	pthread_atfork(NULL, NULL, fork_child);
	/* mtrace() opens the file MALLOC_TRACE names. The Go side set it to
	 * a placeholder longer than any log's path; the path is written over
	 * it for the call and the placeholder put back, for the programs this
	 * one execs. (setenv would allocate, and glibc would free its copy
	 * at exit, in the trace.) */
	strcpy(saved, trace);
	strcpy(trace, path);
	mtrace();
	strcpy(trace, saved);
	trace_fd = find_fd(&st);
}
