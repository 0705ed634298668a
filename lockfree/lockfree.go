// Package lockfree is a fixed-size block allocator safe for concurrent
// use: package pool's design, shared between goroutines without a lock on
// the common paths.
//
// A [Pool] keeps its free chunks on one lock-free stack. The stack's head
// is one 64-bit word holding the index of the first free chunk and a
// version counter, updated by compare-and-swap; the version defeats the
// ABA problem of a bare compare-and-swap stack (see head.go). The link
// from each free chunk to the next lives in a side table of 4 bytes per
// chunk, not in the chunk: the pool never writes into a chunk, and a
// popper that reads the link of a chunk another goroutine has just taken
// reads the table, not memory the new owner is writing.
//
// Every Alloc and Free on the shared stack is a compare-and-swap on one
// cache line that all goroutines contend for. A goroutine that allocates
// much should own a [Cache] (from [Pool.NewCache]): a small free list of
// its own that trades chunks with the pool in batches, so that most of its
// Allocs and Frees touch no shared memory at all.
//
// Which to use:
//   - Pool.Alloc and Pool.Free: occasional allocations from many
//     goroutines, goroutines too short-lived to own a cache, or chunks
//     allocated by one goroutine and freed by another where every chunk
//     must be available to everyone at once. Costs two compare-and-swaps
//     per pair (four to six times package pool's pair), and contention
//     when several cores do it at the same time.
//   - Cache.Alloc and Cache.Free: a long-lived worker goroutine (one per
//     connection handler, per shard, per pipeline stage) that allocates in
//     a loop. Costs about what package pool costs, without a lock; the
//     price is up to 64 free chunks parked in each cache, which other
//     goroutines cannot use until the cache gives them back.
//
// Memory comes from package mem (a reservation of Limit bytes, committed
// in slabs as the pool grows; growth takes a mutex, the fast paths never
// do), or from a region the caller owns ([Over]), which may be Go memory:
// the race detector watches Go memory but not memory mapped from the OS,
// so the tests run the pool over both. The pool does not give memory back
// before Close: there is no Trim, since knowing that a slab's chunks are
// all free would need every cache to stop.
//
// [Of] is the typed handle: built once for a type that holds no Go
// pointers, it hands out *T, and [Of.NewCache] gives typed caches.
//
// Built with -tags carvecheck, the pool keeps each chunk's state in its
// link and moves it with compare-and-swap, so it refuses double frees,
// racing ones included; it poisons freed chunks and quarantines one
// written after free; a cache refuses a second goroutine; and the slow
// paths check what the lock they hold guards (growth, the depot, the
// cache), panicking if an invariant is broken (see check.go).
//
// See the carve package documentation for the overview, the glossary and
// the cost model shared by all carve allocators, and package pool for the
// single-goroutine pool this one mirrors.
package lockfree

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/carvelab/carve/internal/slabs"
	"github.com/carvelab/carve/internal/typecheck"
	"github.com/carvelab/carve/mem"
)

// Errors returned by pools and caches. Test them with errors.Is; the
// returned errors wrap these with the details.
var (
	ErrChunkSize  = errors.New("lockfree: bad chunk size")
	ErrAlign      = errors.New("lockfree: bad alignment")
	ErrOption     = errors.New("lockfree: bad option")
	ErrExhausted  = errors.New("lockfree: exhausted")
	ErrForeign    = errors.New("lockfree: not a chunk of this pool")
	ErrDoubleFree = errors.New("lockfree: chunk freed twice")
	ErrCorrupt    = errors.New("lockfree: freed chunk was written after free")
	ErrClosed     = errors.New("lockfree: closed")
	// ErrBusy reports, in checked builds, a Cache used by two goroutines
	// at once; the call that finds the cache busy changes nothing.
	ErrBusy = errors.New("lockfree: cache used by two goroutines at once")
	// ErrPointers reports, from [NewOf], a type that holds Go pointers;
	// the error wrapping it names the field.
	ErrPointers = typecheck.ErrPointers
)

