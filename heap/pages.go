package heap

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// This file holds what both zones keep of their pages, and how free pages
// go back to the OS.
//
// A zone commits its reservation from the bottom up, and tracks each
// committed page in two bitmaps:
//
//	free   no block, slot, slab or boundary tag lies on the page: the heap
//	       holds nothing there that it must keep
//	clean  the page is free and holds no memory: the heap gave it back
//	       (purged it: MADV_DONTNEED, which keeps the mapping), or it was
//	       never touched since it was committed
//
//	clean ⊆ free;  Footprint = committed - clean - meshed pages (mesh.go)
//
// A free page that is not clean is dirty: resident, or possibly so. The
// heap lets dirty pages wait, for reuse without a page fault, up to its
// budget (at most the Retain); past that it purges the oldest, down to
// half the budget (enforce). Where the heap can purge (canPurge), every
// page that becomes dirty is recorded in the purge ring, a queue of page
// ranges, so the oldest are found without a search; a range whose pages
// were taken again since is skipped when it comes up. The ring holds a
// fixed number of ranges: when it is full, its oldest joins the next of
// its zone (ringSize).

// zoneID names a zone in the purge ring.
type zoneID uint8

const (
	smallID zoneID = iota
	midID
)

// zonePages is a zone's reservation and its pages' states.
type zonePages struct {
	vm        vm
	base      unsafe.Pointer // the reservation's first byte; nil after Close
	reserved  int64          // bytes reserved
	committed int64          // [0, committed) is committed: whole pages
	free      searchSet      // page i is free
	clean     bitset         // page i is free and clean
	nClean    int            // pages clean
	// meshedPages are pages in use mapped onto another's memory (see
	// mesh.go): they hold none of their own.
	meshedPages int
	commits     int64 // calls that committed more
}

func (z *zonePages) init(n int64, mesh bool) error {
	n = roundUp(n, pageSize)
	reserve := reserveVM
	if mesh {
		reserve = reserveMeshVM
	}
	v, err := reserve(n)
	if err != nil {
		return err
	}
	if uintptr(v.base())%pageSize != 0 {
		v.release()
		return fmt.Errorf("heap: a reservation at %p is not aligned to %d-byte pages", v.base(), pageSize)
	}
	*z = zonePages{vm: v, base: v.base(), reserved: n}
	return nil
}

// pages returns the committed pages.
func (z *zonePages) pages() int { return int(z.committed >> pageShift) }

// footprint returns the committed bytes less the clean pages and the
// meshed ones.
func (z *zonePages) footprint() int64 {
	return z.committed - int64(z.nClean+z.meshedPages)<<pageShift
}

// commitStep returns how far a zone commits past what a request needs: a
// quarter of what it has, from 256 KiB to 64 MiB. Committing costs no
// memory until a page is touched, and the pages stay clean until then.
func (z *zonePages) commitStep() int64 {
	return min(max(z.committed/4, 256<<10), 64<<20)
}

// commit commits the zone up to at least end bytes. The new pages are free
// and clean. It fails with ErrExhausted past the reservation.
func (z *zonePages) commit(end int64) error {
	if end <= z.committed {
		return nil
	}
	if end > z.reserved {
		return fmt.Errorf("%w: the zone's reservation of %d bytes is full (%d committed)", ErrExhausted, z.reserved, z.committed)
	}
	to := min(roundUp(end+z.commitStep(), pageSize), z.reserved)
	if err := z.vm.commit(z.committed, to); err != nil {
		return fmt.Errorf("heap: commit: %w", err)
	}
	lo, hi := z.pages(), int(to>>pageShift)
	z.free.grow(hi)
	z.clean = z.clean.grow(hi)
	for i := lo; i < hi; i++ {
		z.free.add(i)
		z.clean.set(i)
	}
	z.nClean += hi - lo
	z.committed = to
	z.commits++
	return nil
}

// cleanIn returns how many pages of [lo, hi) are clean: what taking them
// adds to the Footprint.
func (z *zonePages) cleanIn(lo, hi int) int {
	if lo >= hi {
		return 0
	}
	return z.clean.count(lo, hi)
}

// use marks the free pages of [lo, hi) as used, and returns how many were
// dirty.
func (z *zonePages) use(lo, hi int) (dirty int) {
	f := &z.free
	for w := lo / 64; w*64 < hi; w++ {
		m := f.words[w] & mask(w, lo, hi)
		if m == 0 {
			continue
		}
		c := z.clean[w] & m
		nc, nm := bits.OnesCount64(c), bits.OnesCount64(m)
		z.nClean -= nc
		f.n -= nm
		dirty += nm - nc
		if f.words[w] &^= m; f.words[w] == 0 {
			f.summary.clear(w)
		}
		z.clean[w] &^= m
	}
	return dirty
}

// release marks the pages of [lo, hi) that are not free as free and
// dirty, and returns how many they are.
func (z *zonePages) release(lo, hi int) (n int) {
	f := &z.free
	for w := lo / 64; w*64 < hi; w++ {
		if m := ^f.words[w] & mask(w, lo, hi); m != 0 {
			f.words[w] |= m
			f.summary.set(w)
			n += bits.OnesCount64(m)
		}
	}
	f.n += n
	return n
}

// pageRange returns the pages wholly inside the bytes [lo, hi) of a zone.
func pageRange(lo, hi offset) (int, int) {
	a, b := int((lo+pageSize-1)>>pageShift), int(hi>>pageShift)
	if b < a {
		b = a
	}
	return a, b
}

