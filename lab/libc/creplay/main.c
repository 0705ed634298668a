// main.c: carve's C replayer, a process with no Go runtime in it. The lab
// starts it with LD_PRELOAD naming the malloc to measure (none for glibc)
// and streams it batches of ops; it performs them with the batch loop of
// loop.c, on its main thread, and after each batch reports the
// allocator's own statistic (probe.c) and the process's resident memory.
// Package libc builds it (replayer.go) from this file, loop.c, probe.c
// and carve_libc.h, links it against nothing but libc (and libdl), and
// speaks the protocol below; replayer.go documents what each figure
// means.
//
// The replayer takes nothing from malloc itself, so that the allocator
// under test serves the trace's requests and nothing else: its buffers
// are static, written once before the baseline so that their pages are
// in it, the slot table is mmap'd (loop.c), and it reads /proc with
// pread on descriptors opened at start, never with stdio.
//
// The protocol, in the machine's byte order, on two pipes:
//
//	fd 3, from the lab:  batches: uint32 n, uint32 0, then n ops (struct
//	                     carve_libc_op, 24 bytes each), n <= MAX_OPS; a
//	                     batch of 0 ops asks for a report only. End of
//	                     file ends the process.
//	fd 4, to the lab:    struct hello once, at start; then one struct
//	                     report after each batch.
//
// Usage: creplay [-t]. With -t the loop writes every byte of new blocks.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "carve_libc.h"

enum {
	OPS_FD = 3,
	REPORT_FD = 4,
	MAX_OPS = 4096,
	MAGIC = 0x43525031, // "CRP1"
	PROTOCOL = 2,
};

// hello is what the replayer measured before the first op, at the
// baseline: after the allocator served its first request
// (free(malloc(1))) and before event 0.
struct hello {
	uint32_t magic, protocol;
	uint32_t hello_size, report_size; // sizeof both structs, checked by the lab
	int32_t kind;     // an enum carve_libc_kind: the malloc serving this process
	int32_t stats_ok; // 1 when footprint and allocated were read; else failed says why
	int64_t footprint, allocated; // the allocator's own statistic
	int64_t anon;                 // anonymous RSS (statm resident - shared), bytes
	int64_t rss;                  // RSS (statm resident), bytes: VmHWM's baseline
	int64_t page;                 // the page size
	char version[96];             // the malloc's version
	char library[256];            // the shared object that defines malloc
	char failed[128];             // why the statistic could not be read, or ""
};

// report is what the replayer says after a batch.
struct report {
	int32_t status;  // carve_libc_run's: CARVE_LIBC_OK or the failure of op done
	int32_t err;     // the errno of a failure, or 0
	uint64_t done;   // ops of the batch completed
	int64_t ns;      // nanoseconds inside the batch's calls (loop.c's clock)
	int64_t footprint, allocated; // the allocator's own statistic now
	int64_t anon;    // anonymous RSS now, bytes
	int64_t hwm;     // VmHWM, bytes: the largest RSS since the previous report
	int64_t table;   // bytes of the slot table the slots used
	int32_t stats_ok;
	int32_t pad;
	int64_t off;     // nanoseconds taken off ns, the thread off the CPU in a call
};

// Where replayer.go's batch reads the report's fields.
_Static_assert(offsetof(struct report, ns) == 16, "ns at 16");
_Static_assert(offsetof(struct report, table) == 56, "table at 56");
_Static_assert(offsetof(struct report, stats_ok) == 64, "stats_ok at 64");
_Static_assert(offsetof(struct report, off) == 72, "off at 72");
_Static_assert(sizeof(struct report) == 80, "a report of 80 bytes");

static struct carve_libc_op ops[MAX_OPS];
static char procbuf[8192];
static int statm_fd = -1, status_fd = -1, clear_fd = -1;

// set is memset through a volatile pointer: the writes that bring the
// static buffers into RSS before the baseline must not be optimised away.
static void *(*volatile set)(void *, int, size_t) = memset;

static void say(const char *a, const char *b) {
	(void)!write(2, "creplay: ", 9);
	(void)!write(2, a, strlen(a));
	if (b != NULL) {
		(void)!write(2, b, strlen(b));
	}
	(void)!write(2, "\n", 1);
}

static void die(const char *a, const char *b) {
	say(a, b);
	_exit(2);
}

// full reads or writes exactly n bytes; it returns 0, 1 at end of file
// before the first byte (reads only), or -1.
static int full(int fd, void *buf, size_t n, int writing) {
	char *p = buf;
	size_t got = 0;
	while (got < n) {
		ssize_t k = writing ? write(fd, p + got, n - got) : read(fd, p + got, n - got);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k < 0) {
			return -1;
		}
		if (k == 0) {
			return got == 0 && !writing ? 1 : -1;
		}
		got += (size_t)k;
	}
	return 0;
}

