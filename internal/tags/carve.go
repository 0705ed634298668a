package tags

import (
	"fmt"
	"unsafe"
)

// The block mechanics both best-fit heaps run: package fit's Heap and
// the heap's best-fit zone. They write boundary tags and decide where a
// block goes; the callers keep their own index of free blocks, their own
// record of block starts and, in the heap, the pages' states, around
// these calls. Cut, AlignedSpan, AlignedStart and ResizeOf inline; Carve
// is a call of its own, whose cost the heap's Pairs benchmark, run before
// and after the two heaps shared it, did not show. NotAtStart, on the
// error path, words both heaps' refusals of a free.

// Cut returns how s bytes are cut from the front of b free bytes, s <= b:
// the block's size, s or, when the rest would be smaller than MinBlock,
// all b bytes; and the rest's size, 0 or at least MinBlock.
func Cut(b, s uintptr) (size, rest uintptr) {
	if b-s >= MinBlock {
		return s, b - s
	}
	return b, 0
}

// Carve makes the b free bytes at p, out of the caller's index and
// followed by a block in use, a block in use of s <= b bytes whose
// predecessor is in use if prevInUse, and the rest, when Cut leaves one,
// a free block at p+size, its tags written for the caller to index.
// Without a rest it sets the next block's P flag instead. It returns the
// sizes Cut returned.
func Carve(base unsafe.Pointer, p Offset, b, s uintptr, prevInUse bool) (size, rest uintptr) {
	size, rest = Cut(b, s)
	if rest != 0 {
		SetFree(base, p+Offset(size), rest) // its footer is the b bytes' last word
	} else {
		SetPrev(base, p+Offset(b), true)
	}
	*Hdr(base, p) = NewHeader(size, true, prevInUse)
	return size, rest
}

// AlignedSpan is what an aligned request of s bytes takes from a free
// block: enough that an address aligned to align lies either at its start
// or at least MinBlock into it (see AlignedStart).
func AlignedSpan(s, align uintptr) uintptr { return s + align + Granule }

// AlignedStart returns the first payload offset at or after p that is a
// multiple of align (a power of two above Granule) and leaves before it
// either nothing or a gap of at least MinBlock, which becomes a free
// block.
func AlignedStart(p Offset, align uintptr) Offset {
	q := Offset((uintptr(p) + align - 1) &^ (align - 1))
	if q != p && q-p < MinBlock {
		q += Offset(align)
	}
	return q
}

// Resize is how a block in use changes size in place, or that it cannot.
type Resize uint8

const (
	Shrink   Resize = iota // the new size fits: the rest, if at least MinBlock, is freed
	IntoTop                // the block is the last one: the top gives it room
	IntoNext               // the free block after it gives it room
	Move                   // the block must move
)

// ResizeOf returns how the block in use at p, of s bytes, becomes a block
// of need bytes, the top lying at top.
func ResizeOf(base unsafe.Pointer, p Offset, s, need uintptr, top Offset) Resize {
	next := p + Offset(s)
	switch {
	case need <= s:
		return Shrink
	case next == top:
		return IntoTop
	}
	if nh := *Hdr(base, next); !nh.InUse() && s+nh.Size() >= need {
		return IntoNext
	}
	return Move
}

// NotAtStart explains why the address a, at offset p of a region, is not
// the start of a block in use, where p is a multiple of Granule at or
// past the first block and below the top, and q the block that holds p
// (hd its header): p lies inside a block in use (foreign, the caller's
// error for a block it never handed out), or is a free block's start or
// lies in one (doubleFree). Both heaps' frees explain so.
func NotAtStart(a uintptr, p, q Offset, hd Header, foreign, doubleFree error) error {
	switch {
	case hd.InUse():
		return fmt.Errorf("%w: %#x (offset %d) lies inside the block at offset %d (%d bytes), not at its start",
			foreign, a, p, q, hd.Size())
	case q == p:
		return fmt.Errorf("%w: the block at %#x (offset %d) is free", doubleFree, a, p)
	default:
		return fmt.Errorf("%w: %#x (offset %d) lies in the free block at offset %d (%d bytes)",
			doubleFree, a, p, q, hd.Size())
	}
}
