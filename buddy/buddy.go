// Package buddy is a binary buddy heap: it serves requests of any size
// from power-of-two blocks carved out of one region of address space. A
// request takes the smallest free block that holds it, splitting a larger
// block in halves until one fits; a freed block merges with its buddy,
// the other half of the block it was split from, whenever both are free,
// and the merged block with its own buddy, up the orders.
//
// The heap has the lab's two buddy allocators as its two modes ([Mode]):
//
//   - Plain ("buddy") keeps each block's order in side tables, in Go
//     memory, so a request of 2^k bytes takes a block of exactly 2^k.
//   - Header ("buddy-header") is the FREENIX paper's modified binary
//     buddy: a 16-byte header in front of every payload records the
//     block's order, as malloc's headers record a chunk's size, so a
//     request of exactly 2^k bytes needs a block of 2^(k+1). Requests of power-of-two sizes,
//     which Plain serves without waste, take twice the memory. (The
//     FREENIX paper measured 50.7% fragmentation for its modified buddy,
//     against 30.5% for the best malloc.)
//
// Memory comes from the OS through package mem, outside the Go heap, and
// is committed as blocks are handed out and given back as they are freed
// (see [Granule] and [Retain]), so the footprint follows the live memory.
//
// See the carve package documentation (the root doc.go) for the overview,
// the glossary and the cost model shared by all carve allocators.
package buddy

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
)

// Errors returned by heaps. Test them with errors.Is; the returned errors
// wrap these with the details.
var (
	// ErrOption reports an option New cannot honour, or a zero Option.
	ErrOption = errors.New("buddy: bad option")
	// ErrSize reports a negative size, or a request larger than the
	// largest block (that error matches ErrExhausted too).
	ErrSize = errors.New("buddy: bad size")
	// ErrAlign reports an alignment that is not a power of two from 1 to
	// MaxAlign.
	ErrAlign = errors.New("buddy: bad alignment")
	// ErrExhausted reports a request for which no free block is large
	// enough, or whose memory the OS refused to commit. The heap is
	// unchanged: smaller requests may still succeed, and frees may make
	// room.
	ErrExhausted = errors.New("buddy: exhausted")
	// ErrForeign reports a slice that does not start a payload this heap
	// handed out: Go memory, another heap's, nil, or a pointer into the
	// middle of a block.
	ErrForeign = errors.New("buddy: not a block of this heap")
	// ErrDoubleFree reports a slice whose address lies in free memory of
	// the heap: its block was freed already (the heap cannot tell that
	// from an address it never handed out).
	ErrDoubleFree = errors.New("buddy: block freed twice")
	// ErrClosed reports use of a heap after Close.
	ErrClosed = errors.New("buddy: closed")
)

const (
	// HeaderSize is the size of the header in front of every payload in
	// Header mode: 16 bytes, so payloads stay 16-byte aligned.
	HeaderSize = 16
	// MaxAlign is the largest alignment Alloc accepts, the smallest page
	// size: the heap's base is page-aligned, so a block's natural
	// alignment holds up to it.
	MaxAlign = 4096
	// MaxOrder is the largest order a block can have: blocks of 2^40
	// bytes (1 TiB). Stats index their per-order counts by order.
	MaxOrder = 40

	// reallocAlign is the alignment of a block Realloc moves, as malloc's
	// realloc promises its own alignment and not the one a block was
	// first allocated with.
	reallocAlign = 16
)

// Mode chooses how a heap records the order of a block in use. The names
// are the lab's allocator names.
type Mode int

const (
	// Plain keeps orders in side tables: no header, and a request of 2^k
	// bytes takes a block of 2^k. Its name is "buddy".
	Plain Mode = iota
	// Header keeps a HeaderSize-byte header in front of every payload, as
	// the FREENIX paper's modified buddy and most mallocs do. Its name is
	// "buddy-header".
	Header
)

// String returns the mode's allocator name: "buddy" or "buddy-header".
func (m Mode) String() string {
	switch m {
	case Plain:
		return "buddy"
	case Header:
		return "buddy-header"
	}
	return fmt.Sprintf("buddy.Mode(%d)", int(m))
}

