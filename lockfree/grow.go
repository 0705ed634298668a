package lockfree

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds the slow paths: the depot, carving and growing.

// depot is where caches trade free chunks in batches, as tcmalloc's
// transfer cache: a cache that fills up gives its oldest batch here, and
// one that runs dry takes a batch back, one lock and one copy of a few
// hundred bytes per batch. Chunks in the depot stay out of the shared free
// list, whose pops and pushes go one chunk at a time; the shared Alloc
// takes a batch from the depot when the list is empty.
//
// A mutex-guarded slice rather than a lock-free structure: a batch moves
// once per 32 cache operations, so the lock costs well under a nanosecond
// an operation. The lock-free alternative measured, trading batches
// through the shared free list (a chain of links pushed with one swap,
// popped with one walk and one swap), cost more: 13-18 CPU ns per chunk
// against 9-15 in BenchmarkParallelBurst/impl=cache, since linking a chain
// takes an atomic store per chunk.
type depot struct {
	mu     sync.Mutex
	free   []index             // free chunks, taken from and given to the end
	owner  *Pool               // the pool whose chunks these are, for the checker
	checks invariants.Schedule // checked builds: when take and put run the checker
}

// take moves up to len(dst) chunks from the depot into dst and returns how
// many.
func (d *depot) take(dst []index) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if checked {
		d.mayCheck() // before the chunks leave: every chunk is seen
	}
	n := min(len(dst), len(d.free))
	copy(dst, d.free[len(d.free)-n:])
	d.free = d.free[:len(d.free)-n]
	return n
}

// put moves the chunks of src into the depot.
func (d *depot) put(src []index) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free = append(d.free, src...)
	if checked {
		d.mayCheck() // after the chunks arrive
	}
}

// len returns how many chunks the depot holds.
func (d *depot) len() int {
	n, _ := d.size()
	return n
}

// size returns how many chunks the depot holds, and how many its array
// has room for.
func (d *depot) size() (n, capacity int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.free), cap(d.free)
}

// drain empties the depot.
func (d *depot) drain() {
	d.mu.Lock()
	d.free = nil
	d.mu.Unlock()
}

// batch is how many chunks move between a cache and the pool at once.
const batch = 32

// allocSlow runs when the free list was empty, and in checked builds on
// every allocation (with the chunk the fast path popped, or nilIndex):
//
//  1. Take a batch from the depot: keep one chunk, push the rest onto the
//     free list with one swap.
//  2. Otherwise carve the next chunk, committing a slab if the committed
//     ones are full.
//  3. Otherwise, the pool at its limit, look at the free list and the
//     depot once more: a chunk freed since is as good as any.
func allocSlow(p *Pool, i index) (unsafe.Pointer, error) {
	if i == nilIndex {
		var err error
		if i, err = p.refill(); err != nil {
			return nil, err
		}
	}
	if checked {
		if err := p.handOut(i, false); err != nil {
			return nil, err
		}
	}
	return p.chunk(i), nil
}

// refill finds a chunk for the shared Alloc when the free list is empty.
func (p *Pool) refill() (index, error) {
	var got [batch]index
	if n := p.depot.take(got[:]); n > 0 {
		p.pushAll(got[1:n])
		return got[0], nil
	}
	n, err := p.carve(got[:1])
	if n == 1 {
		return got[0], nil
	}
	if i := p.pop(); i != nilIndex {
		return i, nil
	}
	if n := p.depot.take(got[:1]); n == 1 {
		return got[0], nil
	}
	return nilIndex, err
}

// carve carves up to len(dst) new chunks, growing the pool as needed, and
// returns how many it carved, with the reason it stopped short (an error
// wrapping ErrExhausted or ErrClosed, or a failed commit). Checked builds
// mark new chunks held and never handed out: there is no poison to check
// in them yet.
func (p *Pool) carve(dst []index) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0, ErrClosed
	}
	next := p.carved.Load()
	n := 0
	var err error
	for n < len(dst) {
		if next == p.capacity {
			if err = p.grow(); err != nil {
				break
			}
		}
		dst[n] = index(next)
		if checked {
			p.links[next].Store(uint32(newMark))
		}
		next++
		n++
	}
	p.carved.Store(next)
	if checked {
		p.mustCheckGrowth()
	}
	return n, err
}

// grow commits the next slab, and the side table for the chunks it
// completes. It runs with mu held.
func (p *Pool) grow() error {
	if p.region == nil {
		return fmt.Errorf("%w: all %d chunks of %d bytes are carved", ErrExhausted, p.capacity, p.size)
	}
	end := p.committed + p.slabSize
	if uint64(end)/uint64(p.stride) > p.maxChunks || end > uintptr(p.region.Size()) {
		return fmt.Errorf("%w: %d bytes committed, the limit", ErrExhausted, p.committed)
	}
	if err := p.region.Commit(int(p.committed), int(p.slabSize)); err != nil {
		return fmt.Errorf("lockfree: grow: %w", err)
	}
	capacity := uint64(end) / uint64(p.stride)
	if err := p.linkMem.Commit(int(p.capacity*LinkBytes), int((capacity-p.capacity)*LinkBytes)); err != nil {
		// Give the slab back: the pool counts only what both tables hold.
		return errors.Join(fmt.Errorf("lockfree: grow: %w", err), p.region.Decommit(int(p.committed), int(p.slabSize)))
	}
	p.committed, p.capacity = end, capacity
	return nil
}
