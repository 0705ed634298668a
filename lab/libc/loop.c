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
	switch (op->kind) {
	case CARVE_LIBC_OP_MALLOC:
		p = malloc(size);
		break;
	case CARVE_LIBC_OP_CALLOC:
		p = calloc(1, size);
		fill = 0;
		break;
	default: {
		int r = posix_memalign(&p, align, size);
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
	void *p = realloc(s->p, (size_t)op->size);
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
	free(l->table[slot].p);
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
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	l->err = 0;
	int st = CARVE_LIBC_OK;
	size_t i = 0;
	for (; i < n; i++) {
		st = step(l, &ops[i]);
		if (st != CARVE_LIBC_OK) {
			break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	l->ns += (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
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
