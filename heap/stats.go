package heap

import (
	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/invariants"
)

// Stats is a heap's statistics: the carve vocabulary and the heap's own
// counts. All figures but the counts of slots, slabs and blocks are
// bytes. For any heap:
//
//	Used      = SlotBytes + BlockBytes
//	Footprint = Committed - Clean
//	Live <= Used - HeaderBytes, Used <= Footprint <= Limit
//	Used - Live = the rounding up to slot sizes and granules, and HeaderBytes
//	Footprint - Used = the slabs' free slots and tails, the free blocks'
//	                   resident bytes, the top's and the free pages not yet
//	                   given back (Dirty)
//	Resident <= Footprint (less the pages never touched)
type Stats struct {
	// Live is the sum of the requested sizes of the blocks in use, what
	// their Alloc or last Realloc asked for (whatever the slices given to
	// Free and Realloc say); Used what they take; Footprint the bytes the heap holds: committed and not given
	// back; Resident the part of it in physical memory (mincore);
	// Metadata the Go memory the heap keeps beside its zones (see
	// Heap.Metadata).
	carve.Stats

	// Slots counts the slots in use, Slabs the pages that are slabs, and
	// SlotBytes is the bytes of the slots in use (their class sizes).
	Slots, Slabs, SlotBytes int64
	// Kept counts the slabs the heap keeps after they emptied, for their
	// class to reuse (among Slabs; some may be in use again since): at
	// most 64, 1/32 of the Footprint's pages and a quarter of the free
	// pages it keeps resident (at least one, none with Retain(0)).
	Kept int64
	// Blocks counts the best-fit blocks in use, BlockBytes their sizes
	// (headers included), FreeBlocks and FreeBytes the free ones, and
	// Largest is the largest free block.
	Blocks, BlockBytes, FreeBlocks, FreeBytes, Largest int64
	// HeaderBytes is Blocks * 8: the part of Used - Live the best-fit
	// blocks' boundary tags take.
	HeaderBytes int64
	// Committed is the bytes of the two zones' reservations committed so
	// far; Clean the part of it that holds no memory: pages the heap gave
	// back to the OS, or never touched since it committed them. Dirty is
	// the free pages that wait in physical memory to be reused or given
	// back: at most the Retain, when the heap can give pages back.
	Committed, Clean, Dirty int64
	// Purges counts the system calls that gave free pages back to the OS
	// (one per stretch of pages), since New.
	Purges int64
	// Meshed is the bytes of the pages of slabs meshed onto another's
	// memory now (see Mesh), each a page given back: not among Slabs, and
	// Footprint = Committed - Clean - Meshed. Meshes counts the meshes
	// made since New, Unmeshed the meshed pages that became free when
	// their slab left its class, and MeshRefused the system calls of
	// meshing the kernel refused (mmap, fallocate), each leaving the heap
	// as it was.
	Meshed, Meshes, Unmeshed, MeshRefused int64
	// Classes describes each size class, smallest first.
	Classes []ClassStats
}

// ClassStats describes one size class.
//
//	Slots <= Slabs * PerSlab
type ClassStats struct {
	Size    int   // slot size
	PerSlab int   // slots a slab holds
	Slots   int64 // slots in use
	Slabs   int64 // slabs of the class
}

// Footprint returns Stats().Footprint in O(1), for callers that sample it
// often, such as the lab's replayer.
func (h *Heap) Footprint() int64 {
	return h.small.footprint() + h.mid.footprint()
}

