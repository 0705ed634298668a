package carve_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/sizeclass"
)

// heap is what the benchmark needs of an allocator.
type heap interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
}

// goHeap allocates with make and frees by dropping the reference: the Go
// heap, garbage collector included.
type goHeap struct{}

func (goHeap) Alloc(size, _ int) ([]byte, error) { return make([]byte, size), nil }
func (goHeap) Free([]byte) error                 { return nil }

// BenchmarkHeaps compares carve's general-purpose heaps and the Go heap on
// one workload, side by side in one run: alloc+free pairs of sizes drawn
// log-uniformly from 16 B to 4 KiB (fixed seed), 1,024 blocks live, each
// operation freeing the oldest block and allocating a new one, whose first
// byte it writes. Compare the ratios, not the absolute times:
//
//	go test -run '^$' -bench Heaps -count 10 . | benchstat -col /impl -
func BenchmarkHeaps(b *testing.B) {
	const live = 1024
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, 1<<16)
	for i := range sizes {
		sizes[i] = int(math.Exp(math.Log(16) + r.Float64()*(math.Log(4096)-math.Log(16))))
	}
	impls := []struct {
		name string
		make func() (heap, func(), error)
	}{
		{"make", func() (heap, func(), error) { return goHeap{}, func() {}, nil }},
		{"sizeclass", func() (heap, func(), error) {
			h, err := sizeclass.New()
			return h, func() { h.Close() }, err
		}},
		{"buddy", func() (heap, func(), error) {
			h, err := buddy.New(buddy.Plain)
			return h, func() { h.Close() }, err
		}},
		{"buddy-header", func() (heap, func(), error) {
			h, err := buddy.New(buddy.Header)
			return h, func() { h.Close() }, err
		}},
	}
	for _, p := range fit.Policies() {
		impls = append(impls, struct {
			name string
			make func() (heap, func(), error)
		}{p.String(), func() (heap, func(), error) {
			h, err := fit.New(p)
			return h, func() { h.Close() }, err
		}})
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			h, done, err := impl.make()
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			ring := make([][]byte, live)
			for i := range ring {
				if ring[i], err = h.Alloc(sizes[i], 8); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				slot := i % live
				if err := h.Free(ring[slot]); err != nil {
					b.Fatal(err)
				}
				c, err := h.Alloc(sizes[i%len(sizes)], 8)
				if err != nil {
					b.Fatal(err)
				}
				c[0] = 1
				ring[slot] = c
			}
		})
	}
}
