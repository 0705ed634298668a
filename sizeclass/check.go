package sizeclass

import (
	"fmt"
	"math/bits"
)

// check verifies the heap's invariants and returns the first one broken.
// Tests call it after every step; checked builds (-tags carvecheck) call
// it on the slow paths. It asks each pool for its statistics (the pool's
// own checker is not reachable from here) and reads the heap's
// bookkeeping, never a block's bytes. Per class:
//
//	the pool's InUse + Free + Quarantined == Carved <= Capacity
//	InUse, Quarantined, slabs and Capacity are the heap's counts
//	InUse == live bits set
//	the span table maps the class's reservation, and only it, to the class
//
// and for the heap:
//
//	footprint == sum of the classes' slabs * slab size + large bytes
//	large bytes == sum of the large regions' committed bytes
//	Used <= Footprint <= Limit
//
// Live is not checked against Used: it is what callers' slices said,
// and Free accepts a slice of another length than the one handed out
// (see Heap), which leaves Live too high or too low. Stats clamps it.
func (h *Heap) check() error {
	if h.closed {
		if h.footprint != 0 || len(h.large.regions) != 0 || h.spans.used() != 0 {
			return fmt.Errorf("closed heap holds %d bytes, %d large objects, %d spans", h.footprint, len(h.large.regions), h.spans.used())
		}
		return nil
	}
	var used, footprint int64
	pools := 0
	for c := 1; c < numClasses; c++ {
		cl := &h.classes[c]
		if err := h.checkClass(uint8(c)); err != nil {
			return fmt.Errorf("class %d (%d bytes): %w", c, classSize[c], err)
		}
		if cl.pool != nil {
			pools++
		}
		used += cl.inUse() * int64(cl.size)
		footprint += cl.slabs * cl.slab
	}
	if n := h.spans.used(); n > 2*pools {
		return fmt.Errorf("span table holds %d granules for %d classes (want at most 2 each)", n, pools)
	}

	var large int64
	for a, r := range h.large.regions {
		switch {
		case r == nil || uintptr(r.Base()) != a:
			return fmt.Errorf("large object %#x: region %v", a, r)
		case r.Committed() != r.Size():
			return fmt.Errorf("large object %#x: %d of %d bytes committed", a, r.Committed(), r.Size())
		case h.spans.lookup(a) != 0:
			return fmt.Errorf("large object %#x lies in the reservation of class %d", a, h.spans.lookup(a))
		}
		large += int64(r.Committed())
	}
	if large != h.large.bytes {
		return fmt.Errorf("large objects commit %d bytes, heap counts %d", large, h.large.bytes)
	}
	used += large
	footprint += large
	switch {
	case footprint != h.footprint:
		return fmt.Errorf("classes and large objects commit %d bytes, heap counts %d", footprint, h.footprint)
	case used > footprint || footprint > h.limit:
		return fmt.Errorf("want Used %d <= Footprint %d <= Limit %d", used, footprint, h.limit)
	}
	return nil
}

// checkClass verifies one class against its pool's statistics.
func (h *Heap) checkClass(c uint8) error {
	cl := &h.classes[c]
	if cl.pool == nil {
		if cl.avail != 0 || cl.slabs != 0 || cl.quarantined != 0 || cl.base != 0 || len(cl.live) != 0 {
			return fmt.Errorf("no pool, but avail %d, slabs %d, quarantined %d, base %#x, %d bitmap words",
				cl.avail, cl.slabs, cl.quarantined, cl.base, len(cl.live))
		}
		return nil
	}
	ps := cl.pool.Stats()
	switch {
	case ps.InUse+ps.Free+ps.Quarantined != ps.Carved || ps.Carved > ps.Capacity:
		return fmt.Errorf("pool: InUse %d + Free %d + Quarantined %d != Carved %d (<= Capacity %d)",
			ps.InUse, ps.Free, ps.Quarantined, ps.Carved, ps.Capacity)
	case ps.InUse != cl.inUse() || ps.Quarantined != cl.quarantined:
		return fmt.Errorf("pool has %d chunks in use and %d quarantined, heap counts %d and %d",
			ps.InUse, ps.Quarantined, cl.inUse(), cl.quarantined)
	case int64(ps.Slabs) != cl.slabs || ps.Capacity != cl.slabs*cl.perSlab || ps.Footprint != cl.slabs*cl.slab:
		return fmt.Errorf("pool has %d slabs, %d chunks, %d bytes; heap counts %d slabs of %d chunks, %d bytes each",
			ps.Slabs, ps.Capacity, ps.Footprint, cl.slabs, cl.perSlab, cl.slab)
	case cl.avail < 0:
		return fmt.Errorf("%d chunks available", cl.avail)
	}
	var marked int64
	for _, w := range cl.live {
		marked += int64(bits.OnesCount64(w))
	}
	if marked != cl.inUse() {
		return fmt.Errorf("%d live bits for %d chunks in use", marked, cl.inUse())
	}
	if cl.base == 0 {
		return nil // the pool exists but its first slab failed
	}
	end := cl.base + uintptr(h.reserve)
	for _, probe := range []struct {
		a    uintptr
		want bool
	}{{cl.base, true}, {end - 1, true}, {cl.base - 1, false}, {end, false}} {
		if got := h.spans.lookup(probe.a) == c; got != probe.want {
			return fmt.Errorf("span table maps %#x to class %d (reservation [%#x, %#x))", probe.a, h.spans.lookup(probe.a), cl.base, end)
		}
	}
	return nil
}

// mustCheck panics if the heap's invariants are broken. Checked builds
// call it on the slow paths.
func (h *Heap) mustCheck() {
	if err := h.check(); err != nil {
		panic("sizeclass: " + err.Error())
	}
}
