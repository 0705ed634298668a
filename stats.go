package carve

// Stats is the vocabulary every carve allocator reports in, and the lab
// compares. All figures are bytes. For any allocator at any moment:
//
//	Live <= Used <= Footprint
//	Used - Live      = internal fragmentation (rounding, headers, padding)
//	Footprint - Used = external fragmentation (free memory the allocator holds)
//	Resident <= Footprint (for allocators over their own mem regions)
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
}

// Internal returns Used - Live: bytes live blocks take beyond what was
// asked for.
func (s Stats) Internal() int64 { return s.Used - s.Live }

// External returns Footprint - Used: bytes committed but not in any live
// block.
func (s Stats) External() int64 { return s.Footprint - s.Used }
