package lockfree

import "unsafe"

// Check exposes the pool's invariant checker to the external tests.
func (p *Pool) Check() error { return p.check() }

// Check exposes the cache's invariant checker to the external tests.
func (c *Cache) Check() error { return c.check() }

// SetPopHook sets the function every pop runs between reading the link
// and its compare-and-swap (nil removes it). Set it before the goroutines
// that pop start.
func (p *Pool) SetPopHook(f func()) { p.hook = f }

// Head returns the index of the first free chunk (-1 if none) and the
// head's version.
func (p *Pool) Head() (int64, uint32) {
	h := headWord(p.head.Load())
	if h.index() == nilIndex {
		return -1, h.version()
	}
	return int64(h.index()), h.version()
}

// Index returns the number of the chunk at b and whether b starts a
// carved chunk.
func (p *Pool) Index(b []byte) (int64, bool) {
	i, ok := p.indexOf(unsafe.Pointer(unsafe.SliceData(b)))
	return int64(i), ok
}

// Bounds returns the addresses [lo, hi) that chunks may occupy: the
// reservation of a pool made by New, the caller's region of one made by
// Over.
func (p *Pool) Bounds() (lo, hi uintptr) {
	if p.region != nil {
		lo = uintptr(p.region.Base())
		return lo, lo + uintptr(p.region.Size())
	}
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(p.over)))
	return lo, lo + uintptr(len(p.over))
}

// DepotLen returns how many chunks the depot holds.
func (p *Pool) DepotLen() int { return p.depot.len() }

// Batch is how many chunks a cache trades at once.
const Batch = batch

// Pack, Unpack and Next expose the head word's packing.
func Pack(i uint32, v uint32) uint64 { return uint64(pack(index(i), v)) }

func Unpack(h uint64) (i uint32, v uint32) { return uint32(headWord(h).index()), headWord(h).version() }

func Next(h uint64, i uint32) uint64 { return uint64(headWord(h).to(index(i))) }

// Inverse and Divide expose indexOf's arithmetic.
var (
	Inverse = inverse
	Divide  = divide
)

// CheckDue makes the depot's checker run on its next take or put
// (checked builds).
func (p *Pool) CheckDue() { p.depot.checks.Reset() }

// DepotCheckCounts returns the depot's takes and puts that a checked
// build counted, its checker's runs and its steps.
func (p *Pool) DepotCheckCounts() (calls, runs, work uint64) { return p.depot.checks.Counts() }

// BreakCommitted breaks the count of committed bytes, as a bug in growth
// would.
func (p *Pool) BreakCommitted() {
	p.mu.Lock()
	p.committed += p.slabSize
	p.mu.Unlock()
}

// BreakDepot puts a chunk that was never carved into the depot.
func (p *Pool) BreakDepot() {
	p.depot.mu.Lock()
	p.depot.free = append(p.depot.free, index(p.carved.Load()+3))
	p.depot.mu.Unlock()
}

// CheckDue makes the cache's checker run on its next slow path (checked
// builds).
func (c *Cache) CheckDue() { c.checks.Reset() }

// BreakCache puts the cache's newest chunk in it a second time.
func (c *Cache) BreakCache() {
	c.free[c.n] = c.free[c.n-1]
	c.n++
}