// MaxChunks is the most chunks one pool holds: chunk indices are 32 bits,
// less a few values that mark the end of a list and, in checked builds,
// the state of a chunk.
const MaxChunks = 1<<32 - 5

// LinkBytes is what the pool keeps per chunk beside the chunks: the link
// to the next free chunk, in the side table.
const LinkBytes = 4

const (
	maxChunk = 1 << 30
)

// index is a chunk's number: chunk i starts i*stride bytes after the base.
// The free lists hold indices, not pointers or offsets, so that one fits
// in half of the head word beside its version.
type index uint32

// Special values of a link. Indices of chunks are below all of them.
const (
	nilIndex index = 1<<32 - 1 // ends a free list
	liveMark index = 1<<32 - 2 // checked builds: the chunk is handed out
	heldMark index = 1<<32 - 3 // checked builds: in a cache or the depot
	newMark  index = 1<<32 - 4 // checked builds: held, and never handed out
	quarMark index = 1<<32 - 5 // checked builds: quarantined
)

// cacheLine pads the contended head word away from the fields every
// operation reads, so that a compare-and-swap does not evict them from the
// other cores.
const cacheLine = 64

// Pool is a fixed-size block allocator safe for concurrent use.
//
// Contract:
//   - All methods are safe for concurrent use, except Close, which no
//     other call may overlap. After Close the pool's methods return
//     ErrClosed (Stats reports an empty pool, Owns false), and so do
//     caches made after it; caches made before must not be used again.
//     A [Cache] is not safe for concurrent use: each belongs to one
//     goroutine.
//   - Alloc returns a slice of exactly ChunkSize bytes (len == cap),
//     aligned to the pool's alignment. Its contents are whatever the last
//     owner left (fresh memory is zero): the pool never writes into a
//     chunk, free or not (checked builds fill freed chunks with a poison
//     byte). A chunk's bytes pass from the goroutine that frees it to the
//     one that allocates it next with a happens-before edge, as they would
//     through a channel.
//   - Free takes a slice that Alloc returned (any length; what counts is
//     where it starts) and returns an error, changing nothing, for memory
//     the pool did not hand out. Release builds do not detect a double
//     free: it corrupts the free list. Checked builds (-tags carvecheck)
//     detect it, and detect writes into freed chunks when they are handed
//     out again.
//   - Chunks allocated through a Cache may be freed through the pool or
//     another cache, and the other way round.
//   - After Free or Close the chunk must not be touched. The zero value is
//     not usable: call [New] or [Over].
//   - Go pointers must not be stored in chunks: the GC does not see them.
//
// Costs: Alloc and Free are O(1) and lock-free: a pair is two
// compare-and-swaps on one shared cache line (one to pop, one to push),
// an atomic store of the link when the freed chunk's must change, and
// retries when other goroutines won the race. Growing takes a mutex and
// one mprotect per slab. A chunk in use costs Stride bytes, and
// every chunk the committed memory holds costs LinkBytes in the side
// table. Stats is O(free chunks).
//
// Layout: a pool made by New reserves Limit bytes of address space for the
// chunks and 4 bytes per chunk for the side table, and commits both in
// slabs of SlabSize bytes as it grows. Chunk i spans [i*Stride,
// i*Stride+ChunkSize) from the base; chunks are numbered in address order
// across slab boundaries and carved lazily, in that order. A pool made by
// Over carves the caller's region from its first aligned byte.
type Pool struct {
	// Read by every operation; written only by New, Over and growth.
	base   unsafe.Pointer  // address of chunk 0
	links  []atomic.Uint32 // the side table: links[i] follows chunk i on a list
	size   uintptr         // chunk size asked for: len of handed-out slices
	stride uintptr         // size rounded up to align: distance between chunks
	inv    uint64          // inverse of stride's odd factor, mod 2^64
	shift  int             // trailing zeros of stride
	carved atomic.Uint64   // chunks carved: indices below it are chunks
	// hook, when not nil, runs in every pop between reading the link and
	// the compare-and-swap: the tests (export_test.go) stall a goroutine
	// there to force the ABA interleaving. Nil outside the tests: one
	// load from a line the pop reads anyway and a branch always taken the
	// same way. Measured against a build without it, the difference was
	// below the noise (25.2 CPU ns a pair either way); a build tag would
	// have kept the ABA test out of plain "go test".
	hook func()

	_    [cacheLine]byte
	head atomic.Uint64 // the free list: a headWord
	_    [cacheLine - 8]byte

	depot depot // batches of free chunks traded with caches

	cached      atomic.Int64 // chunks caches held at their last exchange
	quarantined atomic.Int64 // chunks a checked build kept out of use
	closed      atomic.Bool

	// Growth and the statistics of committed memory, guarded by mu.
	mu        sync.Mutex
	align     uintptr     // alignment in force
	slabSize  uintptr     // bytes committed at a time
	committed uintptr     // chunk bytes committed (the region's length over one region)
	capacity  uint64      // chunks the committed bytes hold
	maxChunks uint64      // chunks the reservation holds
	region    *mem.Region // chunks; nil for a pool over a caller's region
	linkMem   *mem.Region // the side table; nil over a caller's region
	over      []byte      // the caller's region, for a pool made by Over
}

