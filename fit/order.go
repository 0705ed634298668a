package fit

import "math/bits"

// This file holds first fit's and next fit's index: the LIFO free list
// both policies are defined by, kept as a tree over list positions so
// that their searches cost O(log n) rather than a walk of the list.
//
// The list changes in three ways only: a block is pushed at its head (a
// freed or merged block, the remainder of use, an alignment gap), taken
// out from anywhere, or replaced in place by the remainder of its split.
// So its order is fixed when a block is pushed: give each pushed block a
// key, one more than the last key given, let a remainder inherit the key
// of the block it replaces, and the list, read from its head, is the free
// blocks by decreasing key. Then
//
//	first fit  takes the block with the largest key of those that fit;
//	next fit   takes the block with the largest key at or below the
//	           rover's that fits, else the largest key that fits.
//
// The rover is a key too, the key of the block next fit took last. When
// that block leaves the list the key stays, as a position: the block the
// list's rover would have moved to, the next older one, is the largest
// key below it, which is where the search starts. Key 0 is never given, so
// the rover's zero value, below every key, starts at the head, as the
// list's empty rover does.
//
// The keys index a segment tree in Go memory (a free block of MinBlock
// bytes has no room for more than its links): leaf k holds the size in
// granules of the block with key k, 0 for none, and each inner node the
// larger of its two children, in heap order (node i has children 2i and
// 2i+1, the leaves at [slots, 2*slots)). The rightmost fit at or below a
// key climbs from its leaf to the first left sibling that holds a fit and
// descends from there, preferring right children: O(log slots) either
// way. Each free block keeps its key in its first link word.
//
// Keys are given until the tree's slots run out; then renumber compacts
// the keys in use to 1, 2, ..., in order, into a tree of at least twice
// as many slots (a power of two), so that at least half the slots are
// left: the O(slots) cost is paid for by as many pushes. When the free
// blocks fall below an eighth of the slots, renumber shrinks the tree, a
// cost paid for by the removals since the last renumbering, at least an
// eighth of the slots. So the tree has 1 to 8 slots per free block (2 to
// 4 just after a renumbering), 12 bytes each, and at least minSlots.

// order is first fit's and next fit's index. The zero value is an empty
// index.
type order struct {
	max    []uint32 // the segment tree, 2*slots nodes; max[1] is the root
	blocks []link   // blocks[k]: the free block with key k, 0 for none
	next   uint32   // the key the next push takes; 0 before the first
	rover  uint32   // next fit's rover: a key, in use or not
}

// minSlots is the size of the smallest tree (192 bytes).
const minSlots = 16

// slots returns the number of leaves.
func (o *order) slots() uint32 { return uint32(len(o.blocks)) }

// key returns the key of the free block at p.
func (h *Heap) key(p offset) uint32 { return uint32(h.links(p)[0]) }

// orderPush gives the free block at p, of size s, the next key.
func (h *Heap) orderPush(p offset, s uintptr) {
	o := &h.idx.order
	if o.next >= o.slots() {
		h.renumber(h.freeBlocks) // insert counted the block being pushed
	}
	k := o.next
	o.next++
	o.blocks[k] = p.Link()
	h.links(p)[0] = link(k)
	o.set(k, uint32(s>>granShift))
}

// orderRemove takes the free block at p out of the index. A rover at its
// key stays there. When the free blocks fall below an eighth of the
// slots, the tree shrinks.
func (h *Heap) orderRemove(p offset) {
	o := &h.idx.order
	k := h.key(p)
	o.blocks[k] = 0
	o.set(k, 0)
	if n := o.slots(); n > minSlots && h.freeBlocks < int64(n/8) {
		h.renumber(h.freeBlocks) // remove has counted the block out
	}
}

// orderReplace gives the free block at r, of size rs, the key of the
// block at p that it is the remainder of.
func (h *Heap) orderReplace(p, r offset, rs uintptr) {
	o := &h.idx.order
	k := h.key(p)
	o.blocks[k] = r.Link()
	h.links(r)[0] = link(k)
	o.set(k, uint32(rs>>granShift))
}

