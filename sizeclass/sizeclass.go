// Package sizeclass is carve's general-purpose heap of segregated size
// classes: blocks of any size and alignment, each request rounded up to
// one of 80 fixed sizes (8 bytes to 32 KiB) and served by a pool.Pool that
// holds only chunks of that size, so that no size can carve up the memory
// of another. Requests above 32 KiB get a mapping of their own from
// package mem, which goes back to the OS when they are freed.
//
// The class table comes from a generator, mkclasses.go, which prints the
// waste of every class into classes.go (go generate rebuilds it). A
// request wastes at most 11.1% of its chunk from 49 bytes up; smaller ones
// lose at most 7 bytes to the 8-byte spacing of the smallest classes.
//
// See the carve package documentation (the root doc.go) for the overview,
// the glossary and the cost model shared by all carve allocators.
package sizeclass

//go:generate go run mkclasses.go -output classes.go

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/pool"
)

// Errors returned by a heap. Test them with errors.Is; the returned errors
// wrap these with the details.
var (
	// ErrBadOption reports an option New cannot honour, or a zero Option.
	ErrBadOption = errors.New("sizeclass: bad option")
	// ErrSize reports a negative size.
	ErrSize = errors.New("sizeclass: bad size")
	// ErrAlign reports an alignment that is not a power of two from 1 to
	// MaxAlign.
	ErrAlign = errors.New("sizeclass: bad alignment")
	// ErrExhausted reports a request that would take the heap's Footprint
	// past its Limit, or one class past the address space it reserved.
	// Smaller requests, and requests of other classes, may still succeed.
	ErrExhausted = errors.New("sizeclass: limit reached")
	// ErrForeign reports a slice that does not start at a block the heap
	// handed out.
	ErrForeign = errors.New("sizeclass: not a block of this heap")
	// ErrDoubleFree reports a slice that starts a chunk of a class that is
	// not in use (freed, or never handed out), or a large object freed
	// recently.
	ErrDoubleFree = errors.New("sizeclass: block freed twice")
	// ErrClosed reports use of a heap after Close.
	ErrClosed = errors.New("sizeclass: heap closed")
	// ErrCorrupt reports, in checked builds (-tags carvecheck), a freed
	// chunk written after it was freed; the pool keeps it out of use.
	ErrCorrupt = pool.ErrCorrupt
)

const (
	// MaxClassSize is the largest size class. Larger requests are large
	// objects: one mapping each.
	MaxClassSize = 32 << 10
	// MaxAlign is the largest alignment Alloc accepts: the smallest page.
	MaxAlign = 4096
	// DefaultLimit is the Footprint a heap may reach when no Limit option
	// says otherwise (1 GiB).
	DefaultLimit = 1 << 30

	// maxLimit bounds the Limit (128 TiB, the user address space of
	// x86-64 and arm64 Linux).
	maxLimit = 1 << 47
	// maxClassReserve bounds the address space one class reserves: 16 GiB
	// on 64-bit platforms (80 classes reserve at most 1.25 TiB, which
	// costs no memory), 16 MiB on 32-bit ones.
	maxClassReserve = 1 << (24 + 10*(bits.UintSize/64))
	// minAlign is the alignment of every chunk, the pool's link word.
	minAlign = 8
	// reallocAlign caps the alignment Realloc keeps when it moves a block:
	// what malloc guarantees on 64-bit platforms.
	reallocAlign = 16
)

// The generated table must agree with the documented constants.
var (
	_ [MaxClassSize - maxSmallSize]struct{}
	_ [maxSmallSize - MaxClassSize]struct{}
	_ [MaxAlign - 1<<maxAlignShift]struct{}
	_ [1<<maxAlignShift - MaxAlign]struct{}
)