// Option configures a pool made by [New] or [Over]. The nil Option is
// invalid.
type Option func(*slabs.Config)

// Align sets the alignment of every chunk: a power of two from 1 up to the
// page size (default 8). A chunk size that is not a multiple of it is
// rounded up to one, so that every chunk stays aligned; Stats reports the
// alignment in force. The free list lives beside the chunks, so Align(1)
// packs chunks of any size without gaps.
func Align(n int) Option { return func(c *slabs.Config) { c.Align = n } }

// SlabSize sets how many bytes the pool commits at a time when it grows
// (default 64 KiB): a power of two, at least a page. The pool raises it to
// hold at least 8 chunks. It has no effect on a pool made by Over.
func SlabSize(n int) Option { return func(c *slabs.Config) { c.SlabSize = n } }

// Limit sets the most bytes of chunks a pool made by New may commit
// (default 1 GiB, or one slab if that is larger); the side table comes on
// top, LinkBytes per chunk. The pool reserves that much address space up
// front, which costs no memory. It has no effect on a pool made by Over.
func Limit(n int64) Option { return func(c *slabs.Config) { c.Limit = n } }

// New returns a pool of chunks of chunkSize bytes over memory it reserves
// from the OS. It commits nothing until the first Alloc.
func New(chunkSize int, opts ...Option) (*Pool, error) {
	c, p, err := configure(chunkSize, opts)
	if err != nil {
		return nil, err
	}
	slabSize, limit, problem := c.Geometry(p.stride)
	if problem != "" {
		return nil, fmt.Errorf("%w: %s", ErrOption, problem)
	}
	size := limit / int64(slabSize) * int64(slabSize)
	chunks := uint64(size) / uint64(p.stride)
	if chunks > MaxChunks {
		return nil, fmt.Errorf("%w: limit %d bytes holds %d chunks of %d bytes: a pool indexes at most %d", ErrOption, limit, chunks, p.stride, int64(MaxChunks))
	}
	r, err := mem.Reserve(int(size))
	if err != nil {
		return nil, fmt.Errorf("lockfree: %w", err)
	}
	lr, err := mem.Reserve(int(max(chunks, 1) * LinkBytes))
	if err != nil {
		r.Release()
		return nil, fmt.Errorf("lockfree: %w", err)
	}
	p.region, p.linkMem = r, lr
	p.base = r.Base()
	// The side table's memory is mem's: reserved, committed with the
	// chunks it describes, never scanned by the GC (it holds no pointers).
	p.links = unsafe.Slice((*atomic.Uint32)(lr.Base()), chunks)
	p.slabSize = slabSize
	p.maxChunks = chunks
	return p, nil
}

