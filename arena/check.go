package arena

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
)

// check verifies the arena's invariants and returns the first one broken.
// Tests call it after every step; carvecheck builds call it on the slow
// paths. It reads the arena's own bookkeeping, never the memory it hands
// out, so it cannot make free pages resident.
func (a *Arena) check() error {
	if a.n < 0 || a.n > len(a.blocks) {
		return fmt.Errorf("%d blocks in use of %d", a.n, len(a.blocks))
	}
	if (a.n == 0) != (a.base == nil) {
		return fmt.Errorf("%d blocks in use but current block base %p", a.n, a.base)
	}
	if a.n == 0 && (a.off != 0 || a.end != 0 || a.cur != 0) {
		return fmt.Errorf("no current block but cur %d, off %d, end %d", a.cur, a.off, a.end)
	}
	if a.n > 0 {
		if a.cur < 0 || a.cur >= a.n {
			return fmt.Errorf("current block %d outside the %d in use", a.cur, a.n)
		}
		if c := a.blocks[a.cur]; a.base != c.r.Base() || a.end != c.size || c.used != 0 {
			return fmt.Errorf("current block %d: base %p, end %d, used %d; want base %p, end %d, used 0",
				a.cur, a.base, a.end, c.used, c.r.Base(), c.size)
		}
		if a.off < 0 || a.off > a.end {
			return fmt.Errorf("offset %d outside the current block of %d bytes", a.off, a.end)
		}
	}

	ps := mem.PageSize()
	var footprint, retired, tail int64
	for i, b := range a.blocks {
		switch {
		case b.r == nil || b.size <= 0 || b.size%ps != 0 || b.size != b.r.Size():
			return fmt.Errorf("block %d: %d bytes in a region of %d (want a positive multiple of %d)",
				i, b.size, regionSize(b.r), ps)
		case b.r.Committed() != b.size:
			return fmt.Errorf("block %d: %d of %d bytes committed", i, b.r.Committed(), b.size)
		case b.used < 0 || b.used > b.size:
			return fmt.Errorf("block %d: %d bytes used of %d", i, b.used, b.size)
		case i >= a.n && b.used != 0:
			return fmt.Errorf("spare block %d: %d bytes used, want 0", i, b.used)
		case b.dirty < 0 || b.dirty > b.size:
			return fmt.Errorf("block %d: poison mark %d outside %d bytes", i, b.dirty, b.size)
		}
		footprint += int64(b.size)
		if i < a.n && i != a.cur {
			retired += int64(b.used)
			tail += int64(b.size - b.used)
		}
	}
	if footprint != a.footprint || footprint > a.limitBytes() {
		return fmt.Errorf("footprint %d, blocks sum to %d, limit %d", a.footprint, footprint, a.limitBytes())
	}
	if retired != a.retired || tail != a.tail {
		return fmt.Errorf("blocks left behind: used %d, tail %d; counted used %d, tail %d",
			retired, tail, a.retired, a.tail)
	}

	used := a.retired + int64(a.off)
	if a.padding < 0 || a.padding > used || used+a.tail > a.footprint {
		return fmt.Errorf("padding %d, used %d, tail %d, footprint %d: want 0 <= padding <= used <= used+tail <= footprint",
			a.padding, used, a.tail, a.footprint)
	}
	if invariants.Enabled && a.n > 0 && a.dirty != a.blocks[a.cur].dirty {
		return fmt.Errorf("current block's poison mark %d, block %d says %d", a.dirty, a.cur, a.blocks[a.cur].dirty)
	}
	return nil
}

func regionSize(r *mem.Region) int {
	if r == nil {
		return 0
	}
	return r.Size()
}

// mustCheck runs check and panics if an invariant is broken: in carvecheck
// builds a broken arena must stop the program before it hands out
// overlapping memory.
func (a *Arena) mustCheck() {
	if err := a.check(); err != nil {
		panic("arena: invariant broken: " + err.Error())
	}
}

// poison overwrites, in carvecheck builds, every byte handed out since the
// last Reset with invariants.Poison, and raises each block's poison mark.
// A later Alloc verifies the poison before it hands the bytes out again,
// which catches writes through allocations that Reset invalidated.
func (a *Arena) poison() {
	for i := range a.blocks[:a.n] {
		b := &a.blocks[i]
		used := b.used
		if i == a.cur {
			used = a.off
		}
		p := b.r.Bytes()[:used]
		for j := range p {
			p[j] = invariants.Poison
		}
		b.dirty = max(b.dirty, used)
	}
}

// verifyPoison panics, in carvecheck builds, if the bytes [off, off+size)
// of the block at base, as far as they lie below the poison mark dirty, no
// longer hold the poison: something wrote through an allocation that a
// Reset had invalidated.
func verifyPoison(base unsafe.Pointer, off, size, dirty int) {
	if off >= dirty {
		return
	}
	// The range lies inside the block that starts at base.
	p := unsafe.Slice((*byte)(unsafe.Add(base, off)), min(size, dirty-off))
	for i, c := range p {
		if c != invariants.Poison {
			panic(fmt.Sprintf("arena: byte %d of block %p is %#x, want poison %#x: written after Reset",
				off+i, base, c, invariants.Poison))
		}
	}
}
