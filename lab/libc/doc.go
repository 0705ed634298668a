// Package libc drives a C malloc, whichever it is, and reads that
// malloc's own heap statistics: the real allocators of carve's lab.
//
// It does so in two places. In this process, through cgo: [Active],
// [Stats], [Malloc], [Free], [UsableSize] and [Loop] serve whatever malloc
// the process runs on. And in a plain C process of its own, a
// [Replayer]: the lab replays a trace through glibc, jemalloc, tcmalloc
// and mimalloc by starting one replayer per allocator with LD_PRELOAD
// naming the library, because a C allocator inside a Go process is not
// what a C program sees (see Replayer). The replayer is built from this
// package's C sources with the system's C compiler at first use, and
// needs no cgo.
//
// The same code serves all four mallocs: the package links against none
// of them, and finds at run time, with dlsym(RTLD_DEFAULT, ...), which
// malloc the dynamic linker bound and the entry points of its statistics
// (mallinfo2, mallctl, MallocExtension_GetNumericProperty,
// mi_heap_visit_blocks). [Active] (and [Replayer.Identity]) says which one it
// is.
//
// The loader ignores an LD_PRELOAD library it cannot find, with only a
// line on standard error, and the program runs on glibc. A caller that
// asked for jemalloc must compare Active().Name (or the Replayer's
// Identity().Name) with "jemalloc" and refuse to report a row it did not
// measure.
//
// # Cost
//
// Every call into C costs a cgo transition, some tens of nanoseconds,
// about what a malloc costs. [Malloc], [Free] and [UsableSize] pay one each
// and serve small experiments. A replay goes through a [Loop] instead: the
// caller decodes the trace into an array of [Op] and [Loop.Run] performs a
// whole batch of them in one C call, so the transition is paid once per
// batch (of 4096 ops, say) and the per-op cost is that of a plain C loop
// (BenchmarkLoop compares the two). [Stats] costs one call plus the
// allocator's own accounting; call it at samples, not after every op.
//
// # Threads
//
// glibc, jemalloc, tcmalloc and mimalloc keep per-thread caches or arenas,
// and mimalloc's statistics of blocks in use are per thread. The Go
// scheduler runs successive cgo calls of one goroutine on any thread: a
// replay that should look like one thread of a C program locks its
// goroutine to its thread (runtime.LockOSThread) before the first call.
// Binding that thread to one CPU as well (sched_setaffinity) keeps the
// kernel from moving it between two batches, away from the cache that
// holds the heap's hot lines: on a busy 2-core machine a Loop replaying
// the shipped trace ran 25-45% slower than a plain C loop unbound, 10-20%
// bound (measured before the loop timed each call, which now costs it
// more than that: see Cost in Loop's documentation).
//
// # Memory
//
// Blocks come from the C heap: the Go garbage collector neither scans nor
// frees them, and cgo's rules forbid storing Go pointers in them. Their
// bytes are reached through unsafe.Pointer.
//
// Without cgo, or on an OS other than Linux, the package builds with the
// same API: [Available] reports false, every call in this process that
// returns an error fails with [ErrUnavailable], [Active] returns the zero
// [Identity], [Free] does nothing and [UsableSize] returns 0. A Replayer
// works without cgo; it needs Linux and a C compiler ([ReplayerAvailable]).
//
// See package lab for the lab's overview, and the carve package (the
// module's root) for the vocabulary of its statistics (Footprint, Used)
// that [HeapStats] maps onto.
package libc

import (
	"errors"

	"github.com/carvelab/carve/lab/internal/cbuild"
)

var (
	// ErrUnavailable reports a build without cgo, or for an OS other than
	// Linux: there is no C allocator to call.
	ErrUnavailable = errors.New("libc: C allocator not available (needs cgo on Linux)")
	// ErrNoMemory reports a malloc, calloc, posix_memalign or realloc that
	// returned no memory, or a slot table that could not grow.
	ErrNoMemory = errors.New("libc: out of memory")
	// ErrInvalid reports an operation the package does not send to the
	// allocator: an unknown op kind, an alignment that is not a power of
	// two, an allocation into a slot that holds a block, a negative size.
	ErrInvalid = errors.New("libc: invalid operation")
	// ErrNoStats reports an allocator whose statistics cannot be read.
	ErrNoStats = errors.New("libc: no heap statistics")
	// ErrClosed reports use of a Loop or a Replayer after Close.
	ErrClosed = errors.New("libc: closed")
	// ErrNoCompiler reports that the C replayer is not built yet and no C
	// compiler is there to build it.
	ErrNoCompiler = cbuild.ErrNoCompiler
)

// Identity names the malloc that serves the process.
type Identity struct {
	// Name is "glibc", "jemalloc", "tcmalloc" or "mimalloc"; "unknown" for
	// a malloc from any other library (Library names it); "" without cgo.
	Name string
	// Version is the allocator's version as it reports it: glibc's
	// gnu_get_libc_version ("2.36"), jemalloc's mallctl("version")
	// ("5.3.0-0-g54eaed1d..."), tcmalloc's tc_version ("2.10"), mimalloc's
	// mi_version (209 becomes "2.0.9"); "" when it does not say.
	Version string
	// Library is the path of the shared object that defines the malloc
	// the process calls, as the dynamic linker loaded it.
	Library string
}

// HeapStats is what the active malloc says about its heap, in bytes. The
// figures come from the allocator's own accounting, so they mean slightly
// different things for each; Source names what was read.
type HeapStats struct {
	// Footprint is the memory the allocator holds from the OS: what it
	// mapped and has not given back, free blocks and metadata included
	// (carve's Footprint, as close as each allocator tells it).
	Footprint int64
	// Allocated is the bytes of the blocks in use, as the allocator counts
	// them: with its rounding to size classes, so nearer carve's Used than
	// its Live.
	Allocated int64
	// Source names the interface read: "mallinfo2", "mallctl",
	// "MallocExtension" or "mi_heap_visit_blocks".
	Source string
}
