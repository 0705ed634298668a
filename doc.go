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
// The words mean what carve's code and documentation mean by them.
//
//   - region: a range of address space reserved from the OS (package mem).
//     Reserved pages cost nothing; committed pages may be touched and
//     count towards the footprint; decommitted pages go back to the OS.
//   - block: the memory one request is given by a heap (fit, buddy,
//     sizeclass, heap) and given back by its Free: the caller's bytes,
//     their rounding and, where the heap has one, the header in front.
//     Package arena alone means something else by it: one region of its
//     chain, through which it bumps a cursor (arena.BlockSize).
//   - chunk: one fixed-size unit of a pool. A free chunk holds the link to
//     the next free chunk in its first bytes; a chunk in use holds only
//     the caller's bytes.
//   - stride: the distance between two chunks: the chunk size rounded up
//     to the alignment, so that every chunk, not only the first, is
//     aligned.
//   - slab: the unit in which a pool commits and gives back memory; slab s
//     holds the chunks carved from its start. In heap, a slab is one page
//     of a size class, cut into slots.
//   - slot: one unit of a heap's size class: the block of a small request
//     in heap, with no header.
//   - size class: a size that requests are rounded up to, so that blocks
//     of one class are interchangeable (sizeclass, heap's small zone).
//   - boundary tag: the header in front of a block of fit, and of heap's
//     best-fit blocks: its size and whether it and its neighbour are in
//     use, so that a free block finds and merges its free neighbours in
//     O(1).
//   - granule: the unit block sizes round to in fit and heap's best-fit
//     zone (16 bytes); in buddy, the unit in which it commits memory and
//     gives it back (buddy.Granule).
//   - page: the heap's unit of tracking (4 KiB, the OS page): which memory
//     is a slab, free, or given back.
//   - purge: giving free pages' physical memory back to the OS while
//     keeping the mapping (MADV_DONTNEED): RSS drops at once, and the pages
//     read as zero when next touched, with no system call.
//   - offset: a chunk's or block's distance from its allocator's base.
//     Allocators keep offsets, not pointers, inside carve memory.
//   - live: the bytes callers asked for and still hold; the figure every
//     other one is compared with (below).
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
// heap (package heap) hands out blocks of any size and alignment, each
// freed on its own; see "The general-purpose heaps" below for how it
// compares with carve's other heaps.
//
//	Alloc: 1. a request of up to 256 bytes (aligned to 8 or less) takes its
//	          size class from a table, and the lowest free slot of the
//	          class's lowest slab that has one: the first set bit of the
//	          slab's bitmap;
//	       2. if no slab of the class has a free slot, a new slab: a free
//	          page still resident (the purge queue's newest), else the
//	          zone's lowest free page, committing more of the zone if none
//	          is free (one mprotect);
//	       3. a request of 512, 1024, 2048 or 4096 bytes less up to 7 takes
//	          an exact class the same way; any other takes the smallest free
//	          block that holds it (an exact bin under 1 KiB, a treap above),
//	          split to size, or the bottom of the top;
//	       4. past the Limit: an error wrapping heap.ErrExhausted.
//	Free:  1. in the small zone: the page's slab record, a multiply for the
//	          slot's index, a check that the slot is in use (else
//	          heap.ErrForeign or heap.ErrDoubleFree), a bit set; a slab that
//	          empties is kept for its class, and the oldest kept gives its
//	          page back past their bound;
//	       2. elsewhere: the walk of one page's headers checks that the
//	          slice starts a block in use; the block merges with its free
//	          neighbours, and the whole pages inside the free block join the
//	          free pages;
//	       3. once more free pages are resident than the heap keeps (64 KiB,
//	          or 1/256 of its footprint, at most Retain), the pages free
//	          longest are purged (MADV_DONTNEED), down to half of that.
//	Trim:  every kept slab and every free page is purged.
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
// The general-purpose heaps serve any size. heap is the one to use; the
// others are designs the lab compares on one trace, and heap combines what
// it measured of them:
//
//	heap       requests up to 256 bytes in 29 header-free size classes
//	           (one-page slabs, two bits per slot in Go memory), the few
//	           slabs that emptied last kept for their class, older ones'
//	           pages given back; four exact classes of 512 B to 4 KiB; the
//	           rest best fit with boundary tags; free pages anywhere in the
//	           heap given back to the OS (MADV_DONTNEED) once more than 64
//	           KiB, or 1/256 of the heap, are resident (at most Retain).
//	fit        one region, an 8-byte boundary-tag header per block (16-byte
//	           granule, 32-byte minimum: two 16-byte requests land 32 bytes
//	           apart with 24 usable, as glibc's), free neighbours coalesced,
//	           a free top given back; placement by first fit or next fit
//	           (a LIFO list, searched through an index by list order: O(log
//	           n)), best fit (exact bins and a tree: O(log n)) or
//	           address-ordered first fit (a max-tree over pages).
//	buddy      power-of-two blocks split and merged with their buddies; the
//	           "header" mode puts a 16-byte header before every block, the
//	           FREENIX paper's modified buddy, so an exact 2^k request
//	           takes 2^(k+1).
//	sizeclass  requests rounded up to one of 80 generated classes (8 B to
//	           32 KiB), each served by a pool; larger ones get a mapping of
//	           their own, returned to the OS when freed.
//
// # The lab
//
// carve's second half, under lab/, measures allocators instead of
// providing them: it records a program's allocation trace, replays it
// through carve's heaps and the real mallocs (glibc, jemalloc, tcmalloc,
// mimalloc, the Go heap), and shows how far each heap grows beyond live
// memory. No package of the library imports it. Its overview is package
// lab (github.com/carvelab/carve/lab); its command line is cmd/carve.
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
//   - Many pointer-free values of any size, each freed on its own (a
//     cache's entries, a parser's buffers, a message store): heap. Its
//     resident memory stays close to the bytes held, and the GC neither
//     scans nor sweeps them.
//   - Objects that hold Go pointers, or whose lifetime nobody tracks: the
//     Go heap. carve never replaces the GC for those.
//
// # Cost model
//
// pool: Alloc and Free are O(1), inline into the caller, and make no
// system call except to commit a slab; a chunk in use costs its stride and
// nothing else; the pool keeps one reservation, a few words, and (in
// checked builds only) one bit per chunk, and one byte per slab. Stats
// walks the free list.
//
// arena: Alloc is O(1), a compare and an add on the fast path; it loses at
// most align-1 bytes to alignment per request and the unused tail of each
// full block.
//
// heap: Alloc of a request up to 256 bytes (and of the exact classes
// near 512, 1024, 2048, 4096) is a class lookup and the first set bit of
// its lowest partial slab's bitmap, with two counters; its Free finds the
// slot by a multiply, checks it, and sets a bit. A slab that empties is
// kept a while for its class, so neither path makes or unmakes a slab in
// the common case. Other requests take a best-fit block: a bin or a
// treap search, the block's tags and the page bitmaps. Free pages past
// what the heap keeps resident (64 KiB, or 1/256 of its footprint) go
// back to the OS by madvise inside the call that frees them: see package
// heap's costs.
//
// None is safe for concurrent use: give each goroutine its own, or
// guard one with a mutex; lockfree is the pool to share, and heap.Shared
// (a heap of shards, each behind its own lock) the heap.
//
// # Checked builds
//
// Built with -tags carvecheck, the allocators add checks that cost time
// on their hot paths; release builds compile them away. What each adds:
//
//   - pool: one bit per chunk, so that a double free, one into a slab Trim
//     gave back included, returns ErrDoubleFree and changes nothing; freed
//     chunks filled with a poison byte past the link, and a chunk handed
//     out again verified (link and poison): one written after free is
//     quarantined and Alloc returns ErrCorrupt. Every Alloc, Free and Trim
//     takes the slow path, which runs the checker of the pool's own
//     bookkeeping (slabs, cursor, head, bitmaps) on a schedule that keeps
//     its cost linear, and panics if an invariant is broken; the free list
//     is verified chunk by chunk as it is handed out, not walked, since its
//     links live in freed memory a caller may have written.
//   - lockfree: each chunk's state in its link, moved by compare-and-swap,
//     so that double frees, racing ones included, return ErrDoubleFree;
//     poison and quarantine as in pool (ErrCorrupt); a Cache used by two
//     goroutines at once returns ErrBusy. Slow paths check, and panic on,
//     what the lock they hold guards: the growth state on every carve, the
//     depot's chunks on its trades, a cache's own chunks; the shared free
//     list, which no lock guards, is left to the tests.
//   - arena: Reset fills what was handed out since with poison, and an
//     allocation verifies it (a panic names a write after Reset); moving
//     to another block and Reset run the checker.
//   - fit: freed blocks filled with poison (but their header, links and
//     footer, and what joins the top) and verified when handed out again
//     (a panic names a write after free); growing and trimming run the
//     checker.
//   - buddy: freed blocks poisoned and verified when handed out again; a
//     heap that commits granules or gives them back, and every refused
//     call, run the checker.
//   - sizeclass: its classes are pools, with pool's poison, quarantine and
//     checks; the heap's checker runs when a class commits a slab, when a
//     large object comes or goes, and on Trim.
//   - heap: freed slots and blocks poisoned and verified when handed out
//     again (pages given back to the OS read as zero and are not); the
//     checker runs on the 1st, 2nd, 4th, 8th... slow-path call; a Heap
//     used by two goroutines at once returns ErrBusy.
//
// fit, buddy, sizeclass and heap refuse double frees in release builds too
// (ErrDoubleFree); a release pool.Pool or lockfree.Pool does not detect
// them, and a double free corrupts the pool: detecting it would cost more
// than the Alloc and Free it guards (measured, a bit per chunk made the
// pair about 2.7 times as slow and stopped both from inlining). Touching
// memory after it was freed, reset or released is a bug the Go runtime
// cannot catch in release builds; after the memory went back to the OS it
// is a fatal fault.
//
// # Sources
//
// carve is built on these, and names them by what they are:
//
//   - the block-allocator article: "Block Allocators and Memory
//     Fragmentation" (undated). The pool with its free list inside the
//     free chunks (its pool.cpp: four chunks, and a freed chunk is the
//     next one handed out); the connection experiment (100,000 connections
//     whose 1 KB scratch buffers are freed: 1 KB follow-ups fit the holes,
//     4 KB ones grow the process by 392 MB), the carving experiment (small
//     objects settling into the holes of freed buffers, so that a second
//     wave of buffers grows the heap by 19 MB unless the buffers have a
//     pool of their own), the stride of malloc's per-block bookkeeping
//     (two malloc(16) 32 bytes apart), and the ABA hazard of a lock-free
//     free list.
//   - the FREENIX paper: Bohra and Gabber, "Are Mallocs Free of
//     Fragmentation?", USENIX Annual Technical Conference, FREENIX
//     track, 2001. Nine mallocs run on one trace (Hummingbird's) and
//     compared by how far each heap grows beyond live memory, its
//     fragmentation 100 × (heap size / live memory - 1): the best at
//     30.5%, the modified binary buddy (a header on every block) at 50.7%.
//   - the post "Bump Allocator" (30 Sep 2026): a bump allocator, and its
//     benchmark of 5,000,000 Person objects allocated one after the other.
//   - Johnstone and Wilson, "The Memory Fragmentation Problem: Solved?",
//     ISMM 1998: the four measures of fragmentation the lab reports, and
//     the finding that best fit and address-ordered first fit stay within
//     about 1% of live memory on real programs.
//   - Robson's worst-case bounds for first fit and best fit (J. M.
//     Robson, "Worst case fragmentation of first fit and best fit storage
//     allocation strategies", The Computer Journal, 1977), which carve
//     stats computes for a trace.
package carve
