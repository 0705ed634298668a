package pool

import "unsafe"

// Check exposes the invariant checker to the external tests.
func (p *Pool) Check() error { return p.check() }

// Bounds returns the addresses [lo, hi) that chunks may occupy: the whole
// reservation of a pool made by New, the caller's region of one made by
// Over. Both are zero after Close.
func (p *Pool) Bounds() (lo, hi uintptr) {
	switch {
	case p.closed:
		return 0, 0
	case p.region != nil:
		lo = uintptr(p.region.Base())
		return lo, lo + uintptr(p.region.Size())
	default:
		lo = uintptr(unsafe.Pointer(unsafe.SliceData(p.over)))
		return lo, lo + uintptr(len(p.over))
	}
}

// Cursor returns the address of the carving cursor: no chunk of the
// cursor's slab starts at or above it.
func (p *Pool) Cursor() uintptr { return uintptr(p.base) + p.top }

// Committed reports whether every byte of b lies in committed memory of
// the pool (always true for a pool made by Over while it is open).
func (p *Pool) Committed(b []byte) bool {
	if p.closed {
		return false
	}
	if p.region == nil {
		return true
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(p.region.Base())
	return off < uintptr(p.region.Size()) && p.region.IsCommitted(int(off), len(b))
}

// CheckDue makes the invariant checker of a checked build run on the next
// slow path.
func (p *Pool) CheckDue() { p.checks.Reset() }

// CheckCounts returns the slow-path calls a checked build counted, how
// many times it ran the checker, and the checker's steps.
func (p *Pool) CheckCounts() (calls, runs, work uint64) { return p.checks.Counts() }

// BreakLiveCount breaks the checked build's count of chunks marked live,
// as a bug in the pool's bookkeeping would.
func (p *Pool) BreakLiveCount() { p.nlive++ }

// CountBits exposes the checker's count of the bits set in a range.
var CountBits = countBits

// BreakLiveBit marks, in a checked build, a chunk index past the cursor as
// live, as a bug in the pool's bookkeeping would.
func (p *Pool) BreakLiveBit() {
	i := uintptr(p.nslabs) * p.perSlab // the first index past the slabs
	for i/64 >= uintptr(len(p.live)) {
		p.live = append(p.live, 0)
	}
	p.live[i/64] |= 1 << (i % 64)
	p.nlive++
}