// Heap is a general-purpose allocator of segregated size classes.
//
// A request of size bytes and alignment align goes to the smallest class
// at least size bytes large whose chunks are aligned to align: classes
// that are multiples of 16 have 16-byte aligned chunks, multiples of 64
// 64-byte aligned ones, and so on up to 4 KiB (the class table in
// classes.go lists every class's alignment). An alignment the first class
// large enough lacks bumps the request up to a larger class: Alloc(24, 64)
// takes a 64-byte chunk. Requests above MaxClassSize are large objects:
// each is a mapping of its own, page-aligned, committed whole and
// page-rounded, and released to the OS when freed.
//
// Contract:
//   - Alloc returns size bytes (len == size), aligned to align, with the
//     block's usable size as capacity (cap == UsableSize: the class size,
//     or a large object's page-rounded size); Realloc likewise. They
//     are not zeroed: fresh memory reads as zero, a reused chunk holds
//     its previous contents except the first 8 bytes, which the free list
//     overwrote (checked builds fill freed chunks with poison instead).
//     Alloc(0, align) returns a non-nil empty slice: a chunk of the
//     smallest class that is aligned enough, counted as 0 bytes live,
//     which Free takes back.
//   - Free, Realloc and UsableSize take a slice as Alloc or Realloc
//     returned it: what identifies the block is its first byte, and Free
//     subtracts len(b) from Live (clamped to the block's size), so a
//     slice resliced shorter leaves Live too high, and one resliced longer
//     too low (Stats keeps Live between 0 and Used; the heap itself and
//     its checker are unaffected). Free finds the class
//     from the capacity when it is the class size (one table lookup),
//     from the address otherwise (the span table's probe), so a slice
//     whose capacity was cut is freed as well, a little slower. They return an error
//     and change nothing for a slice the heap did not hand out
//     (ErrForeign) or one already freed (ErrDoubleFree), in every build.
//     The check costs one bit per chunk, set by Alloc and cleared by
//     Free, in release builds too. A large object freed twice reports
//     ErrDoubleFree while its address is among the last 64 large objects
//     freed, ErrForeign afterwards, and frees whichever large object the
//     OS has since placed at the same address, as malloc would.
//   - After Free, Trim or Close a block must not be touched: the runtime
//     cannot catch that, and memory given back to the OS faults.
//   - Go pointers must not be stored in blocks: the GC does not see them.
//   - A Heap is not safe for concurrent use; callers that share one must
//     serialize every call, Stats included. The zero value is not usable:
//     call New. A Heap must not be copied.
//
// Costs: Alloc and Free are O(1): for a class, two table lookups, the
// pool's pop or push, and one bit of a bitmap set or cleared (the
// double-free check); Free finds the class from the slice's capacity, or
// from the address with one probe of a small hash table when the capacity
// is not a class size. The first chunk of a class reserves
// the class's address space (one mmap); a class that runs out of free
// chunks commits a slab (one mprotect). A large object costs an mmap and
// an mprotect to allocate and an munmap to free. Realloc in place costs a
// lookup; moving costs Alloc, a copy and Free. Stats and Trim are
// O(classes + slabs + free chunks + large objects), with one mincore per
// class and per large object for Stats.
//
// Per block: a chunk costs its class size (the rounding is internal
// fragmentation, counted in Used - Live) and one bit of Go memory for the
// double-free bitmap; no header. A large object costs its page-rounded
// size and a map entry. Each class in use keeps a pool (one reservation
// of min(Limit, 16 GiB) rounded up to a power of two) and commits memory
// in slabs of 64 KiB or more (classes.go lists them), so a heap that
// touched n classes has a Footprint of at least n slabs until Trim.
type Heap struct {
	_ noCopy

	// Read and written by Alloc and Free.
	classes [numClasses]class
	live    int64     // Live: bytes requested by live blocks
	spans   spanTable // address -> class

	footprint int64 // bytes committed: every class's slabs and every large object
	limit     int64 // most bytes footprint may reach
	reserve   int64 // bytes of address space each class's pool reserves: a power of two
	large     largeTable
	closed    bool
}

// noCopy makes go vet's copylocks check report copies of a Heap.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// Option configures a heap built by [New]. The zero Option is invalid.
type Option struct {
	apply func(*Heap) error
}

// Limit caps the heap's Footprint, the bytes committed for all classes and
// large objects, at n (default [DefaultLimit]). A request that would need
// more fails with ErrExhausted. n must be positive and at most 128 TiB.
//
// Each class reserves min(n, 16 GiB) of address space, rounded up to a
// power of two, which costs no memory; one class can use no more than
// that. (Off Linux, where package mem backs reservations with Go memory,
// the bound is 64 MiB.)
func Limit(n int64) Option {
	return Option{func(h *Heap) error {
		if n <= 0 || n > maxLimit {
			return fmt.Errorf("%w: Limit(%d): want 1 to %d bytes", ErrBadOption, n, int64(maxLimit))
		}
		h.limit = n
		return nil
	}}
}

