package sizeclass

import "unsafe"

// Check exposes the invariant checker to the external tests.
func (h *Heap) Check() error { return h.check() }

// ClassOf returns the size of the class a request of size bytes aligned
// to align goes to, or 0 for a large object.
func ClassOf(size, align int) int {
	if size > maxSmallSize {
		return 0
	}
	return int(classSize[classFor(size, align)])
}

// Reserve returns the bytes of address space each class reserves.
func (h *Heap) Reserve() int64 { return h.reserve }

// At returns n bytes starting delta bytes from the start of b, to build
// addresses for Free to refuse; the memory is never touched.
func At(b []byte, delta, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), delta)), n)
}

// ClassAt returns the class whose reservation holds address a (by the
// span table), or 0.
func (h *Heap) ClassAt(a uintptr) int { return int(h.spans.lookup(a)) }

// Reservations returns the first address of each class's reservation
// that exists, in address order, with the class of each.
func (h *Heap) Reservations() (bases []uintptr, classes []int) {
	for c := 1; c < numClasses; c++ {
		if h.classes[c].base != 0 {
			bases = append(bases, h.classes[c].base)
			classes = append(classes, c)
		}
	}
	for i := 1; i < len(bases); i++ { // insertion sort: few entries
		for j := i; j > 0 && bases[j] < bases[j-1]; j-- {
			bases[j], bases[j-1] = bases[j-1], bases[j]
			classes[j], classes[j-1] = classes[j-1], classes[j]
		}
	}
	return bases, classes
}
