package buddy

import (
	"fmt"
	"math/bits"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the buddy tree: splitting, merging, and finding the
// block an address belongs to.
//
// The tree's nodes are the naturally aligned power-of-two ranges of the
// heap: the node of order k at offset off (a multiple of 2^k) spans
// [off, off+2^k) and has the two halves at off and off+2^(k-1) as
// children. Every node is in one of four states, read from two bits:
//
//	split:  split[k] set; its children are nodes of the tree
//	free:   free[k] set; a free block
//	live:   neither, and its parent split (or it is a root); a block in use
//	inside: neither, and its parent not split; part of a larger block
//
// and the blocks, free and live, tile the heap.

// rootOrder returns the order of the root that starts at off, a multiple
// of MinBlock that no root covers yet: the largest block that is aligned
// there and fits before the end of the heap. The roots of a heap whose
// span is not a power of two are its binary digits, largest first.
func (h *Heap) rootOrder(off offset) uint {
	k := uint(bits.Len(uint(h.span-off))) - 1
	if off != 0 {
		k = min(k, uint(bits.TrailingZeros(uint(off))))
	}
	return min(k, h.maxOrder)
}

// isRoot reports whether the node of order k that contains off is a root:
// of the largest order, or with a parent that would reach past the end of
// the heap. A root has no buddy.
func (h *Heap) isRoot(off offset, k uint) bool {
	if k == h.maxOrder {
		return true
	}
	parent := off &^ (2<<k - 1)
	return parent+2<<k > h.span
}

func (h *Heap) setFree(off offset, k uint) {
	h.free[k].set(uint(off >> k))
	h.avail |= 1 << k
}

func (h *Heap) clearFree(off offset, k uint) {
	h.free[k].clear(uint(off >> k))
	if h.free[k].n == 0 {
		h.avail &^= 1 << k
	}
}

// take finds the free block of the smallest order >= k at the lowest
// address, commits the granules of the block of order k at its start,
// splits it down to that block and returns the block's offset. The upper
// halves cut off on the way become free blocks, one per order.
//
// It returns errNoBlock if no free block is large enough, and the error of
// committing if the OS refuses; either way the tree is unchanged.
func (h *Heap) take(k uint) (offset, error) {
	m := h.avail >> k
	if m == 0 {
		return 0, errNoBlock
	}
	j := k + uint(bits.TrailingZeros64(m))
	off := offset(h.free[j].first()) << j
	if err := h.pin(h.granules(off, 1<<k)); err != nil {
		return 0, err
	}
	h.clearFree(off, j)
	h.avail |= 1<<j - 1<<k // orders [k, j) each gain an upper half
	for j > k {
		h.split[j].set(uint(off >> j))
		j--
		h.free[j].set(uint((off + 1<<j) >> j))
	}
	return off, nil
}

// merge makes the block of order k at off free, merging it with its buddy
// while the buddy is a free block, up to a root.
func (h *Heap) merge(off offset, k uint) {
	for !h.isRoot(off, k) {
		if !h.free[k].remove(uint(off>>k) ^ 1) { // the buddy is not free
			break
		}
		if h.free[k].n == 0 {
			h.avail &^= 1 << k
		}
		off &^= 1 << k
		k++
		h.split[k].clear(uint(off >> k))
	}
	h.setFree(off, k)
}

// blockAt returns the block, free or live, that contains off (< span):
// its offset and order. Walking up from the smallest order, the block is
// the first node whose parent is split (or that is a root): the nodes
// below it lie inside it, and their parents are not split.
func (h *Heap) blockAt(off offset) (offset, uint) {
	k := h.minOrder
	for !h.isRoot(off, k) && !h.split[k+1].has(uint(off>>(k+1))) {
		k++
	}
	return off &^ (1<<k - 1), k
}

// lookup maps a slice that the heap handed out to its block: the block's
// offset and order, and the payload's distance d from the block's start.
// It refuses anything else without changing the heap.
//
// The side tables decide: the slice must start inside a block in use
// (blockAt), at its start in Plain mode, and in Header mode at a distance
// a payload can have, with a header in front that names this block and
// this distance. That header lies inside the block in use, so even a
// refused slice never makes the heap read free memory.
func (h *Heap) lookup(b []byte, op string) (offset, uint, offset, error) {
	if h.closed {
		return 0, 0, 0, ErrClosed
	}
	off := offset(addr(b) - uintptr(h.base))
	if off >= h.span || off%16 != 0 {
		return 0, 0, 0, h.refuse(op, b)
	}
	start, k := h.blockAt(off)
	d := off - start
	if h.free[k].has(uint(start>>k)) || !h.validPayload(d, k) {
		return 0, 0, 0, h.refuse(op, b)
	}
	if h.mode == Header {
		if hk, hd, ok := h.readHeader(off); !ok || hk != k || hd != d {
			return 0, 0, 0, h.refuse(op, b)
		}
	}
	return start, k, d, nil
}

// validPayload reports whether a payload can start d bytes into a block of
// order k: at its start in Plain mode; in Header mode at HeaderSize or at
// a larger power of two up to MaxAlign, inside the block.
func (h *Heap) validPayload(d offset, k uint) bool {
	if h.mode == Plain {
		return d == 0
	}
	return d >= HeaderSize && d <= MaxAlign && d&(d-1) == 0 && d < 1<<k
}

// refuse returns the error for a slice lookup refused, saying what lies
// at its address. It is the slow path of misuse: checked builds check
// the heap here.
func (h *Heap) refuse(op string, b []byte) error {
	if invariants.Enabled {
		h.mustCheck()
	}
	a := addr(b)
	off := offset(a - uintptr(h.base))
	switch {
	case a == 0:
		return fmt.Errorf("%w: %s(nil)", ErrForeign, op)
	case off >= h.span:
		return fmt.Errorf("%w: %s(%#x): outside the heap [%#x, %#x)", ErrForeign, op, a, uintptr(h.base), uintptr(h.base)+uintptr(h.span))
	}
	start, k := h.blockAt(off)
	if off%16 == 0 && h.free[k].has(uint(start>>k)) {
		return fmt.Errorf("%w: %s(%#x): offset %d lies in the free block of %d bytes at offset %d",
			ErrDoubleFree, op, a, off, 1<<k, start)
	}
	what := "where its payload starts"
	if h.mode == Header {
		what = "where its payload starts, or its header was overwritten"
	}
	return fmt.Errorf("%w: %s(%#x): offset %d lies in the block of %d bytes in use at offset %d, but not %s",
		ErrForeign, op, a, off, 1<<k, start, what)
}

// shrink cuts the live block of order k at off down to order k2 < k: the
// upper halves become free blocks, one per order. Their buddies are the
// lower halves, in use or split, so they merge with nothing.
func (h *Heap) shrink(off offset, k, k2 uint) {
	_, g1 := h.granules(off, 1<<k)
	_, g2 := h.granules(off, 1<<k2)
	for j := k; j > k2; j-- {
		h.split[j].set(uint(off >> j))
		upper := off + 1<<(j-1)
		if invariants.Enabled {
			h.poison(upper, 1<<(j-1))
		}
		h.setFree(upper, j-1)
	}
	h.used -= 1<<k - 1<<k2
	h.nlive[k]--
	h.nlive[k2]++
	h.unpin(g2, g1)
}

// canGrow reports whether the live block of order k at off can become the
// block of order k2 > k in place: it is the lower half of each node on the
// way up, and each of those nodes' upper half is a free block.
func (h *Heap) canGrow(off offset, k, k2 uint) bool {
	for j := k; j < k2; j++ {
		if h.isRoot(off, j) || off&(1<<j) != 0 || !h.free[j].has(uint(off>>j)+1) {
			return false
		}
	}
	return true
}

// grow makes the live block of order k at off the block of order k2,
// absorbing the free upper halves canGrow found. It commits the granules
// the block grows into first, and changes nothing if that fails.
func (h *Heap) grow(off offset, k, k2 uint) error {
	_, g1 := h.granules(off, 1<<k)
	_, g2 := h.granules(off, 1<<k2)
	if err := h.pin(g1, g2); err != nil {
		return err
	}
	for j := k; j < k2; j++ {
		upper := off + 1<<j
		if invariants.Enabled {
			h.verifyPoison(upper, 1<<j)
		}
		h.clearFree(upper, j)
		h.split[j+1].clear(uint(off >> (j + 1)))
	}
	h.used += 1<<k2 - 1<<k
	h.nlive[k]--
	h.nlive[k2]++
	return nil
}
