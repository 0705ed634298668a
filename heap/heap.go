package heap

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

//go:generate go run mkclasses.go -output classes.go

// Errors returned by a heap. Test them with errors.Is; the returned errors
// wrap these with the details.
var (
	// ErrSize reports a negative size.
	ErrSize = errors.New("heap: bad size")
	// ErrAlign reports an alignment that is neither 0 (the default) nor a
	// power of two from 1 to MaxAlign.
	ErrAlign = errors.New("heap: bad alignment")
	// ErrExhausted reports a request the heap cannot serve without its
	// Footprint passing the Limit, or without more address space than it
	// reserved. The heap stays usable: smaller requests may still succeed.
	ErrExhausted = errors.New("heap: limit reached")
	// ErrForeign reports a slice that does not start at a block of this
	// heap: nil, memory of something else, a pointer into the middle of a
	// block, or an empty slice of capacity 0 past a block's end
	// (b[len(b):], which Go gives b's own pointer).
	ErrForeign = errors.New("heap: not a block of this heap")
	// ErrDoubleFree reports a slice that starts in free memory of the
	// heap: a block freed already, or a slot or address no block in use
	// covers.
	ErrDoubleFree = errors.New("heap: block is not in use (freed twice?)")
	// ErrClosed reports use of a heap after Close, or of a Heap not made
	// by New.
	ErrClosed = errors.New("heap: heap closed")
	// ErrBusy reports, in checked builds, a heap used by two goroutines at
	// once; the call that finds the heap busy changes nothing.
	ErrBusy = errors.New("heap: heap used by two goroutines at once")
	// ErrOption reports an option New cannot honour, or a zero Option.
	ErrOption = errors.New("heap: bad option")
)

const (
	// MaxAlign is the largest alignment Alloc accepts (4 KiB).
	MaxAlign = 4096
	// MaxLimit is the largest Limit (32 GiB): the best-fit zone's links
	// are 32-bit numbers of 16-byte granules, which address 64 GiB.
	MaxLimit = 32 << 30
	// DefaultRetain is the most bytes of free pages the heap keeps in
	// physical memory, for reuse without a page fault, when no Retain
	// option says otherwise (64 MiB): within it, the heap keeps
	// RetainFloor, or 1/RetainShare of its Footprint if that is more.
	DefaultRetain = 64 << 20
	// RetainFloor is what the heap keeps resident of its free memory
	// whatever its size, within the Retain (64 KiB).
	RetainFloor = 64 << 10
	// RetainShare: a heap keeps resident up to 1/RetainShare of its
	// Footprint of free memory (0.4%), within the Retain.
	RetainShare = 256

	// pageSize is the heap's page: the slab of a size class, and the unit
	// in which it tracks which free memory it gave back to the OS. It is
	// the OS page on the platforms carve runs on; where the OS page is
	// larger, the heap gives nothing back (canPurge).
	pageSize  = 4096
	pageShift = 12
	// minLimit is the smallest Limit: a page of each zone.
	minLimit = 2 * pageSize
)

// Heap is carve's general-purpose heap: see the package documentation
// for its design and contract.
type Heap struct {
	small smallZone
	mid   midZone

	live   int64 // Stats.Live: bytes asked for by blocks in use
	limit  int64 // most bytes Footprint may reach
	retain int   // the Retain in pages: the cap of budget
	dirty  int   // free pages of both zones that are not clean
	ring   purgeRing
	purges int64 // Stats.Purges
	closed bool

	meta, metaGen int64 // Metadata's last figure, and the count of changes it saw

	slowCalls uint64          // slow-path calls, for checked builds' checkSlow
	busy      invariants.Busy // checked builds: a call is running
}

// Option configures a heap made by [New]. The zero Option is invalid.
type Option struct {
	apply func(*config) error
}

type config struct {
	limit, retain int64
	retainSet     bool
	shards        int
	mesh          bool
}

// apply applies the options in order.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o.apply == nil {
			return fmt.Errorf("%w: zero Option (want one from Limit, Retain, Mesh or Shards)", ErrOption)
		}
		if err := o.apply(c); err != nil {
			return err
		}
	}
	return nil
}

