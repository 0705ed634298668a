package sizeclass

import (
	"errors"
	"fmt"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
)

// This file holds large objects: requests above MaxClassSize, or ones no
// class is aligned enough for. Each is one mem.Region, reserved and
// committed whole, page-rounded; Free releases it, so the memory goes back
// to the OS at once.

// recentFrees is how many freed large objects the heap remembers, to tell
// a double free (ErrDoubleFree) from a foreign slice (ErrForeign).
const recentFrees = 64

// largeTable holds the heap's large objects.
type largeTable struct {
	regions map[uintptr]*mem.Region // by base address
	bytes   int64                   // committed in all regions

	// freed holds the base addresses of the last recentFrees large objects
	// freed (0: none), next the slot to overwrite.
	freed [recentFrees]uintptr
	next  int
}

func (t *largeTable) init() { t.regions = make(map[uintptr]*mem.Region) }

// allocLarge maps a large object of size bytes.
func (h *Heap) allocLarge(size int) ([]byte, error) {
	n := roundPage(size)
	if h.footprint+n > h.limit {
		return nil, fmt.Errorf("%w: %d bytes committed, a large object of %d bytes would pass the limit %d",
			ErrExhausted, h.footprint, n, h.limit)
	}
	r, err := mem.Reserve(int(n))
	if err != nil {
		return nil, fmt.Errorf("sizeclass: large object of %d bytes: %w", size, err)
	}
	if err := r.Commit(0, int(n)); err != nil {
		r.Release()
		return nil, fmt.Errorf("sizeclass: large object of %d bytes: %w", size, err)
	}
	a := uintptr(r.Base())
	h.large.regions[a] = r
	h.large.forget(a)
	h.large.bytes += n
	h.footprint += n
	h.live += int64(size)
	if invariants.Enabled {
		h.mustCheck()
	}
	return r.Bytes()[:size], nil
}

// freeLarge releases the large object b starts, which lies in no class.
func (h *Heap) freeLarge(b []byte) error {
	if h.closed {
		return ErrClosed
	}
	a := addr(b)
	r := h.large.regions[a]
	if r == nil {
		return h.large.notLive(a)
	}
	n := int64(r.Committed())
	if err := r.Release(); err != nil {
		return fmt.Errorf("sizeclass: free large object %#x: %w", a, err)
	}
	delete(h.large.regions, a)
	h.large.remember(a)
	h.large.bytes -= n
	h.footprint -= n
	h.live -= min(int64(len(b)), n)
	if invariants.Enabled {
		h.mustCheck()
	}
	return nil
}

// notLive explains why a, which lies in no class and starts no large
// object, is not a block.
func (t *largeTable) notLive(a uintptr) error {
	switch {
	case a == 0:
		return fmt.Errorf("%w: nil", ErrForeign)
	case t.wasFreed(a):
		return fmt.Errorf("%w: %#x (a large object already freed)", ErrDoubleFree, a)
	}
	return fmt.Errorf("%w: %#x", ErrForeign, a)
}

func (t *largeTable) remember(a uintptr) {
	t.freed[t.next] = a
	t.next = (t.next + 1) % recentFrees
}

// forget drops a from the freed addresses: the OS placed a new large
// object there.
func (t *largeTable) forget(a uintptr) {
	for i, f := range t.freed {
		if f == a {
			t.freed[i] = 0
		}
	}
}

func (t *largeTable) wasFreed(a uintptr) bool {
	for _, f := range t.freed {
		if f == a {
			return true
		}
	}
	return false
}

// releaseAll releases every large object.
func (t *largeTable) releaseAll() error {
	var errs []error
	for _, r := range t.regions {
		errs = append(errs, r.Release())
	}
	clear(t.regions)
	t.bytes = 0
	t.freed = [recentFrees]uintptr{}
	return errors.Join(errs...)
}

// roundPage returns n rounded up to whole pages.
func roundPage(n int) int64 {
	ps := int64(mem.PageSize())
	return (int64(n) + ps - 1) / ps * ps
}
