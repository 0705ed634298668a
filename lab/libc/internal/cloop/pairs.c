//go:build cgo && linux

// pairs.c: the C side of the heap's speed benchmarks (BenchmarkHeapPair
// and BenchmarkHeapWindow in package libc): the same work as the Go side,
// through the process's malloc, with no Go between the first call and
// the last.

#include <stdlib.h>

#include "cloop.h"

int carve_cloop_pairs(size_t n, size_t size) {
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(size);
		if (p == NULL)
			return CARVE_CLOOP_NOMEM;
		*(volatile unsigned char *)p = 1;
		free(p);
	}
	return CARVE_CLOOP_OK;
}

int carve_cloop_window(void **ring, size_t live, const int32_t *sizes, size_t nsizes, size_t from, size_t n) {
	for (size_t i = from; i < from + n; i++) {
		size_t slot = i % live;
		free(ring[slot]);
		void *p = malloc((size_t)sizes[i % nsizes]);
		ring[slot] = p;
		if (p == NULL)
			return CARVE_CLOOP_NOMEM;
		*(volatile unsigned char *)p = 1;
	}
	return CARVE_CLOOP_OK;
}
