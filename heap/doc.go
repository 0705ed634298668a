// Package heap is carve's general-purpose heap: blocks of any size and
// alignment, outside the Go heap, built to keep a program's resident memory
// as close as it can to the bytes the program holds, with every byte of
// its bookkeeping counted. It combines what the lab measured of carve's
// other heaps: size classes without headers for small requests, best fit
// with boundary tags for the rest, and free pages given back to the OS
// wherever they lie, not only at the top.
//
// See the carve package documentation (the root doc.go) for the overview,
// the glossary and the cost model shared by all carve allocators.
//
// # Design
//
// The heap reserves two zones of address space (on Linux four times the
// Limit each, which costs no memory: see Limit) and commits them from the
// bottom up.
//
// The small zone serves requests of up to MaxSmall (256) bytes from 29
// size classes: every multiple of 8 up to 128 bytes, and above that, for
// each count of slots a page can hold, the largest multiple of 8 that fits
// that many (classes.go lists them with their waste and states the bound
// a request loses to rounding). Four exact
// classes, 512, 1024, 2048 and 4096 bytes, which divide the page, serve
// requests of their size less up to 7 bytes, for which a best-fit block
// would take 16 bytes more and straddle pages. Each page of the zone is
// free or a slab of one class: its slots sit the class's size apart from
// the page's start, with no header; one bit per slot in Go memory says
// which are free, and a second which hold a request shorter than the slot,
// whose slack (the slot's size less the request) the slot's last byte then
// keeps, so that Free knows what was asked of it. A class allocates the
// lowest free slot of its lowest
// slab that has one, and a new slab takes the zone's lowest free page (or,
// first, a free page not yet given back to the OS, which costs no page
// fault), so live slots pack towards the bottom of the zone and slabs
// higher up drain. A slab whose last slot is freed stays a slab of its
// class, kept for the class's next request: the heap keeps the slabs
// that emptied last, at most a quarter of the free pages it keeps resident
// (below), 1/32 of its Footprint and 64 slabs (at least one, none with
// Retain(0)); when one more empties past that bound, the oldest kept
// slab, if still empty, gives its page back to the zone. The decay is
// counted in slabs emptied, so a replay is the same every run. (A request
// and its free in turn would otherwise make and unmake a slab each time:
// that was three quarters of the time of a 64-byte pair.)
//
// The best-fit zone serves the rest (and small requests aligned beyond
// what a class is): fit's best fit (see package fit) over
// one region. A block has an 8-byte boundary tag in front, which also
// keeps the block's slack; sizes are
// multiples of 16 bytes, at least 32; a free block merges with its free
// neighbours at once; a request takes the smallest free block that holds
// it (exact bins under 1 KiB, a treap above, both threaded through the
// free blocks, so the index costs no Go memory), or the bottom of the top.
// A table of 2 bytes per page, the first block that starts on the page,
// lets Free find whether a slice starts a block by walking the headers of
// one page.
//
// Free pages: a page on which the heap keeps nothing (a small page that is
// no slab, a page wholly inside a free block past its tags, a page of the
// top) is free; the heap keeps RetainFloor (64 KiB) of free pages
// resident, or 1/RetainShare (1/256) of its Footprint if that is more,
// at most the Retain (DefaultRetain, 64 MiB), and past that gives back
// the pages that have been free longest (a queue of 64 page ranges), down
// to half of that, in one burst, with
// MADV_DONTNEED, which keeps the mapping: RSS drops at once, and the page reads as zero
// when it is next used, without a system call. So a hole between two live
// blocks costs the partial pages at its ends and nothing else, and the
// heap needs no top to trim; glibc, whose free memory stays resident
// unless it lies at the top of its heap, cannot do this.
//
// # Contract
//
//   - Alloc returns len == cap == size bytes, not zeroed: pages the heap
//     gave back, and fresh ones, read as zero; a reused slot holds what it
//     held (but its last byte, if the request is shorter than the slot:
//     the heap writes its slack there, past the slice's end); a reused
//     best-fit block holds stale bytes, with the tags and
//     links the heap wrote while it was free (its first 8 bytes, the 8
//     before its end, and the words around each former block boundary in
//     it). Checked builds (-tags carvecheck) fill freed memory with a
//     poison byte instead and verify it when it is handed out again.
//   - Free, Realloc and UsableSize take a slice of the block as Alloc or
//     Realloc returned it, or cut shorter (b[:n], b[:n:m]): where it
//     starts identifies the block, and the heap accounts the block by what
//     was asked of it at its Alloc or last Realloc, whatever the slice's
//     length, so Live stays exact. An empty slice of capacity 0 identifies
//     only a block of 0 bytes: b[len(b):], which Go gives b's own pointer,
//     is refused for any other. They refuse, changing nothing, a slice
//     that does not start at a block in use, in every build: ErrForeign for
//     memory that is not the start of a block of this heap, ErrDoubleFree
//     for an address in free memory, which is what a second Free of a
//     block finds. A double free goes undetected only when the memory has
//     been handed out again at the same address: the second Free then
//     frees the new block, as with C's free; so does a Free through a
//     slice from before a Realloc that kept the block in place, which
//     frees the block as it is now.
//   - A block must not be touched after Free, after a Realloc that moved
//     it, or after Close: the runtime cannot catch that; a page the heap
//     gave back reads as zero, and a closed heap's memory faults.
//   - Go pointers must not be stored in blocks: the garbage collector does
//     not see them.
//   - The heap gives memory back only inside its calls: a heap that shrank
//     and then idles keeps the free pages and empty slabs its bounds allow
//     (above) until its next call that frees, or Trim, which gives them
//     all back.
//   - A Heap is not safe for concurrent use: callers that share one must
//     serialize every call, Stats and Map included, or use [Shared], a
//     heap of shards for goroutines that share it. Checked builds detect
//     two goroutines in it at once: the call that finds the heap busy
//     returns an error wrapping ErrBusy and changes nothing (Stats and
//     Map, which return no error, panic); Footprint, Metadata, Limit and
//     Contains, which read a few fields, are not checked. The zero value
//     is not usable (its methods return ErrClosed, Close included): call
//     [New].
//
// # Costs
//
// Alloc of a small request: a table lookup for the class, whose record
// names its lowest partial slab and where that slab's bitmap starts, one
// call (take), the first set bit of at most 8 words, three counters and,
// for a request shorter than its slot, a bit and a byte; BenchmarkHeapPair
// in package lab/libc measures it with its Free beside glibc's malloc and
// free. When the class has no free
// slot, a new slab: a resident free page from the purge queue (a scan of
// its at most 64 ranges) or the zone's lowest free page (one word read
// per 16 MiB of the zone) and, every so often, an mprotect to commit
// more. Free of a slot: the slab's record, a multiply that finds the
// slot's index and a check that it starts a slot in use, two bits (free;
// slack), three counters; a slab that empties joins the kept slabs (a ring
// of 64), and past their bound the oldest kept gives its page to the purge
// queue.
// Alloc of a best-fit block: a bin, or a treap search in O(log n) of the
// free blocks of 1 KiB or more; Free: the walk of one page's headers,
// O(1) to coalesce, the index's update. Both update the page bitmaps of
// the pages the block covers (a word per 64 pages). A purge is one madvise
// per stretch of pages; it happens when more free pages wait than the
// heap keeps (above). Realloc in place costs a lookup, a move costs Alloc, a copy
// and Free. Stats costs a mincore per zone; Map O(pages + slots + blocks).
//
// Per block: a slot costs its rounding to the class size and two bits; a
// best-fit block its 8-byte tag and its rounding to 16 bytes. The Go
// memory of the bookkeeping, per page and per class, is Stats.Metadata
// (Heap.Metadata lists what it counts): with 1 Mi requests of log-uniform
// sizes, about 1% of the footprint for 8 to 256 bytes, 0.15% for 8 B to
// 4 KiB, under 0.1% for 4 to 64 KiB (64 Ki requests); the lab adds it to
// the heap's footprint and resident figures.
//
// The default Limit is the machine's physical memory (at most MaxLimit).
//
// # Meshing
//
// With the Mesh option the heap compacts its small zone without moving
// any slot, as Mesh (Powers et al., PLDI 2019) does: two slabs of a class
// whose slots in use do not overlap are merged onto one page of memory,
// the other page of the zone's reservation mapped onto it, and the freed
// page goes back to the OS (mesh.go says how, and its contract). On the
// 100,000 blocks of 16 to 256 bytes of gen:randfree:min=16,max=256, 90%
// freed at random, the footprint at the end falls from 9.67 times the
// live bytes to 2.95 (the lab's heap and heap-mesh rows: 2,570 meshes,
// 10.04 MiB given back). The heap meshes on the way, in Free, only where
// it pays: while its footprint is at least twice its live bytes, in a
// class where two slabs mesh with a chance of 1% or more (estimated from
// its slots in use), with a budget of probes per free and at most 16
// meshes at a time, a class waiting while it empties slabs by itself and
// backing off when it grew since its last pass or a meshed slab of it
// emptied; Trim meshes what it finds. A mesh
// costs a copy of the slots in use, an mmap and a fallocate (16-25 µs
// for a pair, BenchmarkMesh); a slot is picked at random and the zone is
// a memory file, which costs the fast path about a third
// (BenchmarkSmallPair). Stats counts the meshes (Meshes, Meshed,
// Unmeshed, MeshRefused), and Map shows a meshed page as reserved (its
// slots are its leader's).
package heap