// Over returns a pool that carves the caller's region into chunks of
// chunkSize bytes. The first chunk starts at the first aligned address of
// the region; the pool never grows. The region may be Go memory
// (make([]byte, n)): the pool keeps it alive, and the race detector checks
// every access to it. The side table is Go memory too (LinkBytes per
// chunk). The caller must not touch the region while the pool uses it.
func Over(region []byte, chunkSize int, opts ...Option) (*Pool, error) {
	_, p, err := configure(chunkSize, opts)
	if err != nil {
		return nil, err
	}
	start := unsafe.Pointer(unsafe.SliceData(region))
	pad := -uintptr(start) & (p.align - 1)
	if uintptr(len(region)) < pad+p.stride {
		return nil, fmt.Errorf("%w: a region of %d bytes holds no %d-byte chunk aligned to %d", ErrChunkSize, len(region), p.stride, p.align)
	}
	n := uint64((uintptr(len(region)) - pad) / p.stride)
	if n > MaxChunks {
		return nil, fmt.Errorf("%w: a region of %d bytes holds %d chunks of %d bytes: a pool indexes at most %d", ErrChunkSize, len(region), n, p.stride, int64(MaxChunks))
	}
	p.over = region
	p.base = unsafe.Add(start, pad) // pad < len(region): still inside it
	p.links = make([]atomic.Uint32, n)
	p.slabSize = uintptr(len(region))
	p.committed = uintptr(len(region))
	p.capacity, p.maxChunks = n, n
	return p, nil
}

// configure checks what New and Over share and returns a pool with the
// chunk geometry set.
func configure(chunkSize int, opts []Option) (slabs.Config, *Pool, error) {
	c := slabs.Defaults()
	for _, o := range opts {
		if o == nil {
			return c, nil, fmt.Errorf("%w: nil Option (want one from Align, SlabSize or Limit)", ErrOption)
		}
		o(&c)
	}
	if problem := c.AlignProblem(); problem != "" {
		return c, nil, fmt.Errorf("%w: %s", ErrAlign, problem)
	}
	if chunkSize < 1 || chunkSize > maxChunk {
		return c, nil, fmt.Errorf("%w: %d bytes: want 1 to %d", ErrChunkSize, chunkSize, maxChunk)
	}
	align := uintptr(max(c.Align, c.MinAlign))
	stride := (uintptr(chunkSize) + align - 1) &^ (align - 1)
	shift := bits.TrailingZeros64(uint64(stride))
	p := &Pool{
		size:   uintptr(chunkSize),
		stride: stride,
		inv:    inverse(uint64(stride) >> shift),
		shift:  shift,
		align:  align,
	}
	p.head.Store(uint64(pack(nilIndex, 0)))
	p.depot.owner = p
	return c, p, nil
}

// inverse returns x's inverse modulo 2^64, for odd x: each Newton step
// doubles the correct low bits, from the 3 that x*x = 1 (mod 8) gives.
func inverse(x uint64) uint64 {
	y := x
	for range 5 {
		y *= 2 - x*y
	}
	return y
}

// ChunkSize returns the size of every chunk, as asked for.
func (p *Pool) ChunkSize() int { return int(p.size) }

// Stride returns the distance between chunks: the chunk size rounded up to
// the alignment. A chunk in use costs Stride bytes.
func (p *Pool) Stride() int { return int(p.stride) }

// chunk returns the address of chunk i.
func (p *Pool) chunk(i index) unsafe.Pointer {
	return unsafe.Add(p.base, uintptr(i)*p.stride) // i < carved: inside the pool's memory
}

// indexOf returns the index of the chunk that starts at c, and whether
// one does: c lies a whole number of strides above the base, below the
// carved chunks.
func (p *Pool) indexOf(c unsafe.Pointer) (index, bool) {
	i := divide(uint64(uintptr(c)-uintptr(p.base)), p.inv, p.shift)
	return index(i), i < p.carved.Load()
}