// Limit caps the heap's Footprint, the bytes of memory it holds, at n
// (rounded up to whole pages; by default the machine's physical memory,
// at most MaxLimit: see DefaultLimit). Each of the heap's two zones
// reserves four times the limit in address space on Linux (the best-fit
// zone at most 64 GiB), which costs no memory: a zone whose free pages
// went back to the OS can still grow. n must be from 8 KiB to MaxLimit;
// off Linux and in builds tagged carvegomem, where each zone is Go memory
// of the limit's size taken at New, New refuses a limit above 1 GiB.
func Limit(n int64) Option {
	return Option{func(c *config) error {
		if n < minLimit || n > MaxLimit {
			return fmt.Errorf("%w: Limit(%d): want %d to %d bytes", ErrOption, n, minLimit, int64(MaxLimit))
		}
		c.limit = n
		return nil
	}}
}

// Retain caps the bytes of free pages the heap keeps in physical memory,
// not given back to the OS yet (default DefaultRetain, or the Limit if
// that is smaller; rounded up to whole pages). Within the cap it keeps
// RetainFloor, or 1/RetainShare of its Footprint if that is more; past
// that it gives back the pages that waited longest, down to half of it,
// in one burst. Beside them it keeps up to a quarter as many slabs that
// emptied, for their class. Retained pages are reused without a page
// fault; Retain(0) gives every free page back at once and keeps no empty
// slab, the least RSS for the most system calls. n must be from 0 to the
// Limit.
func Retain(n int64) Option {
	return Option{func(c *config) error {
		if n < 0 || n > MaxLimit {
			return fmt.Errorf("%w: Retain(%d): want 0 to %d bytes", ErrOption, n, int64(MaxLimit))
		}
		c.retain, c.retainSet = n, true
		return nil
	}}
}

// Mesh makes the heap mesh its small-object slabs (see Meshing in the
// package doc): two slabs of one class whose slots in use do not overlap
// share one page of memory, and the other page goes back to the OS, no
// slot's address changing. The small zone is then backed by a memory file, MAP_SHARED
// (a fork shares it with the child), and slots are handed out at random
// among a slab's free ones. Off Linux, and in builds tagged carvegomem,
// the heap does not mesh (Heap.Meshing reports it). Shared does not mesh.
func Mesh() Option {
	return Option{func(c *config) error {
		c.mesh = true
		return nil
	}}
}

// DefaultLimit returns the Limit a heap gets when no Limit option says
// otherwise: the machine's physical memory (4 GiB if Linux does not say;
// 16 MiB off Linux and in builds tagged carvegomem, where the zones are Go
// memory), at most MaxLimit.
func DefaultLimit() int64 {
	return min(max(physicalMemory(), minLimit), MaxLimit)
}

// New returns an empty heap. It reserves address space for its two zones,
// which costs no memory, and commits nothing until the first Alloc.
func New(opts ...Option) (*Heap, error) {
	c := config{limit: DefaultLimit(), retain: DefaultRetain}
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	switch {
	case c.shards != 0:
		return nil, fmt.Errorf("%w: Shards(%d) is an option of NewShared", ErrOption, c.shards)
	case c.retainSet && c.retain > c.limit:
		return nil, fmt.Errorf("%w: Retain(%d) above the Limit %d", ErrOption, c.retain, c.limit)
	case !c.retainSet:
		c.retain = min(c.retain, c.limit)
	}
	limit := roundUp(c.limit, pageSize)
	h := &Heap{limit: limit, retain: int(roundUp(c.retain, pageSize) / pageSize)}
	if err := h.small.init(reserveFactor*limit, c.mesh && canMesh()); err != nil {
		return nil, err
	}
	if err := h.mid.init(h, midID, reserveFactor*limit); err != nil {
		h.small.vm.release()
		return nil, err
	}

	return h, nil
}

// Limit returns the most bytes the heap's Footprint may reach.
func (h *Heap) Limit() int64 { return h.limit }

// Close returns all of the heap's memory to the OS. Every block becomes
// invalid; later calls return ErrClosed, as Close does on a closed heap
// or a Heap not made by New.
func (h *Heap) Close() error {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return err
		}
		defer h.leave()
	}
	if h.small.base == nil {
		return h.unusable()
	}
	vs, vm := h.small.vm, h.mid.vm
	meshed.Add(-int64(h.small.mesh.followers + h.small.mesh.nstale))
	// Forget the memory before it goes: no field may point into address
	// space the OS can hand to someone else.
	*h = Heap{closed: true, limit: h.limit}
	return errors.Join(vs.release(), vm.release())
}

