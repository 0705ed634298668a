// Package fit is carve's general-purpose heap: blocks of any size carved
// from one region, each behind a boundary-tag header as malloc's are, free
// neighbours coalesced on free, and a placement policy chosen at
// construction (first fit, next fit, best fit, address-ordered first fit)
// deciding which free block serves a request. The heap grows at its top by
// committing more of its reservation, and gives a free top back to the OS
// (see Trim and TrimThreshold); a hole below the last block in use stays
// committed, as it does in glibc, which the block-allocator article shows
// giving memory back only from the top of its heap.
//
// All four policies share one block layout, one header, one granule and
// one minimum block, so that the fragmentation the lab measures between
// them comes from placement alone.
//
// See the carve package documentation (the root doc.go) for the overview,
// the glossary and the cost model shared by all carve allocators.
package fit

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/tags"
	"github.com/carvelab/carve/mem"
)

// Errors returned by heaps. Test them with errors.Is; the returned errors
// wrap these with the details.
var (
	// ErrSize reports a negative size.
	ErrSize = errors.New("fit: bad size")
	// ErrAlign reports an alignment that is not a power of two from 1 to
	// MaxAlign.
	ErrAlign = errors.New("fit: bad alignment")
	// ErrExhausted reports a request the heap cannot serve without
	// committing past its Limit, or larger than the Limit itself. The heap
	// stays usable: smaller requests may still fit.
	ErrExhausted = errors.New("fit: limit reached")
	// ErrForeign reports a slice that does not start at a block of this
	// heap: nil, memory of something else, or a pointer into the middle of
	// a block in use.
	ErrForeign = errors.New("fit: not a block of this heap")
	// ErrDoubleFree reports a slice that starts in free memory of the
	// heap: a block freed already (whether or not it has since merged with
	// its neighbours or the top), or an address no block in use covers.
	ErrDoubleFree = errors.New("fit: block is not in use (freed twice?)")
	// ErrClosed reports use of a heap after Close.
	ErrClosed = errors.New("fit: heap closed")
	// ErrOption reports an option New cannot honour, or a zero Option.
	ErrOption = errors.New("fit: bad option")
	// ErrPolicy reports a placement policy that does not exist.
	ErrPolicy = errors.New("fit: unknown policy")
)

// The block layout, the same for every policy.
const (
	// HeaderSize is the boundary tag in front of every block: its size and
	// two flag bits (in use; previous block in use).
	HeaderSize = 8
	// Granule is the unit of block sizes and the alignment of every
	// payload.
	Granule = 16
	// MinBlock is the smallest block: a free block must hold its header,
	// its index links and its footer.
	MinBlock = 32
	// MaxAlign is the largest alignment Alloc accepts (4 KiB).
	MaxAlign = 4096
)

// The layout is package tags': its constants and these must agree (a
// negative constant converted to uint does not compile).
const _ = uint(HeaderSize-tags.HeaderSize) + uint(tags.HeaderSize-HeaderSize) +
	uint(Granule-tags.Granule) + uint(tags.Granule-Granule) +
	uint(MinBlock-tags.MinBlock) + uint(tags.MinBlock-MinBlock)

const (
	granShift  = tags.GranShift  // log2(Granule)
	firstBlock = tags.FirstBlock // the payload offset of the first block

	// DefaultLimit is the Footprint a heap may reach when no Limit option
	// says otherwise (1 GiB).
	DefaultLimit = 1 << 30
	// DefaultTrimThreshold is the free top above which a heap trims itself
	// when no TrimThreshold option says otherwise (128 KiB, glibc's
	// M_TRIM_THRESHOLD).
	DefaultTrimThreshold = 128 << 10
	// DefaultTopPad is what a heap commits beyond a request when it grows,
	// and keeps when it trims itself, when no TopPad option says otherwise
	// (64 KiB).
	DefaultTopPad = 64 << 10

	// maxLimit bounds the Limit (32 GiB): links are 32-bit granule
	// numbers, and sizes in granules must fit 32 bits with room for the
	// padding of an aligned request.
	maxLimit = 1 << 35
)

