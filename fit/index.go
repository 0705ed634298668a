package fit

import "github.com/carvelab/carve/internal/tags"

// This file holds the index of free blocks that every policy keeps and its
// four operations, the lists threaded through free blocks, and the linear
// search of first fit's and next fit's list that order.go's index
// replaces (kept for the tests, which check that both place every block
// alike). order.go, best.go and ao.go hold the policies' structures.
//
// The rules every caller keeps: a block's header holds its final size and
// the free flag before it is inserted, and keeps them until it is removed;
// the top is never in the index.

// index is the state of the policy's index. Only the policy's own fields
// are used.
type index struct {
	// first fit, next fit: the LIFO free list by list order (order.go);
	// the block's first link word holds its key. With linear set (the
	// tests' reference), a doubly linked list through the free blocks
	// instead (links[0] next, links[1] previous), searched by a walk.
	order       order
	linear      bool
	head, rover link // linear only

	// best fit: bins of blocks under smallMax bytes, one per size (links
	// as in the list); larger blocks in a treap in Go memory.
	bins tags.Bins
	tree treap

	// address-ordered first fit: one bit per granule marking free blocks'
	// starts, and the segment tree over 4 KiB groups (see ao.go).
	freeMap []uint64
	seg     []uint32
	leaves  int
}

// insert adds the free block at p, of size s, to the index.
func (h *Heap) insert(p offset, s uintptr) {
	h.freeBlocks++
	h.freeBytes += int64(s)
	switch h.policy {
	case FirstFit, NextFit:
		if h.idx.linear {
			tags.Push(h.base, &h.idx.head, p)
		} else {
			h.orderPush(p, s)
		}
	case BestFit:
		h.bestInsert(p, s)
	case AddressOrderedFirstFit:
		h.aoInsert(p, s)
	}
}

// remove takes the free block at p, of size s, out of the index.
func (h *Heap) remove(p offset, s uintptr) {
	h.freeBlocks--
	h.freeBytes -= int64(s)
	switch h.policy {
	case FirstFit, NextFit:
		if !h.idx.linear {
			h.orderRemove(p)
			break
		}
		if h.idx.rover == p.Link() {
			h.idx.rover = h.links(p)[0] // the next, older block
		}
		tags.Unlink(h.base, &h.idx.head, p)
	case BestFit:
		h.bestRemove(p, s)
	case AddressOrderedFirstFit:
		h.aoRemove(p, s)
	}
}

// replace puts the free block at r, of size rs, in the place of the block
// at p, of size s, which it is the remainder of: r lies inside p's block,
// and r's header is written. Lists keep the remainder where the block was.
func (h *Heap) replace(p offset, s uintptr, r offset, rs uintptr) {
	switch h.policy {
	case FirstFit, NextFit:
		h.freeBytes -= int64(s - rs)
		if h.idx.linear {
			h.listReplace(p, r)
		} else {
			h.orderReplace(p, r, rs)
		}
	default:
		h.remove(p, s)
		h.insert(r, rs)
	}
}

// listReplace puts the block at r in the place of the block at p on the
// linear reference's list, rover included.
func (h *Heap) listReplace(p, r offset) {
	l := h.links(p)
	next, prev := l[0], l[1]
	*h.links(r) = [2]link{next, prev}
	if prev == 0 {
		h.idx.head = r.Link()
	} else {
		h.links(prev.Offset())[0] = r.Link()
	}
	if next != 0 {
		h.links(next.Offset())[1] = r.Link()
	}
	if h.idx.rover == p.Link() {
		h.idx.rover = r.Link()
	}
}

// find returns a free block of at least s bytes, chosen by the policy, or
// 0 if none is large enough. It does not remove the block.
func (h *Heap) find(s uintptr) offset {
	switch h.policy {
	case FirstFit:
		if h.idx.linear {
			return h.firstFitScan(s)
		}
		return h.orderFirst(s)
	case NextFit:
		if h.idx.linear {
			return h.nextFitScan(s)
		}
		return h.orderNext(s)
	case BestFit:
		return h.bestFit(s)
	default:
		return h.aoFit(s)
	}
}

// largest returns the size of the largest block in the index, in O(1)
// or O(log n) (the linear reference walks its list).
func (h *Heap) largest() uintptr {
	var m uintptr
	switch h.policy {
	case FirstFit, NextFit:
		if !h.idx.linear {
			return h.orderLargest()
		}
		for l := h.idx.head; l != 0; l = h.links(l.Offset())[0] {
			m = max(m, h.hdr(l.Offset()).Size())
		}
	case BestFit:
		m = h.bestLargest()
	case AddressOrderedFirstFit:
		if h.idx.leaves > 0 {
			m = uintptr(h.idx.seg[1]) << granShift
		}
	}
	return m
}

// firstFitScan returns the first block on the list with at least s bytes,
// walking it from the head: the linear reference of orderFirst.
func (h *Heap) firstFitScan(s uintptr) offset {
	for l := h.idx.head; l != 0; {
		p := l.Offset()
		if h.hdr(p).Size() >= s {
			return p
		}
		l = h.links(p)[0]
	}
	return 0
}

// nextFitScan returns the first block with at least s bytes on the list
// from the rover to its end, then from its head to the rover, and leaves
// the rover there: the linear reference of orderNext.
func (h *Heap) nextFitScan(s uintptr) offset {
	start := h.idx.rover
	if start == 0 {
		start = h.idx.head
	}
	for l := start; l != 0; {
		p := l.Offset()
		if h.hdr(p).Size() >= s {
			h.idx.rover = l
			return p
		}
		l = h.links(p)[0]
	}
	for l := h.idx.head; l != start; {
		p := l.Offset()
		if h.hdr(p).Size() >= s {
			h.idx.rover = l
			return p
		}
		l = h.links(p)[0]
	}
	return 0
}