// Alloc returns size bytes whose address is a multiple of align, a power
// of two from 1 to MaxAlign, or 0 for the heap's own alignment (as 1 asks:
// 8 bytes at least, 16 for a best-fit block). The slice has len == cap ==
// size, so append
// cannot spill into the next block; the bytes are not zeroed (see the
// package documentation). Alloc(0, align) returns a non-nil empty slice
// of a minimal block, which counts 0 bytes Live and which Free takes back.
//
// Requests up to MaxSmall bytes take a slot of the smallest size class
// that holds them and is aligned enough, as do requests of 512, 1024,
// 2048 or 4096 bytes less up to 7 (the exact classes); the others, and
// requests no class is aligned enough for, a best-fit block.
//
// Alloc fails with an error wrapping ErrSize for a negative size, ErrAlign
// for a bad alignment, ErrExhausted when the Footprint would pass the
// Limit, and ErrClosed after Close. A failed Alloc leaves the heap as it
// was.
func (h *Heap) Alloc(size, align int) ([]byte, error) {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return nil, err
		}
		defer h.leave()
	}
	// Alignments 0, 1, 2, 4 and 8: every class is aligned enough.
	if uint(size) <= MaxSmall && uint(align) <= 8 && align&(align-1) == 0 {
		c := sizeToClass[(size+7)>>3]
		if cl := &h.small.classes[c]; cl.next != 0 {
			p := h.small.take(cl, size)
			h.live += int64(size)
			return h.small.bytes(p, size), nil
		}
	}
	return h.allocSlow(size, align)
}

// allocSlow serves what Alloc's fast path does not: bad arguments, classes
// with no partial slab, alignments above 8, and best-fit blocks.
func (h *Heap) allocSlow(size, align int) ([]byte, error) {
	switch {
	case h.small.base == nil:
		return nil, h.unusable()
	case size < 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size is negative (want >= 0)", ErrSize, size, align)
	case align < 0 || align > MaxAlign || align&(align-1) != 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): want 0 (the default) or a power of two from 1 to %d", ErrAlign, size, align, MaxAlign)
	case int64(size) > h.limit:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size exceeds the limit %d", ErrExhausted, size, align, h.limit)
	}
	if c := classFor(size, align); c != 0 {
		b, err := h.allocSmall(c, size)
		if err != nil {
			return nil, fmt.Errorf("Alloc(%d, %d): %w", size, align, err)
		}
		return b, nil
	}
	b, err := h.mid.alloc(size, align)
	if err != nil {
		return nil, fmt.Errorf("Alloc(%d, %d): %w", size, align, err)
	}
	return b, nil
}

// Free gives back the block b starts at: b is a slice of the block as
// Alloc or Realloc returned it, which may have been cut shorter (b[:n],
// b[:n:m]); where it starts identifies the block, and Live drops by what
// was asked of the block, whatever b's length. An empty slice of capacity
// 0 identifies only a block of 0 bytes: at a larger block's start it is
// what b[len(b):] is, which Go gives b's own pointer, and is refused.
//
// A slot goes back to its slab, and a slab left empty is kept for its
// class, the oldest kept giving its page back past their bound; a
// best-fit block merges with its free neighbours, and the whole pages
// inside the free block that results go back to the OS once more free
// pages are resident than the heap keeps (see Retain).
//
// Free refuses, changing nothing, a slice that does not start at a block
// in use: ErrForeign for nil, memory outside the heap, a slice into the
// middle of a block or past its end; ErrDoubleFree for a slice that
// starts in free memory, as a block freed already does (release builds
// included); ErrClosed after Close.
func (h *Heap) Free(b []byte) error {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return err
		}
		defer h.leave()
	}
	if off := addr(b) - uintptr(h.small.base); off < uintptr(h.small.committed) {
		return h.freeSmall(b, off)
	}
	p, err := h.mid.inUse(b)
	if err != nil {
		return h.notOwned(b, err)
	}
	h.mid.freeBlock(p)
	return nil
}