// orderFirst returns the free block of at least s bytes with the largest
// key: the first on the list that fits. It returns 0 if none does.
func (h *Heap) orderFirst(s uintptr) offset {
	o := &h.idx.order
	v, ok := granules(s)
	if !ok || o.slots() == 0 || o.max[1] < v {
		return 0
	}
	return o.blocks[o.descend(1, v)].Offset()
}

// orderNext returns next fit's block of at least s bytes: the one with
// the largest key at or below the rover's, else the one with the largest
// key; it moves the rover there. It returns 0 if no block fits.
func (h *Heap) orderNext(s uintptr) offset {
	o := &h.idx.order
	v, ok := granules(s)
	if !ok || o.slots() == 0 || o.max[1] < v {
		return 0
	}
	k := o.atOrBelow(o.rover, v)
	if k == 0 {
		k = o.descend(1, v)
	}
	o.rover = k
	return o.blocks[k].Offset()
}

// orderLargest returns the size of the largest block in the index.
func (h *Heap) orderLargest() uintptr {
	o := &h.idx.order
	if o.slots() == 0 {
		return 0
	}
	return uintptr(o.max[1]) << granShift
}

// granules returns s in granules, if that fits a tree node.
func granules(s uintptr) (uint32, bool) {
	v := uint64(s >> granShift)
	return uint32(v), v < 1<<32
}

// set makes v the size of key k's leaf and updates its ancestors, up to
// the first whose maximum does not change.
func (o *order) set(k, v uint32) {
	t := o.max
	i := uint(len(o.blocks)) + uint(k)
	t[i] = v
	for i > 1 {
		m := max(t[i], t[i^1])
		i >>= 1
		if t[i] == m {
			return
		}
		t[i] = m
	}
}

// descend returns the largest key under node i, whose maximum is at least
// v, with a leaf of at least v.
func (o *order) descend(i, v uint32) uint32 {
	t := o.max
	n := uint(len(o.blocks))
	j := uint(i)
	for j < n {
		j *= 2
		var right uint // 1 if the right child fits: no branch to mispredict
		if t[j+1] >= v {
			right = 1
		}
		j += right
	}
	return uint32(j - n)
}

// atOrBelow returns the largest key at or below k with a leaf of at least
// v, or 0 if there is none. The left siblings of the right children on
// the path from k's leaf to the root cover every key below k, nearest
// first.
func (o *order) atOrBelow(k, v uint32) uint32 {
	n := o.slots()
	i := n + min(k, n-1)
	if o.max[i] >= v {
		return i - n
	}
	for ; i > 1; i >>= 1 {
		if i&1 == 1 && o.max[i-1] >= v {
			return o.descend(i-1, v)
		}
	}
	return 0
}

// renumber gives the blocks in the index the keys 1, 2, ... in the order
// of their keys, in a tree of at least twice as many slots as there will
// be blocks after the push or removal that called it (blocks), and moves
// the rover to the new key of the block it stands at (the largest key at
// or below it), or 0 if none. The tree keeps its slots when they are the
// right number, else gets new ones: it grows with the free blocks and
// shrinks after them. At least half its slots are left for pushes.
func (h *Heap) renumber(blocks int64) {
	o := &h.idx.order
	n := uint32(max(minSlots, 1<<bits.Len64(uint64(2*blocks)-1)))
	old, oldMax, oldSlots := o.blocks, o.max, o.slots()
	if n != oldSlots {
		o.blocks, o.max = make([]link, n), make([]uint32, 2*n)
	}
	// When the slots stay, the keys move down in place: key j <= k is
	// written after key k is read.
	j, rover := uint32(1), uint32(0)
	for k := uint32(1); k < o.next; k++ {
		l := old[k]
		if l == 0 {
			continue
		}
		if k <= o.rover {
			rover = j
		}
		o.blocks[j] = l
		o.max[n+j] = oldMax[oldSlots+k]
		h.links(l.Offset())[0] = link(j)
		j++
	}
	clear(o.blocks[j:])
	clear(o.max[n+j : 2*n])
	for i := n - 1; i >= 1; i-- {
		o.max[i] = max(o.max[2*i], o.max[2*i+1])
	}
	o.next, o.rover = j, rover
}

// bytes returns the Go memory the index holds.
func (o *order) bytes() int64 { return sliceBytes(o.blocks) + sliceBytes(o.max) }
