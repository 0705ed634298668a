package fit

import (
	"unsafe"

	carve "github.com/carvelab/carve"
)

// Stats is a heap's statistics: the carve vocabulary and the heap's own
// counts. All figures but Blocks and FreeBlocks are bytes. For a heap
// with anything committed:
//
//	Live <= Used - HeaderBytes   (a block in use holds its size less the header)
//	Used - Live = HeaderBytes + rounding (to the granule, up to MinBlock, and
//	              the rest of a free block too small to split off)
//	Footprint = Used + FreeBytes + Top + 8   (8: the unused word before the first block)
//	Largest <= FreeBytes
//	Resident <= Footprint
type Stats struct {
	// Live is the sum of the requested sizes of the blocks in use (as
	// their slices' lengths tell at Free and Realloc: see [Heap.Free] for
	// a slice cut shorter), Used the sum of those blocks' sizes, Footprint
	// the bytes committed, and Resident the part of them in physical
	// memory (mincore).
	//
	// Metadata is the Go memory the heap's bookkeeping holds beside its
	// region, as the capacities of its slices say (the Heap's own
	// fixed-size fields do not count):
	//
	//   - every policy: the block-start bitmap, one bit per 16 bytes of
	//     the largest footprint the heap has had (1/128 of it);
	//   - first fit, next fit: the index by list order, 12 bytes per slot
	//     of its tree (a power of two, at least 16 and at least twice the
	//     free blocks there were when its keys were last renumbered; it
	//     shrinks when they fall below an eighth of it);
	//   - best fit: the treap, 16 bytes per node, one node for each free
	//     block of 1 KiB or more at the most there have been, and 4 bytes
	//     per node not in use;
	//   - address-ordered first fit: the free-block bitmap (1/128 of the
	//     largest footprint) and the tree over 4 KiB groups (8 bytes per
	//     group, the groups rounded up to a power of two).
	carve.Stats

	// Policy is the heap's placement policy.
	Policy Policy
	// Blocks counts the blocks in use; FreeBlocks the free blocks in the
	// policy's index (the top is not one), and FreeBytes their bytes.
	Blocks, FreeBlocks, FreeBytes int64
	// Largest is the size of the largest free block in the index: a
	// request for more than Largest - HeaderSize bytes goes to the top.
	Largest int64
	// Top is the committed bytes past the last block: the free top, which
	// trimming gives back.
	Top int64
	// HeaderBytes is Blocks * HeaderSize: the part of Used - Live the
	// boundary tags take.
	HeaderBytes int64
}

// Footprint returns the bytes the heap has committed: Stats().Footprint,
// in O(1), for callers that sample it often, such as the lab's replayer.
func (h *Heap) Footprint() int64 { return int64(h.committed) }

// Stats returns the heap's statistics. It costs one mincore over the
// committed heap; the rest is O(1) (O(log n) for best fit's Largest).
func (h *Heap) Stats() Stats {
	st := Stats{
		Stats: carve.Stats{
			Live:      h.live,
			Used:      h.used,
			Footprint: int64(h.committed),
			Metadata:  h.metadata(),
		},
		Policy:      h.policy,
		Blocks:      h.blocks,
		FreeBlocks:  h.freeBlocks,
		FreeBytes:   h.freeBytes,
		HeaderBytes: h.blocks * HeaderSize,
	}
	if h.closed {
		return st
	}
	st.Largest = int64(h.largest())
	if top := int64(h.committed) - int64(h.top-HeaderSize); top > 0 {
		st.Top = top
	}
	if h.committed > 0 {
		if n, err := h.region.Resident(0, int(h.committed)); err == nil {
			st.Resident = int64(n)
		}
	}
	return st
}

// metadata returns Stats.Metadata: the bytes of the slices the heap's
// bookkeeping holds, whichever policy's they are (the others' are empty),
// and its region's page bitmap.
func (h *Heap) metadata() int64 {
	x := &h.idx
	n := sliceBytes(h.starts) + sliceBytes(x.freeMap) + sliceBytes(x.seg) +
		x.tree.bytes() + x.order.bytes()
	if h.region != nil {
		n += h.region.Metadata() // the page bitmap of the region
	}
	return n
}

// sliceBytes returns the size of s's backing array.
func sliceBytes[E any](s []E) int64 {
	var e E
	return int64(cap(s)) * int64(unsafe.Sizeof(e))
}
