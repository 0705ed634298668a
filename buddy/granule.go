package buddy

import (
	"fmt"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the commit state: which granules are committed, and
// when they are committed and given back.
//
// The heap counts, per granule, the live blocks that overlap it (liveIn).
// A block is pinned when it is handed out: its granules are committed if
// they are not, and counted. It is unpinned when it is freed. A committed
// granule with no live block is idle: its bytes belong to free blocks,
// which the heap never touches, so it can go back to the OS at any time.
// The heap keeps up to Retain bytes of idle granules for reuse and gives
// the rest back, from the top of the heap down, where address-ordered
// allocation is least likely to come back soon:
//
//	liveIn[g] > 0              =>  granule g committed
//	idle == committed granules with liveIn == 0
//	idle * granule <= Retain       (after every call, unless decommit failed)
//
// The tables grow to the highest granule used, not to the limit.

// granules returns the granules [g0, g1) that [off, off+n) overlaps (n >
// 0).
func (h *Heap) granules(off offset, n offset) (g0, g1 uint) {
	return uint(off) >> h.gshift, uint(off+n-1)>>h.gshift + 1
}

func (h *Heap) committed(g uint) bool {
	return g/64 < uint(len(h.commit)) && h.commit[g/64]&(1<<(g%64)) != 0
}

// growGranules makes the per-granule tables cover granules [0, g1).
func (h *Heap) growGranules(g1 uint) {
	if g1 <= uint(len(h.liveIn)) {
		return
	}
	n := min(max(g1, 2*uint(len(h.liveIn))), h.ngranules())
	h.liveIn = append(h.liveIn, make([]int32, n-uint(len(h.liveIn)))...)
	if words := (n + 63) / 64; words > uint(len(h.commit)) {
		h.commit = append(h.commit, make([]uint64, words-uint(len(h.commit)))...)
	}
}

// ngranules returns how many granules the heap's region holds.
func (h *Heap) ngranules() uint { return uint(h.region.Size()) >> h.gshift }

// pin counts a block that is being handed out in the granules [g0, g1) it
// overlaps, committing those that are not committed first. If the OS
// refuses, nothing is counted and the granules committed so far stay
// idle.
func (h *Heap) pin(g0, g1 uint) error {
	h.growGranules(g1)
	for g := g0; g < g1; {
		if h.committed(g) {
			g++
			continue
		}
		e := g + 1
		for e < g1 && !h.committed(e) {
			e++
		}
		if err := h.region.Commit(int(g<<h.gshift), int((e-g)<<h.gshift)); err != nil {
			h.maybeTrim()
			return fmt.Errorf("committing %d bytes at offset %d: %w", (e-g)<<h.gshift, g<<h.gshift, err)
		}
		h.commits++
		for ; g < e; g++ {
			h.commit[g/64] |= 1 << (g % 64)
			h.idle++
		}
	}
	for g := g0; g < g1; g++ {
		if h.liveIn[g] == 0 {
			h.idle--
		}
		h.liveIn[g]++
	}
	return nil
}

// unpin uncounts a block that is being freed from the granules [g0, g1)
// it overlaps. It does not decommit: see maybeTrim.
func (h *Heap) unpin(g0, g1 uint) {
	for g := g0; g < g1; g++ {
		h.liveIn[g]--
		if h.liveIn[g] == 0 {
			h.idle++
		}
	}
}

// maybeTrim gives idle granules back to the OS, the highest first, until
// half of Retain is left, if there are more than Retain bytes of them. A
// failure is kept for Trim to report; the granules stay idle.
func (h *Heap) maybeTrim() {
	if int64(h.idle)<<h.gshift > h.retain {
		_, h.trimErr = h.trim(h.retain / 2)
	}
}

// Trim gives every idle granule back to the OS, whatever Retain says, and
// returns how many bytes it released: Footprint drops by as much, and RSS
// by as much as was resident. It also reports a failure to decommit that
// an earlier Free met (those granules stayed committed). It costs a scan
// of the granule tables.
func (h *Heap) Trim() (int64, error) {
	if h.closed {
		return 0, ErrClosed
	}
	n, err := h.trim(0)
	h.trimErr = err
	return n, err
}

// trim decommits idle granules from the top down until at most keep
// bytes of them are left, and returns the bytes released. It decommits
// runs of adjacent granules with one call each.
func (h *Heap) trim(keep int64) (int64, error) {
	var released int64
	for g := uint(len(h.liveIn)); g > 0 && int64(h.idle)<<h.gshift > keep; {
		if h.commit[(g-1)/64] == 0 {
			g = (g - 1) / 64 * 64 // a word of granules none of which is committed
			continue
		}
		if !h.isIdle(g - 1) {
			g--
			continue
		}
		// The run [lo, hi) of idle granules below g, no longer than the
		// excess over keep.
		want := uint((int64(h.idle)<<h.gshift - keep + 1<<h.gshift - 1) >> h.gshift)
		hi, lo := g, g-1
		for lo > 0 && hi-lo < want && h.isIdle(lo-1) {
			lo--
		}
		if err := h.region.Decommit(int(lo<<h.gshift), int((hi-lo)<<h.gshift)); err != nil {
			return released, fmt.Errorf("buddy: giving back %d bytes at offset %d: %w", (hi-lo)<<h.gshift, lo<<h.gshift, err)
		}
		for i := lo; i < hi; i++ {
			h.commit[i/64] &^= 1 << (i % 64)
		}
		h.decommits++
		h.idle -= int(hi - lo)
		released += int64(hi-lo) << h.gshift
		if invariants.Enabled {
			// The decommitted bytes read as zero from now on.
			h.poisoned.clearRange(lo<<h.gshift>>h.minOrder, hi<<h.gshift>>h.minOrder)
		}
		g = lo
	}
	if invariants.Enabled && released > 0 {
		h.mustCheck()
	}
	return released, nil
}

func (h *Heap) isIdle(g uint) bool { return h.committed(g) && h.liveIn[g] == 0 }

// resident returns the bytes of committed granules in physical memory
// (mincore, one call per run of committed granules).
func (h *Heap) resident() int64 {
	var n int64
	for g, end := uint(0), uint(len(h.liveIn)); g < end; {
		if h.commit[g/64]>>(g%64) == 0 {
			g = (g/64 + 1) * 64 // the rest of this word's granules: none committed
			continue
		}
		if !h.committed(g) {
			g++
			continue
		}
		e := g + 1
		for e < end && h.committed(e) {
			e++
		}
		if r, err := h.region.Resident(int(g<<h.gshift), int((e-g)<<h.gshift)); err == nil {
			n += int64(r)
		}
		g = e
	}
	return n
}
