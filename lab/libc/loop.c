//go:build cgo && linux

// loop.c: the batch replay loop. One call performs a whole batch of ops
// on the process's malloc, so the lab pays one cgo call per batch, not
// one per event. The slot table lives in mmap'd memory, never in malloc's
// heap: the allocator under test serves the trace's requests and nothing
// else.

#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "carve_libc.h"

// The layout libc.Op documents (op.go asserts the same numbers of the Go
// type, cgo.go that the Go and C types agree).
_Static_assert(sizeof(struct carve_libc_op) == 24, "carve_libc_op is 24 bytes");
_Static_assert(offsetof(struct carve_libc_op, align) == 4, "align at 4");
_Static_assert(offsetof(struct carve_libc_op, slot) == 8, "slot at 8");
_Static_assert(offsetof(struct carve_libc_op, size) == 16, "size at 16");

enum {
	FIRST_SLOTS = 256, // the first table: one 4 KiB page
	FILL = 0xA5,       // the byte touched blocks are written with (calloc's get zeros)
};

// The allocator's calls are timed one by one, as lab/replay's callClock
// times carve's (its documentation gives the rule): a reading of the
// monotonic clock before each call and one after, the median cost of a
// reading (measured by carve_libc_loop_init) taken off, and the time the
// thread was surely off the CPU in a call (preempted or blocked) taken
// off it, found from the thread's CPU time read at checkpoints. The
// writes of touch and the table's bookkeeping are outside the readings.

