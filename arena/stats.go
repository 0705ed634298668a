package arena

import (
	"unsafe"

	carve "github.com/carvelab/carve"
)

// Stats describes an arena in carve's vocabulary, with the counts that
// are the arena's own. All figures but Blocks are bytes.
//
//	Live <= Used <= Footprint
//	Used      = Live + AlignWaste
//	Footprint = Used + TailWaste + Free
//	Resident <= Footprint
//
// Live, Used, AlignWaste and TailWaste count from the last Reset;
// Footprint, Resident, Metadata, Blocks and Free describe the blocks the
// arena holds, which Reset keeps and Release gives back. Metadata is the
// Go memory of the block list: its array's capacity, 32 bytes a block on
// 64-bit platforms (the Arena struct itself, and package mem's own record
// of each block's region, are not counted).
type Stats struct {
	// Live is the sum of the sizes requested since the last Reset, Used
	// adds the alignment padding, Footprint is the bytes committed in all
	// blocks, Resident the part of it in physical memory (mincore), and
	// Metadata the block list's Go memory.
	carve.Stats

	// Blocks counts the blocks the arena holds, in use or spare.
	Blocks int
	// AlignWaste is the padding inserted before allocations to align
	// them.
	AlignWaste int64
	// TailWaste is the bytes left unused at the ends of blocks the arena
	// has moved past: the rest of a block that could not hold the next
	// request, and the page rounding of blocks given to one large request.
	TailWaste int64
	// Free is the bytes allocations can still take without a new block:
	// the rest of the current block and the spare blocks kept by Reset or
	// made by Prefault.
	Free int64
}

// Footprint returns the bytes the arena holds from the OS, its blocks
// (Stats's Footprint), without the cost of Stats's mincore.
func (a *Arena) Footprint() int64 { return a.footprint }

// Stats returns the arena's statistics. It costs one mincore over every
// block, to count Resident; a block whose residency cannot be measured
// counts as not resident.
func (a *Arena) Stats() Stats {
	used := a.retired + int64(a.off)
	s := Stats{
		Stats: carve.Stats{
			Live:      used - a.padding,
			Used:      used,
			Footprint: a.footprint,
			Metadata:  int64(cap(a.blocks)) * int64(unsafe.Sizeof(block{})),
		},
		Blocks:     len(a.blocks),
		AlignWaste: a.padding,
		TailWaste:  a.tail,
		Free:       a.footprint - used - a.tail,
	}
	for _, b := range a.blocks {
		s.Metadata += b.r.Metadata()
		if n, err := b.r.Resident(0, b.size); err == nil {
			s.Resident += int64(n)
		}
	}
	return s
}
