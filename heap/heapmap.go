package heap

import (
	"cmp"
	"slices"

	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/invariants"
)

// Map returns a map of the heap's committed memory (see package heapmap):
// the small zone's committed pages, then the best-fit zone's, side by
// side (Base is 0: the zones are two ranges of addresses, which Spans
// place), each a labelled region.
//
//	small zone, per page:  a slab: Live for each slot in use (Class: the
//	                       slot size), Free for each run of free slots,
//	                       Padding for the tail past the last slot; a free
//	                       page: Free while resident (a run of such pages is
//	                       one hole), Reserved once given back
//	best-fit zone:         Padding for the first 8 bytes (Reserved while
//	                       their page is clean); each block in use
//	                       a Header and Live (its usable bytes); each free
//	                       block Free, but its clean pages Reserved; the top
//	                       Unused, its clean pages Reserved
//
// The map's figures equal the heap's Stats: Live + Header = Used, Header =
// HeaderBytes, Size - Reserved = Footprint, Size = Committed. A free block
// whose inner pages were given back shows as two holes, one at each end.
// Map reads the best-fit blocks' headers and nothing else of the heap's
// memory; it costs O(pages + slots + blocks).
func (h *Heap) Map() heapmap.Map {
	if invariants.Enabled {
		h.mustEnter()
		defer h.leave()
	}
	m := heapmap.Map{Name: "heap"}
	if h.closed {
		return m
	}
	z := &h.small
	for pg := 0; pg < z.pages(); {
		s := z.slabs[pg]
		if s.class == 0 {
			end := pg + 1
			for end < z.pages() && z.slabs[end].class == 0 {
				end++
			}
			z.appendFree(&m, heapmap.Free, offset(pg)<<pageShift, offset(end)<<pageShift)
			pg = end
			continue
		}
		if z.follower(pg) {
			// A meshed page: its slots are its leader's, in the leader's
			// memory; it holds none of its own.
			m.Append(heapmap.Reserved, 0, pageSize)
			pg++
			continue
		}
		cl := &z.classes[s.class]
		w, _ := cl.bitmaps(s.bits)
		free := func(i int) bool { return w[i/64]&(1<<(i%64)) != 0 }
		for i := 0; i < cl.slots; {
			j := i + 1
			for j < cl.slots && free(j) == free(i) {
				j++
			}
			k := heapmap.Live
			if free(i) {
				k = heapmap.Free
			}
			m.Append(k, int(cl.size), int64(j-i)*int64(cl.size))
			i = j
		}
		m.Append(heapmap.Padding, int(cl.size), int64(pageSize-cl.slots*int(cl.size)))
		pg++
	}
	if z.committed > 0 {
		m.Regions = append(m.Regions, heapmap.Region{Off: 0, Len: z.committed, Label: "small classes"})
		m.Spans = append(m.Spans, heapmap.Span{Off: 0, Len: z.committed, Addr: uintptr(z.base)})
	}
	h.mid.appendMap(&m)
	slices.SortFunc(m.Spans, func(a, b heapmap.Span) int { return cmp.Compare(a.Addr, b.Addr) })
	return m
}

// appendMap appends the zone's committed memory to m, as a region.
func (mz *midZone) appendMap(m *heapmap.Map) {
	if mz.committed == 0 {
		return
	}
	start := m.Size
	mz.appendFree(m, heapmap.Padding, 0, firstBlock-headerSize)
	for p := firstBlock; p < mz.top; {
		hd := *mz.hdr(p)
		s := offset(hd.Size())
		if hd.InUse() {
			m.Append(heapmap.Header, 0, headerSize)
			m.Append(heapmap.Live, 0, int64(s-headerSize))
		} else {
			mz.appendFree(m, heapmap.Free, p-headerSize, p-headerSize+s)
		}
		p += s
	}
	mz.appendFree(m, heapmap.Unused, mz.top-headerSize, offset(mz.committed))
	m.Regions = append(m.Regions, heapmap.Region{Off: start, Len: m.Size - start, Label: "best fit"})
	m.Spans = append(m.Spans, heapmap.Span{Off: start, Len: m.Size - start, Addr: uintptr(mz.base)})
}

// appendFree appends the bytes [lo, hi) of the zone, free memory, as kind
// k, and its clean pages as Reserved: each stretch of one kind a segment.
func (z *zonePages) appendFree(m *heapmap.Map, k heapmap.Kind, lo, hi offset) {
	for lo < hi {
		clean := z.clean.has(int(lo >> pageShift))
		end := lo
		for end < hi && z.clean.has(int(end>>pageShift)) == clean {
			end = min(end&^(pageSize-1)+pageSize, hi)
		}
		kind := k
		if clean {
			kind = heapmap.Reserved
		}
		m.Append(kind, 0, int64(end-lo))
		lo = end
	}
}
