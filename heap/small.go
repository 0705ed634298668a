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
// and a free one holds nothing the heap reads. A second bitmap says which
// slots in use hold a request shorter than the slot: the slot's last
// byte, past what its caller may touch, then holds the slack (the slot's
// size less the request) less 1, from 0 to 255. So Free and Realloc know
// what was asked of every slot, whatever the slice they are given says,
// at the cost of one bit per slot and, for a slot with slack, a byte
// written at Alloc and read at Free. A class allocates from its
// lowest slab with a free slot (its partial set's first member), which
// keeps the live slots packed towards the bottom of the zone, so that
// slabs high up drain; a new slab takes a free page still resident if the
// purge ring holds one (no page fault), else the zone's lowest free page.
//
// A slab whose last slot is freed stays a slab of its class, kept, in
// case the class asks again (a request and its free in turn would
// otherwise make and unmake a slab each time): the zone keeps the
// slabs emptied last, at most keepBound of them, in the order they
// emptied. When one more empties past the bound, the oldest kept goes:
// its page, if the slab is still empty, goes back to the zone, free and
// dirty until the purge ring gives it back to the OS. The decay is
// counted in slabs emptied, so a replay is the same every time; the
// kept slabs are bounded beside the free pages kept (see keepBound).

// slab is what the heap keeps of one page of the small zone.
type slab struct {
	class uint8  // 0: the page is not a slab
	kept  bool   // in the kept ring (empty when it went in; maybe used since)
	nfree uint16 // free slots
	bits  uint32 // which of the class's bitmaps is the slab's
}

// maxKept is the most empty slabs the small zone keeps (256 KiB).
const maxKept = 64

// keptRing is the slabs kept, the oldest first: pages of the zone.
type keptRing struct {
	pages   [maxKept]int32
	head, n int
}

func (k *keptRing) push(pg int) {
	k.pages[(k.head+k.n)%maxKept] = int32(pg)
	k.n++
}

func (k *keptRing) pop() int {
	pg := int(k.pages[k.head])
	k.head = (k.head + 1) % maxKept
	k.n--
	return pg
}

// class is one size class.
//
//	inUse = sum over the class's slabs of (slots - nfree)
//	a slab is in partial exactly when nfree > 0 (an empty one only while kept)
//	cur = where the bitmaps of the slab at next-1 start, when next != 0
//	next = 1 + partial's first member, or 0 if partial is empty
type class struct {
	next    int       // 1 + the page of the lowest slab with a free slot; 0: none (so a zero class has none)
	cur     int       // with next: where in bits that slab's bitmaps start (setNext)
	size    uintptr   // slot size
	magic   uint64    // ceil(2^32 / size): a slot's index is (offset in page * magic) >> 32
	slots   int       // slots per slab
	words   int       // words per bitmap
	bits    []uint64  // the slabs' bitmaps, 2*words apiece: free slots (bit set: free), then slots in use with slack
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
	nSlabs  int
	kept    keptRing // the empty slabs kept
	mesh    meshState

	slabEvents int64 // slabs made and freed, for Metadata
}

