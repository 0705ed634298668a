package pool

import (
	"fmt"
	"math/bits"
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
// and counted in Stats.Quarantined. Its slow paths (every Alloc, Free and
// Trim of a checked build) run checkOwn, the checker of the pool's own
// bookkeeping, on a schedule that keeps its cost linear (mayCheck).

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
	p.mayCheck()
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
// those of checkOwn, and
//
//	every free-list link starts a carved chunk of a committed slab;
//	the list has no cycle;
//	free chunks + Quarantined <= Carved;
//	in checked builds, no free chunk is marked live and the live bits
//	count every carved chunk that is not free.
//
// It reads only free chunks' links and never touches uncarved memory.
// The tests run it after every step.
func (p *Pool) check() error {
	if p.closed {
		return nil
	}
	if err := p.checkOwn(); err != nil {
		return err
	}
	carved := p.carved
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
	if invariants.Enabled && p.nlive != carved-free {
		return fmt.Errorf("%d chunks marked live, want carved %d - free %d", p.nlive, carved, free)
	}
	return nil
}

// checkOwn verifies the invariants of the pool's own bookkeeping, which
// lives in Go memory, and returns the first one broken:
//
//	one vacancy flag per slab, nvacant of them set;
//	Carved == chunks carved per slab;
//	the cursor lies in the last slab, at a chunk boundary;
//	the head is none or a carved chunk of a committed slab;
//	in checked builds, the live bits count nlive chunks, all carved, and
//	none in a vacant slab; the quarantine bits count Quarantined chunks,
//	all marked live; the head is not marked live.
//
// It reads no chunk: it is what checked builds run on slow paths
// (mayCheck), where the free list cannot be walked. Its links live in the
// free chunks, which a caller may have written after freeing them, and a
// checked build must answer such a write with ErrCorrupt when the chunk
// is next handed out (allocChecked), not with a panic in the checker.
// Its cost is O(slabs + chunks / 64).
func (p *Pool) checkOwn() error {
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
	if p.head != none && !p.valid(p.head) {
		return fmt.Errorf("head: offset %d is not a carved chunk of a committed slab", p.head)
	}
	if !invariants.Enabled {
		return nil
	}
	if p.head != none && p.isLive(p.head) {
		return fmt.Errorf("head: chunk at offset %d is marked live", p.head)
	}
	// Every live bit lies in a committed slab, among the chunks carved
	// there: the bits counted in those ranges are all the bits.
	var live, inSlabs, quar int64
	for _, word := range p.live {
		live += int64(bits.OnesCount64(word))
	}
	for s := range p.nslabs {
		lo := uintptr(s) * p.perSlab
		inSlabs += countBits(p.live, lo, lo+p.carvedIn(s))
	}
	if inSlabs != live {
		return fmt.Errorf("%d of %d live bits lie outside the chunks carved in committed slabs", live-inSlabs, live)
	}
	for w, word := range p.quar {
		quar += int64(bits.OnesCount64(word))
		if w >= len(p.live) || word&^p.live[w] != 0 {
			return fmt.Errorf("quarantine bits %#x of word %d are not all marked live", word, w)
		}
	}
	if live != p.nlive || live > carved || quar != p.quarantined {
		return fmt.Errorf("live bits count %d (pool counts %d, carved %d), quarantine bits %d (pool counts %d)",
			live, p.nlive, carved, quar, p.quarantined)
	}
	return nil
}

// countBits returns how many bits of m are set in [lo, hi).
func countBits(m []uint64, lo, hi uintptr) int64 {
	hi = min(hi, uintptr(len(m))*64)
	var n int64
	for lo < hi {
		w, b := lo/64, lo%64
		word := m[w] >> b
		if k := hi - lo; k < 64-b {
			word &= 1<<k - 1
		}
		n += int64(bits.OnesCount64(word))
		lo += 64 - b
	}
	return n
}

// mayCheck runs checkOwn on a slow path of a checked build when its
// schedule says so, and panics if an invariant is broken: a pool whose
// bookkeeping is broken must stop the program before it hands out a chunk
// twice. The schedule keeps the checks' cost linear in the calls.
func (p *Pool) mayCheck() {
	if p.closed || !p.checks.Due() {
		return
	}
	if err := p.checkOwn(); err != nil {
		panic("pool: invariant broken: " + err.Error())
	}
	p.checks.Ran(p.nslabs + 2*len(p.live) + len(p.quar))
}
