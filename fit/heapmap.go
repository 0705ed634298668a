package fit

import "github.com/carvelab/carve/heapmap"

// Map returns a map of the heap's committed memory, [0, Footprint), in
// address order (see package heapmap):
//
//	[0, 8)          Padding: the word before the first header, never used
//	each block in use:  Header (its 8-byte boundary tag), then Live (the
//	                    rest of the block: its usable bytes, rounding
//	                    included, since the heap does not record the size
//	                    asked for)
//	each free block:    Free, header and footer included: one hole
//	the top             Unused: committed bytes past the last block
//
// Every Class is 0. The map's figures equal the heap's Stats: Live +
// Header = Used, Header = HeaderBytes, Free = FreeBytes, Holes =
// FreeBlocks, Largest = Largest, Unused = Top, Size = Footprint (Padding
// is the 8 bytes, Reserved 0); a heap with nothing committed, or closed,
// has an empty map.
//
// Map walks the blocks by their headers, which lie in committed memory
// (free blocks included: the heap decommits only its top); it reads
// nothing else of the heap's memory and changes nothing. It costs
// O(blocks) time, and a segment per free block and two per block in use.
func (h *Heap) Map() heapmap.Map {
	m := heapmap.Map{Name: h.policy.String()}
	if h.closed || h.committed == 0 {
		return m
	}
	m.Base = uintptr(h.base)
	m.Append(heapmap.Padding, 0, int64(firstBlock-HeaderSize))
	for p := firstBlock; p < h.top; {
		hd := *h.hdr(p)
		s := int64(hd.Size())
		if hd.InUse() {
			m.Append(heapmap.Header, 0, HeaderSize)
			m.Append(heapmap.Live, 0, s-HeaderSize)
		} else {
			m.Append(heapmap.Free, 0, s)
		}
		p += offset(s)
	}
	m.Append(heapmap.Unused, 0, int64(h.committed)-int64(h.top-HeaderSize))
	return m
}
