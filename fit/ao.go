package fit

import "math/bits"

// This file holds address-ordered first fit's index: a bitmap marking the
// starts of free blocks, and a segment tree over groups of 4 KiB of
// offsets. Leaf g holds the size, in granules, of the largest free block
// starting in [g*4096, (g+1)*4096); every inner node the larger of its two
// children. The tree is a slice in heap order (node i has children 2i and
// 2i+1, leaves at [leaves, 2*leaves)), so it holds no links at all, and it
// lives in Go memory: 8 bytes per group, 1/512 of the footprint.
//
// The lowest-addressed fit: descend from the root, left when the left
// child's maximum is large enough, right otherwise; the leaf reached is
// the first group that holds a fit, and its free blocks, scanned in
// address order, give the first.

const (
	groupShift = 12                                   // log2 of the bytes of offsets per group
	groupWords = (1 << (groupShift - granShift)) / 64 // bitmap words per group
)

func (h *Heap) aoInsert(p offset, s uintptr) {
	x := &h.idx
	setBit(x.freeMap, p)
	g := int(p >> groupShift)
	if g >= x.leaves {
		h.aoGrow(g + 1)
	}
	v := uint32(s >> granShift)
	i := x.leaves + g
	for ; i >= 1 && x.seg[i] < v; i >>= 1 {
		x.seg[i] = v
	}
}

func (h *Heap) aoRemove(p offset, s uintptr) {
	x := &h.idx
	clearBit(x.freeMap, p)
	g := int(p >> groupShift)
	i := x.leaves + g
	if x.seg[i] != uint32(s>>granShift) {
		return // another block of the group is at least as large
	}
	x.seg[i] = h.groupMax(g)
	for i >>= 1; i >= 1; i >>= 1 {
		m := max(x.seg[2*i], x.seg[2*i+1])
		if x.seg[i] == m {
			break
		}
		x.seg[i] = m
	}
}

// groupMax returns the size, in granules, of the largest free block that
// starts in group g.
func (h *Heap) groupMax(g int) uint32 {
	var m uint32
	for w := g * groupWords; w < (g+1)*groupWords && w < len(h.idx.freeMap); w++ {
		for bs := h.idx.freeMap[w]; bs != 0; bs &= bs - 1 {
			p := offset(w*64+bits.TrailingZeros64(bs)) << granShift
			m = max(m, uint32(h.hdr(p).Size()>>granShift))
		}
	}
	return m
}

// aoFit returns the free block at the lowest offset with at least s
// bytes, or 0.
func (h *Heap) aoFit(s uintptr) offset {
	x := &h.idx
	if x.leaves == 0 || s > uintptr(h.reserved) {
		return 0
	}
	v := uint32(s >> granShift)
	if x.seg[1] < v {
		return 0
	}
	i := 1
	for i < x.leaves {
		i <<= 1
		if x.seg[i] < v {
			i++
		}
	}
	g := i - x.leaves
	for w := g * groupWords; w < (g+1)*groupWords && w < len(x.freeMap); w++ {
		for bs := x.freeMap[w]; bs != 0; bs &= bs - 1 {
			p := offset(w*64+bits.TrailingZeros64(bs)) << granShift
			if h.hdr(p).Size() >= s {
				return p
			}
		}
	}
	panic("fit: ao-first-fit: the tree promises a fit its group does not hold")
}

// aoGrow makes the tree hold at least n leaves: the next power of two,
// with the leaves copied and the inner nodes rebuilt. The free-block
// bitmap grows with the committed heap (see grow), not here.
func (h *Heap) aoGrow(n int) {
	x := &h.idx
	leaves := max(1<<bits.Len(uint(n-1)), 16)
	seg := make([]uint32, 2*leaves)
	if x.leaves > 0 {
		copy(seg[leaves:], x.seg[x.leaves:])
	}
	for i := leaves - 1; i >= 1; i-- {
		seg[i] = max(seg[2*i], seg[2*i+1])
	}
	x.seg, x.leaves = seg, leaves
}