// New returns an empty heap configured by opts. It reserves and commits
// nothing until the first allocation.
func New(opts ...Option) (*Heap, error) {
	h := &Heap{limit: DefaultLimit}
	for _, o := range opts {
		if o.apply == nil {
			return nil, fmt.Errorf("%w: zero Option (want one from Limit)", ErrBadOption)
		}
		if err := o.apply(h); err != nil {
			return nil, err
		}
	}
	// Every class reserves the same power of two, at least the largest
	// slab: the span table relies on it.
	r := int64(1)
	for r < min(h.limit, osClassReserve) {
		r <<= 1
	}
	for c := 1; c < numClasses; c++ {
		r = max(r, slabBytes(c))
	}
	h.reserve = r
	h.spans.init(uint(bits.TrailingZeros64(uint64(r))))
	for c := 1; c < numClasses; c++ {
		cl := &h.classes[c]
		cl.size = uintptr(classSize[c])
		cl.magic = ^uint64(0)/uint64(cl.size) + 1
		cl.slab = slabBytes(c)
		cl.perSlab = cl.slab / int64(cl.size)
	}
	h.large.init()
	return h, nil
}

// Alloc returns size bytes aligned to align, a power of two from 1 to
// MaxAlign: a chunk of the smallest class that holds size bytes and is
// aligned enough, or a large object above MaxClassSize. The slice has
// len == cap == size. Alloc fails with an error wrapping ErrSize for a
// negative size, ErrAlign for a bad alignment, ErrExhausted when the
// request would take the Footprint past the Limit, and ErrClosed after
// Close; a failed Alloc leaves the heap as it was.
func (h *Heap) Alloc(size, align int) ([]byte, error) {
	if uint(size) <= smallSizeMax && uint(align-1) < minAlign && align&(align-1) == 0 {
		if cl := &h.classes[sizeToClass8[(size+smallSizeDiv-1)/smallSizeDiv]]; cl.avail > 0 {
			// take, written out: Alloc and Free cannot inline into the
			// caller (the pool's pop alone uses most of the inliner's
			// budget), so each call they make costs as much as the pop.
			c, err := cl.pool.Alloc() // inlined: a pop
			if err == nil {
				cl.avail--
				cl.mark(c)
				h.live += int64(size)
				return c[:size:cl.size], nil
			}
			return nil, h.takeFailed(cl, err)
		}
	}
	return h.allocSlow(size, align)
}

// take hands out a chunk of cl, which has one available, as size bytes.
func (h *Heap) take(cl *class, size int) ([]byte, error) {
	c, err := cl.pool.Alloc() // inlined: a pop
	if err != nil {
		return nil, h.takeFailed(cl, err)
	}
	cl.avail--
	cl.mark(c)
	h.live += int64(size)
	return c[:size:cl.size], nil
}

// allocSlow serves what Alloc's fast path does not: bad arguments,
// alignments above 8, sizes above 1 KiB, large objects, classes with no
// chunk available, and a closed heap (whose classes have none).
func (h *Heap) allocSlow(size, align int) ([]byte, error) {
	switch {
	case h.closed:
		return nil, ErrClosed
	case size < 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size is negative (want >= 0)", ErrSize, size, align)
	case align < 1 || align > MaxAlign || align&(align-1) != 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): want a power of two from 1 to %d", ErrAlign, size, align, MaxAlign)
	case int64(size) > h.limit:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size exceeds the limit %d", ErrExhausted, size, align, h.limit)
	}
	var c uint8
	if size <= maxSmallSize {
		c = classFor(size, align)
	}
	if c == 0 {
		return h.allocLarge(size)
	}
	if cl := &h.classes[c]; cl.avail > 0 {
		return h.take(cl, size)
	}
	b, err := h.grow(c)
	if err != nil {
		return nil, err
	}
	cl := &h.classes[c]
	cl.avail--
	cl.mark(b)
	h.live += int64(size)
	if invariants.Enabled {
		h.mustCheck()
	}
	return b[:size:cl.size], nil
}

