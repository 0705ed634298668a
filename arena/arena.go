// Package arena is carve's bump allocator. An [Arena] hands out memory by
// moving an offset forward through large blocks that it maps from the OS,
// outside the Go heap, and takes everything back at once with
// [Arena.Reset]. There is no way to free one allocation.
//
// Use an arena for objects whose lifetimes end together: the values built
// while serving one request, drawing one frame or parsing one file.
// Allocating costs a few instructions, no object has a header, and the
// garbage collector never scans the memory, however many objects it holds.
//
// [Arena.Alloc] hands out aligned []byte; the typed handle [Of] hands out
// zeroed *T and []T for types that hold no Go pointers.
//
// See the carve package documentation (the root doc.go) for the overview.
package arena

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/typecheck"
	"github.com/carvelab/carve/mem"
)

var (
	// ErrBadOption reports an option [New] cannot honour, or a zero Option.
	ErrBadOption = errors.New("arena: bad option")
	// ErrSize reports a negative size, a count whose bytes overflow, or
	// (from NewOf) a type larger than the arena's Limit.
	ErrSize = errors.New("arena: bad size")
	// ErrAlign reports an alignment that is not a power of two from 1 to
	// MaxAlign.
	ErrAlign = errors.New("arena: bad alignment")
	// ErrExhausted reports a request that would take the arena's Footprint
	// past its Limit. The arena stays usable: smaller requests may still fit.
	ErrExhausted = errors.New("arena: limit reached")
	// ErrPointers reports, from [NewOf], a type that holds Go pointers. It
	// is the error carve's other typed handles wrap too.
	ErrPointers = typecheck.ErrPointers
)

// MaxAlign is the largest alignment [Arena.Alloc] accepts (1 GiB).
const MaxAlign = 1 << 30

// minPage is the smallest page size of any platform: every block starts
// on a multiple of it.
const minPage = 4096

// Arena is a bump allocator over a chain of blocks, each a [mem.Region]
// reserved and committed whole. An allocation takes the next bytes of the
// current block, after the padding its alignment needs. A request that
// does not fit moves the arena on to a new block (the bytes left behind
// are TailWaste), except that a request larger than the block size gets a
// block of its own and the current block keeps its free space. Reset makes
// every allocation invalid at once and starts again from the first block.
//
// The contract:
//
//   - Memory is not zeroed by [Arena.Alloc]. Fresh blocks read as zero,
//     but after a Reset they hold whatever the previous allocations wrote
//     (in carvecheck builds, poison). The typed handle [Of] zeroes.
//   - No Go pointer may be stored in arena memory: the garbage collector
//     does not see it and may free what it points to. [Of] refuses types
//     that hold pointers; with Alloc the rule is the caller's to keep.
//   - Memory stays valid until the next Reset or Release. Touching it
//     afterwards is a bug the runtime cannot catch: after Reset the bytes
//     belong to new allocations, and after Release they are unmapped, so
//     touching them kills the process with a fault that cannot be
//     recovered.
//   - An Arena is not safe for concurrent use: callers that share one
//     must serialize every call, Alloc and Stats included.
//   - The zero value is an empty arena with the default block size and
//     limit, ready to use. [New] sets the options. An Arena must not be
//     copied after first use, and one dropped without [Arena.Release]
//     keeps its blocks mapped until the process exits.
//
// Costs: Alloc is a few instructions when the request fits the current
// block; moving to another block costs a scan of the blocks kept by
// Reset, or one mmap and one mprotect for a new block (each page then
// faults on first touch unless [Arena.Prefault] touched it). Reset costs
// O(blocks); Stats costs one mincore over the footprint.
//
// The arena keeps, for the statistics and its checker:
//
//	Live <= Used <= Footprint <= Limit
//	Used      = Live + AlignWaste
//	Footprint = Used + TailWaste + Free
type Arena struct {
	_ noCopy

	// The current block: all the fast path reads and writes.
	base unsafe.Pointer // first byte of the current block; nil when there is none
	off  int            // bytes of the current block taken so far
	end  int            // size of the current block; 0 when there is none

	// padding is AlignWaste: bytes skipped to align allocations since the
	// last Reset. Live is Used - padding, so the fast path, which never
	// pads, counts nothing.
	padding int64

	// blocks holds every block, in the order of first use since the last
	// Reset: blocks[:n] are in use (blocks[cur] is the current one when
	// n > 0), blocks[n:] are spare, kept by Reset or made by Prefault.
	blocks []block
	n      int
	cur    int

	retired   int64 // bytes used in the in-use blocks other than the current one
	tail      int64 // bytes left free in the in-use blocks other than the current one
	footprint int64 // bytes committed in all blocks

	blockSize int   // 0 means DefaultBlockSize
	limit     int64 // 0 means DefaultLimit

	// dirty is, in carvecheck builds, the current block's poison mark:
	// bytes [off, dirty) must still hold the poison Reset wrote.
	dirty int
}

