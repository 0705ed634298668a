package buddy

import (
	"math/bits"
	"unsafe"
)

// This file holds the header of Header mode: what the FREENIX paper's
// modified buddy keeps in front of every block, and what makes it
// fragment more.

// header is the HeaderSize bytes just before a payload in Header mode. It
// holds the block's order and the payload's distance from the block's
// start, as a malloc's header holds a chunk's size. The FREENIX paper's
// allocator finds a block's size there; this heap pays the same bytes but
// keeps the side tables authoritative, so that a bad slice never makes it
// read free memory, and uses the header as a second witness: Free, Realloc and
// UsableSize refuse a payload whose header does not name the block the
// tables found, at the distance the slice starts at. The check word keeps
// a payload's bytes, or a stale header, from naming a block by chance;
// Free erases it.
type header struct {
	check uint64 // headerCheck(start, order, shift); zero once the block is freed
	order uint8  // log2 of the block's size
	shift uint8  // log2 of d, the payload's distance from the block's start (4 to 12)
	_     [6]byte
}

// The header must be exactly HeaderSize bytes: both differences are
// constants that would overflow if it were not.
var (
	_ [HeaderSize - unsafe.Sizeof(header{})]struct{}
	_ [unsafe.Sizeof(header{}) - HeaderSize]struct{}
)

// headerCheck mixes where a block starts with its order and the payload's
// distance, so that a header names only the block it was written for.
func headerCheck(start offset, order, shift uint) uint64 {
	return (uint64(start)<<16 | uint64(order)<<8 | uint64(shift) | 1<<63) * 0x9e3779b97f4a7c15
}

// headerAt returns the header in front of the payload at off.
func (h *Heap) headerAt(payload offset) *header {
	// payload >= HeaderSize and 16-aligned, and its header lies inside a
	// block in use (the caller checked, or is handing the block out), in
	// committed memory; the header holds no pointers, so the GC needs
	// nothing.
	return (*header)(unsafe.Add(h.base, payload-HeaderSize))
}

// writeHeader records the block of order k that the payload at off
// belongs to, d bytes from its start.
func (h *Heap) writeHeader(payload offset, k uint, d offset) {
	shift := uint(bits.TrailingZeros(uint(d)))
	*h.headerAt(payload) = header{check: headerCheck(payload-d, k, shift), order: uint8(k), shift: uint8(shift)}
}

// eraseHeader makes the header of a payload being freed name nothing, so
// that a stale slice cannot free a later block through it.
func (h *Heap) eraseHeader(payload offset) { h.headerAt(payload).check = 0 }

// readHeader returns the order and payload distance the header in front
// of the payload at off records, and whether it is a well-formed header of
// this heap. The caller checked that the header lies inside a block in
// use: the heap never reads free memory.
func (h *Heap) readHeader(payload offset) (k uint, d offset, ok bool) {
	hd := *h.headerAt(payload)
	k, shift := uint(hd.order), uint(hd.shift)
	if k < h.minOrder || k > h.maxOrder || shift < 4 || shift > 12 || shift >= k || payload < 1<<shift {
		return 0, 0, false
	}
	d = 1 << shift
	if start := payload - d; start&(1<<k-1) != 0 || hd.check != headerCheck(start, k, shift) {
		return 0, 0, false
	}
	return k, d, true
}
