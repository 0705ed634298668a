package lockfree

import (
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/mem"
)

// Stats is a pool's statistics: the carve vocabulary (Live, Used,
// Footprint, Resident, Metadata) and the pool's counts. For a pool:
//
//	Live      = InUse * ChunkSize
//	Used      = InUse * Stride          (Used - Live: the rounding to the alignment)
//	Footprint = Slabs * SlabSize + LinkBytes   (the region's length, not slabs, for Over)
//	InUse + Free + Cached + Quarantined = Carved <= Capacity
//
// The side table counts in Footprint, so Footprint - Used, the external
// fragmentation, includes the pool's 4 bytes per chunk (over a caller's
// region too, where the table is Go memory). Metadata is the other Go
// memory that grows with the pool: the depot's array of chunk indices,
// 4 bytes per chunk it can hold (the capacity it grew to). Not counted:
// the Pool struct, each Cache (a few hundred bytes, in the memory of
// whoever made it), and package mem's own record of the regions'
// committed pages.
type Stats struct {
	carve.Stats
	ChunkSize   int   // bytes asked for per chunk
	Stride      int   // bytes a chunk takes: ChunkSize rounded up to Align
	Align       int   // alignment of every chunk
	InUse       int64 // chunks handed out and not freed
	Free        int64 // chunks on the shared free list or in the depot
	Cached      int64 // chunks held by caches, as of each cache's last trade with the pool (see Cache)
	Carved      int64 // chunks carved from the committed slabs
	Capacity    int64 // chunks the committed slabs can hold
	Quarantined int64 // chunks a checked build found written after free
	Slabs       int   // committed slabs (1 for a pool made by Over)
	SlabSize    int   // bytes per slab (the region's length for Over)
	LinkBytes   int64 // bytes of the side table, LinkBytes per chunk of Capacity
}

// Stats returns the pool's statistics. It walks the free list, takes the
// growth and depot mutexes briefly, and makes one mincore system call per
// region (for Resident). The pool keeps no count of chunks in use: an
// atomic counter on the shared paths, measured, took an uncontended pair
// from 25 to 35 CPU ns, and would be one more contended cache line.
//
// Stats is exact while no other goroutine allocates or frees, and after
// every cache has flushed (see [Cache] for when caches report). While they
// run it is an estimate: the walk meets a list that changes under it (it
// never takes more steps than there are chunks).
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{
		ChunkSize: int(p.size),
		Stride:    int(p.stride),
		Align:     int(p.align),
		SlabSize:  int(p.slabSize),
	}
	if p.closed.Load() {
		return st
	}
	carved := int64(p.carved.Load())
	quar := p.quarantined.Load()
	// Chunks out of the pool: with callers or in caches. How they split
	// is known as of each cache's last trade: the caches' count may be
	// stale either way, and is capped so that InUse stays positive.
	depot, depotCap := p.depot.size()
	free := min(p.freeCount(carved)+int64(depot), carved-quar)
	out := carved - free - quar
	cached := min(p.cached.Load(), out)
	st.InUse = out - cached
	st.Free, st.Cached, st.Quarantined = free, cached, quar
	st.Carved, st.Capacity = carved, int64(p.capacity)
	st.Live = st.InUse * int64(p.size)
	st.Used = st.InUse * int64(p.stride)
	st.Slabs = int(p.committed / p.slabSize)
	st.Metadata = int64(depotCap) * int64(unsafe.Sizeof(index(0)))
	if p.region != nil {
		st.Metadata += p.region.Metadata() + p.linkMem.Metadata()
	}
	if p.region == nil {
		st.LinkBytes = int64(len(p.links)) * LinkBytes
		st.Footprint = int64(len(p.over)) + st.LinkBytes
		if r, err := mem.Resident(p.over); err == nil {
			// mincore counts whole pages, which may reach past the region.
			st.Resident = min(int64(r), int64(len(p.over))) + st.LinkBytes
		}
		return st
	}
	st.LinkBytes = int64(p.linkMem.Committed())
	st.Footprint = int64(p.region.Committed()) + st.LinkBytes
	r, err := p.region.Resident(0, int(p.committed))
	lr, err2 := p.linkMem.Resident(0, int(p.capacity*LinkBytes))
	if err == nil && err2 == nil {
		st.Resident = int64(r + lr)
	}
	return st
}

// freeCount counts the chunks on the free list, taking at most carved
// steps.
func (p *Pool) freeCount(carved int64) int64 {
	var n int64
	for i := headWord(p.head.Load()).index(); i != nilIndex && n < carved && uint64(i) < uint64(len(p.links)); i = index(p.links[i].Load()) {
		n++
	}
	return n
}
