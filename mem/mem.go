// Package mem hands out virtual memory from the operating system, outside
// the Go heap: the raw material every carve allocator carves up.
//
// A [Region] is a range of address space reserved with one mapping. Its
// pages move through three states:
//
//	reserved   --Commit-->   committed   --Decommit-->   reserved
//	(no access, no memory)   (read/write; resident once touched)
//
// Committed pages count towards an allocator's Footprint. They become
// resident (count towards RSS) only when first touched. Decommit gives the
// physical pages back at once (MADV_DONTNEED on Linux): RSS drops, the bytes
// read as zero when the pages are committed again, and touching them while
// decommitted is a fault that kills the process. Release unmaps the whole
// range.
//
// The package also reads the process's resident set size (RSS) and its
// peak, the measures the lab compares across allocators.
//
// Platforms: the syscalls live in mem_linux.go (mmap, mprotect, madvise,
// mincore, munmap through golang.org/x/sys/unix). Elsewhere mem_other.go
// backs a Region with a Go byte slice: allocators work the same, Decommit
// zeroes instead of returning pages, and Resident reports committed bytes.
//
// See the carve package documentation for the vocabulary (Footprint,
// Resident) and how the allocators use regions.
package mem

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

var (
	// ErrRange reports an offset and length that do not lie inside the region.
	ErrRange = errors.New("mem: range outside the region")
	// ErrSize reports a reservation of a non-positive or unaddressable size.
	ErrSize = errors.New("mem: bad reservation size")
	// ErrReleased reports use of a region after Release.
	ErrReleased = errors.New("mem: region already released")
	// ErrUnsupported reports a measure this platform cannot provide.
	ErrUnsupported = errors.New("mem: not supported on this platform")
)

// maxReserve bounds one reservation (1 TiB, less on 32-bit platforms):
// far above any carve heap and far below the 47-bit user address space,
// so offsets never overflow.
const maxReserve = min(1<<40, math.MaxInt/2)

// Region is a reserved range of address space. The zero value is not
// usable; get one from [Reserve].
//
// A Region is not safe for concurrent use: the allocator that owns it
// serializes Commit and Decommit. Reading and writing committed memory
// through [Region.Bytes] needs no call into the region.
type Region struct {
	base unsafe.Pointer // first byte; page-aligned; never converted from uintptr
	size int            // reserved bytes, a multiple of the page size
	raw  []byte         // the mapping as the OS returned it (Munmap wants exactly this)

	// committed has one bit per page, set while the page is committed,
	// up to the highest page committed: it grows and shrinks with the
	// memory an allocator uses, not with the address space it reserved.
	committed []uint64
	nCommit   int // pages committed (popcount of committed)
}

// Reserve maps size bytes of address space, rounded up to whole pages, with
// no access and no memory behind them. Nothing counts towards RSS or
// Footprint until [Region.Commit].
func Reserve(size int) (*Region, error) {
	if size <= 0 || size > maxReserve {
		return nil, fmt.Errorf("%w: %d bytes (want 1 to %d)", ErrSize, size, int64(maxReserve))
	}
	size = roundUp(size, PageSize())
	raw, err := sysReserve(size)
	if err != nil {
		return nil, fmt.Errorf("mem: reserve %d bytes: %w", size, err)
	}
	return &Region{
		base: unsafe.Pointer(unsafe.SliceData(raw)),
		size: size,
		raw:  raw,
	}, nil
}

// Metadata returns the bytes of Go memory the region keeps for its
// bookkeeping: its bitmap of committed pages, one bit per page up to the
// highest committed (32 KiB for a GiB; a bitmap that lost most of its
// pages is made smaller). An allocator counts it in its Stats.Metadata.
func (r *Region) Metadata() int64 { return int64(cap(r.committed)) * 8 }

// Size returns the reserved bytes, a multiple of the page size.
func (r *Region) Size() int { return r.size }

// Base returns the address of the first byte, a multiple of the page size
// on every platform. Allocators keep it to turn offsets into pointers with
// unsafe.Add.
func (r *Region) Base() unsafe.Pointer { return r.base }

// Bytes returns the whole reserved range as a slice. Only committed pages
// may be touched; reading or writing a reserved page is a fatal fault.
func (r *Region) Bytes() []byte {
	if r.raw == nil {
		return nil
	}
	return r.raw[:r.size:r.size]
}

// Committed returns the bytes committed and not decommitted since: the
// region's contribution to an allocator's Footprint.
func (r *Region) Committed() int { return r.nCommit * PageSize() }

