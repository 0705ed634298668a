package rows

import (
	"errors"
	"fmt"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/pool"
)

// cAllocator is the process's C allocator as a replay.BatchAllocator: a
// batch of events becomes a batch of libc ops, performed by one cgo call.
// With pools, requests of a pool's size are served by a carve pool in Go
// instead (no cgo either): the block-allocator article's "pool for the
// scratch buffers" in front of a real malloc.
type cAllocator struct {
	loop   *libc.Loop
	ops    []libc.Op
	rss    *rssMeter
	pools  []*pool.Pool
	pooled [][]byte // by slot: the pool chunk a slot holds, or nil
}

func newCAllocator(poolSizes []int, touch bool) (*cAllocator, error) {
	l, err := libc.NewLoop(touch)
	if err != nil {
		return nil, err
	}
	c := &cAllocator{loop: l}
	for _, n := range poolSizes {
		p, err := pool.New(n)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("--pool %d: %w", n, err)
		}
		c.pools = append(c.pools, p)
	}
	return c, nil
}

// poolFor returns the pool for requests of size bytes, or nil.
func (c *cAllocator) poolFor(e trace.Event) *pool.Pool {
	for _, p := range c.pools {
		if e.Size == uint64(p.ChunkSize()) && e.Align <= 8 {
			return p
		}
	}
	return nil
}

// errPooledRealloc is a realloc of a block a pool holds.
var errPooledRealloc = errors.New("realloc of a block in a pool in front of a C allocator is not replayed")

// Apply converts the events (whose IDs are slots) and runs them in C,
// serving the pools' requests on the way.
func (c *cAllocator) Apply(evs []trace.Event) (int64, error) {
	c.ops = c.ops[:0]
	for _, e := range evs {
		slot := uint32(e.ID)
		if len(c.pools) > 0 {
			for int(slot) >= len(c.pooled) {
				c.pooled = append(c.pooled, nil)
			}
			if b := c.pooled[slot]; b != nil {
				switch e.Op {
				case trace.Free:
					c.pooled[slot] = nil
					if err := c.poolOf(b).Free(b); err != nil {
						return 0, err
					}
					continue
				case trace.Realloc:
					return 0, errPooledRealloc
				}
			}
			if e.Op == trace.Alloc || e.Op == trace.Calloc || e.Op == trace.Memalign {
				if p := c.poolFor(e); p != nil {
					b, err := p.Alloc()
					if err != nil {
						return 0, err
					}
					clear(b) // touched, as the loop touches C blocks
					c.pooled[slot] = b
					continue
				}
			}
		}
		op, ok := libc.OpOf(e, slot)
		if !ok {
			return 0, fmt.Errorf("event %v: not an allocator call", e)
		}
		c.ops = append(c.ops, op)
	}
	before := c.loop.Elapsed()
	_, err := c.loop.Run(c.ops)
	return int64(c.loop.Elapsed() - before), err
}

// poolOf returns the pool that handed out b.
func (c *cAllocator) poolOf(b []byte) *pool.Pool {
	for _, p := range c.pools {
		if p.Owns(b) {
			return p
		}
	}
	return nil
}

// Stats reads the allocator's own figure of its heap, the pools', and the
// RSS.
func (c *cAllocator) Stats() (carve.Stats, error) {
	st, err := libc.Stats()
	if err != nil {
		return carve.Stats{}, err
	}
	fp, used := st.Footprint, st.Allocated
	for _, p := range c.pools {
		ps := p.Stats()
		fp += ps.Footprint
		used += ps.Used
	}
	// The loop's table of blocks is mapped by the loop, not the allocator.
	return carve.Stats{Footprint: fp, Used: used, Resident: max(c.rss.now()-c.loop.TableBytes(), 0)}, nil
}

func (c *cAllocator) Close() error {
	c.loop.Close()
	var errs []error
	for _, p := range c.pools {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
