//go:build cgo && linux

// loop.c: the plain loop. Slots index an array of pointers; the loop
// trusts its input (Prepare checked it), keeps no sizes, times nothing.

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cloop.h"

_Static_assert(sizeof(struct carve_cloop_op) == 24, "carve_cloop_op is libc.Op: 24 bytes");

enum { MALLOC = 1, CALLOC, MEMALIGN, REALLOC, FREE };

// first writes the first byte of a new non-empty block, as libc.Loop
// without touch does; volatile, so that the store stays.
static inline void first(void *p, size_t size, unsigned char c) {
	if (p != NULL && size != 0) {
		*(volatile unsigned char *)p = c;
	}
}

int carve_cloop_run(const struct carve_cloop_op *ops, size_t n, size_t slots, size_t *done) {
	void **ptr = mmap(NULL, slots * sizeof *ptr, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ptr == MAP_FAILED) {
		*done = 0;
		return CARVE_CLOOP_MAP;
	}
	int status = CARVE_CLOOP_OK;
	size_t i = 0;
	for (; i < n; i++) {
		const struct carve_cloop_op *op = &ops[i];
		size_t size = (size_t)op->size;
		void *p = NULL;
		switch (op->kind) {
		case MALLOC:
			p = malloc(size);
			first(p, size, 0xA5);
			break;
		case CALLOC:
			p = calloc(1, size);
			first(p, size, 0);
			break;
		case MEMALIGN:
			if (posix_memalign(&p, op->align < sizeof(void *) ? sizeof(void *) : op->align, size) != 0) {
				p = NULL;
			}
			first(p, size, 0xA5);
			break;
		case REALLOC: {
			void *old = ptr[op->slot];
			p = realloc(old, size);
			if (old == NULL) {
				first(p, size, 0xA5);
			}
			break;
		}
		default: // FREE
			free(ptr[op->slot]);
			ptr[op->slot] = NULL;
			continue;
		}
		if (p == NULL && size != 0) {
			status = CARVE_CLOOP_NOMEM;
			break;
		}
		ptr[op->slot] = p;
	}
	*done = i;
	for (size_t s = 0; s < slots; s++) {
		if (ptr[s] != NULL) {
			free(ptr[s]);
		}
	}
	munmap(ptr, slots * sizeof *ptr);
	return status;
}
