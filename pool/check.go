package pool

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds what checked builds (-tags carvecheck) add to the pool,
// and the invariant checker the tests run after every step.
//
// A checked pool keeps one bit per chunk (set while the chunk is handed
// out) to detect double frees, including frees into slabs Trim gave back,
// fills freed chunks past the link with invariants.Poison, and verifies
// the poison and the link when it hands a chunk out again. A chunk found
// written after free is quarantined: kept out of use, reported by Alloc,
// and counted in Stats.Quarantined.

// index returns the chunk number of the chunk at off, counting across
// slabs.
func (p *Pool) index(off offset) uintptr {
	s, in := uintptr(off)>>p.shift, uintptr(off)&p.mask
	return s*p.perSlab + in/p.stride
}

func (p *Pool) isLive(off offset) bool {
	i := p.index(off)
	return i/64 < uintptr(len(p.live)) && p.live[i/64]&(1<<(i%64)) != 0
}

func (p *Pool) markLive(off offset) {
	i := p.index(off)
	for i/64 >= uintptr(len(p.live)) {
		p.live = append(p.live, 0)
	}
	if p.live[i/64]&(1<<(i%64)) == 0 {
		p.live[i/64] |= 1 << (i % 64)
		p.nlive++
	}
}

func (p *Pool) clearLive(off offset) {
	i := p.index(off)
	if p.live[i/64]&(1<<(i%64)) != 0 {
		p.live[i/64] &^= 1 << (i % 64)
		p.nlive--
	}
}

// chunk returns the stride bytes of the chunk at off.
func (p *Pool) chunk(off offset) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(p.base, off)), p.stride)
}

// poison fills a free chunk past its link.
func poison(c []byte) {
	for i := LinkSize; i < len(c); i++ {
		c[i] = invariants.Poison
	}
}

// valid reports whether off starts a carved chunk of a committed slab.
func (p *Pool) valid(off offset) bool {
	in := uintptr(off) & p.mask
	return uintptr(off) < p.top && in < p.usable && in%p.stride == 0 && !p.vacant[uintptr(off)>>p.shift]
}

// allocChecked pops the head as alloc does, after checking that the chunk
// was free, that its poison is intact and that its link leads to a free
// chunk.
func (p *Pool) allocChecked() (unsafe.Pointer, error) {
	off := p.head
	c := p.chunk(off)
	next := *p.next(off)
	free := p.carved - p.nlive // this chunk included
	if next == off || (next == none) != (free == 1) || next != none && (!p.valid(next) || p.isLive(next)) {
		// The link was overwritten: keep this chunk out of use and rebuild
		// the list from the live bits, so the pool stays whole.
		p.quarantine(off)
		p.rebuildFreeList()
		return nil, fmt.Errorf("%w: the free-list link of the chunk at offset %d was overwritten", ErrCorrupt, off)
	}
	for i := LinkSize; i < len(c); i++ {
		if c[i] != invariants.Poison {
			// The link may be overwritten too, with a plausible value.
			p.quarantine(off)
			p.rebuildFreeList()
			return nil, fmt.Errorf("%w: chunk at offset %d, byte %d is %#x, want poison %#x", ErrCorrupt, off, i, c[i], invariants.Poison)
		}
	}
	p.head = next
	p.markLive(off)
	return unsafe.Pointer(&c[0]), nil
}

func (p *Pool) quarantine(off offset) {
	p.quarantined++
	p.markLive(off)
	i := p.index(off)
	for i/64 >= uintptr(len(p.quar)) {
		p.quar = append(p.quar, 0)
	}
	p.quar[i/64] |= 1 << (i % 64)
}

func (p *Pool) isQuarantined(off offset) bool {
	i := p.index(off)
	return i/64 < uintptr(len(p.quar)) && p.quar[i/64]&(1<<(i%64)) != 0
}

// freeChecked pushes the chunk at off, which free found to be in range,
// refusing a double free.
func (p *Pool) freeChecked(off offset) error {
	if !p.valid(off) || !p.isLive(off) || p.isQuarantined(off) {
		return fmt.Errorf("%w: chunk at offset %d", ErrDoubleFree, off)
	}
	p.clearLive(off)
	poison(p.chunk(off))
	*p.next(off) = p.head
	p.head = off
	return nil
}

// rebuildFreeList threads every carved chunk that is not live onto a new
// free list (checked builds only: it needs the live bits).
func (p *Pool) rebuildFreeList() {
	p.head = none
	for s := p.nslabs - 1; s >= 0; s-- {
		start := uintptr(s) << p.shift
		for i := p.carvedIn(s); i > 0; i-- {
			off := offset(start + (i-1)*p.stride)
			if !p.isLive(off) {
				*p.next(off) = p.head
				p.head = off
			}
		}
	}
}

// check verifies the pool's invariants and returns the first one broken:
//
//	every free-list link starts a carved chunk of a committed slab;
//	the list has no cycle;
//	free chunks + Quarantined <= Carved == chunks carved per slab;
//	the cursor lies in the last slab, at a chunk boundary;
//	in checked builds, no free chunk is marked live and the live bits
//	count every carved chunk that is not free.
//
// It reads only free chunks' links and never touches uncarved memory.
func (p *Pool) check() error {
	if p.closed {
		return nil
	}
	if len(p.vacant) != p.nslabs {
		return fmt.Errorf("%d vacancy flags for %d slabs", len(p.vacant), p.nslabs)
	}
	if p.nslabs > 0 {
		start := uintptr(p.nslabs-1) << p.shift
		if p.top < start || p.top > p.topEnd || p.topEnd > start+p.usable || (p.top-start)%p.stride != 0 {
			return fmt.Errorf("cursor %d (end %d) outside the last slab [%d, %d)", p.top, p.topEnd, start, start+p.usable)
		}
	}
	var carved int64
	nvacant := 0
	for s := range p.nslabs {
		carved += int64(p.carvedIn(s))
		if p.vacant[s] {
			nvacant++
		}
	}
	if carved != p.carved || nvacant != p.nvacant {
		return fmt.Errorf("slabs carved %d chunks with %d vacant, pool counts %d and %d", carved, nvacant, p.carved, p.nvacant)
	}
	var free int64
	for off := p.head; off != none; off = *p.next(off) {
		if !p.valid(off) {
			return fmt.Errorf("free list: offset %d after %d free chunks is not a carved chunk", off, free)
		}
		if invariants.Enabled && p.isLive(off) {
			return fmt.Errorf("free list: chunk at offset %d is marked live", off)
		}
		free++
		if free > carved {
			return fmt.Errorf("free list: longer than the %d carved chunks (a cycle: a double free?)", carved)
		}
	}
	if free+p.quarantined > carved {
		return fmt.Errorf("free %d + quarantined %d > carved %d", free, p.quarantined, carved)
	}
	if invariants.Enabled {
		var n int64
		for _, w := range p.live {
			for ; w != 0; w &= w - 1 {
				n++
			}
		}
		if n != p.nlive || n != carved-free {
			return fmt.Errorf("live bits count %d, want %d (counted) and carved %d - free %d", n, p.nlive, carved, free)
		}
	}
	return nil
}
