package pool

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the pool's slow paths: carving, growing, reviving and
// trimming slabs.

// allocSlow runs when the free list is empty (and, in checked builds, on
// every allocation, where it also runs the invariant checker when its
// schedule says so: see mayCheck).
//
//  1. Carve the chunk at the cursor, if the cursor's slab has one left.
//  2. Otherwise revive the lowest vacant slab: commit it and put all its
//     chunks on the free list (the free list is empty, so none of them can
//     be there already).
//  3. Otherwise commit the slab after the cursor's and carve from it.
//  4. Otherwise the pool is at its limit.
func (p *Pool) allocSlow() (unsafe.Pointer, error) {
	if invariants.Enabled {
		p.mayCheck()
		if p.head != none {
			return p.allocChecked()
		}
	}
	if p.closed {
		return nil, ErrClosed
	}
	if p.top < p.topEnd {
		off := p.top
		p.top += p.stride
		p.carved++
		if invariants.Enabled {
			p.markLive(offset(off))
		}
		return unsafe.Add(p.base, off), nil
	}
	if p.region == nil {
		return nil, fmt.Errorf("%w: all %d chunks of %d bytes are in use", ErrExhausted, p.perSlab, p.size)
	}
	if p.nvacant > 0 {
		if err := p.revive(); err != nil {
			return nil, err
		}
		if invariants.Enabled {
			return p.allocChecked()
		}
		// Pop the first chunk revive put on the list.
		off := p.head
		p.head = *p.next(off)
		return unsafe.Add(p.base, off), nil
	}
	if int64(p.nslabs+1)*int64(p.slabSize) > p.limit {
		return nil, fmt.Errorf("%w: %d bytes committed, the limit", ErrExhausted, p.limit)
	}
	start := uintptr(p.nslabs) << p.shift
	if err := p.region.Commit(int(start), int(p.slabSize)); err != nil {
		return nil, fmt.Errorf("pool: grow: %w", err)
	}
	p.nslabs++
	p.vacant = append(p.vacant, false)
	p.top, p.topEnd = start, start+p.usable
	return p.allocSlow()
}

// revive commits the lowest vacant slab and threads all its chunks onto
// the (empty) free list in address order.
func (p *Pool) revive() error {
	s := 0
	for !p.vacant[s] {
		s++
	}
	start := uintptr(s) << p.shift
	if err := p.region.Commit(int(start), int(p.slabSize)); err != nil {
		return fmt.Errorf("pool: grow: %w", err)
	}
	p.vacant[s] = false
	p.nvacant--
	for in := p.usable; in >= p.stride; {
		in -= p.stride
		*p.next(offset(start + in)) = p.head
		p.head = offset(start + in)
		if invariants.Enabled {
			poison(p.chunk(offset(start + in)))
		}
	}
	p.carved += int64(p.perSlab)
	return nil
}

// Trim gives every slab whose chunks are all free back to the OS and
// returns how many bytes it released: RSS drops by as much, less pages
// never touched. The free list loses those slabs' chunks first, since
// decommitted pages read as zero. A pool made by Over trims nothing.
// After Close, Trim returns ErrClosed.
func (p *Pool) Trim() (int64, error) {
	if p.closed {
		return 0, ErrClosed
	}
	if invariants.Enabled {
		p.mayCheck()
	}
	if p.region == nil {
		return 0, nil
	}
	// Count the free chunks of each slab; a slab is empty when all the
	// chunks it carved are free.
	free := make([]uintptr, p.nslabs)
	for off := p.head; off != none; off = *p.next(off) {
		free[uintptr(off)>>p.shift]++
	}
	empty := make([]bool, p.nslabs)
	n := 0
	for s := range p.nslabs {
		if c := p.carvedIn(s); c > 0 && free[s] == c {
			empty[s] = true
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	p.unlink(empty)
	var released int64
	for s := range p.nslabs {
		if !empty[s] {
			continue
		}
		if err := p.region.Decommit(s<<p.shift, int(p.slabSize)); err != nil {
			return released, fmt.Errorf("pool: trim: %w", err)
		}
		p.carved -= int64(p.carvedIn(s))
		p.vacant[s] = true
		p.nvacant++
		released += int64(p.slabSize)
	}
	p.lowerCursor()
	return released, nil
}

// carvedIn returns how many chunks slab s has carved.
func (p *Pool) carvedIn(s int) uintptr {
	switch start := uintptr(s) << p.shift; {
	case p.vacant[s]:
		return 0
	case s == p.nslabs-1:
		return (p.top - start) / p.stride
	default:
		return p.perSlab
	}
}

// unlink removes the chunks of the slabs marked in drop from the free list,
// keeping the order of the rest.
func (p *Pool) unlink(drop []bool) {
	prev := none
	for off := p.head; off != none; off = *p.next(off) {
		if drop[uintptr(off)>>p.shift] {
			continue
		}
		if prev == none {
			p.head = off
		} else {
			*p.next(prev) = off
		}
		prev = off
	}
	if prev == none {
		p.head = none
	} else {
		*p.next(prev) = none
	}
}

// lowerCursor drops vacant slabs from the top of the pool: they become
// fresh address space again, and the cursor returns to the end of the
// highest slab still committed.
func (p *Pool) lowerCursor() {
	for p.nslabs > 0 && p.vacant[p.nslabs-1] {
		p.nslabs--
		p.nvacant--
		p.vacant = p.vacant[:p.nslabs]
		start := uintptr(p.nslabs) << p.shift
		p.top, p.topEnd = start, start
	}
	if p.top == uintptr(p.nslabs)<<p.shift && p.nslabs > 0 {
		// The cursor's slab went; the one below is full.
		p.top = uintptr(p.nslabs-1)<<p.shift + p.usable
		p.topEnd = p.top
	}
	// The tables follow the pool down, so that Metadata does: no chunk
	// of the slabs dropped is marked (they were all free).
	p.vacant = shrink(p.vacant)
	if invariants.Enabled {
		words := (uintptr(p.nslabs)*p.perSlab + 63) / 64
		p.live = shrink(p.live[:min(uintptr(len(p.live)), words)])
		p.quar = shrink(p.quar[:min(uintptr(len(p.quar)), words)])
	}
}

// shrink returns s, or a copy of it in a smaller array if s uses less
// than a quarter of its capacity, so that the pool gives back the Go
// memory of tables it no longer needs.
func shrink[E any](s []E) []E {
	switch {
	case len(s) >= cap(s)/4:
		return s
	case len(s) == 0:
		return nil
	}
	return append(make([]E, 0, 2*len(s)), s...)
}
