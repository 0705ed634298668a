//go:build !linux || carvegomem

package heap

import (
	"errors"
	"fmt"
	"unsafe"
)

// This file holds the heap's address space in Go memory: off Linux, and on
// Linux in builds tagged carvegomem. Such a build exists for the race
// detector, which watches Go memory and not mmap'd memory: with the zones
// in a Go slice it sees the bytes of blocks and the best-fit zone's
// boundary tags, so that two goroutines handed the same block, or a
// shard's tags written outside its lock, are reported (see Shared). A
// reservation is memory here: the default Limit is 16 MiB, and every
// committed page counts as resident.
//
// A reservation of Go memory is taken whole when the heap is made, and a
// runtime that cannot get it from the OS (Linux refuses a mapping larger
// than its memory and swap, Windows commits what it maps) stops the
// process with a fatal error no caller can recover from. So a zone
// reserves at most maxGoReserve here, and New returns an error for a
// larger Limit.
const maxGoReserve = 1 << 30

// vm is a zone's reservation.
type vm struct {
	raw []byte // page-aligned; nil after release
}

func reserveVM(n int64) (vm, error) {
	if n > maxGoReserve {
		return vm{}, fmt.Errorf("%w: a Limit of %d bytes: where the heap's zones are Go memory, taken whole at New, at most %d", ErrOption, n, int64(maxGoReserve))
	}
	b := make([]byte, n+pageSize)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (pageSize - 1))
	return vm{raw: b[off : off+int(n) : off+int(n)]}, nil
}

func (v vm) base() unsafe.Pointer      { return unsafe.Pointer(unsafe.SliceData(v.raw)) }
func (v vm) commit(lo, hi int64) error { return nil }

// purge gives nothing back (canPurge is false): the heap keeps every free
// page and its figures say so.
func (v vm) purge(lo, hi int64) error { return nil }

func (v vm) resident(lo, hi int64) (int64, error) { return hi - lo, nil }

// residentPages is not measurable in Go memory: nil.
func (v vm) residentPages(lo, hi int64) ([]byte, error) { return nil, nil }

func (v vm) contains(b []byte) bool {
	if v.raw == nil {
		return false
	}
	a, lo := addr(b), uintptr(v.base())
	return a >= lo && a-lo <= uintptr(len(v.raw)) && uintptr(cap(b)) <= uintptr(len(v.raw))-(a-lo)
}

// bounds returns the reservation's first address and the one past its end.
func (v vm) bounds() (lo, hi uintptr) {
	lo = uintptr(v.base())
	return lo, lo + uintptr(len(v.raw))
}

func (v *vm) release() error {
	v.raw = nil
	return nil
}

// canPurge reports whether purge gives back the heap's pages: never in Go
// memory.
func canPurge() bool { return false }

// physicalMemory returns 16 MiB, the default Limit where reservations are
// Go memory.
func physicalMemory() int64 { return 16 << 20 }

// reserveFactor is how many times the Limit each zone reserves: once, as
// reservations are Go memory here.
const reserveFactor = 1

// Go memory cannot be remapped: the heap does not mesh here (canMesh),
// and these are never called.

func canMesh() bool                       { return false }
func reserveMeshVM(n int64) (vm, error)   { return reserveVM(n) }
func (v vm) remap(lo, from int64) error   { return errNoMesh }
func (v vm) punch(lo, hi int64) error     { return errNoMesh }
func (v vm) fileResident() (int64, error) { return 0, errNoMesh }

var errNoMesh = errors.New("heap: meshing needs Linux, and builds not tagged carvegomem")

func (v vm) residentOnce(lo, hi int64) (int64, error) { return v.resident(lo, hi) }
