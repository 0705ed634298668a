package heap

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the small zone: slots of the size classes, in slabs of
// one page.
//
// Each page of the zone is free or a slab of one class. A slab's slots
// are the class's size apart from the page's start; which are free is a
// bitmap in Go memory (bit set: free), so a slot in use carries no header
// and a free one holds nothing the heap reads. A class allocates from its
// lowest slab with a free slot (its partial set's first member), and a
// new slab takes a free page still resident if the purge ring holds one,
// else the zone's lowest free page: both keep the live slots packed
// towards the bottom of the zone, so that slabs high up drain. A
// slab whose last slot is freed gives its page back to the zone at once:
// the page is free, dirty until the purge ring gives it back to the OS.

// slab is what the heap keeps of one page of the small zone.
type slab struct {
	class uint8  // 0: the page is not a slab
	nfree uint16 // free slots
	bits  uint32 // which of the class's bitmaps is the slab's
}

// class is one size class.
//
//	inUse = sum over the class's slabs of (slots - nfree)
//	a slab is in partial exactly when 0 < nfree < slots (an empty slab is freed)
//	next = 1 + partial's first member, or 0 if partial is empty
type class struct {
	next    int       // 1 + the page of the lowest slab with a free slot; 0: none (so a zero class has none)
	size    uintptr   // slot size
	magic   uint64    // ceil(2^32 / size): a slot's index is (offset in page * magic) >> 32
	slots   int       // slots per slab
	words   int       // bitmap words per slab
	bits    []uint64  // the slabs' bitmaps, words apiece: bit set, slot free
	spare   uint32    // 1 + the first bitmap no slab uses, 0: none; its first word holds the next's spare value
	nspare  int       // bitmaps no slab uses
	partial searchSet // pages of the class's slabs that have a free slot
	inUse   int64     // slots handed out
	slabs   int       // slabs
}

type smallZone struct {
	zonePages
	slabs   []slab // per committed page
	classes [numClasses]class
	used    int64 // bytes of slots in use: Used's part
	nSlabs  int

	slabEvents int64 // slabs made and freed, for Metadata
}

func (z *smallZone) init(n int64) error {
	if err := z.zonePages.init(n); err != nil {
		return err
	}
	for c := range z.classes {
		if c == 0 {
			continue
		}
		cl := &z.classes[c]
		cl.size = uintptr(classSize[c])
		cl.magic = (1<<32 + uint64(cl.size) - 1) / uint64(cl.size)
		cl.slots = int(classSlots[c])
		cl.words = (cl.slots + 63) / 64
	}
	return nil
}

// classAlign returns the alignment of every slot of class c: slabs start
// on pages, so it is the largest power of two that divides the size.
func classAlign(c uint8) int {
	s := int(classSize[c])
	return s & -s
}

// classFor returns the class that serves size bytes aligned to align, or
// 0 if none does: up to MaxSmall, the smallest class that holds size bytes
// and is aligned enough; above it, an exact class whose size is size plus
// at most exactSlack-1.
func classFor(size, align int) uint8 {
	if size > MaxSmall {
		c := 1 << bits.Len(uint(size-1)) // the power of two at or above size
		if c < exactMin || c > pageSize || c-size >= exactSlack || align > c {
			return 0
		}
		return firstExact + uint8(bits.TrailingZeros(uint(c/exactMin)))
	}
	for c := sizeToClass[(size+7)>>3]; c < firstExact; c++ {
		if classAlign(c) >= align {
			return c
		}
	}
	return 0
}

// bytes returns n bytes at offset p of the zone, with cap == n.
func (z *smallZone) bytes(p offset, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(z.base, p)), n)
}

