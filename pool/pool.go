// Package pool is a fixed-size block allocator: every chunk has the same
// size, and the list of free chunks is threaded through the free chunks
// themselves, so a chunk in use carries no header and the pool keeps no
// table per chunk.
//
// Allocate pops the head of the free list; free pushes onto it. Neither
// searches, merges or makes a system call, and a chunk freed is the next
// one handed out. Memory comes from the OS through package mem (outside the
// Go heap: the garbage collector neither scans nor moves it) and grows in
// slabs up to a limit; [Pool.Trim] gives empty slabs back to the OS. A pool
// can also carve a region the caller owns ([Over]), as the block-allocator
// article's pool does.
//
// [Of] is the typed handle: built once for a type that holds no Go
// pointers, it hands out *T.
//
// See the carve package documentation for the overview, the glossary and
// the cost model shared by all carve allocators.
package pool

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/slabs"
	"github.com/carvelab/carve/internal/typecheck"
	"github.com/carvelab/carve/mem"
)

// Errors returned by pools. Test them with errors.Is; the returned errors
// wrap these with the details.
var (
	ErrChunkSize  = errors.New("pool: bad chunk size")
	ErrAlign      = errors.New("pool: bad alignment")
	ErrOption     = errors.New("pool: bad option")
	ErrExhausted  = errors.New("pool: exhausted")
	ErrForeign    = errors.New("pool: not a chunk of this pool")
	ErrDoubleFree = errors.New("pool: chunk freed twice")
	ErrCorrupt    = errors.New("pool: freed chunk was written after free")
	ErrClosed     = errors.New("pool: closed")
	// ErrPointers reports, from [NewOf], a type that holds Go pointers;
	// the error wrapping it names the field.
	ErrPointers = typecheck.ErrPointers
)

// LinkSize is the smallest chunk: a free chunk holds the offset of the next
// free chunk in its first LinkSize bytes.
const LinkSize = int(unsafe.Sizeof(offset(0)))

const (
	maxChunk = 1 << 30
	// overShift makes every offset of a pool over one region fall in slab 0.
	overShift = 63
)

// offset is a chunk's distance in bytes from the pool's base. The free list
// links are offsets, not pointers: checkable, and invisible to the GC (a
// pointer stored in carve memory would make the GC's write barrier read
// the chunk's old bytes as a pointer).
type offset uintptr

// none ends the free list.
const none = ^offset(0)

// Pool is a fixed-size block allocator.
//
// Contract:
//   - Alloc returns a slice of exactly ChunkSize bytes (len == cap), aligned
//     to the pool's alignment. Its contents are whatever was there: fresh
//     OS memory is zero, a reused chunk holds its old bytes except the
//     first LinkSize, which the free list overwrote (checked builds fill
//     freed chunks with a poison byte instead).
//   - Free takes a slice that Alloc returned (any length; what counts is
//     where it starts) and returns an error, changing nothing, for memory
//     the pool did not hand out. A release build does not detect a double
//     free: Free returns nil and the pool is corrupted (the chunk is on the
//     free list twice, so later Allocs hand it out more than once, to
//     owners that then share it, and Stats miscounts), or the process
//     faults if Trim has given the chunk's slab back. Checked builds (-tags
//     carvecheck) refuse it with ErrDoubleFree, changing nothing, and
//     detect writes into freed chunks when they are handed out again.
//     (Detection in release builds was measured: a bit per chunk, set by
//     Alloc and cleared by Free, made the Alloc+Free pair about 2.7 times
//     as slow, side by side, and stopped both from inlining.)
//   - After Free, Trim or Close the chunk must not be touched: the runtime
//     cannot catch that, and after Trim or Close the access is a fatal
//     fault.
//   - A Pool is not safe for concurrent use; see package lockfree for one
//     that is. The zero value is not usable: call [New] or [Over].
//   - Go pointers must not be stored in chunks: the GC does not see them.
//
// Costs: Alloc and Free are O(1), a few instructions and no system call,
// except when the pool grows (one mprotect to commit a slab); both inline
// into the caller. A chunk in use costs Stride bytes (ChunkSize rounded up
// to the alignment) and nothing else. Stats and Trim are O(free chunks +
// slabs).
//
// Layout: a pool made by New reserves Limit bytes of address space and
// cuts it into slabs of SlabSize bytes; slab s spans offsets
// [s*SlabSize, (s+1)*SlabSize) and holds Stride-spaced chunks from its
// start, the bytes after the last whole chunk unused. Chunks are carved
// lazily, in address order, at the cursor; slabs below the cursor's are
// full or vacant (given back by Trim; the next growth revives them first).
// A pool made by Over is one slab: the caller's region from its first
// aligned byte.
type Pool struct {
	// Hot fields, read by Alloc and Free.
	head   offset         // first free chunk, or none
	base   unsafe.Pointer // address of offset 0
	size   uintptr        // chunk size asked for: len of handed-out slices
	stride uintptr        // size rounded up to align: distance between chunks
	magic  uint64         // ceil(2^64 / stride): divisibility test without division
	mask   uintptr        // slab size - 1; all ones over one region
	usable uintptr        // bytes of a slab that hold chunks: perSlab * stride
	top    uintptr        // every chunk lies below top: the carving cursor

	// Slow-path fields.
	align    uintptr     // alignment in force: the option's, at least the link's
	shift    uint        // log2(slab size); overShift over one region
	slabSize uintptr     // bytes a slab spans (the region's length over one region)
	perSlab  uintptr     // chunks a slab holds
	topEnd   uintptr     // end of the chunks of the cursor's slab
	nslabs   int         // slabs below and including the cursor's
	vacant   []bool      // per slab below nslabs: given back by Trim
	nvacant  int         // true entries of vacant
	carved   int64       // chunks carved and not given back
	limit    int64       // most slabs * slabSize the reservation holds
	region   *mem.Region // nil for a pool over a caller's region
	over     []byte      // the caller's region, for a pool made by Over
	closed   bool

	// Checked builds only (see check.go).
	live        []uint64 // one bit per chunk index: handed out or quarantined
	nlive       int64    // bits set in live
	quarantined int64    // chunks found written after free, kept out of use
	quar        []uint64 // one bit per chunk index: quarantined (also set in live)
	checks      invariants.Schedule
}

