package fit

import (
	"fmt"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/tags"
	"github.com/carvelab/carve/mem"
)

// This file holds the allocating paths: Alloc, the aligned requests, the
// top of the heap, its growth and its trimming.

// Alloc returns size bytes whose address is a multiple of align, a power
// of two from 1 to MaxAlign. The slice has len == cap == size, so append
// cannot spill into the next block; the bytes are not zeroed (see the
// Heap's contract). Alloc(0, align) returns a minimal block: a non-nil
// empty slice at a block of MinBlock bytes, which counts 0 bytes Live and
// MinBlock Used and which Free takes back.
//
// A request takes the free block the heap's policy picks, or else the
// bottom of the top, committing more of the reservation when the top is
// short. Alignments above Granule over-allocate by align+16 and split off
// the bytes before the aligned address as a free block.
//
// Alloc fails with an error wrapping ErrSize for a negative size, ErrAlign
// for a bad alignment, ErrExhausted when the heap would have to commit
// past its Limit (or size exceeds the Limit), and ErrClosed after Close. A
// failed Alloc leaves the heap as it was.
func (h *Heap) Alloc(size, align int) ([]byte, error) {
	if uint(size) <= uint(h.reserved) && uint(align-1) < Granule && align&(align-1) == 0 {
		s := tags.BlockSize(size)
		if p := h.find(s); p != 0 {
			h.take(p, s)
			h.live += int64(size)
			return h.bytes(p, size), nil
		}
	}
	return h.allocSlow(size, align)
}

// allocSlow serves what the index cannot: bad arguments, alignments above
// the granule, and requests no free block fits, which go to the top.
func (h *Heap) allocSlow(size, align int) ([]byte, error) {
	switch {
	case h.closed:
		return nil, ErrClosed
	case size < 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size is negative (want >= 0)", ErrSize, size, align)
	case align < 1 || align > MaxAlign || align&(align-1) != 0:
		return nil, fmt.Errorf("%w: Alloc(%d, %d): want a power of two from 1 to %d", ErrAlign, size, align, MaxAlign)
	case int64(size) > int64(h.reserved):
		return nil, fmt.Errorf("%w: Alloc(%d, %d): size exceeds the limit %d", ErrExhausted, size, align, h.reserved)
	}
	s := tags.BlockSize(size)
	var p offset
	var err error
	if align <= Granule {
		p, err = h.fromTop(s) // the fast path found no free block
	} else {
		p, err = h.allocAligned(s, uintptr(align))
	}
	if err != nil {
		return nil, fmt.Errorf("Alloc(%d, %d): %w", size, align, err)
	}
	h.live += int64(size)
	return h.bytes(p, size), nil
}

// take hands out s bytes of the free block at p (see tags.Carve): all of
// it when the rest would be smaller than MinBlock, else the first s bytes,
// the rest becoming a free block that takes p's place in the index.
func (h *Heap) take(p offset, s uintptr) {
	b := h.hdr(p).Size()
	if invariants.Enabled {
		h.verifyPoison(p, b, p, s)
	}
	// A free block's predecessor is in use, and a block in use follows it.
	s, rest := tags.Carve(h.base, p, b, s, true)
	if rest != 0 {
		r := p + offset(s)
		h.setStart(r)
		h.replace(p, b, r, rest)
	} else {
		h.remove(p, b)
	}
	h.used += int64(s)
	h.blocks++
}

// use makes the b bytes at p, out of the index and followed by a block in
// use, a block in use of s <= b bytes, and the rest, if at least MinBlock,
// a free block (see tags.Carve).
func (h *Heap) use(p offset, b, s uintptr, prevInUse bool) {
	s, rest := tags.Carve(h.base, p, b, s, prevInUse)
	if rest != 0 {
		r := p + offset(s)
		h.setStart(r)
		h.insert(r, rest)
	}
	h.setStart(p)
	h.used += int64(s)
	h.blocks++
}

// fromTop carves a block of s bytes from the bottom of the top.
func (h *Heap) fromTop(s uintptr) (offset, error) {
	p := h.top
	if err := h.grow(p - HeaderSize + offset(s)); err != nil {
		return 0, err
	}
	*h.hdr(p) = tags.NewHeader(s, true, true) // the block before the top is in use
	h.setStart(p)
	h.top = p + offset(s)
	h.used += int64(s)
	h.blocks++
	return p, nil
}

