package buddy

import (
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/heaptest"
)

// Check exposes the invariant checker to the external tests.
func (h *Heap) Check() error { return h.check() }

// Layout returns the heap's blocks in address order, each as its size in
// bytes followed by L (in use) or F (free): "16L 16F 32F 64F" is a heap of
// 128 bytes split down to one block of 16 in use. A closed heap's layout
// is empty.
func (h *Heap) Layout() string {
	if h.closed {
		return ""
	}
	var b strings.Builder
	var walk func(off offset, k uint)
	walk = func(off offset, k uint) {
		if k > h.minOrder && h.split[k].has(uint(off>>k)) {
			walk(off, k-1)
			walk(off+1<<(k-1), k-1)
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(1 << k))
		if h.free[k].has(uint(off >> k)) {
			b.WriteByte('F')
		} else {
			b.WriteByte('L')
		}
	}
	for off := offset(0); off < h.span; off += 1 << h.rootOrder(off) {
		walk(off, h.rootOrder(off))
	}
	return b.String()
}

// Bounds returns the addresses [lo, hi) the heap's blocks may occupy, or
// zeros after Close.
func (h *Heap) Bounds() (lo, hi uintptr) {
	if h.closed {
		return 0, 0
	}
	return uintptr(h.base), uintptr(h.base) + uintptr(h.span)
}

// Committed reports whether every byte of b (at least its first, if it is
// empty) lies in memory the heap's region has committed.
func (h *Heap) Committed(b []byte) bool {
	if h.closed {
		return false
	}
	off := heaptest.Addr(b) - uintptr(h.base)
	return off < uintptr(h.span) && h.region.IsCommitted(int(off), max(len(b), 1))
}