// Option configures a pool made by [New] or [Over]. The nil Option is
// invalid.
type Option func(*slabs.Config)

// Align sets the alignment of every chunk: a power of two from 1 up to the
// page size (default 8). A chunk size that is not a multiple of it is
// rounded up to one, so that every chunk stays aligned. Chunks are always
// at least 8-byte aligned, since a free chunk holds a machine-word link:
// Align(1), Align(2) and Align(4) give 8, and Stats reports the alignment
// in force.
func Align(n int) Option { return func(c *slabs.Config) { c.Align = n } }

// SlabSize sets how many bytes the pool commits at a time when it grows
// (default 64 KiB): a power of two, at least a page. The pool raises it to
// hold at least 8 chunks. It has no effect on a pool made by Over.
func SlabSize(n int) Option { return func(c *slabs.Config) { c.SlabSize = n } }

// Limit sets the most bytes a pool made by New may commit (default 1 GiB,
// or one slab if that is larger).
// The pool reserves that much address space up front, which costs no
// memory. It has no effect on a pool made by Over.
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
	nslabs := limit / int64(slabSize)
	r, err := mem.Reserve(int(nslabs * int64(slabSize)))
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	p.region = r
	p.base = r.Base()
	p.slabSize = slabSize
	p.shift = uint(bits.TrailingZeros64(uint64(slabSize)))
	p.mask = slabSize - 1
	p.perSlab = slabSize / p.stride
	p.usable = p.perSlab * p.stride
	p.limit = nslabs * int64(slabSize)
	return p, nil
}

// Over returns a pool that carves the caller's region into chunks of
// chunkSize bytes, as the block-allocator article's pool does. The first
// chunk starts at the first aligned address of the region; the pool never
// grows, and Trim gives nothing back (the caller owns the memory). The region may be Go
// memory (make([]byte, n)): the pool keeps it alive. The caller must not
// touch the region while the pool uses it.
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
	n := (uintptr(len(region)) - pad) / p.stride
	if bits.Len64(uint64(n*p.stride))+bits.Len64(uint64(p.stride)) > 64 {
		return nil, fmt.Errorf("%w: %d chunks of %d bytes are too many for one pool", ErrChunkSize, n, p.stride)
	}
	p.over = region
	p.base = unsafe.Add(start, pad) // pad < len(region): still inside it
	p.slabSize = n * p.stride
	p.perSlab = n
	p.usable = n * p.stride
	p.shift = overShift
	p.mask = ^uintptr(0)
	p.limit = int64(len(region))
	p.nslabs = 1
	p.vacant = []bool{false}
	p.topEnd = p.usable
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
	if chunkSize < LinkSize {
		return c, nil, fmt.Errorf("%w: %d bytes: a free chunk must hold the %d-byte link to the next", ErrChunkSize, chunkSize, LinkSize)
	}
	if chunkSize > maxChunk {
		return c, nil, fmt.Errorf("%w: %d bytes: want at most %d", ErrChunkSize, chunkSize, maxChunk)
	}
	// Links are read and written as whole words: keep them aligned.
	align := uintptr(max(c.Align, c.MinAlign, int(unsafe.Alignof(offset(0)))))
	stride := (uintptr(chunkSize) + align - 1) &^ (align - 1)
	return c, &Pool{
		head:   none,
		size:   uintptr(chunkSize),
		stride: stride,
		magic:  ^uint64(0)/uint64(stride) + 1,
		align:  align,
	}, nil
}

