package fit

import "unsafe"

// Check exposes the invariant checker to the external tests.
func (h *Heap) Check() error { return h.check() }

// LinearScan is the option that makes first fit and next fit walk their
// free list rather than search their index: the reference placement.
var LinearScan = linearScan

// IndexState returns first fit's or next fit's index: its slots, the next
// key it gives, and the rover's key.
func (h *Heap) IndexState() (slots, next, rover int) {
	o := &h.idx.order
	return int(o.slots()), int(o.next), int(o.rover)
}

// Block is one block of a heap's layout, as the tests see it.
type Block struct {
	Off, Size int // payload offset from the base, block size
	Free      bool
}

// Blocks returns the heap's blocks in address order, the top excluded. It
// trusts the headers: run Check first.
func (h *Heap) Blocks() []Block {
	var bs []Block
	if h.closed {
		return nil
	}
	for p := firstBlock; p < h.top; {
		hd := *h.hdr(p)
		bs = append(bs, Block{int(p), int(hd.Size()), !hd.InUse()})
		p += offset(hd.Size())
	}
	return bs
}

// Bounds returns the addresses [lo, hi) of the heap's reservation; zero
// after Close.
func (h *Heap) Bounds() (lo, hi uintptr) {
	if h.closed {
		return 0, 0
	}
	lo = uintptr(h.base)
	return lo, lo + uintptr(h.reserved)
}

// TopOffset returns the offset of the top: the last block ends 8 bytes
// before it.
func (h *Heap) TopOffset() int { return int(h.top) }

// Committed reports whether every byte of b lies in committed memory.
func (h *Heap) Committed(b []byte) bool {
	p, _ := h.offsetOf(b)
	return !h.closed && p <= h.committed && uintptr(len(b)) <= uintptr(h.committed-p)
}

// At returns n bytes at offset off of the heap, for the tests to hand to
// Free what it must refuse. The memory is never touched.
func (h *Heap) At(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(h.base, off)), n)
}
