//go:build cgo && linux

// cloop.h: the plain reference loop of package cloop.

#ifndef CARVE_CLOOP_H
#define CARVE_CLOOP_H

#include <stddef.h>
#include <stdint.h>

// carve_cloop_op is libc.Op, byte for byte (cgo.go asserts it).
struct carve_cloop_op {
	uint8_t kind;
	uint8_t pad0[3];
	uint32_t align;
	uint32_t slot;
	uint32_t pad1;
	uint64_t size;
};

enum { CARVE_CLOOP_OK, CARVE_CLOOP_NOMEM, CARVE_CLOOP_MAP };

// carve_cloop_run performs ops[0..n) over a table of slots pointers,
// stopping at the first that gets NULL, then frees every block left and
// unmaps the table. *done is how many ops completed.
int carve_cloop_run(const struct carve_cloop_op *ops, size_t n, size_t slots, size_t *done);

// carve_cloop_pairs makes n pairs of malloc(size), a write of its first
// byte, and free.
int carve_cloop_pairs(size_t n, size_t size);

// carve_cloop_window replaces, for i from `from` to from+n, the block of
// ring[i % live] (freed) by malloc(sizes[i % nsizes]), writing its first
// byte. ring's blocks are the process's malloc's (NULL for none).
int carve_cloop_window(void **ring, size_t live, const int32_t *sizes, size_t nsizes, size_t from, size_t n);

#endif
