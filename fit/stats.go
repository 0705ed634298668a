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
	// a slice cut shorter), Used the sum of
	// those blocks' sizes, Footprint the bytes committed, and Resident
	// the part of them in physical memory (mincore).
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
	// Metadata is the Go memory the heap keeps beside its region: the
	// Heap itself, the block-start bitmap (one bit per 16 bytes of the
	// footprint, 1/128); for best fit, 16 bytes per free block of 1 KiB or
	// more (its tree); for address-ordered first fit, the free-block
	// bitmap and the tree over pages (1/128 + 1/512 of the footprint).
	Metadata int64
}

// Footprint returns the bytes the heap has committed: Stats().Footprint,
// in O(1), for callers that sample it often, such as the lab's replayer.
func (h *Heap) Footprint() int64 { return int64(h.committed) }

// Stats returns the heap's statistics. It costs one mincore over the
// committed heap and, for first and next fit, a walk of the free list to
// find the largest block.
func (h *Heap) Stats() Stats {
	st := Stats{
		Stats: carve.Stats{
			Live:      h.live,
			Used:      h.used,
			Footprint: int64(h.committed),
		},
		Policy:      h.policy,
		Blocks:      h.blocks,
		FreeBlocks:  h.freeBlocks,
		FreeBytes:   h.freeBytes,
		HeaderBytes: h.blocks * HeaderSize,
		Metadata: int64(unsafe.Sizeof(*h)) + int64(cap(h.starts))*8 +
			int64(cap(h.idx.freeMap))*8 + int64(cap(h.idx.seg))*4 + h.idx.tree.bytes(),
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
