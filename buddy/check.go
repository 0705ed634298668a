package buddy

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the invariant checker the tests run after every step,
// and what checked builds (-tags carvecheck) add: they fill freed blocks
// with invariants.Poison, remember which MinBlock-sized slots hold poison,
// verify it when a slot is handed out again (a write after free panics),
// and run check on the slow paths: commits, decommits, refused calls.
// Slots of decommitted granules read as zero and are forgotten.

// tally is what check counts while it walks the tree.
type tally struct {
	split, free, live [MaxOrder + 1]int
	used, freeBytes   int64
	headers           int64
	liveIn            []int32
}

// check verifies the heap's invariants and returns the first one broken:
//
//	the roots tile [0, Span); each node is split, free, or a block in use;
//	the blocks, free and in use, tile the heap: used + free bytes = Span;
//	buddies are never both free (they would have merged);
//	every free block is in its order's table and nothing else is;
//	split and free bits only on nodes of the tree, none on MinBlock nodes;
//	in Header mode, every block in use has a valid header;
//	the counts (Used, HeaderBytes, blocks per order, the avail mask) match;
//	liveIn counts the blocks in use per granule, and every granule with a
//	block in use is committed (in mem's bookkeeping too);
//	Idle counts the committed granules with no block in use, <= Retain;
//	in checked builds, poison is recorded only in free blocks of
//	committed granules.
//
// It reads the side tables and the headers of blocks in use, never free
// memory, so it cannot make pages resident. Live is not checked against
// Used: it is what callers' slices said, and Free accepts a slice shorter
// than the one handed out (see Heap), which leaves Live too high. Stats
// clamps it.
func (h *Heap) check() error {
	if h.closed {
		if h.base != nil || h.free != nil || h.liveIn != nil {
			return fmt.Errorf("closed heap still holds its tables")
		}
		return nil
	}
	t := &tally{liveIn: make([]int32, len(h.liveIn))}
	for off := offset(0); off < h.span; {
		k := h.rootOrder(off)
		if !h.isRoot(off, k) || off&(1<<k-1) != 0 {
			return fmt.Errorf("the root of order %d at offset %d is not a root", k, off)
		}
		if err := h.checkNode(off, k, t); err != nil {
			return err
		}
		off += 1 << k
	}
	if t.used+t.freeBytes != int64(h.span) {
		return fmt.Errorf("blocks in use (%d bytes) and free (%d bytes) cover %d bytes, want the span %d",
			t.used, t.freeBytes, t.used+t.freeBytes, h.span)
	}
	if err := h.checkTables(t); err != nil {
		return err
	}
	if t.used != h.used || t.headers != h.headers {
		return fmt.Errorf("blocks in use take %d bytes with %d of headers, counted %d and %d", t.used, t.headers, h.used, h.headers)
	}
	return h.checkGranules(t)
}

// checkNode walks the subtree of the node of order k at off.
func (h *Heap) checkNode(off offset, k uint, t *tally) error {
	i := uint(off >> k)
	free := h.free[k].has(i)
	if h.split[k].has(i) {
		if free || k == h.minOrder {
			return fmt.Errorf("node of order %d at offset %d is split, and free %t or of the least order", k, off, free)
		}
		t.split[k]++
		half := offset(1) << (k - 1)
		if h.free[k-1].has(uint(off>>(k-1))) && h.free[k-1].has(uint((off+half)>>(k-1))) {
			return fmt.Errorf("buddies of order %d at offsets %d and %d are both free", k-1, off, off+half)
		}
		if err := h.checkNode(off, k-1, t); err != nil {
			return err
		}
		return h.checkNode(off+half, k-1, t)
	}
	if free {
		t.free[k]++
		t.freeBytes += 1 << k
		return nil
	}
	t.live[k]++
	t.used += 1 << k
	if h.mode == Header {
		d, err := h.findHeader(off, k)
		if err != nil {
			return err
		}
		t.headers += int64(d)
	}
	g0, g1 := h.granules(off, 1<<k)
	if g1 > uint(len(t.liveIn)) {
		return fmt.Errorf("block in use of order %d at offset %d reaches granule %d, past the tables' %d", k, off, g1, len(t.liveIn))
	}
	for g := g0; g < g1; g++ {
		t.liveIn[g]++
	}
	if !h.region.IsCommitted(int(off), 1<<k) {
		return fmt.Errorf("block in use of order %d at offset %d is not committed", k, off)
	}
	if invariants.Enabled {
		if n := h.poisoned.count(uint(off>>h.minOrder), uint((off+1<<k)>>h.minOrder)); n > 0 {
			return fmt.Errorf("block in use of order %d at offset %d has %d slots marked poisoned", k, off, n)
		}
	}
	return nil
}

// findHeader returns the payload distance of the block in use of order k
// at off, whose header must lie in front of one of the payload positions
// the block can have.
func (h *Heap) findHeader(off offset, k uint) (offset, error) {
	for shift := uint(4); shift <= 12 && shift < k; shift++ {
		d := offset(1) << shift
		if kk, dd, ok := h.readHeader(off + d); ok && kk == k && dd == d {
			return d, nil
		}
	}
	return 0, fmt.Errorf("block in use of order %d at offset %d has no valid header", k, off)
}

