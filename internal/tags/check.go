package tags

import (
	"fmt"
	"unsafe"
)

// This file holds what the checkers of fit's heap and of the heap's
// best-fit zone share: the walk that verifies the blocks tile the region,
// and the bookkeeping that verifies an index holds every free block once.
// Both read headers, footers and links, never the rest of free memory, so
// they cannot make untouched pages resident.

// Tiling is what Walk counts of a region's blocks.
type Tiling struct {
	Used, Blocks int64    // bytes and count of the blocks in use
	FreeBytes    int64    // bytes of the free blocks
	Frees        []Offset // the free blocks, in address order
}

// Walk verifies that the blocks of the region at base tile [8, top-8):
//
//	each at least MinBlock, a multiple of Granule, ending by the top;
//	each block's P flag tells whether the block before is in use;
//	a free block's footer repeats its size;
//	no two free blocks are adjacent, and the block before the top is in use.
//
// It calls each, if not nil, on every block that passes, and stops at the
// first error each returns. top is a multiple of Granule, at least
// FirstBlock, and the headers up to it are committed.
func Walk(base unsafe.Pointer, top Offset, each func(p Offset, hd Header) error) (Tiling, error) {
	var t Tiling
	prevInUse := true
	p := FirstBlock
	for p < top {
		hd := *Hdr(base, p)
		s := hd.Size()
		switch {
		case s < MinBlock || s%Granule != 0 || p+Offset(s) > top:
			return t, fmt.Errorf("block at %d: size %d (want a multiple of %d, at least %d, ending by the top at %d)", p, s, Granule, MinBlock, top)
		case hd.PrevInUse() != prevInUse:
			return t, fmt.Errorf("block at %d: P flag %t, but the block before is in use: %t", p, hd.PrevInUse(), prevInUse)
		case !hd.InUse() && !prevInUse:
			return t, fmt.Errorf("block at %d: free, after a free block (not coalesced)", p)
		case !hd.InUse() && *Footer(base, p, s) != uint64(s):
			return t, fmt.Errorf("free block at %d: size %d, footer %d", p, s, *Footer(base, p, s))
		}
		if each != nil {
			if err := each(p, hd); err != nil {
				return t, err
			}
		}
		if hd.InUse() {
			t.Used += int64(s)
			t.Blocks++
		} else {
			t.FreeBytes += int64(s)
			t.Frees = append(t.Frees, p)
		}
		prevInUse = hd.InUse()
		p += Offset(s)
	}
	if p != top {
		return t, fmt.Errorf("blocks end at %d, past the top at %d", p, top)
	}
	if !prevInUse {
		return t, fmt.Errorf("the block before the top at %d is free (not merged into the top)", top)
	}
	return t, nil
}

// Seen records which of a region's free blocks an index holds, to verify
// that it holds each exactly once and nothing else.
type Seen map[Offset]bool

// NewSeen returns a record of the free blocks frees, none seen yet.
func NewSeen(frees []Offset) Seen {
	s := make(Seen, len(frees))
	for _, p := range frees {
		s[p] = false
	}
	return s
}

// Visit records that the index holds the block l, where names the place
// in the index for the error: l must be a free block not seen before.
func (s Seen) Visit(l Link, where string) error {
	p := l.Offset()
	done, ok := s[p]
	switch {
	case !ok:
		return fmt.Errorf("%s: offset %d is not a free block", where, p)
	case done:
		return fmt.Errorf("%s: free block at %d is there twice", where, p)
	}
	s[p] = true
	return nil
}

// Missing returns a free block the index does not hold, if any.
func (s Seen) Missing() (Offset, bool) {
	for p, done := range s {
		if !done {
			return p, true
		}
	}
	return 0, false
}

// CheckList walks the list from head (see Push): every node a free block
// that visit accepts and whose size passes ok, each node's previous link
// the node before. name is the list's, for the errors.
func CheckList(base unsafe.Pointer, head Link, visit func(Link, string) error, name string, ok func(uintptr) bool) error {
	var prev Link
	for l := head; l != 0; l = Links(base, l.Offset())[0] {
		if err := visit(l, name); err != nil {
			return err
		}
		p := l.Offset()
		if s := Hdr(base, p).Size(); !ok(s) {
			return fmt.Errorf("%s: block at %d of %d bytes does not belong there", name, p, s)
		}
		if back := Links(base, p)[1]; back != prev {
			return fmt.Errorf("%s: block at %d links back to %d, want %d", name, p, back.Offset(), prev.Offset())
		}
		prev = l
	}
	return nil
}