// pastEnd returns the error for an empty slice of capacity 0 at a, where
// a block in use of n > 0 bytes starts: such a slice is what b[len(b):]
// is, the end of b, to which Go gives b's pointer when no capacity is
// left. It cannot be told from b[:0:0], which nothing needs.
func pastEnd(a uintptr, n int) error {
	return fmt.Errorf("%w: an empty slice of capacity 0 at %#x, where a block of %d bytes starts: what b[len(b):] is, b's end with b's pointer, not the block (pass a slice of the block with a capacity)",
		ErrForeign, a, n)
}

// notOwned returns the error for a slice that is no block in use of the
// best-fit zone and lies outside the small zone's committed pages, given
// what the best-fit zone found.
func (h *Heap) notOwned(b []byte, err error) error {
	switch {
	case h.small.base == nil:
		return h.unusable()
	case addr(b) == 0:
		return fmt.Errorf("%w: nil", ErrForeign)
	case h.small.vm.contains(b[:0]):
		return fmt.Errorf("%w: %#x lies in the small zone past its last page", ErrForeign, addr(b))
	}
	return err
}

// unusable returns the error for a heap closed, or not made by New.
func (h *Heap) unusable() error {
	if h.closed {
		return ErrClosed
	}
	return fmt.Errorf("%w: a Heap not made by New", ErrClosed)
}

// Realloc changes the size of the block b starts at to size bytes and
// returns the block, moved or not; b is a slice of the block as for Free,
// and Live changes by size less what was asked of the block before. The
// first min(len(b), size) bytes are kept.
//
// A slot stays where it is when size falls in its class; otherwise it
// moves. A best-fit block stays where it is when it shrinks (the rest,
// if large enough, is freed), when it is the last block before the top,
// or when the block after it is free and large enough; otherwise it
// moves. A block that moves gets the alignment of a fresh Alloc(size, 1):
// a larger alignment asked of Alloc is not kept, as with C's realloc.
// Realloc(b, 0) keeps a minimal block; it does not free.
//
// Realloc fails as Free does for a slice it refuses, as Alloc does for a
// bad size or a full heap; the block is then unchanged.
func (h *Heap) Realloc(b []byte, size int) ([]byte, error) {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return nil, err
		}
		defer h.leave()
	}
	var err error
	switch off := addr(b) - uintptr(h.small.base); {
	case off < uintptr(h.small.committed):
		var w int
		var bit uint64
		if w, bit, err = h.small.inUse(b, off); err == nil {
			return h.reallocSmall(b, off, w, bit, size)
		}
	default:
		var p offset
		if p, err = h.mid.inUse(b); err == nil {
			return h.mid.realloc(b, p, size)
		}
		err = h.notOwned(b, err)
	}
	return nil, err
}

// move allocates the block of size bytes a Realloc moves b to and copies
// b into it; the caller then frees b's block.
func (h *Heap) move(b []byte, size int) ([]byte, error) {
	n, err := h.allocSlow(size, 1)
	if err != nil {
		return nil, fmt.Errorf("Realloc(%d): %w", size, err)
	}
	copy(n, b)
	return n, nil
}

// UsableSize returns how many bytes the block b starts at can hold: its
// class's slot size, or a best-fit block's size less its header. A
// Realloc to that size keeps the block in place, as does one to any
// smaller size for a best-fit block; a slot stays only for the sizes its
// class serves (see Realloc). UsableSize refuses the slices Free refuses.
func (h *Heap) UsableSize(b []byte) (int, error) {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return 0, err
		}
		defer h.leave()
	}
	if off := addr(b) - uintptr(h.small.base); off < uintptr(h.small.committed) {
		if _, _, err := h.small.inUse(b, off); err != nil {
			return 0, err
		}
		return int(h.small.classAt(off).size), nil
	}
	p, err := h.mid.inUse(b)
	if err != nil {
		return 0, h.notOwned(b, err)
	}
	return int(h.mid.hdr(p).Size() - headerSize), nil
}

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside the heap's reservations: what a replay checks of every block it
// is handed. It says nothing of whether b is a block. After Close nothing
// is inside.
func (h *Heap) Contains(b []byte) bool {
	return !h.closed && (h.small.vm.contains(b) || h.mid.vm.contains(b))
}

// addr returns the address of b's first byte (of where it would be, for
// an empty slice), as a number: what identifies a block.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
