// Package carve is a family of memory allocators for Go that work outside
// the garbage-collected heap, and a lab that measures how far a heap grows
// beyond the memory its program really uses.
//
// This file is the overview. Each allocator's package documents its own
// contract and points back here.
//
// # Why
//
// A heap that serves every size from one region ends up in pieces: freed
// blocks leave holes between live ones, holes cannot merge until their
// neighbours die, and a request larger than every hole needs fresh memory
// even when the free bytes would cover it many times. A fixed-size pool
// avoids this by never mixing sizes; a bump arena avoids it by freeing
// everything at once. carve provides both for Go programs, over memory the
// GC neither scans nor moves, with no bookkeeping bytes per chunk, and
// with memory that really goes back to the OS.
//
// # Glossary
//
//   - region: a range of address space reserved from the OS (package mem).
//     Reserved pages cost nothing; committed pages may be touched and
//     count towards the footprint; decommitted pages go back to the OS.
//   - chunk: one fixed-size unit of a pool. A free chunk holds the link to
//     the next free chunk in its first bytes; a chunk in use holds only
//     the caller's bytes.
//   - stride: the distance between two chunks: the chunk size rounded up
//     to the alignment, so that every chunk, not only the first, is
//     aligned.
//   - slab: the unit in which a pool commits and gives back memory; slab s
//     holds the chunks carved from its start.
//   - block: one link of an arena's chain; the arena bumps a cursor through
//     it.
//   - offset: a chunk's distance from its allocator's base. Allocators
//     keep offsets, not pointers, inside carve memory.
//
// # Statistics
//
// Every allocator reports the same four figures (see [Stats]): Live, the
// bytes callers asked for and hold; Used, what their blocks take with
// rounding, headers and padding; Footprint, what the allocator has
// committed from the OS and kept; Resident, how much of that is in
// physical memory. Used - Live is internal fragmentation, Footprint -
// Used external fragmentation.
//
// # The allocators
//
// pool (package pool) hands out chunks of one size.
//
//	Alloc: 1. pop the head of the free list: head = link stored in the head chunk.
//	       2. if the list is empty, carve the chunk at the cursor;
//	       3. if the cursor's slab is full, revive a slab Trim gave back, or
//	          commit the next slab of the reservation (one mprotect);
//	       4. past the limit: an error wrapping pool.ErrExhausted.
//	Free:  1. check that the address starts a chunk: below the cursor, and
//	          a multiple of the stride inside its slab (a multiply, no
//	          division); otherwise an error wrapping pool.ErrForeign;
//	       2. write the head's offset into the chunk and make it the head.
//	Trim:  count free chunks per slab, unlink the chunks of slabs whose
//	       chunks are all free, decommit those slabs (RSS drops).
//
// arena (package arena) hands out blocks of any size that live until the
// whole arena is reset.
//
//	Alloc: 1. if the cursor is aligned and the block has room, bump the
//	          cursor past the request (a run of values of one Go type stays
//	          aligned); otherwise pad to the alignment on the slow path;
//	       2. otherwise chain a new block (a larger one for a large request);
//	       3. past the limit: an error wrapping arena.ErrExhausted.
//	Reset: every block is reused from the start; Release gives them all back.
//
// Both have typed handles, pool.Of[T] and arena.Of[T], built once per type
// and refusing types that hold Go pointers: the GC does not look inside
// carve memory, so an object referenced only from there could be freed
// under it.
//
// lockfree (package lockfree) is a pool that goroutines share: its head
// packs the index of the first free chunk with a version counter in one
// word swapped by compare-and-swap, so a pop that stalled while others
// popped and pushed the same chunk (the ABA hazard) fails and retries.
// Per-worker caches (Pool.NewCache) keep a few dozen chunks locally and
// trade batches with a central depot, so the common path touches no
// shared cache line.
//
// The general-purpose heaps serve any size, for the lab to compare designs
// on one trace:
//
//	fit        one region, an 8-byte boundary-tag header per block (16-byte
//	           granule, 32-byte minimum: two 16-byte requests land 32 bytes
//	           apart with 24 usable, as glibc's), free neighbours coalesced,
//	           a free top given back; placement by first fit, next fit, best
//	           fit (exact bins and a tree: O(log n)) or address-ordered first
//	           fit (a max-tree over pages).
//	buddy      power-of-two blocks split and merged with their buddies; the
//	           "header" mode puts a 16-byte header before every block, the
//	           paper's modified buddy, so an exact 2^k request takes 2^(k+1).
//	sizeclass  requests rounded up to one of 80 generated classes (8 B to
//	           32 KiB), each served by a pool; larger ones get a mapping of
//	           their own, returned to the OS when freed.
//
// # The lab
//
// Package trace reads and writes allocation traces (carve's native format,
// CS:APP .rep, valgrind --trace-malloc, heaptrack, glibc mtrace, AOSP
// memory_replay; gzip and zstd) as streams of events on object ids, and
// generates the seeds' scenarios and synthetic workloads; package traces
// ships a real program's trace in the binary. Package replay drives one
// allocator with one trace: it keeps live memory and the footprint after
// every event, samples resident memory, computes the paper's
// fragmentation and Johnstone and Wilson's four measures, times a sample
// of the allocator's calls, and checks every block (inside the heap,
// aligned, overlapping no other, its contents intact). The carve command
// runs the lab: with no arguments, the shipped trace and the seeds'
// scenarios through every heap, one table per trace; carve replay for any
// trace, file or generated, with --pool rows that answer "would a pool for
// these objects have helped?"; carve report for the same as one HTML file
// of charts (package report) and heap maps (package heapmap); carve
// advise for the pools a trace needs, found by replaying candidates; carve
// scenario for the seeds' experiments; carve record for a program's own
// trace (package record). Package libc reaches the C allocators, each
// measured in a child process with LD_PRELOAD.
//
// # Which allocator for which job
//
//   - Many objects of one type or size, freed one by one in any order
//     (connections, sessions, nodes, buffers of one size): pool. A freed
//     chunk always fits the next request, and the other sizes of the
//     program cannot carve it up.
//   - Many objects that die together (everything built while handling one
//     request, one frame, one parse): arena. Allocation is a bump and
//     there is no per-object free.
//   - Objects that hold Go pointers, or whose lifetime nobody tracks: the
//     Go heap. carve never replaces the GC for those.
//
// # Cost model
//
// pool: Alloc and Free are O(1), inline into the caller, and make no
// system call except to commit a slab; a chunk in use costs its stride and
// nothing else; the pool keeps one reservation, a few words, and (in
// checked builds only) one bit per chunk. Stats walks the free list. arena: Alloc is O(1), a compare and an add on the fast path; it
// loses at most align-1 bytes to alignment per request and the unused tail
// of each full block. Neither is safe for concurrent use: give each
// goroutine its own, or guard one with a mutex.
//
// # Checked builds
//
// Built with -tags carvecheck, the allocators detect double frees, poison
// freed memory and verify the poison when it is handed out again (a write
// after free), and run their invariant checkers on slow paths. Touching
// memory after it was freed, reset or released is a bug the Go runtime
// cannot catch in release builds; after the memory went back to the OS it
// is a fatal fault.
package carve
