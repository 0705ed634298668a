package fit

import (
	"fmt"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/tags"
)

// This file holds the paths that take blocks back: Free, Realloc and the
// validation of the slices they are given.

// Free gives back the block b starts at. b must be a slice as Alloc or
// Realloc returned it: where it starts identifies the block, and its
// length is what Live drops by (at most the block's usable size). A slice
// cut shorter (b[:50:50]) still frees the whole block, in every build;
// Live then drops by less than was asked for, and stays too high by the
// difference, bounded by what the blocks in use can hold (see the Heap's
// contract).
//
// The block merges with a free neighbour on either side, or with the top;
// a free top larger than the TrimThreshold then goes back to the OS.
//
// Free refuses, changing nothing, a slice that does not start at a block
// in use: ErrForeign for nil, memory outside the heap, or a slice into the
// middle of a block in use; ErrDoubleFree for a slice that starts in free
// memory, as a block freed already does (release builds included);
// ErrClosed after Close. The check costs a bit test and a header read.
func (h *Heap) Free(b []byte) error {
	p, err := h.owned(b)
	if err != nil {
		return err
	}
	h.free(p, len(b))
	return nil
}

// free frees the block in use at p; n is the length of the slice the
// caller held.
func (h *Heap) free(p offset, n int) {
	hd := *h.hdr(p)
	s := hd.Size()
	h.live -= int64(min(uintptr(n), s-HeaderSize))
	h.used -= int64(s)
	h.blocks--
	h.boundLive()
	// Checked builds poison what becomes a free block, not what goes to
	// the top: nothing verifies the top, and a large block would have all
	// its pages touched for nothing.
	poisoned := invariants.Enabled && p+offset(s) != h.top
	if poisoned {
		poison(h.bytes(p, int(s-HeaderSize)))
	}
	if !hd.PrevInUse() {
		// Merge with the free block before: its footer gives its size.
		ps := uintptr(*tags.PrevFooter(h.base, p))
		q := p - offset(ps)
		h.remove(q, ps)
		h.clearStart(p)
		if poisoned {
			poison(h.bytes(p-2*HeaderSize, 2*HeaderSize)) // q's footer, p's header
		}
		p, s = q, s+ps
	}
	h.release(p, s)
}

// release makes the s bytes at p a free block, merged with the block after
// it if that is free, or into the top. The block before it is in use.
func (h *Heap) release(p offset, s uintptr) {
	next := p + offset(s)
	if next == h.top {
		h.top = p
		h.clearStart(p)
		h.autoTrim()
		return
	}
	nh := *h.hdr(next)
	if nh.InUse() {
		*h.hdr(next) = nh.WithPrev(false)
	} else {
		ns := nh.Size()
		h.remove(next, ns)
		h.clearStart(next)
		if invariants.Enabled {
			poison(h.bytes(next-HeaderSize, 2*HeaderSize)) // next's header and links
		}
		s += ns
	}
	tags.SetFree(h.base, p, s)
	h.setStart(p)
	h.insert(p, s)
}

