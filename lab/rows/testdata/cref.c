// cref.c: an independent reference for the real mallocs' rows, used by
// TestAgreesWithPlainC. It shares no code with the rows' path (package
// libc's replayer and its loop): it reads its own text op list, keeps its
// own table, and reads its own RSS. Its measure of the peak RSS:
//
//	baseline  VmRSS after free(malloc(1)), then 5 written to clear_refs
//	peak      the larger of VmHWM at the end and VmRSS read at each peak of
//	          live memory (before the first op that lowers it), less the
//	          baseline
//
// Usage: cref OPS, where OPS is
//
//	slots N          the first line: slots 0 to N-1 are used
//	m SLOT SIZE      malloc
//	c SLOT SIZE      calloc(1, SIZE)
//	a SLOT SIZE AL   posix_memalign(AL, SIZE)
//	r SLOT SIZE      realloc of the slot's block (NULL if empty)
//	f SLOT           free
//
// Every byte of every new block is written (0xA5; zeros for calloc), and
// the grown part of a realloc'd one. It prints "key value" lines: peak_rss,
// peak_live, baseline, malloc (the file that defines the malloc called).

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct slot {
	unsigned char *p;
	unsigned long long size;
};

static void *(*volatile fill)(void *, int, size_t) = memset;

// status returns the value in bytes of the /proc/self/status line key
// ("VmRSS:"), read without stdio so that no malloc happens.
static long long status(const char *key) {
	static char buf[16384];
	int fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0) {
		perror("cref: /proc/self/status");
		exit(2);
	}
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) {
		perror("cref: reading /proc/self/status");
		exit(2);
	}
	buf[n] = 0;
	char *s = strstr(buf, key);
	if (s == NULL) {
		fprintf(stderr, "cref: no %s in /proc/self/status\n", key);
		exit(2);
	}
	return strtoll(s + strlen(key), NULL, 10) * 1024;
}

// The op list is read with read(2) into a static buffer, never with
// stdio, whose FILE and buffer would come from the malloc under test.
static int in = -1;
static char rbuf[1 << 16];
static size_t rlen, rpos;

// next_line copies the next line of the op list into line (NUL-terminated,
// without its newline) and returns 1, or 0 at the end.
static int next_line(char *line, size_t n) {
	size_t k = 0;
	for (;;) {
		if (rpos == rlen) {
			ssize_t got = read(in, rbuf, sizeof rbuf);
			if (got < 0) {
				perror("cref: reading the op list");
				exit(2);
			}
			if (got == 0) {
				line[k] = 0;
				return k > 0;
			}
			rlen = (size_t)got;
			rpos = 0;
		}
		char c = rbuf[rpos++];
		if (c == '\n') {
			line[k] = 0;
			return 1;
		}
		if (k + 1 < n) {
			line[k++] = c;
		}
	}
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: cref OPS\n");
		return 2;
	}
	if ((in = open(argv[1], O_RDONLY)) < 0) {
		perror(argv[1]);
		return 2;
	}
	static char line[256];
	unsigned long long nslots = 0;
	if (!next_line(line, sizeof line) || strncmp(line, "slots ", 6) != 0 || (nslots = strtoull(line + 6, NULL, 10)) == 0) {
		fprintf(stderr, "cref: %s: want a first line \"slots N\"\n", argv[1]);
		return 2;
	}
	// The table, mapped and written before the baseline: its pages are
	// in the baseline, and it takes nothing from malloc.
	size_t tsize = (nslots + 1) * sizeof(struct slot);
	struct slot *t = mmap(NULL, tsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED) {
		perror("cref: mmap");
		return 2;
	}
	fill(t, 0, tsize);
	status("VmRSS:");

	void *volatile one = malloc(1); // volatile: the compiler may not drop the pair
	free(one);
	long long base = status("VmRSS:");
	int cr = open("/proc/self/clear_refs", O_WRONLY);
	if (cr < 0 || write(cr, "5", 1) != 1) {
		perror("cref: /proc/self/clear_refs");
		return 2;
	}
	close(cr);

	long long live = 0, peak = 0, sampled = 0, rss = 0;
	unsigned long long lineno = 1;
	while (next_line(line, sizeof line)) {
		lineno++;
		char op = line[0], *p = line + 1, *end;
		unsigned long long f[3] = {0, 0, 0};
		int n = 0;
		for (; n < 3; n++) {
			f[n] = strtoull(p, &end, 10);
			if (end == p) {
				break;
			}
			p = end;
		}
		unsigned long long slot = f[0], size = f[1], align = f[2];
		if (n < 1 || slot >= nslots) {
			fprintf(stderr, "cref: %s:%llu: bad line %s\n", argv[1], lineno, line);
			return 2;
		}
		struct slot *s = &t[slot];
		long long after = live;
		switch (op) {
		case 'm': case 'c': case 'a':
			after = live + (long long)size;
			break;
		case 'r':
			after = live - (long long)s->size + (long long)size;
			break;
		case 'f':
			after = live - (long long)s->size;
			break;
		}
		// Live memory is about to fall from a peak not yet read: read the
		// RSS there.
		if (after < live && live == peak && peak > sampled) {
			long long now = status("VmRSS:");
			if (now > rss) {
				rss = now;
			}
			sampled = peak;
		}
		void *b = NULL;
		switch (op) {
		case 'm':
			b = malloc(size);
			if (b != NULL) {
				fill(b, 0xA5, size);
			}
			break;
		case 'c':
			b = calloc(1, size);
			if (b != NULL) {
				fill(b, 0, size);
			}
			break;
		case 'a':
			if (align < sizeof(void *)) {
				align = sizeof(void *);
			}
			if (posix_memalign(&b, align, size) != 0) {
				b = NULL;
			}
			if (b != NULL) {
				fill(b, 0xA5, size);
			}
			break;
		case 'r':
			b = realloc(s->p, size);
			if (b == NULL && size == 0) {
				s->p = NULL; // freed
			} else if (b != NULL && size > s->size) {
				fill((unsigned char *)b + s->size, 0xA5, size - s->size);
			}
			break;
		case 'f':
			free(s->p);
			s->p = NULL;
			s->size = 0;
			live = after;
			continue;
		default:
			fprintf(stderr, "cref: %s:%llu: unknown op %c\n", argv[1], lineno, op);
			return 2;
		}
		if (b == NULL && size > 0) {
			fprintf(stderr, "cref: %s:%llu: out of memory\n", argv[1], lineno);
			return 2;
		}
		s->p = b;
		s->size = b == NULL ? 0 : size;
		live = after;
		if (live > peak) {
			peak = live;
		}
	}
	long long hwm = status("VmHWM:");
	long long now = status("VmRSS:");
	if (now > rss) {
		rss = now;
	}
	if (hwm > rss) {
		rss = hwm;
	}
	Dl_info di;
	const char *lib = dladdr(dlsym(RTLD_DEFAULT, "malloc"), &di) != 0 && di.dli_fname != NULL ? di.dli_fname : "?";
	printf("peak_rss %lld\npeak_live %lld\nbaseline %lld\nmalloc %s\n", rss - base, peak, base, lib);
	return 0;
}