// Stats returns the heap's statistics. It costs one mincore per zone over
// its committed pages.
func (h *Heap) Stats() Stats {
	if invariants.Enabled {
		h.mustEnter()
		defer h.leave()
	}
	st := Stats{
		Stats: carve.Stats{
			Live:      h.live,
			Used:      h.small.usedBytes() + h.mid.used,
			Footprint: h.Footprint(),
			Metadata:  h.Metadata(),
		},
		Slabs:       int64(h.small.nSlabs),
		Kept:        int64(h.small.kept.n),
		SlotBytes:   h.small.usedBytes(),
		Blocks:      h.mid.blocks,
		BlockBytes:  h.mid.used,
		FreeBlocks:  h.mid.freeBlocks,
		FreeBytes:   h.mid.freeBytes,
		HeaderBytes: h.mid.blocks * headerSize,
		Committed:   h.small.committed + h.mid.committed,
		Clean:       int64(h.small.nClean+h.mid.nClean) << pageShift,
		Dirty:       int64(h.dirty) << pageShift,
		Purges:      h.purges,
		Meshes:      h.small.mesh.meshes,
		Meshed:      int64(h.small.meshedPages) << pageShift,
		Unmeshed:    h.small.mesh.unmeshed,
		MeshRefused: h.small.mesh.refused,
		Classes:     make([]ClassStats, numClasses-1),
	}
	for c := 1; c < numClasses; c++ {
		cl := &h.small.classes[c]
		st.Classes[c-1] = ClassStats{Size: int(cl.size), PerSlab: cl.slots, Slots: cl.inUse, Slabs: int64(cl.slabs)}
		st.Slots += cl.inUse
	}
	if h.closed {
		st.Classes = nil
		return st
	}
	st.Largest = int64(h.mid.largest())
	for _, z := range h.zones() {
		if z.committed > 0 {
			if n, err := z.vm.residentOnce(0, z.committed); err == nil {
				st.Resident += n
			}
		}
	}
	if !canPurge() {
		// Go memory, where residence is not measured: the committed bytes
		// stand for it, of which the Footprint is what the heap touched.
		st.Resident = min(st.Resident, st.Footprint)
	}
	return st
}

// Metadata returns Stats().Metadata without a system call: the bytes of Go
// memory the heap keeps for its bookkeeping, outside its zones. Per page of
// the small zone, its slab record (8 bytes) and its bits in the page-state
// bitmaps and in each class's partial set; per class, its slabs' slot
// bitmaps (two bits per slot: free, and holding a shorter request); per page
// of the best-fit zone, its entry in the first-start table (2 bytes) and its
// page-state bits (its free blocks' index is threaded through them and costs
// no Go memory); and the small tables of fixed size in the Heap itself. On a
// heap of small objects this comes to about 1% of the footprint, on one of
// larger blocks under 0.2% (see the package documentation's costs).
func (h *Heap) Metadata() int64 {
	// The figure changes only when a slice grows: when a zone commits, or
	// a slab is made or freed. It is kept from one change to the next.
	if gen := h.small.commits + h.mid.commits + h.small.slabEvents; gen != h.metaGen || h.meta == 0 {
		h.meta, h.metaGen = h.metadata(), gen
	}
	return h.meta
}

func (h *Heap) metadata() int64 {
	n := int64(cap(h.small.slabs))*8 + int64(cap(h.mid.first))*2 + h.small.mesh.bytes()
	for _, z := range h.zones() {
		n += z.free.bytes() + int64(cap(z.clean))*8
	}
	for c := 1; c < numClasses; c++ {
		cl := &h.small.classes[c]
		n += int64(cap(cl.bits))*8 + cl.partial.bytes()
	}
	return n
}

// Trim gives every free page back to the OS now, whatever the Retain,
// the kept empty slabs' included, and returns how many bytes it gave
// back: Footprint drops by as much. Blocks and slabs in use stay where
// they are; a heap that meshes (see Mesh) first meshes what it finds in
// every class.
func (h *Heap) Trim() (int64, error) {
	if invariants.Enabled {
		if err := h.enter(); err != nil {
			return 0, err
		}
		defer h.leave()
	}
	if h.small.base == nil {
		return 0, h.unusable()
	}
	before := h.Footprint()
	// Each round meshes groups the last made: a few rounds find most.
	for round := 0; h.small.mesh.on && round < 4 && h.meshAll() > 0; round++ {
	}
	h.unkeepAll()
	h.purgeAll()
	err := h.restoreAll()
	h.checkSlow()
	return before - h.Footprint(), err
}