// take hands out the lowest free slot of the slab at page pg, a partial
// slab of class cl.
func (z *smallZone) take(cl *class, pg int) offset {
	s := &z.slabs[pg]
	w := cl.bits[int(s.bits)*cl.words:][:cl.words]
	var slot int
	for i, m := range w {
		if m != 0 {
			w[i] = m & (m - 1)
			slot = i*64 + bits.TrailingZeros64(m)
			break
		}
	}
	if s.nfree--; s.nfree == 0 {
		cl.partial.remove(pg)
		cl.next = cl.partial.first() + 1
	}
	cl.inUse++
	z.used += int64(cl.size)
	p := offset(pg<<pageShift) + offset(slot)*offset(cl.size)
	if invariants.Enabled {
		verifySlot(z.bytes(p, int(cl.size)), p)
	}
	return p
}

// allocSmall returns size bytes from a slot of class c, making a slab
// when the class has no free slot.
func (h *Heap) allocSmall(c uint8, size int) ([]byte, error) {
	z := &h.small
	cl := &z.classes[c]
	if cl.next == 0 {
		if err := h.newSlab(c); err != nil {
			return nil, err
		}
	}
	p := z.take(cl, cl.next-1)
	h.live += int64(size)
	return z.bytes(p, size), nil
}

// newSlab makes a free page a slab of class c (one still resident if the
// purge ring knows one, else the zone's lowest), committing more of the
// zone if no page is free.
func (h *Heap) newSlab(c uint8) error {
	z := &h.small
	pg := h.dirtySmallPage()
	if pg < 0 {
		pg = z.free.first()
	}
	if pg < 0 {
		if err := z.commit(z.committed + pageSize); err != nil {
			return fmt.Errorf("a slab of the %d-byte class: %w", classSize[c], err)
		}
		z.slabs = append(z.slabs, make([]slab, z.pages()-len(z.slabs))...)
		pg = z.free.first()
		h.checkSlow()
	}
	if z.clean.has(pg) && h.Footprint()+pageSize > h.limit {
		return fmt.Errorf("%w: a slab of the %d-byte class would take the footprint %d past the limit %d",
			ErrExhausted, classSize[c], h.Footprint(), h.limit)
	}
	h.used(&z.zonePages, pg, pg+1)
	cl := &z.classes[c]
	var idx uint32
	if cl.spare != 0 {
		// A bitmap of a slab freed before: its first word links the next.
		idx = cl.spare - 1
		cl.spare = uint32(cl.bits[int(idx)*cl.words])
		cl.nspare--
	} else {
		idx = uint32(len(cl.bits) / cl.words)
		cl.bits = append(cl.bits, make([]uint64, cl.words)...)
	}
	w := cl.bits[int(idx)*cl.words:][:cl.words]
	for i := range w {
		w[i] = mask(i, 0, cl.slots)
	}
	z.slabs[pg] = slab{class: c, nfree: uint16(cl.slots), bits: idx}
	if invariants.Enabled {
		poison(z.bytes(offset(pg<<pageShift), pageSize))
	}
	cl.partial.grow(pg + 1)
	cl.partial.add(pg)
	cl.next = cl.partial.first() + 1
	cl.slabs++
	z.nSlabs++
	z.slabEvents++
	return nil
}

// dirtySmallPage returns a free page of the small zone that is still
// resident, the most recently freed the purge ring knows, or -1: a slab
// made there costs neither a page fault nor, later, a purge.
func (h *Heap) dirtySmallPage() int {
	z := &h.small
	r := &h.ring
	for i := r.n - 1; i >= 0; i-- {
		x := r.at(i)
		if x.zone != smallID {
			continue
		}
		lo, hi := int(x.lo), min(int(x.hi), z.pages())
		for w := (hi - 1) / 64; w >= lo/64 && hi > lo; w-- {
			if m := z.free.words[w] &^ z.clean[w] & mask(w, lo, hi); m != 0 {
				return w*64 + 63 - bits.LeadingZeros64(m)
			}
		}
	}
	return -1
}