// Heap is a free-list heap with boundary tags over one reserved region.
//
// # Layout
//
// The heap is a sequence of blocks tiling its region from offset 8, then
// the top: the free space past the last block, partly committed, the rest
// reserved. A block's payload starts on a multiple of Granule (16); the
// 8-byte header just before it holds the block's size (a multiple of 16,
// header included) and two flags, U (this block is in use) and P (the
// block before it is in use):
//
//	        p-8          p                                      p-8+size
//	in use: [ size|P|U ][ payload: size-8 usable bytes ........ ][ next header
//	free:   [ size|P|0 ][ links (8) ][ ...................... ][ size ]
//	                                                             footer
//
// The links are the free list's next and previous blocks, as 32-bit
// granule numbers, for the lists that best fit threads through its small
// free blocks; first and next fit keep the block's position in their list
// in the first link word; address-ordered first fit leaves those bytes
// alone.
//
// A free block repeats its size in its last 8 bytes, the footer, and
// clears the P flag of the block after it; Free reads that flag to find a
// free predecessor and the footer to find its start, as dlmalloc does. A
// block in use has no footer: its payload runs up to the next header, so
// it can use the bytes its footer would take.
//
// The stride: a request of n bytes takes a block of n+8 bytes rounded up
// to 16, at least MinBlock (32). Two Alloc(16, 1) in a row land 32 bytes
// apart, and each has 24 usable bytes: the 8-byte header plus rounding to
// the 16-byte granule, exactly glibc's figures on x86-64. Used counts the
// 32, Live the 16.
//
// # Placement
//
// A request takes a free block chosen by the heap's [Policy], splitting
// off the rest as a free block when that is at least MinBlock; when no
// free block fits, it takes the bottom of the top, committing more of the
// reservation if needed. The top is never in any index: every policy
// prefers any free block to growing the heap (what Wilson et al.'s survey
// calls preserving the wilderness). Alignments above 16 take a block big
// enough to hold an aligned one, and the bytes before the aligned address
// become a free block of their own, as memalign does.
//
// Free marks the block free and merges it with a free block before it, a
// free block after it, or the top: no two free blocks are ever adjacent,
// and the block before the top is in use. A free top larger than the
// TrimThreshold is given back to the OS (decommitted), down to TopPad
// bytes; [Heap.Trim] gives back all of it.
//
// # Contract
//
//   - Alloc returns len == cap == size bytes, not zeroed: fresh pages read
//     as zero; a reused block holds stale bytes, what earlier blocks there
//     held, with the links and boundary tags the heap wrote while the
//     memory was free (its first 8 bytes, the 8 before its end, and the
//     words around each former block boundary inside it). Checked builds
//     fill freed blocks with a poison byte instead and verify it when the
//     bytes are handed out again.
//   - Free and Realloc take the slice exactly as Alloc or Realloc returned
//     it: what identifies the block is where the slice starts, and its
//     length is what Live drops by (clamped to the block's usable size).
//     A slice cut shorter is accepted, in release and checked builds
//     alike: the whole block is freed, and Live, which then dropped by
//     less, overstates what is live by the cut bytes, but never beyond
//     the usable bytes of the blocks in use (Used - HeaderBytes), and is 0
//     again when no block is.
//     A slice that does not start at a block in use is refused, changing
//     nothing: ErrForeign for memory that is not the start of a block of
//     this heap, ErrDoubleFree for an address in free memory, which is
//     what a second Free of a block finds. A double free goes undetected
//     only when the block's memory has been handed out again at the same
//     address: the second Free then frees the new block, as with C's free.
//   - A block must not be touched after Free, after a Realloc that moved
//     it, or after Close: the runtime cannot catch that, and memory the
//     heap gave back to the OS (a trimmed top, a closed heap) faults.
//   - Go pointers must not be stored in blocks: the garbage collector does
//     not see them.
//   - A Heap is not safe for concurrent use. The zero value is not usable:
//     call [New].
//
// # Costs
//
// Per block in use: the 8-byte header and the rounding to 16 (Used -
// Live). Per heap, in Go memory (Stats.Metadata): one bit per granule of
// the committed heap marking block starts (1/128 of the Footprint), which
// lets Free and Realloc validate a slice in O(1) and refuse double frees
// in every build; first and next fit add 12 to 96 bytes per free block
// (their index's tree: 24 to 48 just after it was resized), best fit a 16-byte tree node per free block of 1
// KiB or more, address-ordered first fit a second bitmap and a tree of 8
// bytes per 4 KiB. Alloc: the policy's search (see [Policy]), then O(1)
// to split; Free: O(1) to coalesce, plus the policy's index updates;
// growing and trimming cost one mprotect or madvise. Stats costs a
// mincore.
type Heap struct {
	base      unsafe.Pointer // address of offset 0; nil after Close
	top       offset         // payload offset of the top; the last block ends at top-8
	committed offset         // [0, committed) is committed
	starts    []uint64       // one bit per granule: a block (free or in use) starts there

	policy Policy
	idx    index // the free blocks, as the policy keeps them

	live, used int64  // Stats.Live, Stats.Used
	blocks     int64  // blocks in use
	freeBlocks int64  // blocks in the index
	freeBytes  int64  // their bytes
	reserved   offset // the Limit in whole pages: the region's size
	trimAbove  int64  // automatic trim when the free top exceeds it; < 0: never
	pad        offset // committed beyond a request; kept by automatic trims
	region     *mem.Region
	closed     bool
}