// divide returns off / stride if stride divides off, and otherwise a
// number of at least 2^34, where stride = q << shift, q odd, inv = q's
// inverse modulo 2^64, and stride <= 2^30. One multiply and one rotate,
// no division (Hacker's Delight, 10-17): if off is a multiple of stride,
// off*inv is the quotient shifted left by shift, and rotating right by
// shift gives the quotient. Otherwise either a low bit of off survives the
// multiply and the rotate sends it to the top, or off >> shift is not a
// multiple of q and the product lands above (2^64-1)/q.
func divide(off, inv uint64, shift int) uint64 {
	return bits.RotateLeft64(off*inv, -shift)
}

// Alloc hands out a chunk: the most recently freed one, or a new one
// carved at the end. It returns an error wrapping ErrExhausted when the
// pool is at its limit and no chunk is free (chunks that caches hold do
// not count as free until the caches give them back).
func (p *Pool) Alloc() ([]byte, error) {
	c, err := p.allocVia(allocSlow)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(c), p.size), nil
}

// allocVia is Alloc's fast path: pop the head of the free list. The slow
// path comes in as a parameter, as in package pool, to keep the fast path
// small enough to inline.
func (p *Pool) allocVia(slow func(*Pool, index) (unsafe.Pointer, error)) (unsafe.Pointer, error) {
	i := p.pop()
	if i == nilIndex || checked {
		return slow(p, i)
	}
	return p.chunk(i), nil
}

// Free gives a chunk back. A slice that does not start at a chunk the
// pool handed out is refused with an error wrapping ErrForeign, and the
// pool is unchanged.
func (p *Pool) Free(b []byte) error {
	c := unsafe.Pointer(unsafe.SliceData(b))
	i, ok := p.indexOf(c)
	if !ok {
		return p.foreignError(c)
	}
	if checked {
		return p.freeChecked(i, c)
	}
	p.push(i)
	return nil
}

// Owns reports whether b starts at a chunk of this pool: what Free checks
// before it takes a slice back. It does not tell whether the chunk is in
// use.
func (p *Pool) Owns(b []byte) bool {
	_, ok := p.indexOf(unsafe.Pointer(unsafe.SliceData(b)))
	return ok
}

// foreignError returns the error for freeing c, which the pool does not
// own.
func (p *Pool) foreignError(c unsafe.Pointer) error {
	return &foreignError{addr: uintptr(c), base: uintptr(p.base), size: p.size, closed: p.closed.Load()}
}

// foreignError explains why an address is not a chunk of a pool. It keeps
// the address as a number: the memory may be gone.
type foreignError struct {
	addr, base, size uintptr
	closed           bool
}

func (e *foreignError) Unwrap() error {
	switch {
	case e.closed:
		return ErrClosed
	case e.addr == 0:
		return fmt.Errorf("%w: nil", ErrForeign)
	}
	return fmt.Errorf("%w: %#x (chunks of %d bytes from %#x)", ErrForeign, e.addr, e.size, e.base)
}

func (e *foreignError) Error() string { return e.Unwrap().Error() }

// Close returns the pool's memory to the OS (a pool made by Over only
// drops its reference to the region). Every chunk becomes invalid, in use,
// free or held by a cache; later calls return ErrClosed, and the pool's
// caches must not be used again. Close must not overlap any other call on
// the pool or its caches.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	p.closed.Store(true)
	// Forget the chunks before the memory goes: Free refuses everything,
	// Alloc finds nothing free and nothing to carve.
	p.carved.Store(0)
	p.head.Store(uint64(headWord(p.head.Load()).to(nilIndex)))
	p.depot.drain()
	p.cached.Store(0)
	p.quarantined.Store(0)
	p.capacity, p.committed, p.over, p.links = 0, 0, nil, nil
	if p.region == nil {
		return nil
	}
	err := p.region.Release()
	if err2 := p.linkMem.Release(); err == nil {
		err = err2
	}
	return err
}