// init reserves n bytes for the zone, backed by a memory file if it
// meshes.
func (z *smallZone) init(n int64, mesh bool) error {
	if err := z.zonePages.init(n, mesh); err != nil {
		return err
	}
	z.mesh = meshState{on: mesh, rng: meshSeed}
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

// bitmaps returns the two bitmaps of the slab whose bitmaps are number i
// of class cl: its free slots, then its slots in use with slack.
func (cl *class) bitmaps(i uint32) (free, slack []uint64) {
	w := cl.bits[int(i)*2*cl.words:][:2*cl.words]
	return w[:cl.words], w[cl.words:]
}

// last returns the last byte of the slot of class cl at offset p, where a
// slot in use with slack keeps its slack less 1.
func (z *smallZone) last(cl *class, p offset) *byte {
	return (*byte)(unsafe.Add(z.base, p+offset(cl.size)-1))
}

// take hands out the lowest free slot of the slab at page pg, a partial
// slab of class cl, for a request of size bytes; a zone that meshes, a
// free slot picked at random.
func (z *smallZone) take(cl *class, size int) offset {
	pg, base := cl.next-1, cl.cur
	var slot int
	if z.mesh.on {
		slot = z.mesh.randomSlot(cl, base)
	} else {
		i := base
		for cl.bits[i] == 0 { // the slab has a free slot: the loop stops within its words
			i++
		}
		m := cl.bits[i]
		cl.bits[i] = m & (m - 1)
		slot = (i-base)*64 + bits.TrailingZeros64(m)
	}
	if s := &z.slabs[pg]; s.nfree == 1 {
		z.fill(cl, pg)
	} else {
		s.nfree--
	}
	cl.inUse++
	p := offset(pg<<pageShift) + offset(slot)*offset(cl.size)
	if invariants.Enabled {
		verifySlot(z.bytes(p, int(cl.size)), p)
	}
	if slack := cl.size - uintptr(size); slack != 0 {
		cl.bits[base+cl.words+slot/64] |= 1 << (slot % 64)
		*z.last(cl, p) = byte(slack - 1)
	}
	return p
}

// fill takes the last free slot's count of the slab at pg, the lowest
// partial slab of class cl: the slab leaves the partial set, and the
// next one up is the class's.
func (z *smallZone) fill(cl *class, pg int) {
	z.slabs[pg].nfree = 0
	cl.partial.remove(pg)
	z.setNext(cl, cl.partial.first())
}

// setNext makes the slab at page pg (-1: none) the one class cl takes
// its slots from: its lowest partial slab.
func (z *smallZone) setNext(cl *class, pg int) {
	cl.next = pg + 1
	if pg >= 0 {
		cl.cur = int(z.slabs[pg].bits) * 2 * cl.words
	}
}

// usedBytes returns the bytes of the slots in use: Used's part.
func (z *smallZone) usedBytes() int64 {
	var n int64
	for c := 1; c < numClasses; c++ {
		n += z.classes[c].inUse * int64(z.classes[c].size)
	}
	return n
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
	p := z.take(cl, size)
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
	if z.mesh.isStale(pg) {
		if err := h.restore(pg); err != nil {
			return fmt.Errorf("a slab of the %d-byte class: %w", classSize[c], err)
		}
	}
	h.used(&z.zonePages, pg, pg+1)
	cl := &z.classes[c]
	var idx uint32
	if cl.spare != 0 {
		// Bitmaps of a slab freed before: their first word links the next.
		idx = cl.spare - 1
		cl.spare = uint32(cl.bits[int(idx)*2*cl.words])
		cl.nspare--
	} else {
		idx = uint32(len(cl.bits) / (2 * cl.words))
		cl.bits = append(cl.bits, make([]uint64, 2*cl.words)...)
	}
	free, slack := cl.bitmaps(idx)
	for i := range free {
		free[i], slack[i] = mask(i, 0, cl.slots), 0
	}
	z.slabs[pg] = slab{class: c, nfree: uint16(cl.slots), bits: idx}
	if invariants.Enabled {
		poison(z.bytes(offset(pg<<pageShift), pageSize))
	}
	cl.partial.grow(pg + 1)
	cl.partial.add(pg)
	z.setNext(cl, cl.partial.first())
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
// its committed pages: its class, the index in the class's bits of the
// word of its free bitmap that holds its bit (the word of its slack
// bitmap is words further on), and the bit. It refuses anything else, reading nothing of
// the zone's memory.
func (z *smallZone) slot(off uintptr) (cl *class, w int, bit uint64, err error) {
	_, cl, w, bit, ok := z.locate(off)
	if !ok || cl.bits[w]&bit != 0 {
		return nil, 0, 0, z.notSlot(off)
	}
	return cl, w, bit, nil
}

// locate is slot's work, small enough to inline into Free's path: the
// slab at offset off, its class, the word and bit of the slot there, and
// whether a slot starts there (in use if cl.bits[w]&bit == 0).
func (z *smallZone) locate(off uintptr) (s *slab, cl *class, w int, bit uint64, ok bool) {
	s = &z.slabs[off>>pageShift]
	cl = &z.classes[s.class] // class 0, of a free page, has no slots: never ok
	o := uint64(off & (pageSize - 1))
	i := uint(o * cl.magic >> 32)
	w = int(s.bits)*2*cl.words + int(i/64)
	bit = 1 << (i % 64)
	ok = i < uint(cl.slots) && uintptr(i)*cl.size == uintptr(o)
	return s, cl, w, bit, ok
}

// notSlot says why offset off of the zone, in its committed pages, is
// not the start of a slot in use.
func (z *smallZone) notSlot(off uintptr) error {
	s := &z.slabs[off>>pageShift]
	if s.class == 0 {
		return fmt.Errorf("%w: %#x (offset %d of the small zone) lies in a free page",
			ErrDoubleFree, uintptr(z.base)+off, off)
	}
	cl := &z.classes[s.class]
	o := uint64(off & (pageSize - 1))
	if i := uint(o * cl.magic >> 32); uintptr(i)*cl.size != uintptr(o) || i >= uint(cl.slots) {
		return fmt.Errorf("%w: %#x (offset %d of the small zone) is not the start of a slot of its %d-byte slab",
			ErrForeign, uintptr(z.base)+off, off, cl.size)
	}
	return fmt.Errorf("%w: %#x (a free slot of the %d-byte class)", ErrDoubleFree, uintptr(z.base)+off, cl.size)
}

// classAt returns the class of the slab at offset off of the zone.
func (z *smallZone) classAt(off uintptr) *class { return &z.classes[z.slabs[off>>pageShift].class] }

// asked returns how many bytes the caller asked of the slot in use of
// class cl at offset off, whose bits slot found.
func (z *smallZone) asked(cl *class, off uintptr, w int, bit uint64) int {
	n := int(cl.size)
	if cl.bits[w+cl.words]&bit != 0 {
		n -= 1 + int(*z.last(cl, offset(off)))
	}
	return n
}

// setAsked records that the caller asked for n bytes of the slot in use
// of class cl at offset off, whose bits slot found.
func (z *smallZone) setAsked(cl *class, off uintptr, w int, bit uint64, n int) {
	sw := &cl.bits[w+cl.words]
	if slack := cl.size - uintptr(n); slack != 0 {
		*sw |= bit
		*z.last(cl, offset(off)) = byte(slack - 1)
	} else {
		*sw &^= bit
	}
}

// inUse is slot for the slice b, which starts at offset off: it also
// refuses an empty slice of capacity 0 if the slot holds more than 0
// bytes (see pastEnd).
func (z *smallZone) inUse(b []byte, off uintptr) (w int, bit uint64, err error) {
	cl, w, bit, err := z.slot(off)
	if err == nil && cap(b) == 0 {
		if n := z.asked(cl, off, w, bit); n != 0 {
			return 0, 0, pastEnd(addr(b), n)
		}
	}
	return w, bit, err
}

// freeSmall frees the slot at offset off of the small zone, in its
// committed pages; b is the caller's slice.
func (h *Heap) freeSmall(b []byte, off uintptr) error {
	z := &h.small
	s, cl, w, bit, ok := z.locate(off)
	if !ok || cl.bits[w]&bit != 0 {
		return z.notSlot(off)
	}
	pg := int(off >> pageShift)
	if z.mesh.on {
		// A follower's slots are its leader's: the record to count in.
		if l := z.leader(pg); l != pg {
			pg, s = l, &z.slabs[l]
		}
	}
	n := z.asked(cl, off, w, bit)
	if cap(b) == 0 && n != 0 {
		return pastEnd(addr(b), n)
	}
	cl.bits[w] |= bit
	cl.bits[w+cl.words] &^= bit
	if invariants.Enabled {
		poison(z.bytes(offset(off), int(cl.size)))
	}
	cl.inUse--
	h.live -= int64(n)
	if s.nfree++; s.nfree == 1 {
		cl.partial.add(pg)
		if cl.next == 0 || pg < cl.next-1 {
			z.setNext(cl, pg)
		}
	}
	if int(s.nfree) == cl.slots && !s.kept {
		if z.mesh.on {
			z.mesh.emptied[s.class] = true
			if z.isLeader(pg) {
				z.mesh.backOff(s.class) // a meshed slab emptied: the mesh was not needed
			}
		}
		h.keep(pg)
	} else if z.mesh.on {
		z.mesh.freed(h, s.class, cl)
	}
	return nil
}

// keepBound is how many empty slabs the small zone keeps, beside the
// budget of free pages kept resident: a quarter of that budget, at most
// 1/32 of the heap's Footprint in pages and maxKept, and at least one
// unless the budget is none (Retain(0)).
func (h *Heap) keepBound() int {
	b := h.budget()
	if b == 0 {
		return 0
	}
	return max(1, min(maxKept, b/4, int(h.Footprint()>>pageShift)/32))
}

// keep keeps the slab at pg, just emptied, making room by letting the
// oldest kept go.
func (h *Heap) keep(pg int) {
	z := &h.small
	bound := h.keepBound()
	for z.kept.n > 0 && z.kept.n >= bound {
		h.unkeep(z.kept.pop())
	}
	if bound == 0 {
		h.unkeep(pg)
		return
	}
	z.kept.push(pg)
	z.slabs[pg].kept = true
}

// unkeep lets go of the slab at pg, out of the kept ring: its page goes
// back to the zone if it is still empty.
func (h *Heap) unkeep(pg int) {
	z := &h.small
	s := &z.slabs[pg]
	s.kept = false
	if cl := &z.classes[s.class]; s.class != 0 && int(s.nfree) == cl.slots {
		h.freeSlab(cl, pg)
	}
}

// unkeepAll lets go of every kept slab.
func (h *Heap) unkeepAll() {
	for h.small.kept.n > 0 {
		h.unkeep(h.small.kept.pop())
	}
}

// freeSlab gives back the page of the empty slab at pg, of class cl, and
// a leader's followers' pages (unmesh).
func (h *Heap) freeSlab(cl *class, pg int) {
	z := &h.small
	if z.isLeader(pg) {
		h.unmesh(pg)
	}
	cl.partial.remove(pg)
	if cl.next == pg+1 {
		z.setNext(cl, cl.partial.first())
	}
	// The slab's bitmap goes on the class's spare list, linked through
	// its own first word, so that the list costs no memory of its own.
	idx := z.slabs[pg].bits
	cl.bits[int(idx)*2*cl.words] = uint64(cl.spare)
	cl.spare = idx + 1
	cl.nspare++
	z.slabs[pg] = slab{}
	cl.slabs--
	z.nSlabs--
	z.slabEvents++
	h.released(smallID, pg, pg+1)
}

// reallocSmall resizes the slot in use at offset off that b starts,
// whose bits inUse found: in place when size falls in its class, else by
// moving it.
func (h *Heap) reallocSmall(b []byte, off uintptr, w int, bit uint64, size int) ([]byte, error) {
	z := &h.small
	c := z.slabs[off>>pageShift].class
	cl := &z.classes[c]
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: Realloc(%d): size is negative (want >= 0)", ErrSize, size)
	case int64(size) > h.limit:
		return nil, fmt.Errorf("%w: Realloc(%d): size exceeds the limit %d", ErrExhausted, size, h.limit)
	case classFor(size, 1) == c:
		h.live += int64(size - z.asked(cl, off, w, bit))
		z.setAsked(cl, off, w, bit, size)
		return z.bytes(offset(off), size), nil
	}
	n, err := h.move(b[:min(len(b), int(cl.size))], size)
	if err != nil {
		return nil, err
	}
	if err := h.freeSmall(b, off); err != nil {
		panic("heap: Realloc: the slot it moved from cannot be freed: " + err.Error())
	}
	return n, nil
}
