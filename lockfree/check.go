package lockfree

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds what checked builds (-tags carvecheck) add to the pool,
// and the invariant checkers the tests run after every step.
//
// A checked pool keeps each chunk's state in its link, where release
// builds keep only the next free chunk: liveMark while handed out,
// heldMark while in a cache or the depot (newMark if never handed out
// since it was carved), quarMark once quarantined, and a next index or
// nilIndex while on the shared free list. Free moves a
// chunk from live with a compare-and-swap, so a double free, even one
// racing another free of the same chunk, fails. Freed chunks are filled
// with invariants.Poison and checked when handed out again; a chunk found
// written after free is quarantined: kept out of use, reported by Alloc,
// counted in Stats.Quarantined.

// checked is true in checked builds.
const checked = invariants.Enabled

// bytes returns the stride bytes of chunk i.
func (p *Pool) bytes(i index) []byte {
	return unsafe.Slice((*byte)(p.chunk(i)), p.stride)
}

// poison fills a free chunk.
func poison(c []byte) {
	for k := range c {
		c[k] = invariants.Poison
	}
}

// handOut marks chunk i live and checks its poison (checked builds).
// strict says the chunk comes from a cache and must be marked held;
// chunks popped from the shared list hold a link instead.
func (p *Pool) handOut(i index, strict bool) error {
	old := index(p.links[i].Swap(uint32(liveMark)))
	if old == liveMark || old == quarMark || strict && old != heldMark && old != newMark {
		p.links[i].Store(uint32(old))
		return fmt.Errorf("%w: chunk %d was about to be handed out in state %s", ErrCorrupt, i, state(old))
	}
	if old == newMark {
		return nil // fresh memory, never freed: nothing to check
	}
	for k, b := range p.bytes(i) {
		if b != invariants.Poison {
			p.links[i].Store(uint32(quarMark))
			p.quarantined.Add(1)
			return fmt.Errorf("%w: chunk %d, byte %d is %#x, want poison %#x", ErrCorrupt, i, k, b, invariants.Poison)
		}
	}
	return nil
}

// retire marks the live chunk i, at ptr, as to (heldMark for a cache or
// the depot) and poisons it; a chunk that is not live was freed already
// (checked builds).
func (p *Pool) retire(i index, ptr unsafe.Pointer, to index) error {
	if !p.links[i].CompareAndSwap(uint32(liveMark), uint32(to)) {
		return fmt.Errorf("%w: chunk %d at %#x", ErrDoubleFree, i, uintptr(ptr))
	}
	poison(p.bytes(i))
	return nil
}

// freeChecked is Free in checked builds.
func (p *Pool) freeChecked(i index, ptr unsafe.Pointer) error {
	if err := p.retire(i, ptr, heldMark); err != nil {
		return err
	}
	p.push(i)
	return nil
}

// state names a link's value.
func state(l index) string {
	switch l {
	case liveMark:
		return "live"
	case heldMark:
		return "held"
	case newMark:
		return "held, new"
	case quarMark:
		return "quarantined"
	case nilIndex:
		return "last free"
	}
	return fmt.Sprintf("free, before %d", l)
}

// check verifies the pool's invariants and returns the first one broken.
// It needs a quiescent pool: no other goroutine in the pool or its caches.
//
//	every index on the free list and in the depot is a carved chunk, and
//	appears once across both (no cycle, no chunk twice);
//	free list + depot + Quarantined <= Carved <= Capacity;
//	in checked builds, every carved chunk is in exactly one state:
//	  on the free list (its link an index or nilIndex),
//	  held (in the depot or a cache, new or not), live, or quarantined, and
//	  free list + held + live + quarantined == Carved, held >= depot.
//
// It reads the side table and the depot, never a chunk.
func (p *Pool) check() error {
	if p.closed.Load() {
		return nil
	}
	carved := p.carved.Load()
	p.mu.Lock()
	capacity, committed := p.capacity, p.committed
	p.mu.Unlock()
	if carved > capacity || capacity > p.maxChunks || capacity*uint64(p.stride) > uint64(committed) {
		return fmt.Errorf("carved %d, capacity %d, max %d chunks, %d bytes committed: want carved <= capacity <= max, capacity*%d <= committed",
			carved, capacity, p.maxChunks, committed, p.stride)
	}
	seen := make([]bool, carved)
	var free int64
	for i := headWord(p.head.Load()).index(); i != nilIndex; i = index(p.links[i].Load()) {
		if uint64(i) >= carved {
			return fmt.Errorf("free list: %d after %d free chunks is not a carved chunk (%d carved)", i, free, carved)
		}
		if seen[i] {
			return fmt.Errorf("free list: chunk %d twice (a cycle: a double free?)", i)
		}
		seen[i] = true
		free++
	}
	p.depot.mu.Lock()
	depot := append([]index(nil), p.depot.free...)
	p.depot.mu.Unlock()
	for _, i := range depot {
		if uint64(i) >= carved {
			return fmt.Errorf("depot: %d is not a carved chunk (%d carved)", i, carved)
		}
		if seen[i] {
			return fmt.Errorf("depot: chunk %d is on the free list or in the depot already", i)
		}
		seen[i] = true
	}
	cached, quar := p.cached.Load(), p.quarantined.Load()
	if cached < 0 || quar < 0 || free+int64(len(depot))+quar > int64(carved) {
		return fmt.Errorf("free list %d + depot %d + quarantined %d > carved %d, or cached %d < 0", free, len(depot), quar, carved, cached)
	}
	if !checked {
		return nil
	}
	var live, held, quarantined int64
	for i := range carved {
		switch l := index(p.links[i].Load()); l {
		case liveMark:
			live++
		case heldMark, newMark:
			held++
		case quarMark:
			quarantined++
		default:
			if !seen[i] || uint64(l) >= carved && l != nilIndex {
				return fmt.Errorf("chunk %d: link %d, but it is not on the free list", i, l)
			}
		}
	}
	for _, i := range depot {
		if l := index(p.links[i].Load()); l != heldMark && l != newMark {
			return fmt.Errorf("depot: chunk %d is %s, want held", i, state(l))
		}
	}
	if quarantined != quar || free+held+live+quarantined != int64(carved) || held < int64(len(depot)) {
		return fmt.Errorf("free list %d + held %d + live %d + quarantined %d (counted %d) != carved %d, or held < depot %d",
			free, held, live, quarantined, quar, carved, len(depot))
	}
	return nil
}

// check verifies the cache's invariants: it holds at most its capacity,
// carved chunks only, each once, and (checked builds) each marked held.
// The cache's goroutine must not be in it.
func (c *Cache) check() error {
	if c.n > uint(len(c.free)) {
		return fmt.Errorf("cache holds %d chunks, more than its %d", c.n, len(c.free))
	}
	carved := c.p.carved.Load()
	seen := map[index]bool{}
	for _, i := range c.free[:c.n] {
		if uint64(i) >= carved || seen[i] {
			return fmt.Errorf("cache: chunk %d is not carved (%d) or held twice", i, carved)
		}
		seen[i] = true
		if l := index(c.p.links[i].Load()); checked && l != heldMark && l != newMark {
			return fmt.Errorf("cache: chunk %d is %s, want held", i, state(l))
		}
	}
	return nil
}
