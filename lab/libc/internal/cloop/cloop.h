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

#endif