// New returns an empty heap placing blocks by policy. It reserves the
// Limit in address space, which costs no memory, and commits nothing until
// the first Alloc.
func New(policy Policy, opts ...Option) (*Heap, error) {
	if !policy.valid() {
		return nil, fmt.Errorf("%w: Policy(%d) (want one of %v)", ErrPolicy, int(policy), Policies())
	}
	c := config{limit: DefaultLimit, trim: DefaultTrimThreshold, pad: DefaultTopPad}
	for _, o := range opts {
		if o.apply == nil {
			return nil, fmt.Errorf("%w: zero Option (want one from Limit, TrimThreshold or TopPad)", ErrOption)
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	if c.trim >= 0 && c.trim < c.pad {
		return nil, fmt.Errorf("%w: TrimThreshold(%d) below TopPad(%d): the heap would trim what it just grew (want TrimThreshold >= TopPad, or < 0 for never)",
			ErrOption, c.trim, c.pad)
	}
	r, err := mem.Reserve(int(c.limit))
	if err != nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	h := &Heap{
		base:      r.Base(),
		top:       firstBlock,
		starts:    make([]uint64, 1),
		policy:    policy,
		reserved:  offset(r.Size()),
		trimAbove: c.trim,
		pad:       offset(roundUp(uintptr(c.pad), uintptr(mem.PageSize()))),
		region:    r,
	}
	h.idx.linear = c.linear && (policy == FirstFit || policy == NextFit)
	return h, nil
}

// Policy returns the heap's placement policy.
func (h *Heap) Policy() Policy { return h.policy }

// Limit returns the most bytes the heap may commit: the Limit option
// rounded up to whole pages.
func (h *Heap) Limit() int64 { return int64(h.reserved) }

// Close returns the heap's memory to the OS. Every block becomes invalid,
// in use or not; later calls return ErrClosed.
func (h *Heap) Close() error {
	if h.closed {
		return ErrClosed
	}
	r := h.region
	// Forget the memory before it goes: no field may point into address
	// space the OS can hand to someone else.
	*h = Heap{policy: h.policy, top: firstBlock, closed: true, reserved: h.reserved}
	return r.Release()
}

// Option configures a heap made by [New]. The zero Option is invalid.
type Option struct {
	apply func(*config) error
}

type config struct {
	limit, trim, pad int64
	linear           bool
}

// linearScan makes first fit and next fit keep their free list as a
// doubly linked list through the free blocks and search it by walking it,
// O(free blocks) a search, instead of by their index: the reference that
// the tests hold the index's placement to (export_test.go). The other
// policies ignore it.
func linearScan() Option {
	return Option{func(c *config) error {
		c.linear = true
		return nil
	}}
}

// Limit caps the heap's Footprint, the bytes it commits, at n (rounded up
// to whole pages; default 1 GiB). The heap reserves that much address
// space up front, which costs no memory. n must be positive and at most
// 32 GiB.
func Limit(n int64) Option {
	return Option{func(c *config) error {
		if n <= 0 || n > maxLimit {
			return fmt.Errorf("%w: Limit(%d): want 1 to %d bytes", ErrOption, n, int64(maxLimit))
		}
		c.limit = n
		return nil
	}}
}

// TrimThreshold makes the heap decommit its free top, down to TopPad
// bytes, whenever a Free or Realloc leaves more than n bytes free there
// (default 128 KiB). A negative n turns automatic trimming off; Trim still
// works. n must be at least the TopPad, so that the heap does not give
// back what it has just grown.
func TrimThreshold(n int64) Option {
	return Option{func(c *config) error {
		if n > maxLimit {
			return fmt.Errorf("%w: TrimThreshold(%d): want at most %d bytes", ErrOption, n, int64(maxLimit))
		}
		c.trim = n
		return nil
	}}
}

// TopPad sets how many bytes the heap commits beyond what a request needs
// when it grows, and keeps committed when it trims itself (default 64
// KiB, rounded up to whole pages). A larger pad means fewer system calls,
// a smaller one a Footprint that follows the heap's top more closely.
func TopPad(n int64) Option {
	return Option{func(c *config) error {
		if n < 0 || n > maxLimit {
			return fmt.Errorf("%w: TopPad(%d): want 0 to %d bytes", ErrOption, n, int64(maxLimit))
		}
		c.pad = n
		return nil
	}}
}

func roundUp(n, to uintptr) uintptr { return (n + to - 1) &^ (to - 1) }
