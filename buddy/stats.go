package buddy

import (
	"unsafe"

	carve "github.com/carvelab/carve"
)

// Stats is a heap's statistics: the carve vocabulary and the heap's own
// counts. All figures but the counts of blocks and calls are bytes. For a
// heap:
//
//	Live      = the sizes asked for, of the blocks in use (from len(b) at Free),
//	            clamped to [0, Used - HeaderBytes]
//	Used      = sum over blocks in use of 2^order        (headers included)
//	Used - Live - HeaderBytes = the power-of-two rounding
//	Footprint = Granule * committed granules; Footprint - Used = free bytes committed
//	Idle     <= Retain: committed granules with no block in use
//	Used + free blocks' bytes = Span
type Stats struct {
	// Live, Used, Footprint, Resident and Metadata in carve's vocabulary.
	// Resident is mincore over the committed granules. Metadata is the Go
	// memory of the side tables: the split and free bits of every order
	// (their leaves, the leaf pointers and the non-empty masks, from the
	// slices' capacities), the per-granule counts and commit bits, and in
	// checked builds the poison record; the Heap struct itself is not
	// counted, nor package mem's own record of the region's committed
	// pages.
	carve.Stats

	// Mode is the heap's mode; Mode.String() is the allocator's name.
	Mode Mode
	// Blocks counts the blocks in use, FreeBlocks the free blocks.
	Blocks, FreeBlocks int64
	// LiveByOrder[k] counts the blocks of 2^k bytes in use,
	// FreeByOrder[k] the free ones.
	LiveByOrder, FreeByOrder [MaxOrder + 1]int64
	// HeaderBytes is what the blocks in use spend in front of their
	// payloads: HeaderSize each in Header mode, or the alignment asked for
	// when it is larger; zero in Plain mode. It is part of Used - Live.
	HeaderBytes int64
	// Idle is the committed bytes in granules with no block in use: free
	// memory kept for reuse, at most Retain. Part of Footprint - Used.
	Idle int64
	// Commits and Decommits count the calls into the OS that committed
	// granules and gave them back.
	Commits, Decommits int64
	// Span is the address space the heap manages; MinBlock, MaxBlock and
	// Granule its geometry.
	Span                        int64
	MinBlock, MaxBlock, Granule int
}

// Footprint returns the bytes the heap has committed: Stats().Footprint,
// in O(1), for callers that sample it often, such as the lab's replayer.
func (h *Heap) Footprint() int64 {
	if h.closed {
		return 0
	}
	return int64(h.region.Committed())
}

// Stats returns the heap's statistics. It costs O(MaxOrder) plus one
// mincore call per run of committed granules (for Resident). After Close
// only the mode and geometry remain.
func (h *Heap) Stats() Stats {
	s := Stats{
		Mode:     h.mode,
		Span:     int64(h.span),
		MinBlock: 1 << h.minOrder,
		MaxBlock: 1 << h.maxOrder,
		Granule:  1 << h.gshift,
	}
	if h.closed {
		return s
	}
	s.Used, s.HeaderBytes = h.used, h.headers
	s.Live = min(max(h.live, 0), h.used-h.headers)
	s.Footprint = int64(h.region.Committed())
	s.Resident = h.resident()
	s.LiveByOrder = h.nlive
	for k := range h.free {
		s.FreeByOrder[k] = int64(h.free[k].n)
		s.Metadata += h.free[k].bytes() + h.split[k].bytes()
		s.FreeBlocks += s.FreeByOrder[k]
		s.Blocks += s.LiveByOrder[k]
	}
	s.Metadata += int64(cap(h.free)+cap(h.split))*int64(unsafe.Sizeof(bitset{})) +
		int64(cap(h.liveIn))*4 + int64(cap(h.commit))*8 + h.poisoned.bytes() + h.region.Metadata()
	s.Idle = int64(h.idle) << h.gshift
	s.Commits, s.Decommits = h.commits, h.decommits
	return s
}
