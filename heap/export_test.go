package heap

import "fmt"

// Check exposes the invariant checker to the external tests.
func (h *Heap) Check() error { return h.check() }

// Zones returns the address ranges [lo, hi) of the small zone's and the
// best-fit zone's reservations; zero after Close.
func (h *Heap) Zones() (smallLo, smallHi, midLo, midHi uintptr) {
	if h.closed {
		return
	}
	s, m := uintptr(h.small.base), uintptr(h.mid.base)
	return s, s + uintptr(h.small.reserved), m, m + uintptr(h.mid.reserved)
}

// PageSize is the heap's page, the slab of a class.
const PageSize = pageSize

// ClassSizes returns the slot sizes of the classes, smallest first.
func ClassSizes() []int {
	var s []int
	for c := 1; c < numClasses; c++ {
		s = append(s, int(classSize[c]))
	}
	return s
}

// Debug describes the best-fit zone's state.
func (h *Heap) Debug() string {
	m := &h.mid
	s := ""
	for p := firstBlock; p < m.top; p += offset(m.hdr(p).size()) {
		s += fmt.Sprintf("[%d %d %v] ", p, m.hdr(p).size(), m.hdr(p).inUse())
	}
	return fmt.Sprintf("top %d committed %d free %x clean %x blocks %s", m.top, m.committed, m.free.words, m.clean, s)
}
