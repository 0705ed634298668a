package fit

import (
	"fmt"
	"math/bits"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/tags"
	"github.com/carvelab/carve/mem"
)

// This file holds the invariant checker, which the tests run after every
// step and checked builds (-tags carvecheck) run whenever the heap grows
// or trims, and what checked builds add: freed blocks are filled with
// invariants.Poison (all but their header, links and footer), and the
// bytes of a free block are verified to still hold the poison when they
// are handed out again, which catches writes after free.

// check verifies the heap's invariants and returns the first one broken:
//
//	the blocks tile [8, top-8): each at least MinBlock, a multiple of
//	Granule, marked in the block-start bitmap, which marks nothing else;
//	each block's P flag tells whether the block before is in use;
//	a free block's footer repeats its size;
//	no two free blocks are adjacent, and the block before the top is in use;
//	sum of blocks in use = Used, their count = Blocks;
//	Live <= Used - HeaderSize * Blocks;
//	the index holds every free block exactly once and nothing else, in its
//	policy's order (see checkIndex; first fit's and next fit's order is
//	their history, which only the tests' linear reference can confirm);
//	committed = the region's committed bytes, a whole number of pages,
//	holding every block: top-8 <= committed, unless the heap is empty.
//
// It reads headers, footers and links, never the rest of free memory, so
// it cannot make untouched pages resident.
func (h *Heap) check() error {
	if h.closed {
		if h.base != nil || h.committed != 0 || h.blocks != 0 || h.top != firstBlock {
			return fmt.Errorf("closed heap keeps base %p, committed %d, %d blocks, top %d", h.base, h.committed, h.blocks, h.top)
		}
		return nil
	}
	ps := offset(mem.PageSize())
	switch {
	case h.committed%ps != 0 || h.committed > h.reserved:
		return fmt.Errorf("committed %d: want a multiple of the page size %d, at most the reservation %d", h.committed, ps, h.reserved)
	case int(h.committed) != h.region.Committed():
		return fmt.Errorf("committed %d, the region says %d", h.committed, h.region.Committed())
	case h.top < firstBlock || h.top%Granule != 0 || h.top > firstBlock && h.top-HeaderSize > h.committed:
		return fmt.Errorf("top at %d: want a multiple of %d from %d, its start (top-8) at most committed %d", h.top, Granule, firstBlock, h.committed)
	case offset(len(h.starts))*64*Granule < h.committed:
		return fmt.Errorf("block-start bitmap covers %d bytes, committed %d", len(h.starts)*64*Granule, h.committed)
	}

	tl, err := tags.Walk(h.base, h.top, func(p offset, _ header) error {
		if !h.isStart(p) {
			return fmt.Errorf("block at %d: not marked in the block-start bitmap", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	used, blocks, freeBytes, frees := tl.Used, tl.Blocks, tl.FreeBytes, tl.Frees
	marked := 0
	for _, w := range h.starts {
		marked += bits.OnesCount64(w)
	}
	if n := int(blocks) + len(frees); marked != n {
		return fmt.Errorf("block-start bitmap marks %d offsets, the heap has %d blocks", marked, n)
	}
	switch {
	case used != h.used || blocks != h.blocks:
		return fmt.Errorf("blocks in use: %d of %d bytes, the heap counts %d of %d", blocks, used, h.blocks, h.used)
	case int64(len(frees)) != h.freeBlocks || freeBytes != h.freeBytes:
		return fmt.Errorf("free blocks: %d of %d bytes, the heap counts %d of %d", len(frees), freeBytes, h.freeBlocks, h.freeBytes)
	case h.live < 0 || h.live > used-HeaderSize*blocks:
		return fmt.Errorf("live %d: want 0 to the usable bytes of the blocks in use, %d", h.live, used-HeaderSize*blocks)
	}
	return h.checkIndex(frees)
}

// checkIndex verifies that the policy's index holds exactly the free
// blocks frees (in address order), once each, and is well formed; and
// that the other policies' fields are empty.
func (h *Heap) checkIndex(frees []offset) error {
	x := &h.idx
	seen := tags.NewSeen(frees)
	visit := seen.Visit
	list := x.head != 0 || x.rover != 0
	ordered := len(x.order.blocks) != 0 || len(x.order.max) != 0 || x.order.next != 0 || x.order.rover != 0
	lists := list || ordered || x.linear
	bests := x.bins.Map != 0 || x.tree.root != 0 || x.tree.n != 0
	aos := x.leaves != 0 || len(x.seg) != 0 || len(x.freeMap) != 0
	switch h.policy {
	case FirstFit, NextFit:
		if bests || aos || h.policy == FirstFit && (x.rover != 0 || x.order.rover != 0) {
			return fmt.Errorf("%v: other policies' index fields are set", h.policy)
		}
		if !x.linear {
			if list {
				return fmt.Errorf("%v: the linear list's fields are set in an indexed heap", h.policy)
			}
			if err := h.checkOrder(visit); err != nil {
				return err
			}
			break
		}
		if ordered {
			return fmt.Errorf("%v: the index's fields are set in a heap with a linear list", h.policy)
		}
		if err := tags.CheckList(h.base, x.head, visit, "free list", func(uintptr) bool { return true }); err != nil {
			return err
		}
		if x.rover != 0 {
			if done, ok := seen[x.rover.Offset()]; !ok || !done {
				return fmt.Errorf("next fit: rover %d is not on the free list", x.rover.Offset())
			}
		}
	case BestFit:
		if lists || aos {
			return fmt.Errorf("%v: other policies' index fields are set", h.policy)
		}
		if err := x.bins.Check(h.base, visit); err != nil {
			return fmt.Errorf("best fit: %w", err)
		}
		if err := h.checkTreap(visit, len(frees)); err != nil {
			return err
		}
	case AddressOrderedFirstFit:
		if lists || bests {
			return fmt.Errorf("%v: other policies' index fields are set", h.policy)
		}
		if err := h.checkAO(frees); err != nil {
			return err
		}
		for _, p := range frees {
			seen[p] = true
		}
	}
	if p, ok := seen.Missing(); ok {
		return fmt.Errorf("%v: free block at %d is missing from the index", h.policy, p)
	}
	return nil
}

// checkOrder verifies first fit's and next fit's index: a tree of a
// power of two slots, at least minSlots; keys given from 1 to next-1, the
// rover among them or 0; each key in use a free block that holds the key
// in its first link word, its leaf the block's size in granules; every
// other leaf 0; each inner node the larger of its children.
func (h *Heap) checkOrder(visit func(link, string) error) error {
	o := &h.idx.order
	n := o.slots()
	switch {
	case n == 0:
		if len(o.max) != 0 || o.next != 0 || o.rover != 0 {
			return fmt.Errorf("%v index: no slots, but %d nodes, next key %d, rover %d", h.policy, len(o.max), o.next, o.rover)
		}
		return nil
	case n&(n-1) != 0 || n < minSlots || len(o.max) != 2*int(n):
		return fmt.Errorf("%v index: %d slots, %d nodes (want a power of two from %d, and twice as many nodes)", h.policy, n, len(o.max), minSlots)
	case o.next < 1 || o.next > n || o.rover >= o.next:
		return fmt.Errorf("%v index: next key %d, rover %d, %d slots (want 1 <= next <= slots, rover < next)", h.policy, o.next, o.rover, n)
	}
	for k := range n {
		l, leaf := o.blocks[k], o.max[n+k]
		if l == 0 {
			if leaf != 0 {
				return fmt.Errorf("%v index: key %d has no block, its leaf holds %d granules", h.policy, k, leaf)
			}
			continue
		}
		if k == 0 || k >= o.next {
			return fmt.Errorf("%v index: key %d, never given (next key %d), has the block at %d", h.policy, k, o.next, l.Offset())
		}
		if err := visit(l, fmt.Sprintf("%v index", h.policy)); err != nil {
			return err
		}
		p := l.Offset()
		if s := h.hdr(p).Size(); h.key(p) != k || leaf != uint32(s>>granShift) {
			return fmt.Errorf("%v index: key %d, leaf %d granules; its block at %d holds key %d, has %d bytes", h.policy, k, leaf, p, h.key(p), s)
		}
	}
	for i := n - 1; i >= 1; i-- {
		if m := max(o.max[2*i], o.max[2*i+1]); o.max[i] != m {
			return fmt.Errorf("%v index: node %d holds %d, its children's maximum is %d", h.policy, i, o.max[i], m)
		}
	}
	return nil
}

// checkTreap verifies best fit's tree: keys in order, each node's
// priority below its parent's, each key a free block of at least smallMax
// bytes of the size the key says, the count right, and every node either
// in the tree or spare.
func (h *Heap) checkTreap(visit func(link, string) error, frees int) error {
	t := &h.idx.tree
	var (
		walk  func(x uint32, lo, hi uint64, pmax uint32) error
		count int
	)
	walk = func(x uint32, lo, hi uint64, pmax uint32) error {
		if x == 0 {
			return nil
		}
		if count++; count > frees || int(x) >= len(t.nodes) {
			return fmt.Errorf("best fit tree: node %d: more nodes than free blocks, or out of the node slice (a cycle?)", x)
		}
		nd := t.nodes[x]
		l := link(nd.key)
		if err := visit(l, "best fit tree"); err != nil {
			return err
		}
		s := h.hdr(l.Offset()).Size()
		switch {
		case s < smallMax || tags.TreapKey(s, l) != nd.key:
			return fmt.Errorf("best fit tree: key %#x, but the block at %d has %d bytes", nd.key, l.Offset(), s)
		case x != t.root && tags.Prio(nd.key) >= pmax:
			return fmt.Errorf("best fit tree: block at %d has a priority above its parent's", l.Offset())
		case nd.key <= lo && lo != 0 || nd.key >= hi:
			return fmt.Errorf("best fit tree: block at %d (%d bytes) out of order", l.Offset(), s)
		}
		if err := walk(nd.left, lo, nd.key, tags.Prio(nd.key)); err != nil {
			return err
		}
		return walk(nd.right, nd.key, hi, tags.Prio(nd.key))
	}
	if err := walk(t.root, 0, ^uint64(0), 0); err != nil {
		return err
	}
	if count != t.n || len(t.nodes) > 0 && len(t.nodes)-1 != t.n+len(t.spare) {
		return fmt.Errorf("best fit tree: %d nodes reachable, counts %d, %d spare of %d", count, t.n, len(t.spare), len(t.nodes))
	}
	return nil
}

// checkAO verifies address-ordered first fit's bitmap and tree against
// the free blocks.
func (h *Heap) checkAO(frees []offset) error {
	x := &h.idx
	if len(frees) == 0 && x.leaves == 0 {
		for _, w := range x.freeMap {
			if w != 0 {
				return fmt.Errorf("ao-first-fit: free-block bitmap marks blocks in an empty index")
			}
		}
		return nil
	}
	marked := 0
	for _, w := range x.freeMap {
		marked += bits.OnesCount64(w)
	}
	want := make([]uint32, x.leaves)
	for _, p := range frees {
		if !isSet(x.freeMap, p) {
			return fmt.Errorf("ao-first-fit: free block at %d not marked in the bitmap", p)
		}
		g := int(p >> groupShift)
		if g >= x.leaves {
			return fmt.Errorf("ao-first-fit: free block at %d beyond the tree's %d leaves", p, x.leaves)
		}
		want[g] = max(want[g], uint32(h.hdr(p).Size()>>granShift))
	}
	if marked != len(frees) {
		return fmt.Errorf("ao-first-fit: bitmap marks %d blocks, %d are free", marked, len(frees))
	}
	if len(x.seg) != 2*x.leaves || x.leaves&(x.leaves-1) != 0 {
		return fmt.Errorf("ao-first-fit: tree of %d nodes for %d leaves", len(x.seg), x.leaves)
	}
	for g, v := range want {
		if x.seg[x.leaves+g] != v {
			return fmt.Errorf("ao-first-fit: leaf %d holds %d granules, its largest free block has %d", g, x.seg[x.leaves+g], v)
		}
	}
	for i := x.leaves - 1; i >= 1; i-- {
		if m := max(x.seg[2*i], x.seg[2*i+1]); x.seg[i] != m {
			return fmt.Errorf("ao-first-fit: node %d holds %d, its children's maximum is %d", i, x.seg[i], m)
		}
	}
	return nil
}

func isSet(m []uint64, p offset) bool {
	g := uintptr(p >> granShift)
	return g/64 < uintptr(len(m)) && m[g/64]&(1<<(g%64)) != 0
}

// mustCheck runs check and panics if an invariant is broken: in checked
// builds a broken heap must stop the program before it hands out
// overlapping memory.
func (h *Heap) mustCheck() {
	if err := h.check(); err != nil {
		panic("fit: invariant broken: " + err.Error())
	}
}

// poison fills freed bytes with invariants.Poison (checked builds only).
func poison(b []byte) {
	for i := range b {
		b[i] = invariants.Poison
	}
}

// verifyPoison panics, in checked builds, if the bytes of the free block
// at p (size s) that the block [q-8, q-8+n) is about to take no longer hold
// the poison. A free block's poison covers all but its header, its links
// ([p, p+8)) and its footer: [p+8, p+s-16).
func (h *Heap) verifyPoison(p offset, s uintptr, q offset, n uintptr) {
	lo := max(q, p+HeaderSize)
	hi := min(q-HeaderSize+offset(n), p+offset(s)-2*HeaderSize)
	if lo >= hi {
		return
	}
	for i, c := range h.bytes(lo, int(hi-lo)) {
		if c != invariants.Poison {
			panic(fmt.Sprintf("fit: byte at offset %d, in the free block at %d (%d bytes), is %#x, want poison %#x: written after free",
				lo+offset(i), p, s, c, invariants.Poison))
		}
	}
}