// ChunkSize returns the size of every chunk, as asked for.
func (p *Pool) ChunkSize() int { return int(p.size) }

// Stride returns the distance between chunks: the chunk size rounded up to
// the alignment. A chunk in use costs Stride bytes.
func (p *Pool) Stride() int { return int(p.stride) }

// Alloc hands out a chunk: the most recently freed one, or a new one
// carved at the cursor. It returns an error wrapping ErrExhausted when the
// pool is at its limit.
func (p *Pool) Alloc() ([]byte, error) {
	return p.allocVia(allocSlowBytes)
}

// allocVia is Alloc's fast path: pop the head of the free list. The slow
// path comes in as a parameter because Go's inliner charges a call to a
// parameter a fraction of what it charges a call to a function: that keeps
// Alloc small enough to inline into the caller, where the parameter is a
// constant again and the call a direct one. Inlined, the pop shares
// registers with the caller's code instead of passing through a call.
func (p *Pool) allocVia(slow func(*Pool) ([]byte, error)) ([]byte, error) {
	off := p.head
	if off == none || invariants.Enabled {
		return slow(p)
	}
	c := unsafe.Add(p.base, off) // off is a carved chunk: inside the pool's memory
	p.head = *linkOf(c)
	return unsafe.Slice((*byte)(c), p.size), nil
}

// allocSlowBytes is Alloc's slow path.
func allocSlowBytes(p *Pool) ([]byte, error) {
	c, err := p.allocSlow()
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(c), p.size), nil
}

// Free gives a chunk back. A slice that does not start at a chunk the
// pool handed out is refused with an error wrapping ErrForeign, and the
// pool is unchanged. The check is two compares and a multiply, and Free
// makes no call, so the compiler inlines it into the caller.
//
// A release build does not detect a double free: Free returns nil and
// corrupts the pool (see Pool). Checked builds return an error wrapping
// ErrDoubleFree and change nothing.
func (p *Pool) Free(b []byte) error {
	c := unsafe.Pointer(unsafe.SliceData(b))
	off := uintptr(c) - uintptr(p.base)
	if !p.owns(off) {
		return p.foreignError(c)
	}
	if invariants.Enabled {
		return p.freeChecked(offset(off))
	}
	*linkOf(c) = p.head
	p.head = offset(off)
	return nil
}

// Owns reports whether b starts at a chunk of this pool: what Free checks
// before it takes a slice back. It does not tell whether the chunk is in
// use.
func (p *Pool) Owns(b []byte) bool {
	return p.owns(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(p.base))
}

// owns reports whether offset off starts a chunk the pool has carved:
// below the cursor, and at a multiple of the stride inside a slab's
// chunks. Any address minus the base is such an offset, or fails.
func (p *Pool) owns(off uintptr) bool {
	in := off & p.mask
	// in is a multiple of stride exactly when in*magic (mod 2^64) < magic
	// (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
	// 2019): exact because in*stride < 2^64, which New and Over ensure.
	return off < p.top && in < p.usable && uint64(in)*p.magic < p.magic
}

