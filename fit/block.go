package fit

import (
	"math/bits"
	"unsafe"

	"github.com/carvelab/carve/internal/tags"
)

// This file holds the heap's view of the block layout (offsets, links,
// headers and footers, which package tags defines and the best-fit zone
// of package heap shares), the block-start bitmap, and the accessors that
// read and write them in the heap's memory.

// The layout is package tags', shared with the best-fit zone of package
// heap; these names keep it short here.
type (
	offset = tags.Offset
	link   = tags.Link
	header = tags.Header
)

// The accessors turn offsets into pointers in the heap's memory (see
// package tags).

// hdr returns the header of the block at p.
func (h *Heap) hdr(p offset) *header { return tags.Hdr(h.base, p) }

// links returns the two link words a free block keeps at the start of
// its payload: next and previous in a list (best fit's bins, the linear
// reference of first and next fit), or, in the first, the block's key in
// first and next fit's index.
func (h *Heap) links(p offset) *[2]link { return tags.Links(h.base, p) }

// bytes returns n bytes from offset p.
func (h *Heap) bytes(p offset, n int) []byte { return tags.Bytes(h.base, p, n) }

// offsetOf returns the address b starts at and its distance from the base,
// which the callers check: any address minus the base is an offset, in
// range or not.
func (h *Heap) offsetOf(b []byte) (offset, uintptr) {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return offset(a - uintptr(h.base)), a
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