// noCopy makes go vet's copylocks check report copies of an Arena, whose
// copy would hand out the same bytes again.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// block is one region of the chain, committed whole.
type block struct {
	r     *mem.Region
	size  int // bytes committed: the whole region
	used  int // bytes taken when the block was left behind; 0 while spare or current
	dirty int // carvecheck builds: bytes [0, dirty) were poisoned by a Reset
}

// New returns an empty arena configured by opts. It maps no memory until
// the first allocation (or [Arena.Prefault]).
func New(opts ...Option) (*Arena, error) {
	a := &Arena{}
	for _, o := range opts {
		if o.apply == nil {
			return nil, fmt.Errorf("%w: zero Option (want one from BlockSize or Limit)", ErrBadOption)
		}
		if err := o.apply(a); err != nil {
			return nil, err
		}
	}
	if int64(a.blockBytes()) > a.limitBytes() {
		return nil, fmt.Errorf("%w: block size %d exceeds the limit %d (want BlockSize <= Limit)",
			ErrBadOption, a.blockBytes(), a.limitBytes())
	}
	return a, nil
}

// Alloc returns size bytes whose first byte's address is a multiple of
// align, which must be a power of two from 1 to [MaxAlign]. The slice has
// len == cap == size, so append cannot spill into the next allocation.
// The bytes are not zeroed. Alloc(0, align) returns a non-nil empty slice
// whose address is aligned and lies inside one of the arena's blocks; it
// counts 0 bytes live and may share its address with the next allocation,
// as Go's zero-size values may.
//
// Alloc fails with an error wrapping [ErrSize] for a negative size,
// [ErrAlign] for a bad alignment, and [ErrExhausted] when the request
// needs a new block that would take the Footprint past the Limit (or is
// larger than the Limit itself). A failed Alloc leaves the arena as it
// was.
func (a *Arena) Alloc(size, align int) ([]byte, error) {
	if p, ok := a.tryBump(size, align); ok {
		// p is the start of size bytes inside the current block, mapped
		// memory the arena owns and the Go heap does not.
		return unsafe.Slice((*byte)(p), size), nil
	}
	return a.allocSlow(size, align)
}

// tryBump is the fast path of every allocation: if the request is valid,
// not empty and fits the current block, it takes the bytes and returns
// their address. It must stay small enough to inline.
//
// It takes only requests that start at the current offset: an offset
// already aligned, as it stays for a run of requests whose sizes are
// multiples of their alignment (every Go type's are). Anything that needs
// padding goes to the slow path. The offset is the one value each
// allocation hands to the next, so the work on it is kept to a load, an
// add and a store, and nothing else is counted.
func (a *Arena) tryBump(size, align int) (unsafe.Pointer, bool) {
	off := a.off
	if off&(align-1) == 0 && size > 0 && size <= a.end-off && uint(align-1) < minPage && align&(align-1) == 0 {
		a.off = off + size
		if invariants.Enabled {
			verifyPoison(a.base, off, size, a.dirty)
		}
		return unsafe.Add(a.base, off), true
	}
	return nil, false
}

// allocSlow serves what the fast path of Alloc does not: bad arguments,
// empty requests, and requests that do not fit the current block.
func (a *Arena) allocSlow(size, align int) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size is negative (want >= 0)", ErrSize, size, align)
	}
	if align < 1 || align > MaxAlign || align&(align-1) != 0 {
		return nil, fmt.Errorf("%w: Alloc(%d, %d): want a power of two from 1 to %d", ErrAlign, size, align, MaxAlign)
	}
	if int64(size) > a.limitBytes() {
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size exceeds the limit %d", ErrExhausted, size, align, a.limitBytes())
	}

	// 1. An empty request comes here even when it fits the current block.
	if a.n > 0 {
		if pad, ok := fit(a.base, a.off, a.end, size, align); ok {
			return a.bump(pad, size), nil
		}
	}

	// 2. Find a block that holds the request: the first spare that does,
	// or a new one. take moves it to blocks[n], just after the blocks in
	// use, so that blocks stay in the order of first use and the next
	// Reset replays the same addresses.
	pad, err := a.take(size, align)
	if err != nil {
		return nil, err
	}
	b := &a.blocks[a.n]
	a.n++

	// 3. A request larger than the block size gets the block to itself.
	// The block is left behind at once and the current block, if there is
	// one, stays current with its free space.
	if a.n > 1 && need(size, align) > int64(a.blockBytes()) {
		b.used = pad + size
		a.retired += int64(b.used)
		a.tail += int64(b.size - b.used)
		a.padding += int64(pad)
		if invariants.Enabled {
			verifyPoison(b.r.Base(), pad, size, b.dirty)
			a.mustCheck()
		}
		return unsafe.Slice((*byte)(unsafe.Add(b.r.Base(), pad)), size), nil
	}

	// 4. Otherwise leave the current block behind, with the bytes it has
	// left as TailWaste, and continue in the new one.
	if a.n > 1 {
		c := &a.blocks[a.cur]
		c.used = a.off
		a.retired += int64(c.used)
		a.tail += int64(c.size - c.used)
	}
	a.cur = a.n - 1
	a.base, a.off, a.end, a.dirty = b.r.Base(), 0, b.size, b.dirty
	s := a.bump(pad, size)
	if invariants.Enabled {
		a.mustCheck()
	}
	return s, nil
}