// slot finds the slot in use that starts at offset off of the zone, in
// its committed pages: its slab's page, the bitmap word that holds its
// bit, and the bit. It refuses anything else, reading nothing of the
// zone's memory.
func (z *smallZone) slot(off uintptr) (pg int, w *uint64, bit uint64, err error) {
	pg = int(off >> pageShift)
	s := &z.slabs[pg]
	if s.class == 0 {
		return 0, nil, 0, fmt.Errorf("%w: %#x (offset %d of the small zone) lies in a free page",
			ErrDoubleFree, uintptr(z.base)+off, off)
	}
	cl := &z.classes[s.class]
	o := uint64(off & (pageSize - 1))
	i := int(o * cl.magic >> 32)
	if uintptr(i)*cl.size != uintptr(o) || i >= cl.slots {
		return 0, nil, 0, fmt.Errorf("%w: %#x (offset %d of the small zone) is not the start of a slot of its %d-byte slab",
			ErrForeign, uintptr(z.base)+off, off, cl.size)
	}
	w = &cl.bits[int(s.bits)*cl.words+i/64]
	bit = 1 << (i % 64)
	if *w&bit != 0 {
		return 0, nil, 0, fmt.Errorf("%w: %#x (a free slot of the %d-byte class)", ErrDoubleFree, uintptr(z.base)+off, cl.size)
	}
	return pg, w, bit, nil
}

// owned returns the class of the slot in use at offset off, or why there
// is none.
func (z *smallZone) owned(off uintptr) (uint8, error) {
	pg, _, _, err := z.slot(off)
	if err != nil {
		return 0, err
	}
	return z.slabs[pg].class, nil
}

// freeSmall frees the slot at offset off of the small zone, in its
// committed pages; b is the caller's slice.
func (h *Heap) freeSmall(b []byte, off uintptr) error {
	z := &h.small
	pg, w, bit, err := z.slot(off)
	if err != nil {
		return err
	}
	s := &z.slabs[pg]
	cl := &z.classes[s.class]
	*w |= bit
	if invariants.Enabled {
		poison(z.bytes(offset(off), int(cl.size)))
	}
	cl.inUse--
	z.used -= int64(cl.size)
	h.live -= int64(min(uintptr(len(b)), cl.size))
	if s.nfree++; s.nfree == 1 {
		cl.partial.add(pg)
		if cl.next == 0 || pg < cl.next-1 {
			cl.next = pg + 1
		}
	}
	if int(s.nfree) == cl.slots {
		h.freeSlab(cl, pg)
	}
	return nil
}

// freeSlab gives back the page of the empty slab at pg, of class cl.
func (h *Heap) freeSlab(cl *class, pg int) {
	z := &h.small
	cl.partial.remove(pg)
	if cl.next == pg+1 {
		cl.next = cl.partial.first() + 1
	}
	// The slab's bitmap goes on the class's spare list, linked through
	// its own first word, so that the list costs no memory of its own.
	idx := z.slabs[pg].bits
	cl.bits[int(idx)*cl.words] = uint64(cl.spare)
	cl.spare = idx + 1
	cl.nspare++
	z.slabs[pg] = slab{}
	cl.slabs--
	z.nSlabs--
	z.slabEvents++
	h.released(smallID, pg, pg+1)
}

// reallocSmall resizes the slot of class c that b starts: in place when
// size falls in the class, else by moving it.
func (h *Heap) reallocSmall(b []byte, c uint8, size int) ([]byte, error) {
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: Realloc(%d): size is negative (want >= 0)", ErrSize, size)
	case int64(size) > h.limit:
		return nil, fmt.Errorf("%w: Realloc(%d): size exceeds the limit %d", ErrExhausted, size, h.limit)
	case classFor(size, 1) == c:
		old := min(len(b), int(classSize[c]))
		h.live += int64(size - old)
		return h.small.bytes(offset(addr(b)-uintptr(h.small.base)), size), nil
	}
	return h.move(b[:min(len(b), int(classSize[c]))], size)
}