static inline int64_t mono(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t thread_cpu(void) {
	struct timespec t;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) {
		return 0;
	}
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void checkpoint(struct carve_libc_loop *l) {
	l->cpu_at = thread_cpu();
	l->wall_at = mono();
}

// begin returns the reading before a call, after a checkpoint if one is
// due.
static inline int64_t begin(struct carve_libc_loop *l) {
	int64_t t = mono();
	if (t - l->wall_at >= CARVE_LIBC_CHECK_AFTER_NS) {
		checkpoint(l);
		t = l->wall_at;
	}
	return t;
}

// end adds the call begun at t to the calls' time. A call faster than a
// reading's median cost adds less than nothing: the sum is the estimate.
static inline void end(struct carve_libc_loop *l, int64_t t) {
	int64_t e = mono();
	int64_t d = e - t - l->clock;
	if (d > CARVE_LIBC_LONG_CALL_NS) {
		int64_t wall = l->wall_at, cpu = l->cpu_at;
		checkpoint(l);
		int64_t gone = (l->wall_at - wall) - (l->cpu_at - cpu);
		int64_t outside = (t - wall) + (l->wall_at - e);
		int64_t off = gone - outside;
		off = off < 0 ? 0 : off > d ? d : off;
		d -= off;
		l->off += off;
	}
	l->ns += d;
}

static int cmp64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

// clock_cost returns the median interval between two readings with
// nothing between them, as begin and end read the clock.
static int64_t clock_cost(void) {
	int64_t d[255];
	for (int i = 0; i < 255; i++) {
		int64_t t = mono();
		d[i] = mono() - t;
	}
	qsort(d, 255, sizeof d[0], cmp64);
	return d[127];
}

// set is memset, called through a volatile pointer so that the compiler
// cannot drop the writes (it knows that calloc's memory is already zero).
static void *(*volatile set)(void *, int, size_t) = memset;

// touch writes the new bytes [off, off+n) of block p with c: all of them
// when the loop touches, else the block's first byte only, and only when
// it is new (off == 0).
static inline void touch(const struct carve_libc_loop *l, unsigned char *p, uint64_t off, uint64_t n, int c) {
	if (n == 0) {
		return;
	}
	if (l->touch) {
		set(p + off, c, (size_t)n);
	} else if (off == 0) {
		*(volatile unsigned char *)p = (unsigned char)c;
	}
}

// grow doubles the table until it has an entry for slot. mremap moves the
// pages, not their bytes; the new entries read as zero (empty).
static int grow(struct carve_libc_loop *l, uint32_t slot) {
	uint64_t cap = l->cap;
	while (cap <= slot) {
		cap *= 2;
	}
	if (cap > SIZE_MAX / sizeof *l->table) {
		l->err = ENOMEM;
		return -1;
	}
	void *t = mremap(l->table, l->cap * sizeof *l->table, cap * sizeof *l->table, MREMAP_MAYMOVE);
	if (t == MAP_FAILED) {
		l->err = errno;
		return -1;
	}
	l->table = t;
	l->cap = cap;
	return 0;
}

// entry returns the table entry of a slot an op may fill, growing the
// table as needed, or NULL when it cannot grow.
static inline struct carve_libc_slot *entry(struct carve_libc_loop *l, uint32_t slot) {
	if (slot >= l->cap && grow(l, slot) != 0) {
		return NULL;
	}
	if (slot >= l->hi) {
		l->hi = (uint64_t)slot + 1;
	}
	return &l->table[slot];
}

// allocate performs a malloc, calloc or memalign op into an empty slot.
static int allocate(struct carve_libc_loop *l, const struct carve_libc_op *op) {
	size_t align = op->align < sizeof(void *) ? sizeof(void *) : op->align;
	if (op->kind == CARVE_LIBC_OP_MEMALIGN && (align & (align - 1)) != 0) {
		return CARVE_LIBC_ALIGN;
	}
	if (op->size > SIZE_MAX) {
		return CARVE_LIBC_NOMEM;
	}
	struct carve_libc_slot *s = entry(l, op->slot);
	if (s == NULL) {
		return CARVE_LIBC_TABLE;
	}
	if (s->p != NULL) {
		return CARVE_LIBC_INUSE;
	}
	size_t size = (size_t)op->size;
	void *p = NULL;
	int fill = FILL;
	int64_t t = begin(l);
	switch (op->kind) {
	case CARVE_LIBC_OP_MALLOC:
		p = malloc(size);
		end(l, t);
		break;
	case CARVE_LIBC_OP_CALLOC:
		p = calloc(1, size);
		end(l, t);
		fill = 0;
		break;
	default: {
		int r = posix_memalign(&p, align, size);
		end(l, t);
		if (r != 0) {
			l->err = r;
			return r == EINVAL ? CARVE_LIBC_ALIGN : CARVE_LIBC_NOMEM;
		}
	}
	}
	if (p == NULL) {
		if (size == 0) {
			return CARVE_LIBC_OK; // malloc(0) may return NULL: the slot stays empty
		}
		l->err = errno;
		return CARVE_LIBC_NOMEM;
	}
	s->p = p;
	s->size = op->size;
	touch(l, p, 0, op->size, fill);
	return CARVE_LIBC_OK;
}

// reallocate performs a realloc op: of the slot's block, or of NULL (a
// malloc) when the slot is empty.
static int reallocate(struct carve_libc_loop *l, const struct carve_libc_op *op) {
	if (op->size > SIZE_MAX) {
		return CARVE_LIBC_NOMEM;
	}
	struct carve_libc_slot *s = entry(l, op->slot);
	if (s == NULL) {
		return CARVE_LIBC_TABLE;
	}
	uint64_t old = s->size;
	int64_t t = begin(l);
	void *p = realloc(s->p, (size_t)op->size);
	end(l, t);
	if (p == NULL) {
		if (op->size != 0) {
			l->err = errno;
			return CARVE_LIBC_NOMEM; // the old block stays in the slot
		}
		s->p = NULL; // realloc(p, 0) may free p and return NULL (glibc does)
		s->size = 0;
		return CARVE_LIBC_OK;
	}
	s->p = p;
	s->size = op->size;
	if (op->size > old) {
		touch(l, p, old, op->size - old, FILL);
	}
	return CARVE_LIBC_OK;
}

// release performs a free op. A slot beyond the table is empty.
static inline void release(struct carve_libc_loop *l, uint32_t slot) {
	if (slot >= l->cap || l->table[slot].p == NULL) {
		return;
	}
	int64_t t = begin(l);
	free(l->table[slot].p);
	end(l, t);
	l->table[slot].p = NULL;
	l->table[slot].size = 0;
}

static inline int step(struct carve_libc_loop *l, const struct carve_libc_op *op) {
	switch (op->kind) {
	case CARVE_LIBC_OP_MALLOC:
	case CARVE_LIBC_OP_CALLOC:
	case CARVE_LIBC_OP_MEMALIGN:
		return allocate(l, op);
	case CARVE_LIBC_OP_REALLOC:
		return reallocate(l, op);
	case CARVE_LIBC_OP_FREE:
		release(l, op->slot);
		return CARVE_LIBC_OK;
	}
	return CARVE_LIBC_KIND;
}

int carve_libc_run(struct carve_libc_loop *l, const struct carve_libc_op *ops, size_t n) {
	l->err = 0;
	int st = CARVE_LIBC_OK;
	size_t i = 0;
	for (; i < n; i++) {
		st = step(l, &ops[i]);
		if (st != CARVE_LIBC_OK) {
			break;
		}
	}
	l->done = i;
	return st;
}

int carve_libc_loop_init(struct carve_libc_loop *l, int touch) {
	memset(l, 0, sizeof *l);
	void *t = mmap(NULL, FIRST_SLOTS * sizeof *l->table, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED) {
		l->err = errno;
		return -1;
	}
	l->table = t;
	l->cap = FIRST_SLOTS;
	l->touch = touch;
	l->clock = clock_cost();
	checkpoint(l);
	return 0;
}

void carve_libc_loop_close(struct carve_libc_loop *l) {
	if (l->table == NULL) {
		return;
	}
	for (uint64_t i = 0; i < l->hi; i++) {
		if (l->table[i].p != NULL) {
			free(l->table[i].p);
		}
	}
	munmap(l->table, l->cap * sizeof *l->table);
	l->table = NULL;
	l->cap = 0;
	l->hi = 0;
}
