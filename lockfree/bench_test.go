package lockfree_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carvelab/carve/lockfree"
	"github.com/carvelab/carve/pool"
)

// sinks keep what the make benchmark allocates reachable, one padded slot
// per goroutine, so that the slices go to the heap as they would in use.
var sinks [256]struct {
	b []byte
	_ [40]byte
}

// BenchmarkParallelPair compares one allocate+free pair of a 64-byte chunk
// under b.RunParallel (GOMAXPROCS goroutines, one per -cpu):
//
//   - tagged: carve's lock-free pool, its shared Alloc and Free: every pair
//     is two compare-and-swaps on the one head word;
//   - cache: carve's lock-free pool through a cache per goroutine;
//   - mutex: package pool's single-goroutine pool, shared under a mutex;
//   - pool: package pool, one per goroutine, no lock: the floor for a
//     per-worker allocator (at -cpu 1, the single-goroutine pool pair);
//   - syncpool: sync.Pool Get and Put;
//   - make: the Go heap, the garbage collector's share included.
//
// Compare the ratios, not the absolute times:
//
//	go test -run '^$' -bench ParallelPair -cpu 1,2 -count 10 ./lockfree | benchstat -col /impl -
//
// The loops count with pb.Next and write one byte of each chunk, so that
// the chunk is really touched.
func BenchmarkParallelPair(b *testing.B) {
	const size = 64
	b.Run("impl=tagged", func(b *testing.B) {
		p, err := lockfree.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c, err := p.Alloc()
				if err != nil {
					b.Error(err)
					return
				}
				c[0] = 1
				if err := p.Free(c); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("impl=cache", func(b *testing.B) {
		p, err := lockfree.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			c := p.NewCache()
			defer c.Flush()
			for pb.Next() {
				x, err := c.Alloc()
				if err != nil {
					b.Error(err)
					return
				}
				x[0] = 1
				if err := c.Free(x); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("impl=mutex", func(b *testing.B) {
		p, err := pool.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		var mu sync.Mutex
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				c, err := p.Alloc()
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
				c[0] = 1
				mu.Lock()
				err = p.Free(c)
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("impl=pool", func(b *testing.B) {
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			p, err := pool.New(size)
			if err != nil {
				b.Error(err)
				return
			}
			defer p.Close()
			for pb.Next() {
				c, err := p.Alloc()
				if err != nil {
					b.Error(err)
					return
				}
				c[0] = 1
				if err := p.Free(c); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("impl=syncpool", func(b *testing.B) {
		sp := sync.Pool{New: func() any { return new([size]byte) }}
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c := sp.Get().(*[size]byte)
				c[0] = 1
				sp.Put(c)
			}
		})
	})
	b.Run("impl=make", func(b *testing.B) {
		var id atomic.Int32
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			slot := &sinks[id.Add(1)%int32(len(sinks))]
			for pb.Next() {
				c := make([]byte, size)
				c[0] = 1
				slot.b = c
			}
		})
	})
}

// BenchmarkParallelBurst allocates 128 chunks in a row, then frees them,
// on every goroutine: more than a cache holds, so the caches trade batches
// with the depot (four batches in, four out, per burst). Costs are per
// chunk: one allocate and one free.
func BenchmarkParallelBurst(b *testing.B) {
	const size, burst = 64, 128
	run := func(pb *testing.PB, alloc func() ([]byte, error), free func([]byte) error) {
		held := make([][]byte, 0, burst)
		defer func() {
			for _, c := range held {
				if err := free(c); err != nil {
					b.Error(err)
				}
			}
		}()
		for pb.Next() {
			c, err := alloc()
			if err != nil {
				b.Error(err)
				return
			}
			c[0] = 1
			if held = append(held, c); len(held) == burst {
				for _, c := range held {
					if err := free(c); err != nil {
						b.Error(err)
						return
					}
				}
				held = held[:0]
			}
		}
	}
	b.Run("impl=tagged", func(b *testing.B) {
		p, err := lockfree.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) { run(pb, p.Alloc, p.Free) })
	})
	b.Run("impl=cache", func(b *testing.B) {
		p, err := lockfree.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			c := p.NewCache()
			defer c.Flush()
			run(pb, c.Alloc, c.Free)
		})
	})
	b.Run("impl=mutex", func(b *testing.B) {
		p, err := pool.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		var mu sync.Mutex
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			run(pb, func() ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				return p.Alloc()
			}, func(c []byte) error {
				mu.Lock()
				defer mu.Unlock()
				return p.Free(c)
			})
		})
	})
	b.Run("impl=syncpool", func(b *testing.B) {
		sp := sync.Pool{New: func() any { return new([size]byte) }}
		defer reportCPU(b)()
		b.RunParallel(func(pb *testing.PB) {
			run(pb, func() ([]byte, error) { return sp.Get().(*[size]byte)[:], nil },
				func(c []byte) error { sp.Put((*[size]byte)(c)); return nil })
		})
	})
}
