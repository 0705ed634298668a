package lockfree

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// Cache is a free list of a pool's chunks that belongs to one goroutine:
// its Alloc and Free touch only the cache, which no other goroutine reads,
// until the cache runs dry or fills up. Then it trades a batch of 32
// chunks with the pool: it takes a batch from the pool's depot (or, if the
// depot is empty, pops one off the shared free list with one swap, or
// carves one), or gives its 32 oldest chunks to the depot. Get one with
// [Pool.NewCache].
//
// Contract:
//   - A Cache is not safe for concurrent use. One goroutine owns it at a
//     time (hand it over through a channel or a mutex if it must move).
//     Checked builds (-tags carvecheck) detect two goroutines in it at
//     once: the call that finds it busy returns an error wrapping ErrBusy
//     and changes nothing.
//   - Alloc and Free behave as the pool's (same chunks, same errors, same
//     checks); chunks may be freed through another cache or the pool.
//   - A cache holds up to 64 free chunks that no one else can use. Flush
//     gives them back; call it before dropping the cache (e.g. defer
//     c.Flush() in the worker), or they stay out of use, counted as Cached
//     in the pool's Stats, until the pool is closed.
//   - The pool's Stats learn how many chunks a cache holds when it trades
//     with the pool, not on every call, which would cost an atomic
//     instruction: between trades, chunks it handed out still count as
//     Cached and chunks freed into it as InUse (their sum is exact). After
//     Flush both are.
//   - After the pool is closed, its caches must not be used.
//
// Costs: Alloc and Free are O(1), a few instructions with no atomic
// read-modify-write, and inline into the caller; one call in 32 (at most)
// trades a batch, taking the depot's mutex once.
type Cache struct {
	// The pool's geometry, copied so that the fast paths read only the
	// cache's own lines.
	base   unsafe.Pointer
	size   uintptr
	stride uintptr
	inv    uint64
	shift  int
	carved uint64 // the pool's carved count when the cache last looked

	n    uint // chunks in free
	free [2 * batch]index

	p         *Pool
	published int64               // n as last added to the pool's Cached count
	busy      invariants.Busy     // checked builds: an operation is running
	checks    invariants.Schedule // checked builds: when slow paths run check
}

// NewCache returns an empty cache of the pool's chunks for one goroutine.
func (p *Pool) NewCache() *Cache {
	c := new(Cache)
	c.init(p)
	return c
}

// init makes c an empty cache of p's chunks.
func (c *Cache) init(p *Pool) {
	c.base, c.size, c.stride, c.inv, c.shift, c.p = p.base, p.size, p.stride, p.inv, p.shift, p
}

// Pool returns the pool the cache trades with.
func (c *Cache) Pool() *Pool { return c.p }

// Len returns how many free chunks the cache holds.
func (c *Cache) Len() int { return int(c.n) }

// Alloc hands out a chunk: the one the cache was given back last, or, if
// the cache is empty, one of a batch it takes from the pool. It returns an
// error wrapping ErrExhausted when the pool has nothing to give.
func (c *Cache) Alloc() ([]byte, error) {
	return c.allocVia(cacheAllocBytes)
}

// allocVia is Alloc's fast path; the slow path comes in as a parameter,
// as in package pool, to keep it small enough to inline into the caller.
func (c *Cache) allocVia(slow func(*Cache) ([]byte, error)) ([]byte, error) {
	n := c.n - 1
	if n >= uint(len(c.free)) || checked { // n wrapped: the cache is empty
		return slow(c)
	}
	c.n = n
	return unsafe.Slice((*byte)(unsafe.Add(c.base, uintptr(c.free[n])*c.stride)), c.size), nil
}

// newVia is allocVia for the typed cache.
func (c *Cache) newVia(slow func(*Cache) (unsafe.Pointer, error)) (unsafe.Pointer, error) {
	n := c.n - 1
	if n >= uint(len(c.free)) || checked {
		return slow(c)
	}
	c.n = n
	return unsafe.Add(c.base, uintptr(c.free[n])*c.stride), nil
}

// Free gives a chunk back to the cache. A slice that does not start at a
// chunk of the cache's pool is refused with an error wrapping ErrForeign,
// and nothing changes.
func (c *Cache) Free(b []byte) error {
	return c.freeVia(unsafe.Pointer(unsafe.SliceData(b)), cacheFreeSlow)
}

