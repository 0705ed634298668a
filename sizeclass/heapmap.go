package sizeclass

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/carvelab/carve/heapmap"
)

// Map returns a map of the heap's committed memory (see package heapmap).
// The classes' pools are separate reservations, so the map's space is not
// one range of addresses (Base is 0): it lays each class's committed slabs
// side by side, smallest class first, each class a Region labelled with
// its chunk size, and then the large objects, by address, in a Region of
// their own; its Spans say where each slab and large object lies in
// memory. Segment.Class is the chunk size (0 for a large object). Each
// slab holds, in address order:
//
//	its chunks:  Live for a chunk in use (the whole chunk: the heap does
//	             not record the size asked for), Free for a chunk carved
//	             and not in use; each run of free chunks in a slab is one
//	             hole
//	Unused:      the chunks not carved yet, in the slab the pool carves
//	             from (its highest committed one)
//	Padding:     the slab's tail, too short for a chunk
//
// and each large object is Live, its page-rounded size. Against the
// heap's Stats: Live = Used, Size = Footprint, so Free + Unused + Padding
// = Footprint - Used; per class, Free = (Carved - InUse) * Size and
// Unused = (Capacity - Carved) * Size. Chunks a checked build quarantined
// show as Free.
//
// A class's slabs are those its pool has committed (pool.Slabs: slabs
// Trim gave back are left out), in address order, each with the chunks
// the pool carved in it. A closed heap has an empty map.
//
// Map reads the heap's tables and the pools' bookkeeping (Go memory); it
// never reads a chunk's memory, and changes nothing. It costs O(slabs +
// committed chunks / 64 + runs of chunks).
func (h *Heap) Map() heapmap.Map {
	m := heapmap.Map{Name: "sizeclass"}
	if h.closed {
		return m
	}
	for c := 1; c < numClasses; c++ {
		cl := &h.classes[c]
		if cl.pool == nil || cl.slabs == 0 {
			continue
		}
		start := m.Size
		cl.mapSlabs(&m)
		m.Regions = append(m.Regions, heapmap.Region{Off: start, Len: m.Size - start, Label: fmt.Sprintf("class %d B", cl.size)})
	}
	if len(h.large.regions) > 0 {
		start := m.Size
		for _, a := range slices.Sorted(maps.Keys(h.large.regions)) {
			n := int64(h.large.regions[a].Committed())
			m.Spans = append(m.Spans, heapmap.Span{Off: m.Size, Len: n, Addr: a})
			m.Append(heapmap.Live, 0, n)
		}
		m.Regions = append(m.Regions, heapmap.Region{Off: start, Len: m.Size - start, Label: "large objects"})
	}
	slices.SortFunc(m.Spans, func(a, b heapmap.Span) int { return cmp.Compare(a.Addr, b.Addr) })
	return m
}

// mapSlabs appends the committed slabs of the class, in address order,
// as the pool lists them (committed, and how many chunks it carved in
// each), with the class's bitmap telling which chunks are in use.
func (cl *class) mapSlabs(m *heapmap.Map) {
	size, class := int64(cl.size), int(cl.size)
	cl.pool.Slabs(func(slab, n int) bool {
		s, carved := int64(slab), int64(n)
		m.Spans = append(m.Spans, heapmap.Span{Off: m.Size, Len: cl.slab, Addr: cl.base + uintptr(s*cl.slab)})
		first := cl.firstChunk(s)
		for i, end := first, first+carved; i < end; {
			live := liveBits(cl.live).has(i)
			j := liveBits(cl.live).runEnd(i, end, live)
			if live {
				m.Append(heapmap.Live, class, (j-i)*size)
			} else {
				m.Append(heapmap.Free, class, (j-i)*size)
			}
			i = j
		}
		m.Append(heapmap.Unused, class, (cl.perSlab-carved)*size)
		m.Append(heapmap.Padding, class, cl.slab-cl.perSlab*size)
		return true
	})
}

// firstChunk returns the index of slab s's first chunk: a chunk's index
// is its offset from the base divided by the chunk size, rounded down.
func (cl *class) firstChunk(s int64) int64 { return s * cl.slab / int64(cl.size) }

// liveBits is a class's bitmap of chunks in use, read by index.
type liveBits []uint64

func (b liveBits) has(i int64) bool {
	return i/64 < int64(len(b)) && b[i/64]&(1<<(i%64)) != 0
}

// runEnd returns the end, at most hi, of the run of chunks from i whose
// bits all say live (or all say not live).
func (b liveBits) runEnd(i, hi int64, live bool) int64 {
	for i < hi {
		var w uint64
		if i/64 < int64(len(b)) {
			w = b[i/64]
		}
		if !live {
			w = ^w
		}
		// The bits from i, set where they match; the zeros shifted in end
		// the run at the word's end.
		w >>= uint(i % 64)
		n, rest := int64(bits.TrailingZeros64(^w)), 64-i%64
		if n < rest {
			return min(i+n, hi)
		}
		i += rest
	}
	return hi
}
