package heap

import (
	"errors"
	"fmt"
	"unsafe"
)

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

// TopOffset returns the offset of the best-fit zone's top from its base:
// the last block ends 8 bytes before it.
func (h *Heap) TopOffset() int { return int(h.mid.top) }

// SmallCommitted returns the bytes the small zone has committed.
func (h *Heap) SmallCommitted() int64 { return h.small.committed }

// At returns n bytes at address a, which lies in one of the heap's zones,
// for the tests to hand to Free what it must refuse. The memory is never
// touched.
func (h *Heap) At(a uintptr, n int) []byte {
	for _, z := range []*zonePages{&h.small.zonePages, &h.mid.zonePages} {
		if b := uintptr(z.base); a >= b && a < b+uintptr(z.reserved) {
			return unsafe.Slice((*byte)(unsafe.Add(z.base, a-b)), n)
		}
	}
	panic(fmt.Sprintf("At(%#x): not in the heap's zones", a))
}

// Enter and Leave mark the heap busy and idle again, as a call running in
// it does in checked builds: for the tests of ErrBusy, from a goroutine
// that stands for the one inside the heap.
func (h *Heap) Enter() error { return h.enter() }
func (h *Heap) Leave()       { h.leave() }

// Check runs each shard's invariant checker under its lock.
func (s *Shared) Check() error {
	var errs []error
	s.each(func(h *Heap) {
		if err := h.check(); err != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// MeshAll meshes what it finds in every class, as Trim does first, and
// returns how many meshes it made.
func (h *Heap) MeshAll() int { return h.meshAll() }

// CanMesh reports whether heaps mesh in this build.
func CanMesh() bool { return canMesh() }

// CanPurge reports whether the heap gives pages back to the OS in this
// build: not in Go memory (off Linux, or with -tags carvegomem).
func CanPurge() bool { return canPurge() }
