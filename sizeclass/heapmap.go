package sizeclass

import (
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
// their own. Segment.Class is the chunk size (0 for a large object). Each
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
// Where a class's slabs lie: a slab holding a chunk in use is drawn where
// it is. A slab whose chunks are all free may be committed or, after
// Trim, given back, and the pool does not tell the heap which: Map counts
// how many are committed (Stats) and draws them at the lowest free slab
// positions. That is their place exactly unless Trim has given back a
// slab of the class that has not been reused since; then slabs of free
// chunks may be drawn out of place within their class (the figures stay
// exact). A closed heap has an empty map.
//
// Map reads the heap's tables (Go memory) and each pool's statistics; it
// never reads a chunk's memory, and changes nothing. It costs O(committed
// chunks / 64 + runs of chunks), plus each class's pool Stats (a walk of
// its free list, one mincore).
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
			m.Append(heapmap.Live, 0, int64(h.large.regions[a].Committed()))
		}
		m.Regions = append(m.Regions, heapmap.Region{Off: start, Len: m.Size - start, Label: "large objects"})
	}
	return m
}

// mapSlabs appends the committed slabs of the class, which has some.
func (cl *class) mapSlabs(m *heapmap.Map) {
	size, class := int64(cl.size), int(cl.size)
	slabs := cl.committedSlabs()
	cursor := cl.cursorSlab(slabs)
	for _, s := range slabs {
		carved := cl.perSlab
		if s == cursor.slab {
			carved = cursor.carved
		}
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
	}
}

// firstChunk returns the index of slab s's first chunk: a chunk's index
// is its offset from the base divided by the chunk size, rounded down.
func (cl *class) firstChunk(s int64) int64 { return s * cl.slab / int64(cl.size) }

// committedSlabs returns the indexes of the class's committed slabs, as
// far as the heap can tell (see Map): every slab holding a chunk in use,
// and the lowest others, as many as the pool's count of committed slabs
// calls for.
func (cl *class) committedSlabs() []int64 {
	var held []int64
	for s := int64(0); cl.firstChunk(s) < int64(len(cl.live))*64; s++ {
		first := cl.firstChunk(s)
		if !cl.noneLive(first, first+cl.perSlab) {
			held = append(held, s)
		}
	}
	slabs := make([]int64, 0, cl.slabs)
	extra := cl.slabs - int64(len(held))
	for s := int64(0); int64(len(slabs)) < cl.slabs; s++ {
		switch {
		case len(held) > 0 && held[0] == s:
			slabs = append(slabs, s)
			held = held[1:]
		case extra > 0:
			slabs = append(slabs, s)
			extra--
		}
	}
	return slabs
}

// cursor is the slab the pool carves from and how many chunks it has
// carved there.
type cursor struct{ slab, carved int64 }

// cursorSlab returns the pool's cursor: the highest committed slab, whose
// carved chunks are those the pool's Carved count leaves once every other
// committed slab is full. If that slab holds a chunk in use beyond them,
// the cursor must be a slab of free chunks: the highest of slabs.
func (cl *class) cursorSlab(slabs []int64) cursor {
	carved := cl.pool.Stats().Carved - (cl.slabs-1)*cl.perSlab
	top := slabs[len(slabs)-1]
	first := cl.firstChunk(top)
	if cl.noneLive(first+carved, first+cl.perSlab) {
		return cursor{top, carved}
	}
	for i := len(slabs) - 1; i >= 0; i-- {
		if f := cl.firstChunk(slabs[i]); cl.noneLive(f, f+cl.perSlab) {
			return cursor{slabs[i], carved}
		}
	}
	return cursor{top, carved} // a broken heap, which check reports
}

// noneLive reports whether none of the chunks of indexes [i, j) is in
// use.
func (cl *class) noneLive(i, j int64) bool { return liveBits(cl.live).runEnd(i, j, false) == j }

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