// Free gives a block back: a chunk to its class's pool, a large object's
// mapping to the OS. It returns an error wrapping ErrForeign for a slice
// that does not start at a block of the heap, ErrDoubleFree for a block
// already freed, and ErrClosed after Close; the heap is then unchanged.
func (h *Heap) Free(b []byte) error {
	// A slice as Alloc returned it has its class size as capacity: that
	// names the class without the span table's lookup, which would wait on
	// the address. The address must then lie in that class's reservation
	// (reservations are disjoint), so a wrong guess, from a slice whose
	// capacity was cut or a foreign one, only sends Free the long way.
	a := addr(b)
	if n := cap(b); n <= maxSmallSize {
		cl := &h.classes[sizeClass(n)]
		i := cl.index(a)
		w, bit := i/64, uint64(1)<<(i%64)
		if a-cl.base < uintptr(h.reserve) && uintptr(n) == cl.size &&
			w < uintptr(len(cl.live)) && cl.live[w]&bit != 0 && cl.pool.Free(b) == nil {
			h.freed(cl, w, bit, len(b))
			return nil
		}
	}
	return h.freeSlow(b)
}

// freeSlow is Free for a block its capacity does not name: a large object,
// a slice resliced to a smaller capacity, a foreign or freed one.
func (h *Heap) freeSlow(b []byte) error {
	a := addr(b)
	c := h.spans.lookup(a)
	if c == 0 {
		return h.freeLarge(b)
	}
	cl := &h.classes[c]
	i := cl.index(a)
	w, bit := i/64, uint64(1)<<(i%64)
	if w >= uintptr(len(cl.live)) || cl.live[w]&bit == 0 || cl.pool.Free(b) != nil {
		return h.notLive(cl, b)
	}
	h.freed(cl, w, bit, len(b))
	return nil
}

// freed records that the chunk of bit bit in word w of cl's bitmap, which
// the pool took back, is free, and that n bytes (at most the chunk) are
// no longer live.
func (h *Heap) freed(cl *class, w uintptr, bit uint64, n int) {
	cl.live[w] &^= bit
	cl.avail++
	h.live -= int64(min(uintptr(n), cl.size))
}

// notLive explains why b, which lies in cl's reservation, is not a live
// chunk: it starts a chunk that is free (ErrDoubleFree: freed, given back
// by Trim, or not handed out yet), or no chunk at all (ErrForeign). It
// reads nothing of the memory, which may be decommitted.
func (h *Heap) notLive(cl *class, b []byte) error {
	if h.isChunk(cl, addr(b)) && !cl.isLive(addr(b)) {
		return fmt.Errorf("%w: %#x (a free chunk of the %d-byte class)", ErrDoubleFree, addr(b), cl.size)
	}
	return fmt.Errorf("%w: %#x (not the start of a chunk of the %d-byte class)", ErrForeign, addr(b), cl.size)
}

// isChunk reports whether address a is where a chunk of cl starts, or
// would start once its slab is committed: inside the class's reservation,
// at a multiple of the chunk size from a slab's start, before the slab's
// tail.
func (h *Heap) isChunk(cl *class, a uintptr) bool {
	off := a - cl.base
	in := off & uintptr(cl.slab-1)
	return off < uintptr(h.reserve) && in < uintptr(cl.perSlab)*cl.size && in%cl.size == 0
}

// block returns the class of the block b starts, or 0 for a large object,
// and an error if b is not a live block.
func (h *Heap) block(b []byte) (uint8, error) {
	a := addr(b)
	c := h.spans.lookup(a)
	if c == 0 {
		switch {
		case h.closed:
			return 0, ErrClosed
		case h.large.regions[a] != nil:
			return 0, nil
		}
		return 0, h.large.notLive(a)
	}
	if cl := &h.classes[c]; !cl.isLive(a) || !h.isChunk(cl, a) {
		return 0, h.notLive(cl, b)
	}
	return c, nil
}