// bump hands out size bytes of the current block after pad bytes of
// padding; fit has checked that they are there.
func (a *Arena) bump(pad, size int) []byte {
	off := a.off + pad
	a.off = off + size
	a.padding += int64(pad)
	if invariants.Enabled {
		verifyPoison(a.base, off, size, a.dirty)
	}
	// [off, off+size] lies inside the current block (the end is included
	// only for an empty slice, which fit keeps strictly inside).
	return unsafe.Slice((*byte)(unsafe.Add(a.base, off)), size)
}

// fit returns the padding that aligns base+off to align, and whether a
// request of size bytes then fits before end. An empty request needs one
// byte, so that its address lies inside the block.
func fit(base unsafe.Pointer, off, end, size, align int) (pad int, ok bool) {
	pad = int(-uintptr(unsafe.Add(base, off)) & uintptr(align-1))
	return pad, max(size, 1) <= end-off-pad
}

// take finds a block for a request of size bytes aligned to align, moves
// it to blocks[n] and returns the padding the request needs at its start.
// It prefers the first spare block that holds the request and otherwise
// reserves a new one.
func (a *Arena) take(size, align int) (pad int, err error) {
	i := a.n
	for ; i < len(a.blocks); i++ {
		if _, ok := fit(a.blocks[i].r.Base(), 0, a.blocks[i].size, size, align); ok {
			break
		}
	}
	if i == len(a.blocks) {
		if err := a.grow(size, align); err != nil {
			return 0, err
		}
	}
	a.blocks[a.n], a.blocks[i] = a.blocks[i], a.blocks[a.n]
	b := &a.blocks[a.n]
	pad, _ = fit(b.r.Base(), 0, b.size, size, align)
	return pad, nil
}

// need returns the bytes a new block must have to hold a request of size
// bytes aligned to align. Blocks start on a page boundary, so only
// alignments above the page size can need padding at the start.
func need(size, align int) int64 {
	ps := int64(mem.PageSize())
	return int64(max(size, 1)) + max(int64(align), ps) - ps
}

// grow appends a new spare block that holds a request of size bytes
// aligned to align: BlockSize bytes, or what the request needs if that is
// more, or less when only less fits under the Limit.
func (a *Arena) grow(size, align int) error {
	ps := int64(mem.PageSize())
	least := need(size, align)
	bytes := roundUp(max(least, int64(a.blockBytes())), ps)
	if room := (a.limitBytes() - a.footprint) / ps * ps; bytes > room {
		// A smaller block than usual still lets the arena use its whole
		// Limit.
		if least > room {
			return fmt.Errorf("%w: Alloc(%d, %d) needs a block of %d bytes; footprint %d of limit %d",
				ErrExhausted, size, align, roundUp(least, ps), a.footprint, a.limitBytes())
		}
		bytes = room
	}
	if bytes > math.MaxInt {
		return fmt.Errorf("%w: Alloc(%d, %d) needs a block of %d bytes, more than this platform addresses",
			ErrSize, size, align, bytes)
	}
	b, err := newBlock(int(bytes))
	if err != nil {
		return fmt.Errorf("arena: mapping a block of %d bytes: %w", bytes, err)
	}
	if _, ok := fit(b.r.Base(), 0, b.size, size, align); !ok {
		// mem promises page-aligned regions; a platform that breaks the
		// promise gets an error here rather than an overrun.
		err := fmt.Errorf("%w: Alloc(%d, %d): block at %p is not page-aligned", ErrAlign, size, align, b.r.Base())
		return errors.Join(err, b.r.Release())
	}
	a.blocks = append(a.blocks, b)
	a.footprint += int64(b.size)
	return nil
}