// pagesOver returns the pages the bytes [lo, hi) of a zone touch.
func pagesOver(lo, hi offset) (int, int) {
	if hi <= lo {
		return 0, 0
	}
	return int(lo >> pageShift), int((hi + pageSize - 1) >> pageShift)
}

// The purge ring.

// ringSize is how many page ranges the purge ring holds. When it is full,
// the oldest range is merged into the next one of its zone, so a range
// may cover pages that were never dirty together; purging skips those.
// (A range alone of its zone in a full ring is purged instead.)
const ringSize = 64

// pageRun is pages [lo, hi) of a zone, once dirty.
type pageRun struct {
	zone   zoneID
	lo, hi uint32
}

type purgeRing struct {
	runs    [ringSize]pageRun
	head, n int
}

func (r *purgeRing) at(i int) *pageRun { return &r.runs[(r.head+i)%ringSize] }

func (r *purgeRing) pop() pageRun {
	x := r.runs[r.head]
	r.head = (r.head + 1) % ringSize
	r.n--
	return x
}

// zone returns the pages of zone id.
func (h *Heap) zone(id zoneID) *zonePages {
	if id == smallID {
		return &h.small.zonePages
	}
	return &h.mid.zonePages
}

// zones returns the pages of every zone.
func (h *Heap) zones() []*zonePages {
	return []*zonePages{&h.small.zonePages, &h.mid.zonePages}
}

// used marks the free pages of [lo, hi) of zone z as used: a block, slab
// or tag now lies on them.
func (h *Heap) used(z *zonePages, lo, hi int) {
	if lo < hi {
		h.dirty -= z.use(lo, hi)
	}
}

// released marks pages [lo, hi) of zone id free: nothing of the heap lies
// on them any more. Those that were not free become dirty, and go to the
// purge ring; once more dirty pages wait than the budget, the oldest are
// purged (enforce).
func (h *Heap) released(id zoneID, lo, hi int) {
	if lo >= hi {
		return
	}
	n := h.zone(id).release(lo, hi)
	if n == 0 {
		return
	}
	h.dirty += n
	if !canPurge() {
		return
	}
	r := &h.ring
	if r.n > 0 {
		if last := r.at(r.n - 1); last.zone == id && int(last.lo) <= hi && lo <= int(last.hi) {
			last.lo, last.hi = min(last.lo, uint32(lo)), max(last.hi, uint32(hi))
			h.enforce()
			return
		}
	}
	if r.n == ringSize {
		// Full: the oldest range joins the next one of its zone, which
		// then covers both (and the pages between, which its purge skips
		// if they are in use).
		x := r.pop()
		merged := false
		for i := range r.n {
			if y := r.at(i); y.zone == x.zone {
				y.lo, y.hi = min(y.lo, x.lo), max(y.hi, x.hi)
				merged = true
				break
			}
		}
		if !merged {
			h.purgeRun(x) // the only range of its zone: its pages go now
		}
	}
	*r.at(r.n) = pageRun{id, uint32(lo), uint32(hi)}
	r.n++
	h.enforce()
}

// budget is how many free pages the heap keeps resident (dirty):
// RetainFloor, or 1/RetainShare of the Footprint if more, at most the
// Retain. The kept empty slabs are bounded beside it (keepBound).
func (h *Heap) budget() int {
	return min(h.retain, max(RetainFloor>>pageShift, int(h.Footprint()>>pageShift)/RetainShare))
}

// enforce purges the oldest dirty pages once they are more than the
// budget, down to half of it, so that the system calls
// come in bursts, one every budget/2 pages freed rather than one per
// page, and the pages given back in one burst are more often neighbours
// (purgeRun gives each stretch back in one call).
func (h *Heap) enforce() {
	b := h.budget()
	if h.dirty <= b {
		return
	}
	for h.dirty > b/2 && h.ring.n > 0 {
		h.purgeRun(h.ring.pop())
	}
}

// purgeAll purges every dirty page, and returns the bytes it gave back.
func (h *Heap) purgeAll() int64 {
	before := h.dirty
	for h.ring.n > 0 {
		h.purgeRun(h.ring.pop())
	}
	return int64(before-h.dirty) << pageShift
}

// purgeRun gives back the dirty pages of run: each stretch of them in one
// system call. A purge the OS refuses leaves its pages dirty: the heap is
// whole either way, only bigger.
func (h *Heap) purgeRun(run pageRun) {
	z := h.zone(run.zone)
	lo, hi := int(run.lo), min(int(run.hi), z.pages())
	for i := lo; i < hi; {
		// The next stretch [a, b) of free pages that are not clean.
		a := -1
		for w := i / 64; w*64 < hi; w++ {
			if m := z.free.words[w] &^ z.clean[w] & mask(w, i, hi); m != 0 {
				a = w*64 + bits.TrailingZeros64(m)
				break
			}
		}
		if a < 0 {
			break
		}
		// The stretch runs on over free pages, clean ones included (the
		// OS has nothing to do for those), to the last dirty one before
		// a page in use: one call for dirty pages that clean ones part.
		b, dirty := a+1, 1
		for j := a + 1; j < hi && z.free.has(j); j++ {
			if !z.clean.has(j) {
				b, dirty = j+1, dirty+1
			}
		}
		if err := z.vm.purge(int64(a)<<pageShift, int64(b)<<pageShift); err == nil {
			for j := a; j < b; j++ {
				z.clean.set(j)
			}
			z.nClean += dirty
			h.dirty -= dirty
			h.purges++
		}
		i = b
	}
}