// Realloc resizes a block to size bytes and returns it, with its first
// min(len(b), size) bytes kept. When size maps to the block's class (or,
// for a large object, to the same number of pages) the block stays where
// it is and Realloc returns it resliced; otherwise it allocates a new
// block, copies, and frees b. A moved block is aligned as the old block's
// class is, up to 16 bytes (malloc's guarantee): a block allocated with a
// larger alignment that must keep it is moved by hand (Alloc, copy, Free).
// Realloc(nil, size) is Alloc(size, 8).
//
// Errors are those of Alloc and Free; on error b is unchanged and still
// allocated.
func (h *Heap) Realloc(b []byte, size int) ([]byte, error) {
	if b == nil {
		return h.Alloc(size, minAlign)
	}
	c, err := h.block(b)
	if err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: Realloc(%#x, %d): size is negative (want >= 0)", ErrSize, addr(b), size)
	}
	align := reallocAlign
	if c != 0 {
		cl := &h.classes[c]
		if size <= maxSmallSize && classFor(size, 1) == c {
			h.live += int64(size) - int64(min(uintptr(len(b)), cl.size))
			// The chunk holds cl.size >= size bytes from b's first byte.
			return unsafe.Slice(unsafe.SliceData(b), cl.size)[:size], nil
		}
		align = min(align, classAlign(c))
	} else if r := h.large.regions[addr(b)]; size > maxSmallSize && roundPage(size) == int64(r.Committed()) {
		h.live += int64(size) - min(int64(len(b)), int64(r.Committed()))
		// The mapping holds roundPage(size) >= size bytes from its base.
		return unsafe.Slice(unsafe.SliceData(b), r.Committed())[:size], nil
	}
	nb, err := h.Alloc(size, align)
	if err != nil {
		return nil, err
	}
	copy(nb, b)
	if err := h.Free(b); err != nil {
		h.Free(nb)
		return nil, err
	}
	return nb, nil
}

// UsableSize returns the bytes the block b starts can hold: its class
// size, or a large object's page-rounded size. Realloc within it does not
// move the block only if the new size also maps to the same class.
func (h *Heap) UsableSize(b []byte) (int, error) {
	c, err := h.block(b)
	switch {
	case err != nil:
		return 0, err
	case c == 0:
		return h.large.regions[addr(b)].Committed(), nil
	}
	return int(h.classes[c].size), nil
}

// Trim gives every slab of every class whose chunks are all free back to
// the OS (RSS drops by as much, less pages never touched) and returns how
// many bytes it released. Large objects went back when they were freed.
func (h *Heap) Trim() (int64, error) {
	if h.closed {
		return 0, ErrClosed
	}
	var released int64
	for c := range h.classes {
		cl := &h.classes[c]
		if cl.pool == nil {
			continue
		}
		n, err := cl.pool.Trim()
		// Every chunk of a slab Trim gave back was free or not yet
		// carved, so counted in avail.
		slabs := n / cl.slab
		cl.slabs -= slabs
		cl.avail -= slabs * cl.perSlab
		h.footprint -= n
		released += n
		if err != nil {
			return released, fmt.Errorf("sizeclass: trim the %d-byte class: %w", cl.size, err)
		}
	}
	if invariants.Enabled {
		h.mustCheck()
	}
	return released, nil
}

// Close gives all the heap's memory back to the OS: every block becomes
// invalid. Later calls return ErrClosed.
func (h *Heap) Close() error {
	if h.closed {
		return ErrClosed
	}
	h.closed = true
	var errs []error
	for c := range h.classes {
		cl := &h.classes[c]
		if cl.pool != nil {
			errs = append(errs, cl.pool.Close())
		}
		*cl = class{}
	}
	h.spans.clear()
	errs = append(errs, h.large.releaseAll())
	h.footprint, h.live = 0, 0
	return errors.Join(errs...)
}

// addr returns the address of b's first byte (of where it would be, for
// an empty slice), as a number: what identifies a block.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside memory the heap reserved: one class's reservation, or one large
// object's mapping. It says nothing of whether b is a block; a replay
// checks it of every block it is handed. After Close nothing is inside.
func (h *Heap) Contains(b []byte) bool {
	a := addr(b)
	end := a + uintptr(cap(b))
	if end < a {
		return false
	}
	if c := h.spans.lookup(a); c != 0 {
		return end <= h.classes[c].base+uintptr(h.reserve)
	}
	if r := h.large.regions[a]; r != nil {
		return r.Contains(b)
	}
	for _, r := range h.large.regions {
		if r.Contains(b) {
			return true
		}
	}
	return false
}
