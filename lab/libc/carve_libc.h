//go:build cgo && linux

// carve_libc.h: the C side of package libc, shared by the Go files and by
// probe.c (which malloc serves the process, and its statistics) and
// loop.c (the batch replay loop). Every name starts with carve_libc_:
// other packages of carve link C into the same binary.

#ifndef CARVE_LIBC_H
#define CARVE_LIBC_H

#include <stddef.h>
#include <stdint.h>

// The mallocs probe.c recognizes.
enum carve_libc_kind {
	CARVE_LIBC_UNKNOWN,
	CARVE_LIBC_GLIBC,
	CARVE_LIBC_JEMALLOC,
	CARVE_LIBC_TCMALLOC,
	CARVE_LIBC_MIMALLOC,
};

// carve_libc_identity is what carve_libc_probe finds.
struct carve_libc_identity {
	int kind;          // an enum carve_libc_kind
	char version[96];  // as the malloc reports it; "" when it does not
	char library[256]; // path of the shared object that defines malloc
};

// carve_libc_probe finds the malloc serving the process, fills id, and
// keeps the entry points carve_libc_heap_stats needs. Call it once, before
// carve_libc_heap_stats (package libc does, under a sync.Once).
void carve_libc_probe(struct carve_libc_identity *id);

// carve_libc_stats is what carve_libc_heap_stats reads.
struct carve_libc_stats {
	int64_t footprint;
	int64_t allocated;
	const char *failed; // a static string naming the call that failed, or NULL
};

// carve_libc_heap_stats reads the probed malloc's own statistics. It
// returns 0, or -1 with out->failed set.
int carve_libc_heap_stats(struct carve_libc_stats *out);

// carve_libc_malloc is malloc itself: cgo's C.malloc aborts the process
// when malloc returns NULL, and package libc reports that as an error.
void *carve_libc_malloc(size_t size);

// carve_libc_op is libc.Op, byte for byte (both sides assert the layout).
struct carve_libc_op {
	uint8_t kind;
	uint8_t pad0[3];
	uint32_t align;
	uint32_t slot;
	uint32_t pad1;
	uint64_t size;
};

// The op kinds: libc.OpMalloc and the others, in the same order.
enum {
	CARVE_LIBC_OP_MALLOC = 1,
	CARVE_LIBC_OP_CALLOC,
	CARVE_LIBC_OP_MEMALIGN,
	CARVE_LIBC_OP_REALLOC,
	CARVE_LIBC_OP_FREE,
};

// carve_libc_slot is one entry of a loop's table: the block a slot holds
// (NULL when it holds none) and the size it was asked for.
struct carve_libc_slot {
	void *p;
	uint64_t size;
};

// carve_libc_loop is a loop's state. It lives in Go memory (inside a
// libc.Loop) and holds no Go pointer: the table is mmap'd.
struct carve_libc_loop {
	struct carve_libc_slot *table; // cap entries, mmap'd; NULL once closed
	uint64_t cap;                  // entries mapped: a power of two
	uint64_t hi;                   // 1 + the highest slot an allocation or realloc named; hi <= cap
	int64_t ns;                    // nanoseconds inside the allocator's calls, summed (see loop.c)
	int64_t off;                   // nanoseconds taken off them as the thread was off the CPU
	int64_t clock;                 // what timing a call adds to its time, measured at init
	int64_t wall_at, cpu_at;       // the clock's last checkpoint: monotonic and thread CPU time
	uint64_t done;                 // ops the last carve_libc_run completed
	int err;                       // errno of the last failure, or 0
	int touch;                     // write every byte of new blocks
};

// The clock's checkpoints (loop.c): before a call that starts
// CARVE_LIBC_CHECK_AFTER_NS or more after the last, and after every call
// longer than CARVE_LIBC_LONG_CALL_NS, the rule of lab/replay's
// callClock, its CheckAfter and LongCall.
enum {
	CARVE_LIBC_CHECK_AFTER_NS = 32000,
	CARVE_LIBC_LONG_CALL_NS = 20000,
};

// What carve_libc_run returns.
enum {
	CARVE_LIBC_OK,
	CARVE_LIBC_NOMEM,    // malloc, calloc, posix_memalign or realloc failed
	CARVE_LIBC_KIND,     // unknown op kind
	CARVE_LIBC_ALIGN,    // alignment not a power of two
	CARVE_LIBC_INUSE,    // allocation into a slot that holds a block
	CARVE_LIBC_TABLE,    // the table could not grow (err is the errno)
};

// carve_libc_loop_init maps a loop's first table. It returns 0, or -1
// with l->err set.
int carve_libc_loop_init(struct carve_libc_loop *l, int touch);

// carve_libc_run performs ops[0..n) in order, stopping at the first that
// fails; l->done says how many completed.
int carve_libc_run(struct carve_libc_loop *l, const struct carve_libc_op *ops, size_t n);

// carve_libc_loop_close frees every block still held and unmaps the table.
void carve_libc_loop_close(struct carve_libc_loop *l);

#endif