// proc reads a /proc file afresh into procbuf, NUL-terminated.
static void proc(int fd, const char *name) {
	ssize_t n;
	do {
		n = pread(fd, procbuf, sizeof procbuf - 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		die("reading ", name);
	}
	procbuf[n] = 0;
}

// number parses the decimal number at *s and moves *s past it and the
// blanks after.
static int64_t number(const char **s) {
	const char *p = *s;
	while (*p == ' ' || *p == '\t') {
		p++;
	}
	int64_t v = 0;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p++ - '0');
	}
	while (*p == ' ' || *p == '\t') {
		p++;
	}
	*s = p;
	return v;
}

// statm returns the resident and anonymous pages' bytes.
static void statm(int64_t page, int64_t *rss, int64_t *anon) {
	proc(statm_fd, "/proc/self/statm");
	const char *s = procbuf;
	number(&s); // size
	int64_t resident = number(&s), shared = number(&s);
	*rss = resident * page;
	*anon = (resident - shared) * page;
}

// hwm returns VmHWM in bytes.
static int64_t hwm(void) {
	proc(status_fd, "/proc/self/status");
	const char *s = strstr(procbuf, "\nVmHWM:");
	if (s == NULL) {
		die("no VmHWM in /proc/self/status", NULL);
	}
	s += strlen("\nVmHWM:");
	return number(&s) * 1024;
}

// reset_hwm sets VmHWM back to the current RSS.
static void reset_hwm(void) {
	if (write(clear_fd, "5", 1) != 1) {
		die("writing 5 to /proc/self/clear_refs", NULL);
	}
}

static void copy(char *dst, size_t n, const char *src) {
	size_t k = strlen(src);
	if (k >= n) {
		k = n - 1;
	}
	memcpy(dst, src, k);
	dst[k] = 0;
}

int main(int argc, char **argv) {
	int touch = argc > 1 && strcmp(argv[1], "-t") == 0;
	set(ops, 0, sizeof ops);
	set(procbuf, 0, sizeof procbuf);

	struct carve_libc_identity id;
	carve_libc_probe(&id);
	// The allocator's first request, which sets it up (glibc allocates its
	// thread cache; others map their first arena or segment). Through a
	// volatile pointer: a compiler may drop a plain free(malloc(1)).
	void *volatile first = malloc(1);
	free(first);

	statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	clear_fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (statm_fd < 0 || status_fd < 0 || clear_fd < 0) {
		die("cannot open /proc/self/statm, status or clear_refs", NULL);
	}
	struct carve_libc_loop loop;
	if (carve_libc_loop_init(&loop, touch) != 0) {
		die("cannot map the slot table", NULL);
	}
	int64_t page = sysconf(_SC_PAGESIZE);
	(void)hwm(); // the first read of status, so that its code is in the baseline
	static struct hello h;
	static struct report r;
	set(&r, 0, sizeof r);
	h.magic = MAGIC;
	h.protocol = PROTOCOL;
	h.hello_size = sizeof h;
	h.report_size = sizeof r;
	h.kind = id.kind;
	h.page = page;
	copy(h.version, sizeof h.version, id.version);
	copy(h.library, sizeof h.library, id.library);
	struct carve_libc_stats st;
	if (carve_libc_heap_stats(&st) == 0) {
		h.stats_ok = 1;
		h.footprint = st.footprint;
		h.allocated = st.allocated;
	} else {
		copy(h.failed, sizeof h.failed, st.failed);
	}
	statm(page, &h.rss, &h.anon);
	reset_hwm();
	if (full(REPORT_FD, &h, sizeof h, 1) != 0) {
		die("writing the hello", NULL);
	}

	for (;;) {
		uint32_t head[2];
		int end = full(OPS_FD, head, sizeof head, 0);
		if (end == 1) {
			_exit(0); // the lab is done
		}
		if (end != 0 || head[0] > MAX_OPS || head[1] != 0) {
			die("malformed batch from the lab", NULL);
		}
		if (full(OPS_FD, ops, head[0] * sizeof ops[0], 0) != 0) {
			die("the lab's batch ended early", NULL);
		}
		int64_t ns = loop.ns, off = loop.off;
		r.status = head[0] > 0 ? carve_libc_run(&loop, ops, head[0]) : CARVE_LIBC_OK;
		r.done = head[0] > 0 ? loop.done : 0;
		r.err = head[0] > 0 ? loop.err : 0;
		r.ns = loop.ns - ns;
		r.off = loop.off - off;
		r.stats_ok = carve_libc_heap_stats(&st) == 0;
		r.footprint = st.footprint;
		r.allocated = st.allocated;
		int64_t rss;
		statm(page, &rss, &r.anon);
		r.hwm = hwm();
		r.table = (int64_t)(loop.hi * sizeof loop.table[0]);
		reset_hwm();
		if (full(REPORT_FD, &r, sizeof r, 1) != 0) {
			die("writing a report", NULL);
		}
	}
}