// foreignError returns the error for freeing c, which the pool does not
// own. It is built from a composite literal, not a call, so that free
// stays small enough to inline.
func (p *Pool) foreignError(c unsafe.Pointer) error {
	return &foreignError{addr: uintptr(c), base: uintptr(p.base), size: p.size, closed: p.closed}
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

// freeCount counts the chunks on the free list, stopping at the carved
// count should a double free have made it a cycle.
func (p *Pool) freeCount() int64 {
	var n int64
	for off := p.head; off != none && n <= p.carved; off = *p.next(off) {
		n++
	}
	return n
}

// linkOf returns the free-list link of the chunk at c: the word a free
// chunk keeps in its first LinkSize bytes. Every read and write of a link
// goes through it. c must start a carved chunk of a committed slab (the
// callers' invariants say so; check verifies them), so the word is mapped,
// and aligned, since the stride is a multiple of the link's alignment.
func linkOf(c unsafe.Pointer) *offset { return (*offset)(c) }

// next returns the link of the chunk at off, as linkOf does.
func (p *Pool) next(off offset) *offset { return linkOf(unsafe.Add(p.base, off)) }

// Close returns the pool's memory to the OS (a pool made by Over only
// drops its reference to the region). Every chunk becomes invalid, in use
// or not; later calls return ErrClosed.
func (p *Pool) Close() error {
	if p.closed {
		return ErrClosed
	}
	p.closed = true
	// Forget the memory before it goes: no field may point into
	// address space the OS can hand to someone else.
	p.head, p.base, p.top, p.topEnd, p.carved = none, nil, 0, 0, 0
	p.nslabs, p.vacant, p.nvacant, p.over = 0, nil, 0, nil
	p.live, p.nlive, p.quar, p.quarantined = nil, 0, nil, 0
	if p.region != nil {
		return p.region.Release()
	}
	return nil
}

// Stats is a pool's statistics: the carve vocabulary (Live, Used,
// Footprint, Resident, Metadata) and the pool's counts. For a pool:
//
//	Live      = InUse * ChunkSize
//	Used      = InUse * Stride          (Used - Live: the rounding to the alignment)
//	Footprint = Slabs * SlabSize        (the region's length for a pool made by Over)
//	InUse + Free + Quarantined = Carved <= Capacity = Slabs * chunks per slab
//	Metadata  = the slab table, one byte per slab below the cursor, and in
//	            checked builds the live and quarantine bitmaps, one bit
//	            each per chunk carved
//
// Metadata counts the capacity of those slices, the Go memory the pool
// keeps beside its chunks; the Pool struct (a few hundred bytes) and
// package mem's own record of the region's committed pages are not
// counted. The free list lives in the free chunks and costs nothing.
type Stats struct {
	carve.Stats
	ChunkSize   int   // bytes asked for per chunk
	Stride      int   // bytes a chunk takes: ChunkSize rounded up to Align
	Align       int   // alignment of every chunk
	InUse       int64 // chunks handed out and not freed
	Free        int64 // chunks carved and on the free list
	Carved      int64 // chunks carved from the committed slabs
	Capacity    int64 // chunks the committed slabs can hold
	Quarantined int64 // chunks a checked build found written after free
	Slabs       int   // committed slabs
	SlabSize    int   // bytes per slab
}

// Footprint returns the bytes the pool has committed: Stats().Footprint,
// in O(1), for callers that sample it often.
func (p *Pool) Footprint() int64 {
	switch {
	case p.closed:
		return 0
	case p.region != nil:
		return int64(p.region.Committed())
	}
	return int64(len(p.over))
}

// Stats returns the pool's statistics. It costs a walk of the free list
// (the pool keeps no counter on its fast paths, where one would cost more
// than the rest of the work) and one mincore system call (for Resident).
func (p *Pool) Stats() Stats {
	slabs := p.nslabs - p.nvacant
	free := p.freeCount()
	st := Stats{
		ChunkSize:   int(p.size),
		Stride:      int(p.stride),
		Align:       int(p.align),
		InUse:       p.carved - p.quarantined - free,
		Free:        free,
		Carved:      p.carved,
		Quarantined: p.quarantined,
		Capacity:    int64(slabs) * int64(p.perSlab),
		Slabs:       slabs,
		SlabSize:    int(p.slabSize),
	}
	st.Live = st.InUse * int64(p.size)
	st.Used = st.InUse * int64(p.stride)
	st.Footprint, st.Resident, st.Metadata = p.Held()
	return st
}

// Held returns the pool's Footprint, Resident and Metadata as Stats
// does, without its walk of the free list: for a caller that counts the
// chunks it holds itself (InUse: Live is that × ChunkSize, Used that ×
// Stride) and samples the pool often. It makes one mincore system call.
func (p *Pool) Held() (footprint, resident, metadata int64) {
	metadata = int64(cap(p.vacant)) + 8*int64(cap(p.live)+cap(p.quar))
	if p.region != nil {
		metadata += p.region.Metadata()
	}
	switch {
	case p.closed:
	case p.region != nil:
		footprint = int64(p.region.Committed())
		if r, err := p.region.Resident(0, p.nslabs*int(p.slabSize)); err == nil {
			resident = int64(r)
		}
	default:
		footprint = int64(len(p.over))
		if r, err := mem.Resident(p.over); err == nil {
			// mincore counts whole pages, which may reach past the region.
			resident = min(int64(r), footprint)
		}
	}
	return footprint, resident, metadata
}
