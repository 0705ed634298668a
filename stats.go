package carve

// Stats is the vocabulary every carve allocator reports in, and the lab
// compares. All figures are bytes. For any allocator at any moment:
//
//	Live <= Used <= Footprint
//	Used - Live      = internal fragmentation (rounding, headers, padding)
//	Footprint - Used = external fragmentation (free memory the allocator holds)
//	Resident <= Footprint (for allocators over their own mem regions)
//
// Metadata stands beside these: the Go memory an allocator keeps for its
// own bookkeeping outside its regions (bitmaps, trees, tables). It is not
// part of Footprint or Resident, which measure the allocator's regions;
// a fair comparison with a C malloc, whose metadata lives inside its RSS,
// adds it to both (the lab does).
//
// Each allocator's own Stats type embeds this one and adds its counts.
type Stats struct {
	// Live is what callers asked for and have not freed: the sum of the
	// requested sizes of live blocks.
	Live int64
	// Used is what live blocks take, with rounding, headers and alignment
	// padding.
	Used int64
	// Footprint is what the allocator has committed from the OS and not
	// given back: its heap size. Reserved address space never committed
	// does not count.
	Footprint int64
	// Resident is how much of the footprint is in physical memory
	// (mincore over the allocator's regions).
	Resident int64
	// Metadata is the bytes of Go memory the allocator holds for its
	// bookkeeping (bitmaps, trees, tables), outside its regions: what a C
	// malloc would keep inside its heap. Fixed-size fields of the
	// allocator's own struct do not count; what grows with the heap does.
	Metadata int64
}

// Internal returns Used - Live: bytes live blocks take beyond what was
// asked for.
func (s Stats) Internal() int64 { return s.Used - s.Live }

// External returns Footprint - Used: bytes committed but not in any live
// block.
func (s Stats) External() int64 { return s.Footprint - s.Used }