// allocAligned returns a block of s bytes at a multiple of align (32 to
// MaxAlign). It takes a free block of s+align+16 bytes, or the top: enough
// that an aligned address lies either at its start or at least MinBlock
// into it, the bytes before becoming a free block (see tags.AlignedStart).
func (h *Heap) allocAligned(s, align uintptr) (offset, error) {
	p := h.find(tags.AlignedSpan(s, align))
	var b uintptr // the free block's size; 0 for the top
	if p != 0 {
		b = h.hdr(p).Size()
	} else {
		p = h.top
	}
	q := tags.AlignedStart(p, align)
	gap := uintptr(q - p)
	if b == 0 {
		if err := h.grow(q - HeaderSize + offset(s)); err != nil {
			return 0, err
		}
	} else {
		if invariants.Enabled {
			h.verifyPoison(p, b, q, s)
		}
		h.remove(p, b)
	}
	if gap > 0 {
		if invariants.Enabled && b == 0 {
			poison(h.bytes(p, int(gap-HeaderSize))) // fresh from the top
		}
		tags.SetFree(h.base, p, gap)
		h.setStart(p)
		h.insert(p, gap)
	}
	if b == 0 {
		*h.hdr(q) = tags.NewHeader(s, true, gap == 0)
		h.setStart(q)
		h.top = q + offset(s)
		h.used += int64(s)
		h.blocks++
		return q, nil
	}
	h.use(q, b-gap, s, gap == 0)
	return q, nil
}

// grow commits the heap up to end, and TopPad bytes more, or fails with
// ErrExhausted if end lies past the limit. The block-start bitmaps grow
// with it.
func (h *Heap) grow(end offset) error {
	if end <= h.committed {
		return nil
	}
	if end > h.reserved {
		return fmt.Errorf("%w: the heap would need %d bytes; footprint %d of limit %d",
			ErrExhausted, end, h.committed, h.reserved)
	}
	to := min(offset(roundUp(uintptr(end+h.pad), uintptr(mem.PageSize()))), h.reserved)
	if err := h.region.Commit(int(h.committed), int(to-h.committed)); err != nil {
		return fmt.Errorf("fit: grow: %w", err)
	}
	h.committed = to
	h.starts = growBitmap(h.starts, to)
	if h.policy == AddressOrderedFirstFit {
		h.idx.freeMap = growBitmap(h.idx.freeMap, to)
	}
	if invariants.Enabled {
		h.mustCheck()
	}
	return nil
}

// Trim gives the free top back to the OS, every whole page of it, and
// returns how many bytes it released: Footprint drops by as much, and RSS
// by as much less the pages never touched. Free blocks below the last
// block in use stay committed. The heap grows again from its top as
// requests need.
func (h *Heap) Trim() (int64, error) {
	if h.closed {
		return 0, ErrClosed
	}
	return h.trim(0)
}

// trim decommits the top beyond its first keep bytes, in whole pages.
func (h *Heap) trim(keep offset) (int64, error) {
	end := h.top - HeaderSize // where the top starts
	if h.top == firstBlock {
		end = 0 // an empty heap keeps nothing, not even the unused first word
	}
	from := offset(roundUp(uintptr(end+keep), uintptr(mem.PageSize())))
	if from >= h.committed {
		return 0, nil
	}
	if err := h.region.Decommit(int(from), int(h.committed-from)); err != nil {
		return 0, fmt.Errorf("fit: trim: %w", err)
	}
	n := int64(h.committed - from)
	h.committed = from
	if invariants.Enabled {
		h.mustCheck()
	}
	return n, nil
}

// autoTrim trims the top down to TopPad bytes when it holds more than the
// TrimThreshold. A trim the OS refuses changes nothing and is skipped: the
// heap is whole either way, and Trim reports such errors.
func (h *Heap) autoTrim() {
	if h.trimAbove >= 0 && int64(h.committed)-int64(h.top-HeaderSize) > h.trimAbove {
		_, _ = h.trim(h.pad)
	}
}