// Realloc changes the size of the block b starts at to size bytes and
// returns the block, moved or not; b must be a slice as Alloc or Realloc
// returned it, as for Free. The first min(len(b), size) bytes are kept.
//
// The block stays where it is when it shrinks (the rest, if at least
// MinBlock, is freed), when it is the last block before the top (the top
// gives it room, growing if needed), or when the block after it is free
// and large enough. Otherwise Realloc allocates a new block (aligned to
// Granule: a larger alignment asked of Alloc is not kept, as with C's
// realloc), copies, and frees the old one. Realloc(b, 0) keeps a minimal
// block; it does not free.
//
// Realloc fails as Free does for a slice it refuses, as Alloc does for a
// bad size or a full heap; the block is then unchanged.
func (h *Heap) Realloc(b []byte, size int) ([]byte, error) {
	p, err := h.owned(b)
	switch {
	case err != nil:
		return nil, err
	case size < 0:
		return nil, fmt.Errorf("%w: Realloc(%d): size is negative (want >= 0)", ErrSize, size)
	case int64(size) > int64(h.reserved):
		return nil, fmt.Errorf("%w: Realloc(%d): size exceeds the limit %d", ErrExhausted, size, h.reserved)
	}
	hd := *h.hdr(p)
	s := hd.Size()
	old := int(min(uintptr(len(b)), s-HeaderSize))
	need := tags.BlockSize(size)
	next := p + offset(s)
	switch tags.ResizeOf(h.base, p, s, need, h.top) {
	case tags.Shrink:
		h.live += int64(size - old)
		if s-need >= MinBlock {
			*h.hdr(p) = tags.NewHeader(need, true, hd.PrevInUse())
			h.used -= int64(s - need)
			h.boundLive() // before release, whose trim may run the checker
			t := p + offset(need)
			if invariants.Enabled && next != h.top {
				poison(h.bytes(t, int(s-need-HeaderSize)))
			}
			h.release(t, s-need)
		}
	case tags.IntoTop:
		if err := h.grow(p - HeaderSize + offset(need)); err != nil {
			return nil, fmt.Errorf("Realloc(%d): %w", size, err)
		}
		*h.hdr(p) = tags.NewHeader(need, true, hd.PrevInUse())
		h.top = p + offset(need)
		h.used += int64(need - s)
		h.live += int64(size - old)
	case tags.IntoNext:
		ns := h.hdr(next).Size()
		if invariants.Enabled {
			h.verifyPoison(next, ns, p, need)
		}
		h.remove(next, ns)
		h.clearStart(next)
		h.used -= int64(s)
		h.blocks--
		h.use(p, s+ns, need, hd.PrevInUse())
		h.live += int64(size - old)
	default:
		q, err := h.Alloc(size, Granule)
		if err != nil {
			return nil, fmt.Errorf("Realloc(%d): %w", size, err)
		}
		copy(q, b[:old])
		h.free(p, len(b))
		return q, nil
	}
	h.boundLive()
	return h.bytes(p, size), nil
}

// boundLive keeps Live within 0 and the usable bytes of the blocks in
// use, Used - HeaderSize*Blocks. Live follows the lengths of the slices
// callers hand back: a slice cut shorter than the block's request makes a
// Free or a Realloc take off less than was put on, and without this bound
// Live would pass Used, and stay above 0 with no block in use.
func (h *Heap) boundLive() {
	h.live = min(max(h.live, 0), h.used-HeaderSize*h.blocks)
}

// UsableSize returns how many bytes the block b starts at can hold: its
// size less the header. A Realloc up to that size keeps the block in place
// and costs no more memory. UsableSize refuses the slices Free refuses.
func (h *Heap) UsableSize(b []byte) (int, error) {
	p, err := h.owned(b)
	if err != nil {
		return 0, err
	}
	return int(h.hdr(p).Size() - HeaderSize), nil
}

// owned returns the offset of the block in use that b starts at, or the
// error saying why b is not one.
func (h *Heap) owned(b []byte) (offset, error) {
	p, addr := h.offsetOf(b)
	// p-firstBlock wraps for p < firstBlock, and for any p after Close,
	// when top is firstBlock; the bitmap covers everything below top.
	if p-firstBlock < h.top-firstBlock && p%Granule == 0 && h.isStart(p) && h.hdr(p).InUse() {
		return p, nil
	}
	return 0, h.notOwned(p, addr)
}

// notOwned explains why the address addr, at offset p, is not the start
// of a block in use. It reads the heap's memory only below the top.
func (h *Heap) notOwned(p offset, addr uintptr) error {
	switch {
	case h.closed:
		return ErrClosed
	case addr == 0:
		return fmt.Errorf("%w: nil", ErrForeign)
	case p >= h.reserved:
		return fmt.Errorf("%w: %#x lies outside the heap's memory [%#x, %#x)", ErrForeign, addr, addr-uintptr(p), addr-uintptr(p)+uintptr(h.reserved))
	case p%Granule != 0 || p < firstBlock:
		return fmt.Errorf("%w: %#x (offset %d): no block starts there (blocks start at offsets that are multiples of %d, from %d)",
			ErrForeign, addr, p, Granule, firstBlock)
	case p >= h.top:
		return fmt.Errorf("%w: %#x (offset %d) lies in the free top of the heap (from offset %d)", ErrDoubleFree, addr, p, h.top)
	}
	q := h.startBefore(p)
	return tags.NotAtStart(addr, p, q, *h.hdr(q), ErrForeign, ErrDoubleFree)
}

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside the heap's region: what a replay checks of every block it is
// handed. It says nothing of whether b is a block. After Close nothing is
// inside.
func (h *Heap) Contains(b []byte) bool { return !h.closed && h.region.Contains(b) }