// ParseMode returns the mode whose allocator name is name.
func ParseMode(name string) (Mode, error) {
	for _, m := range []Mode{Plain, Header} {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: mode %q: want %q or %q", ErrOption, name, Plain, Header)
}

// offset is a byte's distance from the heap's base. Blocks are named by
// their offset and order; the heap stores offsets, never pointers.
type offset uint

// Heap is a binary buddy heap over one region of address space.
//
// Contract:
//   - Alloc returns a slice of exactly the size asked for (len == cap),
//     aligned as asked. Its bytes are not zeroed: memory fresh from the OS
//     reads as zero, a reused block holds what was there before (checked
//     builds fill freed blocks with a poison byte instead).
//   - Free, Realloc and UsableSize take the slice Alloc or Realloc
//     returned, as returned: what counts is where it starts, and its
//     length is taken as the bytes that were asked for (clamped to the
//     block), so Stats.Live stays exact only if the length is the one
//     handed out (a shorter one leaves it too high; Stats keeps it at
//     most Used - HeaderBytes, and the heap itself is unaffected). A slice the heap did not hand out is refused with
//     ErrForeign, one already freed with ErrDoubleFree, in release builds
//     too; a refused call changes nothing. A double free goes undetected
//     only once the block, or a block at the same address, has been handed
//     out again.
//   - After Free, or a Realloc that moved the block, the old slice must not
//     be touched: its bytes may belong to another block, or have gone back
//     to the OS, where touching them is a fatal fault. After Close every
//     block is gone.
//   - No Go pointer may be stored in a block: the garbage collector does
//     not look inside carve memory, and may free what it points to.
//   - A Heap is not safe for concurrent use: callers that share one must
//     serialize every call, Stats included. The zero value is not usable:
//     call [New].
//   - Checked builds (-tags carvecheck) fill freed blocks with a poison
//     byte, verify it when the bytes are handed out again (a write after
//     free panics), and check the whole heap on slow paths.
//
// Costs: Alloc splits at most log2(MaxBlock/MinBlock) times (26 with the
// defaults), and finds the lowest free block of an order with a scan of
// that order's table that is O(1) amortized; Free finds the block by
// walking up the tree from MinBlock to the block's order and merges at
// most log2(MaxBlock/MinBlock) times. Each step is a few bit operations
// on the side tables, in Go memory; neither touches free memory, and
// neither makes a system call, except Alloc to commit a granule that is
// not committed and Free when the idle memory passes Retain. Realloc in
// place costs a Free's walk plus the splits or merges between the two
// orders; moved, an Alloc, a copy and a Free. Stats costs O(MaxOrder)
// plus one mincore call per run of committed granules; Trim, a scan of the
// granule tables.
//
// A block in use costs its power-of-two size: Used - Live is the
// rounding, plus the header and alignment padding in Header mode. The
// side tables cost at most two bits per node of the tree that has been
// split or free, in leaves allocated where blocks have been (at most
// about 2.4% of the address range where 16-byte blocks have been, far
// less where blocks are larger), and 4 bytes and a bit per granule up to
// the highest used; Stats.Metadata reports them.
//
// Layout: the heap manages offsets [0, Span) of its region, the limit
// rounded down to MinBlock, tiled by top-level blocks (roots) of at most
// MaxBlock bytes. A block of order k spans [off, off+2^k) with off a
// multiple of 2^k; its buddy is the block at off XOR 2^k. In Plain mode
// the payload starts at off. In Header mode the payload starts d bytes in,
// where d is HeaderSize, or the alignment asked for if larger, and the
// header takes the HeaderSize bytes just before the payload:
//
//	Plain:   off: [payload ............................ | rounding]
//	Header:  off: [padding (d > 16) | header | payload | rounding]
//
// The side tables, in Go memory, say for every node of the tree whether it
// is split and whether it is a free block: a block in use is a node that
// is neither, under a split parent (or a root). Free blocks carry no links: nothing
// the heap needs lives in free memory, so the heap never touches it (it
// may have gone back to the OS), and a free block costs no resident
// memory. Free lists are the per-order tables; Alloc takes the free block
// of the smallest sufficient order at the lowest address, so live memory
// gathers at the bottom of the heap and the top stays free and
// decommitted.
//
// Memory: the heap reserves its span of address space up front, which
// costs nothing, and commits it in granules ([Granule], 64 KiB by
// default): a granule is committed when a block that overlaps it is
// handed out, and becomes idle when no block in use overlaps it. Free
// keeps up to [Retain] bytes of idle granules for reuse and gives the
// rest back to the OS (mem's Decommit: MADV_DONTNEED, then no access),
// the highest first, so Footprint and RSS drop as blocks are freed.
// Footprint is the committed granules; Resident is mincore over them.
type Heap struct {
	// The tree: what Alloc and Free read and write.
	base     unsafe.Pointer // address of offset 0, page-aligned
	span     offset         // bytes managed: offsets [0, span)
	mode     Mode
	minOrder uint
	maxOrder uint
	free     []bitset // free[k], bit i: the block of order k at offset i<<k is free
	split    []bitset // split[k], bit i: the node of order k at offset i<<k is split in halves
	avail    uint64   // bit k set: free[k] is not empty

	// Counts for Stats, kept by every operation.
	live    int64               // bytes asked for and not freed
	used    int64               // bytes of live blocks
	headers int64               // bytes in front of live payloads (Header mode)
	nlive   [MaxOrder + 1]int64 // live blocks per order

	// Commit state, per granule (see granule.go).
	region    *mem.Region
	gshift    uint     // log2 of the granule size
	liveIn    []int32  // granule g: live blocks that overlap it
	commit    []uint64 // bit g: granule g is committed
	idle      int      // granules committed with no live block in them
	retain    int64    // idle bytes Free keeps for reuse
	trimErr   error    // the last failure to decommit, until a trim succeeds
	commits   int64    // calls that committed granules
	decommits int64    // calls that gave granules back

	closed bool

	// poisoned, in checked builds only, bit s: the MinBlock-sized slot s
	// holds poison, to be verified when it is handed out again.
	poisoned bitset
}

// New returns an empty heap of the given mode configured by opts. It
// reserves the limit's address space, which costs no memory, and commits
// nothing until the first Alloc.
func New(mode Mode, opts ...Option) (*Heap, error) {
	if mode != Plain && mode != Header {
		return nil, fmt.Errorf("%w: mode %d: want Plain or Header", ErrOption, int(mode))
	}
	c := config{limit: DefaultLimit, minBlock: DefaultMinBlock, retain: DefaultRetain}
	for _, o := range opts {
		if o.apply == nil {
			return nil, fmt.Errorf("%w: zero Option (want one from Limit, MinBlock, MaxBlock, Granule or Retain)", ErrOption)
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	g, err := c.resolve()
	if err != nil {
		return nil, err
	}
	r, err := mem.Reserve(int(roundUp(g.span, 1<<g.gshift)))
	if err != nil {
		return nil, fmt.Errorf("buddy: %w", err)
	}
	h := &Heap{
		base:     r.Base(),
		span:     offset(g.span),
		mode:     mode,
		minOrder: g.minOrder,
		maxOrder: g.maxOrder,
		free:     make([]bitset, g.maxOrder+1),
		split:    make([]bitset, g.maxOrder+1),
		region:   r,
		gshift:   g.gshift,
		retain:   g.retain,
	}
	for off := offset(0); off < h.span; off += 1 << h.rootOrder(off) {
		h.setFree(off, h.rootOrder(off))
	}
	return h, nil
}

// Alloc returns size bytes whose first byte's address is a multiple of
// align, a power of two from 1 to MaxAlign. The slice has len == cap ==
// size, so append cannot spill into the next block. The bytes are not
// zeroed.
//
// The block is the smallest that holds the request: in Plain mode 2^k >=
// max(size, align, MinBlock); in Header mode 2^k >= d + max(size, 1),
// where d, the payload's distance from the block start, is HeaderSize or
// align if larger. Alloc(0, align) takes such a block too (Plain: one of
// MinBlock bytes; Header: 32 bytes, the header and one byte, so that the
// empty slice points inside its own block); it returns a non-nil empty
// slice that Free accepts and counts 0 bytes live.
//
// Alloc fails with an error wrapping ErrSize for a negative size, ErrAlign
// for a bad alignment, ErrSize and ErrExhausted both for a request larger
// than the largest block, ErrExhausted when no free block is large enough
// or the OS refuses to commit the memory, and ErrClosed after Close. A
// failed Alloc leaves the heap as it was.
func (h *Heap) Alloc(size, align int) ([]byte, error) {
	if h.closed {
		return nil, ErrClosed
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size is negative (want >= 0)", ErrSize, size, align)
	}
	if align < 1 || align > MaxAlign || align&(align-1) != 0 {
		return nil, fmt.Errorf("%w: Alloc(%d, %d): want a power of two from 1 to %d", ErrAlign, size, align, MaxAlign)
	}
	var d offset
	if h.mode == Header {
		d = offset(max(HeaderSize, align))
	}
	k, ok := h.orderFor(size, align, d)
	if !ok {
		return nil, &tooLarge{"Alloc", size, align, h.maxOrder}
	}
	commits := h.commits
	off, err := h.take(k)
	if err != nil {
		return nil, h.takeError(err, "Alloc", size, align, k)
	}
	b := h.handOut(off, k, d, size)
	if invariants.Enabled && h.commits != commits {
		h.mustCheck() // the slow path: the heap grew
	}
	return b, nil
}

// orderFor returns the order of the block a request of size bytes aligned
// to align needs when its payload starts d bytes into the block, and false
// if no block is that large.
func (h *Heap) orderFor(size, align int, d offset) (uint, bool) {
	if uint(size) > 1<<h.maxOrder {
		return 0, false
	}
	need := d + offset(max(size, 1))
	if d == 0 {
		need = offset(max(size, align))
	}
	k := max(h.minOrder, uint(bits.Len(uint(need-1))))
	return k, k <= h.maxOrder
}

// handOut turns the block of order k at off, just taken, into the
// caller's slice: it writes the header (Header mode) and counts the block
// live.
func (h *Heap) handOut(off offset, k uint, d offset, size int) []byte {
	if invariants.Enabled {
		h.verifyPoison(off, 1<<k)
	}
	if d > 0 {
		h.writeHeader(off+d, k, d)
	}
	h.live += int64(size)
	h.used += 1 << k
	h.headers += int64(d)
	h.nlive[k]++
	// [off+d, off+d+size) lies inside the block, committed memory of the
	// region (for size 0 the address is still inside the block).
	return unsafe.Slice((*byte)(unsafe.Add(h.base, off+d)), size)
}

// Free gives back a block that Alloc or Realloc handed out. It refuses,
// changing nothing, a slice that does not start such a block's payload
// (ErrForeign), one whose block is free already (ErrDoubleFree), and any
// slice after Close (ErrClosed).
//
// The block merges with its buddy while the buddy is free. Granules left
// with no live block stay committed for reuse up to Retain bytes; past
// that, Free gives them back to the OS.
func (h *Heap) Free(b []byte) error {
	off, k, d, err := h.lookup(b, "Free")
	if err != nil {
		return err
	}
	h.release(off, k, d, len(b))
	h.maybeTrim()
	return nil
}

// release takes the live block of order k at off, whose payload starts d
// bytes in and whose caller held n bytes, out of use: it uncounts it,
// merges it with its free buddies and updates the granules. It does not
// trim.
func (h *Heap) release(off offset, k uint, d offset, n int) {
	h.live -= int64(min(n, int(1<<k-d)))
	h.used -= 1 << k
	h.headers -= int64(d)
	h.nlive[k]--
	if d > 0 {
		h.eraseHeader(off + d)
	}
	if invariants.Enabled {
		h.poison(off, 1<<k)
	}
	h.unpin(h.granules(off, 1<<k))
	h.merge(off, k)
}

// Realloc resizes a block that Alloc or Realloc handed out, keeping its
// first min(len(b), size) bytes, and returns the new slice (len == cap ==
// size). It works in place when it can:
//
//   - when the request still fits the block's order or a smaller one, the
//     block shrinks to the smallest order that holds it, and the halves it
//     no longer needs become free blocks;
//   - when the block is the lower half of its parent, and so on up to the
//     order needed, and every buddy on the way is free, the block absorbs
//     them.
//
// Otherwise it allocates a new block, copies and frees the old one. A
// moved block is aligned to 16 bytes, as malloc's realloc promises, not
// to the alignment the block was first allocated with; in Header mode its
// payload starts HeaderSize bytes in. Realloc(b, 0) shrinks b to a minimal
// block; it does not free it.
//
// Realloc refuses b as Free does, and fails as Alloc does; either way b
// stays valid and the heap unchanged.
func (h *Heap) Realloc(b []byte, size int) ([]byte, error) {
	if h.closed {
		return nil, ErrClosed
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: Realloc(%#x, %d): size is negative (want >= 0)", ErrSize, addr(b), size)
	}
	off, k, d, err := h.lookup(b, "Realloc")
	if err != nil {
		return nil, err
	}
	held := min(len(b), int(1<<k-d))
	k2, ok := h.orderFor(size, 1, d)
	switch {
	case ok && k2 <= k:
		h.shrink(off, k, k2)
	case ok && h.canGrow(off, k, k2):
		if err := h.grow(off, k, k2); err != nil {
			return nil, h.takeError(err, "Realloc", size, reallocAlign, k2)
		}
	default:
		return h.move(b, off, k, d, held, size)
	}
	if d > 0 {
		h.writeHeader(off+d, k2, d)
	}
	h.live += int64(size - held)
	h.maybeTrim()
	// The payload keeps its address; [off+d, off+d+size) lies inside the
	// block of order k2, committed.
	return unsafe.Slice((*byte)(unsafe.Add(h.base, off+d)), size), nil
}

// move is Realloc's last resort: a new block, a copy, and the old block
// freed.
func (h *Heap) move(b []byte, off offset, k uint, d offset, held, size int) ([]byte, error) {
	var d2 offset
	if h.mode == Header {
		d2 = HeaderSize
	}
	k2, ok := h.orderFor(size, reallocAlign, d2)
	if !ok {
		return nil, &tooLarge{"Realloc", size, reallocAlign, h.maxOrder}
	}
	off2, err := h.take(k2)
	if err != nil {
		return nil, h.takeError(err, "Realloc", size, reallocAlign, k2)
	}
	nb := h.handOut(off2, k2, d2, size)
	copy(nb, b[:held])
	h.release(off, k, d, held)
	h.maybeTrim()
	return nb, nil
}

// UsableSize returns how many bytes the block of b holds from the start
// of b: the block size, less the header and padding in Header mode. A
// Realloc up to that size works in place. It refuses b as Free does.
func (h *Heap) UsableSize(b []byte) (int, error) {
	_, k, d, err := h.lookup(b, "UsableSize")
	if err != nil {
		return 0, err
	}
	return int(1<<k - d), nil
}

// Close returns the heap's memory to the OS. Every block becomes invalid
// and its memory unmapped: touching it afterwards kills the process with a
// fault that cannot be recovered. Later calls return ErrClosed.
func (h *Heap) Close() error {
	if h.closed {
		return ErrClosed
	}
	h.closed = true
	// Forget the memory before it goes: no field may point into address
	// space the OS can hand to someone else.
	h.base = nil
	h.free, h.split, h.avail = nil, nil, 0
	h.liveIn, h.commit, h.idle = nil, nil, 0
	h.poisoned = bitset{}
	h.live, h.used, h.headers, h.nlive = 0, 0, 0, [MaxOrder + 1]int64{}
	return h.region.Release()
}

// tooLarge reports a request larger than the largest block. It is a bad
// size for this heap and an exhaustion no Free will cure: it matches both
// ErrSize and ErrExhausted.
type tooLarge struct {
	op          string
	size, align int
	maxOrder    uint
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("buddy: bad size: %s(%d, %d) needs more than the largest block, %d bytes", e.op, e.size, e.align, 1<<e.maxOrder)
}

func (e *tooLarge) Is(target error) bool { return target == ErrSize || target == ErrExhausted }

// errNoBlock is take's report that no free block is large enough; callers
// turn it into an error wrapping ErrExhausted with the request.
var errNoBlock = errors.New("no free block")

// takeError describes a failure of take for a request of size bytes
// aligned to align that needed a block of order k.
func (h *Heap) takeError(err error, op string, size, align int, k uint) error {
	if err != errNoBlock {
		return fmt.Errorf("%w: %s(%d, %d): %w", ErrExhausted, op, size, align, err)
	}
	largest := 0
	if h.avail != 0 {
		largest = 1 << (bits.Len64(h.avail) - 1)
	}
	return fmt.Errorf("%w: %s(%d, %d) needs a block of %d bytes; the largest free block has %d",
		ErrExhausted, op, size, align, 1<<k, largest)
}

// addr returns the address of b's first byte, as a number (for messages
// and checks; never converted back).
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func roundUp(n, to uint) uint { return (n + to - 1) / to * to }

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside the heap's region: what a replay checks of every block it is
// handed. It says nothing of whether b is a block. After Close nothing is
// inside.
func (h *Heap) Contains(b []byte) bool { return !h.closed && h.region.Contains(b) }
