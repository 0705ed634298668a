package buddy

import (
	"math/bits"

	"github.com/carvelab/carve/heapmap"
)

// Map returns a map of the heap (see package heapmap): its span from
// offset 0 up to the end of the highest committed granule, past which
// every block is free and no memory is committed. Each block, free or in
// use, is one or more segments of its order (Segment.Class):
//
//	a block in use:  Plain mode: Live, the whole block (its rounding
//	                 included, since the heap does not record the size
//	                 asked for). Header mode: Padding (the alignment gap,
//	                 when the payload starts more than HeaderSize in), the
//	                 Header, then Live up to the block's end.
//	a free block:    Free where its granules are committed, Reserved where
//	                 they are not: each committed run is one hole.
//	past the span:   Unused, the part of the last granule the span does
//	                 not reach.
//
// Against the heap's Stats: Live + Header + Padding = Used, Header +
// Padding = HeaderBytes, Size - Reserved = Footprint, so Free + Unused =
// Footprint - Used; Largest is at most the largest free block. A heap with
// nothing committed, or closed, has an empty map.
//
// Map reads the side tables (Go memory) and, in Header mode, the headers
// of blocks in use; never the memory of a free block, which may have gone
// back to the OS. It changes nothing. It costs O(blocks + granules) for
// the blocks and granules below the map's end.
func (h *Heap) Map() heapmap.Map {
	m := heapmap.Map{Name: h.mode.String()}
	if h.closed {
		return m
	}
	end := h.mapEnd()
	if end == 0 {
		return m
	}
	m.Base = uintptr(h.base)
	for off := offset(0); off < min(end, h.span); off += 1 << h.rootOrder(off) {
		h.mapNode(&m, off, h.rootOrder(off), end)
	}
	m.Append(heapmap.Unused, 0, int64(end)-int64(min(end, h.span)))
	return m
}

// mapEnd returns the end of the highest committed granule, or 0.
func (h *Heap) mapEnd() offset {
	for w := len(h.commit) - 1; w >= 0; w-- {
		if word := h.commit[w]; word != 0 {
			g := uint(w)*64 + uint(bits.Len64(word)-1)
			return offset(g+1) << h.gshift
		}
	}
	return 0
}

// mapNode appends the blocks of the subtree of order k at off that lie
// below end.
func (h *Heap) mapNode(m *heapmap.Map, off offset, k uint, end offset) {
	if off >= end {
		return
	}
	i := uint(off >> k)
	switch {
	case h.split[k].has(i):
		h.mapNode(m, off, k-1, end)
		h.mapNode(m, off+1<<(k-1), k-1, end)
	case h.free[k].has(i):
		h.mapFree(m, off, min(off+1<<k, end), k)
	case h.mode == Header:
		d, err := h.findHeader(off, k)
		if err != nil {
			d = HeaderSize // a broken heap, which check reports; draw the usual layout
		}
		m.Append(heapmap.Padding, int(k), int64(d-HeaderSize))
		m.Append(heapmap.Header, int(k), HeaderSize)
		m.Append(heapmap.Live, int(k), int64(1<<k-d))
	default:
		m.Append(heapmap.Live, int(k), 1<<k)
	}
}

// mapFree appends the free block of order k that spans [off, end) below
// the map's end: Free over committed granules, Reserved over the others.
func (h *Heap) mapFree(m *heapmap.Map, off, end offset, k uint) {
	for off < end {
		g := uint(off) >> h.gshift
		c := h.committed(g)
		next := min(offset(g+1)<<h.gshift, end)
		for next < end && h.committed(uint(next)>>h.gshift) == c {
			next = min(next+1<<h.gshift, end)
		}
		kind := heapmap.Reserved
		if c {
			kind = heapmap.Free
		}
		m.Append(kind, int(k), int64(next-off))
		off = next
	}
}