// checkTables compares the side tables with what the walk found.
func (h *Heap) checkTables(t *tally) error {
	if len(h.free) != int(h.maxOrder)+1 || len(h.split) != int(h.maxOrder)+1 {
		return fmt.Errorf("%d free and %d split tables, want %d", len(h.free), len(h.split), h.maxOrder+1)
	}
	for k := range h.free {
		limit := uint(h.span >> k)
		if err := h.free[k].check(limit); err != nil {
			return fmt.Errorf("free table of order %d: %w", k, err)
		}
		if err := h.split[k].check(limit); err != nil {
			return fmt.Errorf("split table of order %d: %w", k, err)
		}
		if h.free[k].n != t.free[k] || h.split[k].n != t.split[k] {
			return fmt.Errorf("order %d: the tables hold %d free and %d split nodes, the tree %d and %d",
				k, h.free[k].n, h.split[k].n, t.free[k], t.split[k])
		}
		if int64(t.live[k]) != h.nlive[k] {
			return fmt.Errorf("order %d: %d blocks in use, counted %d", k, t.live[k], h.nlive[k])
		}
		if (h.avail&(1<<k) != 0) != (t.free[k] > 0) {
			return fmt.Errorf("order %d: %d free blocks, avail mask %#x", k, t.free[k], h.avail)
		}
	}
	if h.avail>>len(h.free) != 0 {
		return fmt.Errorf("avail mask %#x has orders past %d", h.avail, h.maxOrder)
	}
	for k := len(h.free); k <= MaxOrder; k++ {
		if h.nlive[k] != 0 {
			return fmt.Errorf("order %d, past the largest, counts %d blocks in use", k, h.nlive[k])
		}
	}
	return nil
}

// checkGranules compares the commit state with the blocks in use and with
// mem's bookkeeping.
func (h *Heap) checkGranules(t *tally) error {
	if uint(len(h.liveIn)) > h.ngranules() || len(h.commit) != (len(h.liveIn)+63)/64 {
		return fmt.Errorf("tables of %d granules and %d words, for %d granules", len(h.liveIn), len(h.commit), h.ngranules())
	}
	idle, ncommit := 0, 0
	for g := range uint(len(h.liveIn)) {
		if h.liveIn[g] != t.liveIn[g] {
			return fmt.Errorf("granule %d: %d blocks in use overlap it, counted %d", g, t.liveIn[g], h.liveIn[g])
		}
		c := h.committed(g)
		if c != h.region.IsCommitted(int(g<<h.gshift), 1<<h.gshift) {
			return fmt.Errorf("granule %d: committed %t, mem says %t", g, c, !c)
		}
		switch {
		case c && h.liveIn[g] == 0:
			idle++
		case !c && h.liveIn[g] > 0:
			return fmt.Errorf("granule %d holds %d blocks in use but is not committed", g, h.liveIn[g])
		}
		if c {
			ncommit++
		} else if invariants.Enabled {
			lo := g << h.gshift >> h.minOrder
			if n := h.poisoned.count(lo, lo+1<<h.gshift>>h.minOrder); n > 0 {
				return fmt.Errorf("granule %d is decommitted but %d of its slots are marked poisoned", g, n)
			}
		}
	}
	for g := uint(len(h.liveIn)); g < uint(len(h.commit))*64; g++ {
		if h.committed(g) {
			return fmt.Errorf("granule %d, past the tables' %d, is marked committed", g, len(h.liveIn))
		}
	}
	if idle != h.idle {
		return fmt.Errorf("%d idle granules, counted %d", idle, h.idle)
	}
	if h.region.Committed() != ncommit<<h.gshift {
		return fmt.Errorf("mem counts %d bytes committed, the heap %d granules of %d", h.region.Committed(), ncommit, 1<<h.gshift)
	}
	if h.trimErr == nil && int64(idle)<<h.gshift > h.retain {
		return fmt.Errorf("%d idle granules of %d bytes, more than Retain %d", idle, 1<<h.gshift, h.retain)
	}
	return nil
}

// mustCheck runs check and panics if an invariant is broken: in checked
// builds a broken heap must stop the program before it hands out
// overlapping memory.
func (h *Heap) mustCheck() {
	if err := h.check(); err != nil {
		panic("buddy: invariant broken: " + err.Error())
	}
}

// bytes returns the n bytes at off, committed memory of the region.
func (h *Heap) bytes(off, n offset) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(h.base, off)), n)
}

// poison fills the n bytes at off, a block being freed, with the poison
// byte and records its slots (checked builds only).
func (h *Heap) poison(off, n offset) {
	b := h.bytes(off, n)
	b[0] = invariants.Poison
	for done := 1; done < len(b); done *= 2 {
		copy(b[done:], b[:done])
	}
	h.poisoned.setRange(uint(off>>h.minOrder), uint((off+n)>>h.minOrder))
}

// poisonSlot is poison to compare slots with, a KiB at a time.
var poisonSlot = bytes.Repeat([]byte{invariants.Poison}, 1<<10)

// verifyPoison checks, in checked builds, that the slots of the n bytes
// at off that were poisoned when freed still hold the poison, and forgets
// them: the bytes are being handed out. A byte that changed was written
// after its block was freed; the heap panics.
func (h *Heap) verifyPoison(off, n offset) {
	lo, hi := uint(off>>h.minOrder), uint((off+n)>>h.minOrder)
	if h.poisoned.count(lo, hi) == 0 {
		return
	}
	slot := offset(1) << h.minOrder
	for s := lo; s < hi; s++ {
		if !h.poisoned.has(s) {
			continue
		}
		b := h.bytes(offset(s)<<h.minOrder, slot)
		for chunk := 0; chunk < len(b); chunk += len(poisonSlot) {
			if part := b[chunk:min(chunk+len(poisonSlot), len(b))]; !bytes.Equal(part, poisonSlot[:len(part)]) {
				i := chunk
				for b[i] == invariants.Poison {
					i++
				}
				panic(fmt.Sprintf("buddy: byte %d of the heap is %#x, want poison %#x: written after its block was freed",
					offset(s)<<h.minOrder+offset(i), b[i], invariants.Poison))
			}
		}
	}
	h.poisoned.clearRange(lo, hi)
}