// newBlock reserves and commits a region of size bytes, a multiple of the
// page size.
func newBlock(size int) (block, error) {
	r, err := mem.Reserve(size)
	if err != nil {
		return block{}, err
	}
	if err := r.Commit(0, size); err != nil {
		return block{}, errors.Join(err, r.Release())
	}
	return block{r: r, size: size}, nil
}

// Owns reports whether b lies in memory the arena has handed out since
// its last Reset: in one of its blocks in use, below what was taken of
// the current one. It does not tell an allocation's start from its
// middle (the arena keeps no record of its allocations); it costs a scan
// of the blocks in use.
func (a *Arena) Owns(b []byte) bool {
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))
	for i, bl := range a.blocks[:a.n] {
		lo, used := uintptr(bl.r.Base()), uintptr(bl.used)
		if i == a.cur {
			used = uintptr(a.off)
		}
		if p >= lo && p+n <= lo+used {
			return true
		}
	}
	return false
}

// Reset makes every allocation invalid at once. The arena keeps its
// blocks, committed, and starts again from the first one, so the same
// sequence of requests gets the same addresses again. The bytes are not
// cleared (carvecheck builds poison them). Touching memory from before the
// Reset is a bug: it now belongs to, or will be handed out to, new
// allocations.
//
// Reset costs O(blocks). To give the memory back to the OS, use Release.
func (a *Arena) Reset() {
	if invariants.Enabled {
		a.poison()
	}
	for i := range a.blocks[:a.n] {
		a.blocks[i].used = 0
	}
	a.base, a.off, a.end, a.dirty = nil, 0, 0, 0
	a.n, a.cur = 0, 0
	a.padding, a.retired, a.tail = 0, 0, 0
	if invariants.Enabled {
		a.mustCheck()
	}
}

// Release returns every block to the OS. Every allocation becomes invalid,
// and its memory is unmapped: touching it afterwards kills the process
// with a fault that cannot be recovered. The arena is then empty, with its
// options kept, and may be used again: it maps new blocks as it needs them.
//
// Release reports the errors of unmapping, if any; the arena forgets the
// blocks either way.
func (a *Arena) Release() error {
	var errs []error
	for _, b := range a.blocks {
		if err := b.r.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	*a = Arena{blockSize: a.blockSize, limit: a.limit}
	return errors.Join(errs...)
}

// Prefault makes the next n bytes of allocations land on memory that is
// committed and already touched, so they cause no page faults: it touches
// the free part of the current block and the spare blocks, and adds a
// spare block for whatever is left. Padding and block tails are not
// counted in n; ask for a little more when they matter.
//
// Prefault is for benchmarks and latency-critical phases that must not pay
// the first-touch faults (the bump allocator post's benchmark memsets its
// arena before timing). It fails with [ErrExhausted] if the new block would pass the
// Limit, and with [ErrSize] if n is negative.
func (a *Arena) Prefault(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: Prefault(%d): want n >= 0", ErrSize, n)
	}
	left := int64(n)
	if a.n > 0 {
		touch(&a.blocks[a.cur], a.off, a.end, a.dirty)
		left -= int64(a.end - a.off)
	}
	for i := a.n; i < len(a.blocks) && left > 0; i++ {
		b := &a.blocks[i]
		touch(b, 0, b.size, b.dirty)
		left -= int64(b.size)
	}
	if left <= 0 {
		return nil
	}
	ps := int64(mem.PageSize())
	if room := (a.limitBytes() - a.footprint) / ps * ps; left > room {
		return fmt.Errorf("%w: Prefault(%d) needs a block of %d more bytes; footprint %d of limit %d",
			ErrExhausted, n, roundUp(left, ps), a.footprint, a.limitBytes())
	}
	// A block that holds a request of the remaining bytes, aligned to 1,
	// holds them all.
	if err := a.grow(int(left), 1); err != nil {
		return err
	}
	b := &a.blocks[len(a.blocks)-1]
	touch(b, 0, b.size, 0)
	return nil
}

// touch writes one byte in each page of b's free bytes [lo, hi), so that
// the kernel backs them with memory now. It writes what a later check
// expects there: poison below the poison mark, zero above it, where fresh
// memory must stay zero.
func touch(b *block, lo, hi, dirty int) {
	bytes := b.r.Bytes()
	ps := mem.PageSize()
	for off := lo; off < hi; off = (off + ps) / ps * ps {
		if invariants.Enabled && off < dirty {
			bytes[off] = invariants.Poison
		} else {
			bytes[off] = 0
		}
	}
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
