package heap_test

import (
	"math/rand/v2"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/sizeclass"
)

// allocator is what the benchmarks need of a heap.
type allocator interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
	Close() error
}

// impls are the heaps the benchmarks compare, side by side: this one,
// with its default options and meshing, fit's best fit and sizeclass.
var impls = []struct {
	name string
	make func() (allocator, error)
}{
	{"heap", func() (allocator, error) { return heap.New() }},
	{"heap-mesh", func() (allocator, error) { return heap.New(heap.Mesh()) }},
	{"best-fit", func() (allocator, error) { return fit.New(fit.BestFit) }},
	{"sizeclass", func() (allocator, error) { return sizeclass.New() }},
}

// BenchmarkPairs measures one alloc+free pair: each iteration allocates a
// block, writes its first byte, and frees one allocated earlier, picked at
// random among the last 1024 (a fixed seed), for sizes drawn
// log-uniformly from three ranges: small (8 to 256 bytes, the size
// classes), mixed (8 B to 4 KiB) and large (4 to 64 KiB). For the heap
// it also reports the system calls that gave pages back, per pair. Compare
// the rows side by side:
//
//	go test -run '^$' -bench Pairs -count 10 ./heap | benchstat -col /impl -
func BenchmarkPairs(b *testing.B) {
	const window = 1024
	victims := make([]int, 4096)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range victims {
		victims[i] = r.IntN(window)
	}
	for _, sizes := range []struct {
		name   string
		lo, hi int
	}{{"small", 8, 256}, {"mixed", 8, 4096}, {"large", 4096, 64 << 10}} {
		ss := heaptest.LogUniform(4096, sizes.lo, sizes.hi, 1)
		for _, impl := range impls {
			b.Run("sizes="+sizes.name+"/impl="+impl.name, func(b *testing.B) {
				h, err := impl.make()
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
				var live [window][]byte
				for i := range live {
					if live[i], err = h.Alloc(ss[i%len(ss)], 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := range b.N {
					c, err := h.Alloc(ss[i%len(ss)], 1)
					if err != nil {
						b.Fatal(err)
					}
					c[0] = 1
					v := &live[victims[i%len(victims)]]
					if err := h.Free(*v); err != nil {
						b.Fatal(err)
					}
					*v = c
				}
				if hh, ok := h.(*heap.Heap); ok {
					b.ReportMetric(float64(hh.Stats().Purges)/float64(b.N), "purges/op")
				}
			})
		}
	}
}

// BenchmarkSmallPair is the fast path alone: Alloc(64, 1) and Free of the
// same block.
//
//	go test -run '^$' -bench SmallPair -count 10 ./heap | benchstat -col /impl -
func BenchmarkSmallPair(b *testing.B) {
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			h, err := impl.make()
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			keep, _ := h.Alloc(64, 1) // the slab stays
			for range b.N {
				c, err := h.Alloc(64, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Free(c); err != nil {
					b.Fatal(err)
				}
			}
			h.Free(keep)
		})
	}
}
