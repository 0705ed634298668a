package sizeclass

import (
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// Stats is a heap's statistics: the carve vocabulary and the heap's
// counts. For a heap:
//
//	Live      = sum of the sizes requested by live blocks (as Free saw them)
//	Used      = sum over classes of InUse * Size  +  LargeBytes
//	Footprint = sum over classes of Slabs * SlabSize  +  LargeBytes
//	0 <= Live <= Used <= Footprint <= Limit
//
// Used - Live is the rounding to class sizes and pages; Footprint - Used
// the free and not yet carved chunks of the classes and their slabs'
// tails.
//
// Metadata is the Go memory the heap keeps for its bookkeeping and that
// grows with it: each class in use's double-free bitmap (one bit per
// chunk of its committed slabs), its pool (the Pool struct and the pool's
// own Metadata), and each large object's table entry and mem.Region
// struct. It counts the slices' capacities; not counted are the Heap
// struct (the span table and the class table in it, about 16 KiB however
// large the heap), the large-object map's own overhead beyond its keys and
// values, and package mem's own record of each region's committed pages.
//
// Live counts, for each freed block, the length of the slice Free
// was given: a block freed through a shorter slice than Alloc returned
// leaves Live too high, through a longer one too low, and Stats clamps
// Live to [0, Used] so that the equations above hold.
type Stats struct {
	carve.Stats
	// Classes has one entry per size class, smallest first, including
	// classes never used.
	Classes []ClassStats
	// LargeObjects counts the live large objects, LargeBytes their
	// committed (page-rounded) bytes.
	LargeObjects int64
	LargeBytes   int64
}

// ClassStats describes one size class: its pool's counts. For a class:
//
//	InUse + Free + Quarantined = Carved <= Capacity = Slabs * (SlabSize / Size)
type ClassStats struct {
	Size        int   // chunk size
	Align       int   // alignment of every chunk
	SlabSize    int   // bytes committed at a time
	InUse       int64 // chunks handed out and not freed
	Free        int64 // chunks freed and ready for reuse
	Carved      int64 // chunks cut from the committed slabs so far
	Capacity    int64 // chunks the committed slabs hold
	Quarantined int64 // chunks a checked build found written after free
	Slabs       int64 // slabs committed
	Footprint   int64 // bytes committed: Slabs * SlabSize
	Resident    int64 // bytes of the footprint in physical memory
}

// Footprint returns the bytes the heap has committed, every class's slabs
// and every large object: Stats().Footprint, in O(1), for callers that
// sample it often, such as the lab's replayer.
func (h *Heap) Footprint() int64 { return h.footprint }

// Stats returns the heap's statistics. It costs a walk of every class's
// free list and one mincore per class in use and per large object.
func (h *Heap) Stats() Stats {
	st := Stats{Classes: make([]ClassStats, numClasses-1)}
	st.Live = h.live
	for c := 1; c < numClasses; c++ {
		cl := &h.classes[c]
		cs := &st.Classes[c-1]
		*cs = ClassStats{
			Size:     int(classSize[c]),
			Align:    classAlign(uint8(c)),
			SlabSize: int(slabBytes(c)),
		}
		if cl.pool == nil {
			continue
		}
		ps := cl.pool.Stats()
		cs.InUse, cs.Free, cs.Carved, cs.Capacity = ps.InUse, ps.Free, ps.Carved, ps.Capacity
		cs.Quarantined, cs.Slabs = ps.Quarantined, int64(ps.Slabs)
		cs.Footprint, cs.Resident = ps.Footprint, ps.Resident
		st.Metadata += 8*int64(cap(cl.live)) + int64(unsafe.Sizeof(pool.Pool{})) + ps.Metadata
		st.Used += cs.InUse * int64(cs.Size)
		st.Footprint += cs.Footprint
		st.Resident += cs.Resident
	}
	st.LargeObjects = int64(len(h.large.regions))
	st.Metadata += st.LargeObjects * int64(unsafe.Sizeof(uintptr(0))+unsafe.Sizeof((*mem.Region)(nil))+unsafe.Sizeof(mem.Region{}))
	st.LargeBytes = h.large.bytes
	st.Used += h.large.bytes
	st.Footprint += h.large.bytes
	st.Live = min(max(st.Live, 0), st.Used)
	for _, r := range h.large.regions {
		st.Metadata += r.Metadata()
		if n, err := r.Resident(0, r.Size()); err == nil {
			st.Resident += int64(n)
		}
	}
	return st
}
