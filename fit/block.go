package fit

import (
	"math/bits"
	"unsafe"
)

// This file holds the block layout: offsets, links, headers and footers,
// the block-start bitmap, and the few unsafe conversions that read and
// write them in the heap's memory.

// offset is a distance in bytes from the heap's base. A block is known by
// the offset of its payload, a multiple of Granule; its header is the word
// before. Offset 0 is no block: the first payload is at 16.
type offset uintptr

// link is a block's offset in granules, in the 32 bits a free block has
// room for (Limit keeps every offset below 2^35). The zero link is none.
type link uint32

func (o offset) link() link   { return link(o >> granShift) }
func (l link) offset() offset { return offset(l) << granShift }

// header is a block's boundary tag: its size in bytes (a multiple of
// Granule, header included) with two flags in the low bits, which sizes
// never use.
type header uint64

const (
	inUseBit     header = 1 // the block is in use
	prevInUseBit header = 2 // the block before it is in use (or it is the first)
	flagBits            = inUseBit | prevInUseBit
)

func mkHeader(size uintptr, inUse, prevInUse bool) header {
	h := header(size)
	if inUse {
		h |= inUseBit
	}
	if prevInUse {
		h |= prevInUseBit
	}
	return h
}

func (h header) size() uintptr   { return uintptr(h &^ flagBits) }
func (h header) inUse() bool     { return h&inUseBit != 0 }
func (h header) prevInUse() bool { return h&prevInUseBit != 0 }
func (h header) withPrev(b bool) header {
	if b {
		return h | prevInUseBit
	}
	return h &^ prevInUseBit
}

// The layout's sizes, checked at compile time: a header is one word of
// HeaderSize bytes, and a free block's two links fill the 8 bytes after
// it, so that a free block of MinBlock bytes holds its header, its links
// and its footer.
var (
	_ [HeaderSize - unsafe.Sizeof(header(0))]struct{}
	_ [unsafe.Sizeof(header(0)) - HeaderSize]struct{}
	_ [MinBlock - HeaderSize - unsafe.Sizeof([2]link{}) - 8]struct{}
)

// blockSize returns the size of the block that holds a request of n bytes,
// 0 <= n <= the limit: n plus the header, rounded up to the granule, at
// least MinBlock.
func blockSize(n int) uintptr {
	return max(roundUp(uintptr(n)+HeaderSize, Granule), MinBlock)
}

// The accessors below turn offsets into pointers. Every offset they get
// lies in committed memory of the heap (the callers' invariants say so;
// check verifies them), and the words they address are aligned: headers
// and footers sit at 8 mod 16, links at payload starts.

// hdr returns the header of the block at p.
func (h *Heap) hdr(p offset) *header {
	return (*header)(unsafe.Add(h.base, p-HeaderSize))
}

// footer returns the footer of the free block at p of size s: its last
// word, just before the next block's header.
func (h *Heap) footer(p offset, s uintptr) *uint64 {
	return (*uint64)(unsafe.Add(h.base, p+offset(s)-2*HeaderSize))
}

// prevFooter returns the footer of the block before the one at p, valid
// when that block is free.
func (h *Heap) prevFooter(p offset) *uint64 {
	return (*uint64)(unsafe.Add(h.base, p-2*HeaderSize))
}

// links returns the two link words a free block keeps at the start of
// its payload: next and previous in a list (best fit's bins, the linear
// reference of first and next fit), or, in the first, the block's key in
// first and next fit's index.
func (h *Heap) links(p offset) *[2]link {
	return (*[2]link)(unsafe.Add(h.base, p))
}

// offsetOf returns the address b starts at and its distance from the base,
// which the callers check: any address minus the base is an offset, in
// range or not.
func (h *Heap) offsetOf(b []byte) (offset, uintptr) {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return offset(a - uintptr(h.base)), a
}

// bytes returns n bytes from offset p.
func (h *Heap) bytes(p offset, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(h.base, p)), n)
}

// setFree writes the boundary tags of a free block at p of size s, whose
// predecessor is in use.
func (h *Heap) setFree(p offset, s uintptr) {
	*h.hdr(p) = mkHeader(s, false, true)
	*h.footer(p, s) = uint64(s)
}

// setPrev sets or clears the P flag of the block at p.
func (h *Heap) setPrev(p offset, inUse bool) {
	hd := h.hdr(p)
	*hd = hd.withPrev(inUse)
}

// The block-start bitmap: bit p/16 is set when a block, free or in use,
// starts at p. It covers the committed heap.

func (h *Heap) isStart(p offset) bool {
	g := uintptr(p >> granShift)
	return h.starts[g/64]&(1<<(g%64)) != 0
}

func (h *Heap) setStart(p offset)   { setBit(h.starts, p) }
func (h *Heap) clearStart(p offset) { clearBit(h.starts, p) }

func setBit(m []uint64, p offset) {
	g := uintptr(p >> granShift)
	m[g/64] |= 1 << (g % 64)
}

func clearBit(m []uint64, p offset) {
	g := uintptr(p >> granShift)
	m[g/64] &^= 1 << (g % 64)
}

// startBefore returns the offset of the last block that starts at or below
// p, or 0 if none does.
func (h *Heap) startBefore(p offset) offset {
	g := uintptr(p >> granShift)
	w := g / 64
	m := h.starts[w] & (^uint64(0) >> (63 - g%64))
	for m == 0 {
		if w == 0 {
			return 0
		}
		w--
		m = h.starts[w]
	}
	return offset(w*64+uintptr(bits.Len64(m))-1) << granShift
}

// growBitmap extends m to cover [0, end).
func growBitmap(m []uint64, end offset) []uint64 {
	words := int((uintptr(end)>>granShift + 63) / 64)
	if words > len(m) {
		m = append(m, make([]uint64, words-len(m))...)
	}
	return m
}
