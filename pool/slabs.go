package pool

// Slabs calls yield for each committed slab of the pool, in address
// order, with the slab's index (slab s spans offsets [s*SlabSize,
// (s+1)*SlabSize) of the pool's reservation) and how many chunks have
// been carved in it (all of them, but for the slab the pool is carving
// from), until yield returns false. Slabs that Trim gave back are
// skipped. It reads the pool's bookkeeping only, never its memory: for a
// heap map (package heapmap) of the heaps built from pools. O(slabs).
func (p *Pool) Slabs(yield func(slab, carved int) bool) {
	if p.closed {
		return
	}
	for s := range p.nslabs {
		if p.vacant[s] {
			continue
		}
		if !yield(s, int(p.carvedIn(s))) {
			return
		}
	}
}