// freeVia is Free's fast path; the slow path comes in as a parameter to
// keep it small enough to inline.
// It compares the index with the carved count the cache saw last, which
// only grows: a chunk carved since goes to the slow path, which looks
// again.
func (c *Cache) freeVia(ptr unsafe.Pointer, slow func(*Cache, unsafe.Pointer) error) error {
	// divide(off, c.inv, c.shift), written out: the call would push Free
	// past the inliner's budget.
	i := bits.RotateLeft64(uint64(uintptr(ptr)-uintptr(c.base))*c.inv, -c.shift)
	n := c.n
	if i >= c.carved || n >= uint(len(c.free)) || checked {
		return slow(c, ptr)
	}
	c.free[n] = index(i)
	c.n = n + 1
	return nil
}

// Flush gives every chunk the cache holds back to the pool's depot, where
// other caches and the pool can use them. The cache stays usable. After
// the pool's Close it returns ErrClosed.
func (c *Cache) Flush() error {
	if c.p.closed.Load() {
		return ErrClosed
	}
	if checked {
		if err := c.enter(); err != nil {
			return err
		}
		defer c.leave()
	}
	c.p.depot.put(c.free[:c.n])
	c.n = 0
	c.publish()
	return nil
}

// cacheAllocBytes is Alloc's slow path.
func cacheAllocBytes(c *Cache) ([]byte, error) {
	ptr, err := cacheAllocSlow(c)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(ptr), c.p.size), nil
}

// cacheAllocSlow runs when the cache is empty, and in checked builds on
// every allocation.
func cacheAllocSlow(c *Cache) (unsafe.Pointer, error) {
	if checked {
		if err := c.enter(); err != nil {
			return nil, err
		}
		defer c.leave()
		c.mayCheck()
	}
	if c.n == 0 {
		if err := c.refill(); err != nil {
			return nil, err
		}
	}
	c.n--
	i := c.free[c.n]
	if checked {
		if err := c.p.handOut(i, true); err != nil {
			return nil, err
		}
	}
	return c.p.chunk(i), nil
}

// refill takes a batch for the empty cache: from the depot, else off the
// shared free list, else newly carved.
func (c *Cache) refill() error {
	p := c.p
	got := c.free[:batch]
	n := p.depot.take(got)
	if n == 0 {
		if n = p.popN(got); checked {
			for _, i := range got[:n] {
				p.links[i].Store(uint32(heldMark))
			}
		}
	}
	var err error
	if n == 0 {
		n, err = p.carve(got)
	}
	c.n = uint(n)
	c.carved = p.carved.Load()
	c.publish()
	if n == 0 {
		return err
	}
	return nil
}

// cacheFreeSlow runs when the pointer is not a chunk, when the cache is
// full, and in checked builds on every free.
func cacheFreeSlow(c *Cache, ptr unsafe.Pointer) error {
	p := c.p
	i, ok := p.indexOf(ptr)
	if !ok {
		return p.foreignError(ptr)
	}
	c.carved = p.carved.Load()
	if checked {
		if err := c.enter(); err != nil {
			return err
		}
		defer c.leave()
		c.mayCheck()
		if err := p.retire(i, ptr, heldMark); err != nil {
			return err
		}
	}
	if c.n == uint(len(c.free)) {
		// Give the oldest batch to the depot; keep the recently freed
		// chunks, whose cache lines are more likely to be warm.
		p.depot.put(c.free[:batch])
		copy(c.free[:], c.free[batch:])
		c.n -= batch
		c.publish()
	}
	c.free[c.n] = i
	c.n++
	return nil
}

// publish tells the pool how many chunks the cache holds now.
func (c *Cache) publish() {
	if d := int64(c.n) - c.published; d != 0 {
		c.p.cached.Add(d)
		c.published = int64(c.n)
	}
}

// enter marks the cache busy for one operation of a checked build.
func (c *Cache) enter() error {
	if c.p.closed.Load() {
		return ErrClosed
	}
	if !c.busy.Enter() {
		return fmt.Errorf("%w: a cache of %d-byte chunks", ErrBusy, c.p.size)
	}
	return nil
}

func (c *Cache) leave() { c.busy.Leave() }
