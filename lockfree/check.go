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

// The checkers below run on the slow paths of checked builds, while the
// calling goroutine holds the lock of what they read, so that nothing they
// check can change under them:
//
//   - checkGrowth, under the growth mutex (on every carve): the carved
//     count, capacity and committed bytes, which only the holder of mu
//     writes, against each other and the regions. O(1), so it runs every
//     time.
//   - depot.check, under the depot's mutex (before every take and after
//     every put, when its schedule says so): the depot's chunks are
//     carved, each there once, and in checked builds marked held. A chunk in the depot is the
//     depot's: its link changes only when a cache that took it hands it
//     out, and a free of it fails its compare-and-swap from liveMark.
//   - Cache.check, by the cache's goroutine inside its busy mark (on every
//     slow path, when the cache's schedule says so): what check checks of
//     a cache.
//
// What no lock guards is left to check, which needs a quiescent pool: the
// shared free list (other goroutines pop and push while the lock is held,
// so a walk would meet a list that changes under it), the chunks in use
// and in other goroutines' caches (whose links their owners change without
// a lock), and the counts Stats reads (cached, quarantined), which
// goroutines update with atomics outside the locks.

// checkGrowth verifies, with mu held, that
//
//	carved <= capacity <= max chunks, capacity * stride <= committed;
//	over the pool's own reservation: committed = the slabs committed, a
//	whole number of slabs, and the side table commits a link per chunk
//	of capacity;
//	over a caller's region: committed = the region's length.
func (p *Pool) checkGrowth() error {
	if p.closed.Load() {
		return nil
	}
	carved := p.carved.Load()
	if carved > p.capacity || p.capacity > p.maxChunks || p.capacity*uint64(p.stride) > uint64(p.committed) {
		return fmt.Errorf("carved %d, capacity %d, max %d chunks, %d bytes committed: want carved <= capacity <= max, capacity*%d <= committed",
			carved, p.capacity, p.maxChunks, p.committed, p.stride)
	}
	if p.region == nil {
		if p.committed != uintptr(len(p.over)) || uint64(len(p.links)) != p.capacity {
			return fmt.Errorf("over a region of %d bytes: %d bytes committed, %d links for %d chunks", len(p.over), p.committed, len(p.links), p.capacity)
		}
		return nil
	}
	switch {
	case uintptr(p.region.Committed()) != p.committed || p.committed%p.slabSize != 0:
		return fmt.Errorf("%d bytes committed, the region says %d: want equal, a multiple of the slab size %d", p.committed, p.region.Committed(), p.slabSize)
	case uint64(p.linkMem.Committed()) < p.capacity*LinkBytes:
		return fmt.Errorf("the side table commits %d bytes for %d chunks of %d bytes each", p.linkMem.Committed(), p.capacity, LinkBytes)
	}
	return nil
}

// mustCheckGrowth runs checkGrowth and panics if an invariant is broken:
// in checked builds a broken pool must stop the program before it hands
// out a chunk twice.
func (p *Pool) mustCheckGrowth() {
	if err := p.checkGrowth(); err != nil {
		panic("lockfree: invariant broken: " + err.Error())
	}
}

// check verifies, with the depot's mutex held, that every chunk in the
// depot is carved and there once and, in checked builds, marked held.
// It takes O(chunks in the depot + carved chunks / 64) steps and returns
// them.
func (d *depot) check() (steps int, err error) {
	p := d.owner
	if p.closed.Load() {
		return 1, nil
	}
	// Chunks are carved before they reach the depot, and the carved count
	// only grows while the pool is open.
	carved := p.carved.Load()
	seen := make([]uint64, (carved+63)/64)
	for _, i := range d.free {
		if uint64(i) >= carved {
			return len(seen), fmt.Errorf("depot: %d is not a carved chunk (%d carved)", i, carved)
		}
		if seen[i/64]&(1<<(i%64)) != 0 {
			return len(seen), fmt.Errorf("depot: chunk %d is there twice", i)
		}
		seen[i/64] |= 1 << (i % 64)
		if l := index(p.links[i].Load()); checked && l != heldMark && l != newMark {
			return len(seen), fmt.Errorf("depot: chunk %d is %s, want held", i, state(l))
		}
	}
	return len(d.free) + len(seen), nil
}

// mayCheck runs check, with the depot's mutex held, when its schedule
// says so, and panics if an invariant is broken.
func (d *depot) mayCheck() {
	if !d.checks.Due() {
		return
	}
	steps, err := d.check()
	if err != nil {
		panic("lockfree: invariant broken: " + err.Error())
	}
	d.checks.Ran(steps)
}

// mayCheck runs the cache's check on a slow path of a checked build, from
// the cache's goroutine inside its busy mark, when the cache's schedule
// says so, and panics if an invariant is broken.
func (c *Cache) mayCheck() {
	if c.p.closed.Load() || !c.checks.Due() {
		return
	}
	if err := c.check(); err != nil {
		panic("lockfree: invariant broken: " + err.Error())
	}
	c.checks.Ran(int(c.n))
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