// Commit makes [off, off+n) readable and writable. Both are rounded out to
// whole pages. Committing committed pages is allowed and changes nothing.
// Pages read as zero the first time and after a Decommit.
func (r *Region) Commit(off, n int) error {
	lo, hi, err := r.pages(off, n)
	if err != nil || lo == hi {
		return err
	}
	if err := sysCommit(r.raw[lo:hi]); err != nil {
		return fmt.Errorf("mem: commit [%d, %d): %w", lo, hi, err)
	}
	r.mark(lo, hi, true)
	return nil
}

// Decommit returns the physical pages of [off, off+n), shrunk inwards to
// whole pages, to the OS: they leave RSS at once and read as zero when
// committed again. The range becomes inaccessible. Decommitting reserved
// pages is allowed and changes nothing.
//
// Shrinking inwards means a partial page at either end stays committed: a
// caller never loses bytes it did not ask to lose.
func (r *Region) Decommit(off, n int) error {
	if r.raw == nil {
		return ErrReleased
	}
	if off < 0 || n < 0 || off > r.size-n {
		return fmt.Errorf("%w: [%d, %d+%d) in a region of %d bytes", ErrRange, off, off, n, r.size)
	}
	ps := PageSize()
	lo, hi := roundUp(off, ps), (off+n)/ps*ps
	if lo >= hi {
		return nil
	}
	if err := sysDecommit(r.raw[lo:hi]); err != nil {
		return fmt.Errorf("mem: decommit [%d, %d): %w", lo, hi, err)
	}
	r.mark(lo, hi, false)
	return nil
}

// Resident returns how many bytes of [off, off+n), rounded out to whole
// pages, are in physical memory (mincore on Linux). Reading never touches
// the memory, so it does not make pages resident.
func (r *Region) Resident(off, n int) (int, error) {
	lo, hi, err := r.pages(off, n)
	if err != nil || lo == hi {
		return 0, err
	}
	return r.resident(lo, hi)
}

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside the region's address space. After Release nothing does.
func (r *Region) Contains(b []byte) bool {
	if r.base == nil {
		return false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := a - uintptr(r.base)
	return a >= uintptr(r.base) && off <= uintptr(r.size) && uintptr(cap(b)) <= uintptr(r.size)-off
}

// Release unmaps the whole region. Every slice into it becomes invalid:
// touching one afterwards is a fatal fault. Releasing twice is an error.
func (r *Region) Release() error {
	if r.raw == nil {
		return ErrReleased
	}
	if err := sysRelease(r.raw); err != nil {
		return fmt.Errorf("mem: release: %w", err)
	}
	r.raw, r.base, r.nCommit = nil, nil, 0
	r.committed = nil
	return nil
}

// pages checks [off, off+n) and rounds it out to page boundaries.
func (r *Region) pages(off, n int) (lo, hi int, err error) {
	if r.raw == nil {
		return 0, 0, ErrReleased
	}
	if off < 0 || n < 0 || off > r.size-n {
		return 0, 0, fmt.Errorf("%w: [%d, %d+%d) in a region of %d bytes", ErrRange, off, off, n, r.size)
	}
	ps := PageSize()
	return off / ps * ps, roundUp(off+n, ps), nil
}

// mark records pages [lo, hi) (byte offsets, page-aligned) as committed or not.
func (r *Region) mark(lo, hi int, on bool) {
	ps := PageSize()
	if on {
		if words := (hi/ps + 63) / 64; words > len(r.committed) {
			r.committed = append(r.committed, make([]uint64, words-len(r.committed))...)
		}
	} else {
		hi = min(hi, len(r.committed)*64*ps) // pages past the bitmap were never committed
	}
	for p := lo / ps; p < hi/ps; p++ {
		w, b := p/64, uint64(1)<<(p%64)
		was := r.committed[w]&b != 0
		switch {
		case on && !was:
			r.committed[w] |= b
			r.nCommit++
		case !on && was:
			r.committed[w] &^= b
			r.nCommit--
		}
	}
	if !on {
		r.shrink()
	}
}

// shrink drops the bitmap's words past the highest committed page, and
// gives their memory back once fewer than a quarter are left.
func (r *Region) shrink() {
	n := len(r.committed)
	for n > 0 && r.committed[n-1] == 0 {
		n--
	}
	switch {
	case n == 0:
		r.committed = nil
	case n < cap(r.committed)/4:
		r.committed = append([]uint64(nil), r.committed[:n]...)
	default:
		r.committed = r.committed[:n]
	}
}

// IsCommitted reports whether every page of [off, off+n) is committed.
func (r *Region) IsCommitted(off, n int) bool {
	lo, hi, err := r.pages(off, n)
	if err != nil {
		return false
	}
	ps := PageSize()
	for p := lo / ps; p < hi/ps; p++ {
		if p/64 >= len(r.committed) || r.committed[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
