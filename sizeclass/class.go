package sizeclass

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// This file holds the size classes: what the heap keeps per class, how a
// request finds its class, and how a class grows.

// class is one size class: a pool of chunks of one size, and what the
// heap knows about it without asking the pool.
//
//	inUse = slabs*perSlab - avail - quarantined
type class struct {
	// Hot fields, read by Alloc and Free.
	pool  *pool.Pool // nil until the class's first allocation
	avail int64      // chunks the pool hands out before it must commit a slab: free or not yet carved
	base  uintptr    // address of the pool's reservation, which its first chunk starts
	magic uint64     // ceil(2^64 / size): a chunk's index is the high word of its offset times magic
	live  []uint64   // bit i set: the chunk of index i is handed out
	size  uintptr    // chunk size

	// Slow-path fields.
	slab        int64 // bytes per slab
	perSlab     int64 // chunks per slab
	slabs       int64 // slabs committed
	quarantined int64 // chunks a checked build found written after free
}

// classFor returns the class of a request of size bytes (at most
// MaxClassSize) aligned to align (a power of two up to MaxAlign), or 0 if
// no class is aligned enough.
func classFor(size, align int) uint8 {
	c := sizeClass(size)
	if align > minAlign {
		c = alignedClass[bits.TrailingZeros(uint(align))][c]
	}
	return c
}

// sizeClass returns the smallest class that holds size bytes, from 0 to
// MaxClassSize.
func sizeClass(size int) uint8 {
	if size <= smallSizeMax {
		return sizeToClass8[(size+smallSizeDiv-1)/smallSizeDiv]
	}
	return sizeToClass128[(size-smallSizeMax+largeSizeDiv-1)/largeSizeDiv]
}

// classAlign returns the alignment of the chunks of class c: the largest
// power of two that divides its size, up to MaxAlign (pools start on a
// page and slabs are powers of two, so every chunk has it).
func classAlign(c uint8) int {
	return min(1<<bits.TrailingZeros32(classSize[c]), MaxAlign)
}

// grow hands out a chunk of class c, which has none available: the pool
// commits a slab for it (a new one, or one that Trim gave back). The
// class's first slab also creates its pool and records where the pool's
// reservation lies.
func (h *Heap) grow(c uint8) ([]byte, error) {
	cl := &h.classes[c]
	if h.footprint+cl.slab > h.limit {
		return nil, fmt.Errorf("%w: %d bytes committed, a %d-byte slab of the %d-byte class would pass the limit %d",
			ErrExhausted, h.footprint, cl.slab, cl.size, h.limit)
	}
	if cl.pool == nil {
		if err := h.open(c); err != nil {
			return nil, err
		}
	}
	b, err := cl.pool.Alloc()
	if err != nil {
		if errors.Is(err, pool.ErrExhausted) {
			return nil, fmt.Errorf("%w: the %d-byte class: %w", ErrExhausted, cl.size, err)
		}
		return nil, fmt.Errorf("sizeclass: the %d-byte class: %w", cl.size, err)
	}
	if cl.base == 0 {
		// A new pool carves its first chunk at offset 0, the first byte of
		// its reservation (pool's layout: slab 0 starts at the base and
		// chunks are carved in address order).
		cl.base = addr(b)
		h.spans.insert(cl.base, c)
	}
	cl.slabs++
	cl.avail += cl.perSlab
	h.footprint += cl.slab
	cl.cover(addr(b))
	return b, nil
}

// open creates the pool of class c.
func (h *Heap) open(c uint8) error {
	cl := &h.classes[c]
	align := classAlign(c)
	p, err := pool.New(int(cl.size), pool.Align(align), pool.SlabSize(int(cl.slab)), pool.Limit(h.reserve))
	if err != nil {
		return fmt.Errorf("sizeclass: the %d-byte class: %w", cl.size, err)
	}
	// The heap counts slabs and chunks itself; it relies on the pool's
	// geometry being what it asked for.
	if st := p.Stats(); st.Stride != int(cl.size) || st.SlabSize != int(cl.slab) || st.Align != align {
		p.Close()
		return fmt.Errorf("sizeclass: the %d-byte class: pool has stride %d, slabs of %d bytes, alignment %d; want %d, %d, %d",
			cl.size, st.Stride, st.SlabSize, st.Align, cl.size, cl.slab, align)
	}
	cl.pool = p
	return nil
}

// takeFailed handles a pool that refused a chunk the heap counted as
// available: in checked builds, one it found written after free and
// quarantined.
func (h *Heap) takeFailed(cl *class, err error) error {
	if errors.Is(err, pool.ErrCorrupt) {
		cl.quarantined++
		cl.avail--
	}
	return fmt.Errorf("sizeclass: the %d-byte class: %w", cl.size, err)
}

// index returns the index of the chunk at address a, which lies in the
// class's reservation: floor(offset / size), by a multiply (exact for
// offsets below 2^64/size, far above any reservation). Chunks are size
// bytes apart within a slab and each slab holds a whole number of them,
// so distinct chunks get distinct indices, increasing with the address.
func (cl *class) index(a uintptr) uintptr {
	hi, _ := bits.Mul64(uint64(a-cl.base), cl.magic)
	return uintptr(hi)
}

// mark records the chunk c as handed out.
func (cl *class) mark(c []byte) {
	i := cl.index(addr(c))
	cl.live[i/64] |= 1 << (i % 64)
}

// isLive reports whether the chunk index of a is handed out.
func (cl *class) isLive(a uintptr) bool {
	i := cl.index(a)
	return i/64 < uintptr(len(cl.live)) && cl.live[i/64]&(1<<(i%64)) != 0
}

// cover grows the live bitmap to hold every chunk of the slab that holds
// address a.
func (cl *class) cover(a uintptr) {
	off := int64(a - cl.base)
	end := (off/cl.slab + 1) * cl.slab
	i := cl.index(cl.base + uintptr(end-1))
	for uintptr(len(cl.live)) <= i/64 {
		cl.live = append(cl.live, 0)
	}
}

// inUse returns the chunks of the class handed out and not freed.
func (cl *class) inUse() int64 { return cl.slabs*cl.perSlab - cl.avail - cl.quarantined }

// slabBytes returns the slab size of class c: the table's, or a page if
// pages are larger.
func slabBytes(c int) int64 {
	return max(int64(classSlab[c]), int64(mem.PageSize()))
}
