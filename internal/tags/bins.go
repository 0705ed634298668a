package tags

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// BinMax is the size from which best fit's free blocks go to a tree
// rather than a bin: 64 bins of 16-byte steps (the first two, sizes 0 and
// 16, stay empty), one bitmap word.
const BinMax = 1024

// Bins are best fit's exact-size lists of the free blocks under BinMax
// bytes, in fit and in the heap's best-fit zone: one list per size,
// threaded through the blocks' links (see Push), and a bitmap of the
// lists that are not empty. The zero Bins is empty.
type Bins struct {
	Map   uint64                 // bit i set: Heads[i] is not empty
	Heads [BinMax / Granule]Link // blocks of i granules
}

// Fit returns the first block of the smallest bin that is not empty and
// holds blocks of at least s bytes, a multiple of Granule, or 0.
func (b *Bins) Fit(s uintptr) Offset {
	if i := s >> GranShift; i < 64 {
		if m := b.Map &^ (1<<i - 1); m != 0 {
			return b.Heads[bits.TrailingZeros64(m)].Offset()
		}
	}
	return 0
}

// Insert adds the free block at p, of s < BinMax bytes, to its bin.
func (b *Bins) Insert(base unsafe.Pointer, p Offset, s uintptr) {
	i := s >> GranShift
	Push(base, &b.Heads[i], p)
	b.Map |= 1 << i
}

// Remove takes the free block at p, of s < BinMax bytes, out of its bin:
// Unlink, and the bitmap bit cleared when the block had neither
// neighbour. Free's path calls it: it converts offsets to pointers
// itself, as Links does, because three calls of Links would take it past
// the inliner's budget.
func (b *Bins) Remove(base unsafe.Pointer, p Offset, s uintptr) {
	i := s >> GranShift % 64
	l := (*[2]Link)(unsafe.Add(base, p))
	next, prev := l[0], l[1]
	if prev != 0 {
		(*[2]Link)(unsafe.Add(base, Offset(prev)<<GranShift))[0] = next
	} else if b.Heads[i] = next; next == 0 {
		b.Map &^= 1 << i
	}
	if next != 0 {
		(*[2]Link)(unsafe.Add(base, Offset(next)<<GranShift))[1] = prev
	}
}

// Largest returns the size of the largest block in the bins, or 0.
func (b *Bins) Largest() uintptr {
	if b.Map == 0 {
		return 0
	}
	return uintptr(63-bits.LeadingZeros64(b.Map)) << GranShift
}

// Check verifies that a bin's bitmap bit is set exactly when the bin is
// not empty, and each bin a well-formed list (see CheckList) of blocks of
// its size that visit accepts.
func (b *Bins) Check(base unsafe.Pointer, visit func(Link, string) error) error {
	for i, head := range b.Heads {
		if (head != 0) != (b.Map&(1<<i) != 0) {
			return fmt.Errorf("bin %d has head %d, bitmap bit %t", i, head.Offset(), b.Map&(1<<i) != 0)
		}
		size := uintptr(i) << GranShift
		if err := CheckList(base, head, visit, fmt.Sprintf("bin %d", i), func(s uintptr) bool { return s == size }); err != nil {
			return err
		}
	}
	return nil
}

// TreapKey is the key of a free block of s bytes at l in best fit's
// treap: one 64-bit compare orders blocks by size, then by address.
func TreapKey(s uintptr, l Link) uint64 { return uint64(s>>GranShift)<<32 | uint64(l) }

// Prio is a treap key's priority: a bijective mix of its low 32 bits (the
// link, distinct for distinct blocks), so that no two nodes tie and the
// order of addresses tells nothing of the order of priorities.
func Prio(k uint64) uint32 {
	x := uint32(k)
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	x ^= x >> 16
	return x
}
