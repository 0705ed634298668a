package libc

import (
	"fmt"
	"sync"
	"unsafe"
)

// Available reports whether the package can call the C allocator: true in
// builds with cgo on Linux.
func Available() bool { return available }

// probe finds the active malloc once: the dynamic linker binds malloc when
// the process starts, and nothing rebinds it afterwards.
var probe = sync.OnceValues(func() (mallocKind, Identity) {
	if !available {
		return unknownMalloc, Identity{}
	}
	kind, version, library := sysProbe()
	return kind, Identity{Name: kind.String(), Version: version, Library: library}
})

// mallocKind is what sysProbe recognizes (the C enum carve_libc_kind).
type mallocKind int

const (
	unknownMalloc mallocKind = iota
	glibcMalloc
	jemallocMalloc
	tcmallocMalloc
	mimallocMalloc
)

var kindStrings = [...]string{"unknown", "glibc", "jemalloc", "tcmalloc", "mimalloc"}

func (k mallocKind) String() string {
	if k < 0 || int(k) >= len(kindStrings) {
		return kindStrings[unknownMalloc]
	}
	return kindStrings[k]
}

// sources names what Stats reads, by malloc.
var sources = [...]string{"", "mallinfo2", "mallctl", "MallocExtension", "mi_heap_visit_blocks"}

// Active returns the malloc that serves the process: the shared object
// that defines the malloc symbol the process calls, named by an entry
// point it also defines (mallctl: jemalloc; MallocExtension_*: tcmalloc;
// mi_version: mimalloc; gnu_get_libc_version: glibc). A library that is
// loaded but does not define that malloc does not count.
//
// The first call looks the symbols up (a few dlsym and dladdr calls); the
// answer is kept, and later calls cost nothing. Without cgo it returns the
// zero Identity.
func Active() Identity {
	_, id := probe()
	return id
}

// Stats reads the active malloc's own statistics, from the interface each
// one offers (looked up at run time, never linked):
//
//	glibc     mallinfo2, over all arenas:
//	          Footprint = arena + hblkhd (arena bytes from sbrk and mmap, plus mmap'd chunks),
//	          Allocated = uordblks + hblkhd (chunks in use, headers included).
//	jemalloc  mallctl, after writing "epoch" to refresh the snapshot:
//	          Footprint = stats.mapped, Allocated = stats.allocated.
//	tcmalloc  MallocExtension_GetNumericProperty:
//	          Footprint = generic.heap_size - tcmalloc.pageheap_unmapped_bytes,
//	          Allocated = generic.current_allocated_bytes.
//	mimalloc  over the areas (pages) of the calling thread's default heap
//	          (mi_heap_visit_blocks): Footprint = the areas' committed
//	          bytes (the blocks each page has set up, in use or free),
//	          Allocated = blocks in use × block size.
//
// For jemalloc, stats.mapped rather than stats.active: active counts the
// pages of extents in use and falls as soon as blocks are freed, while
// jemalloc keeps the freed pages (dirty, then muzzy) until its decay
// purges them seconds later. Those pages are memory the process holds, as
// glibc's free chunks inside its arenas and tcmalloc's free page heap are,
// so Footprint counts them; mapped does (with jemalloc's metadata, a few
// MiB from the start), and leaves out retained address space whose pages
// went back to the OS. Freeing 25 MiB of 16-byte blocks, for instance,
// drops active to 0.1 MiB while mapped stays at 37 MiB until the purge
// (jemalloc 5.3.0, in a C process).
//
// For mimalloc, not mi_process_info's current_commit: mimalloc commits its
// first segment whole, 32 MiB, before the first block, and a heap of tens
// of MiB comes and goes in it with the commit unmoved (aosp-systemui's
// replay read 0 B above the baseline throughout, with 15 MiB more
// resident). The pages' committed bytes follow the heap: 14.1 MiB at
// that replay's peak against its peak RSS of 15.3 MiB above the baseline,
// which also holds the segments' page tables and the pages mimalloc
// retired (whose blocks were all freed; it keeps them for reuse, outside
// any heap's areas, so Footprint leaves them out). Both figures cover the
// calling thread only: call Stats from the thread that allocated (see
// Threads in the package documentation).
//
// Each Footprint starts from its own baseline. In a fresh carve test
// process, before any block of its own: glibc 0.5 to 0.65 MiB, tcmalloc
// 1 MiB, jemalloc 6.2 MiB (metadata), mimalloc 32 KiB (the pages of the
// few blocks the process made). A caller that compares allocators
// subtracts the figure it read before the replay.
//
// Cost: one cgo call, plus the allocator's accounting: mallinfo2 walks
// every arena's bins under their locks, jemalloc merges every arena's
// counters, mimalloc visits every page of the heap. Call it at samples.
//
// The error wraps ErrNoStats when the malloc is unknown or lacks the
// interface (glibc before 2.33, jemalloc built without statistics), and
// ErrUnavailable without cgo.
func Stats() (HeapStats, error) {
	if !available {
		return HeapStats{}, ErrUnavailable
	}
	kind, _ := probe() // also resolves the entry points sysStats calls
	footprint, allocated, failed := sysStats()
	if failed != "" {
		return HeapStats{}, fmt.Errorf("%w: %v: %s", ErrNoStats, kind, failed)
	}
	return HeapStats{Footprint: footprint, Allocated: allocated, Source: sources[kind]}, nil
}

// Malloc calls malloc(size) and returns the block, uninitialized. The
// error wraps ErrNoMemory when malloc returns NULL, ErrInvalid for a
// negative size, ErrUnavailable without cgo. Malloc(0) returns what
// malloc(0) does: a block to free (glibc and the three others), or nil
// with no error (a malloc may).
func Malloc(size int) (unsafe.Pointer, error) {
	switch {
	case !available:
		return nil, ErrUnavailable
	case size < 0:
		return nil, fmt.Errorf("%w: Malloc(%d): negative size", ErrInvalid, size)
	}
	p := sysMalloc(size)
	if p == nil && size > 0 {
		return nil, fmt.Errorf("%w: Malloc(%d)", ErrNoMemory, size)
	}
	return p, nil
}

// Free calls free(p). p must be nil or a block from Malloc not yet freed,
// as free requires: anything else corrupts the C heap. Without cgo it does
// nothing.
func Free(p unsafe.Pointer) {
	if available && p != nil {
		sysFree(p)
	}
}

// UsableSize returns malloc_usable_size(p): the bytes of the block that
// may be used, at least the size it was asked for; 0 for nil and without
// cgo. Each of the four mallocs exports its own malloc_usable_size, so the
// answer is the active one's. p must be nil or a live block.
func UsableSize(p unsafe.Pointer) int {
	if !available || p == nil {
		return 0
	}
	return sysUsableSize(p)
}
