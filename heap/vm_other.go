//go:build !linux

package heap

import (
	"unsafe"

	"github.com/carvelab/carve/mem"
)

// This file holds the heap's address space off Linux: a mem.Region per
// zone, which package mem backs with Go memory there.

// vm is a zone's reservation.
type vm struct {
	r *mem.Region // nil after release
}

func reserveVM(n int64) (vm, error) {
	r, err := mem.Reserve(int(n))
	if err != nil {
		return vm{}, err
	}
	return vm{r: r}, nil
}

func (v vm) base() unsafe.Pointer      { return v.r.Base() }
func (v vm) commit(lo, hi int64) error { return v.r.Commit(int(lo), int(hi-lo)) }
func (v vm) purge(lo, hi int64) error  { return nil }
func (v vm) contains(b []byte) bool    { return v.r != nil && v.r.Contains(b) }

func (v vm) resident(lo, hi int64) (int64, error) {
	n, err := v.r.Resident(int(lo), int(hi-lo))
	return int64(n), err
}

// residentPages is not measurable off Linux: nil.
func (v vm) residentPages(lo, hi int64) ([]byte, error) { return nil, nil }

func (v *vm) release() error {
	if v.r == nil {
		return nil
	}
	err := v.r.Release()
	v.r = nil
	return err
}

// canPurge reports whether purge gives back the heap's pages: never, off
// Linux. Free pages stay dirty; the heap's figures say so.
func canPurge() bool { return false }

// physicalMemory returns 16 MiB off Linux, where package mem backs every
// reservation with Go memory: the default limit must stay small there.
func physicalMemory() int64 { return 16 << 20 }

// reserveFactor is how many times the Limit each zone reserves: once, as
// reservations are Go memory here.
const reserveFactor = 1
