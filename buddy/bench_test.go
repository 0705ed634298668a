package buddy_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/carvelab/carve/buddy"
)

// sink keeps the Go heap's allocations alive past the compiler.
var sink []byte

// benchSizes returns n sizes drawn log-uniformly from 16 B to 64 KiB, from
// a fixed seed, so every run and every implementation sees the same ones.
func benchSizes(n int) []int {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = int(math.Exp2(4 + 12*r.Float64()))
	}
	return sizes
}

// impls are the allocators the benchmarks compare: the two modes and the
// Go heap (make, with the garbage collector's share of the cost).
var impls = []string{buddy.Plain.String(), buddy.Header.String(), "make"}

// BenchmarkPair measures one Alloc and one Free of mixed sizes (log-uniform
// 16 B to 64 KiB) on an otherwise empty heap: every pair splits a block
// from the top of the tree down and merges it back up, the worst case of
// the O(log(MaxBlock/MinBlock)) paths. The default Retain keeps the
// memory committed, so no pair makes a system call. Compare the rows:
//
//	go test -run '^$' -bench 'Pair|Churn' -count 10 ./buddy | benchstat -col /impl -
func BenchmarkPair(b *testing.B) {
	sizes := benchSizes(1 << 12)
	for _, impl := range impls {
		b.Run("impl="+impl, func(b *testing.B) {
			if impl == "make" {
				for i := range b.N {
					s := make([]byte, sizes[i%len(sizes)])
					s[0] = 1
					sink = s
				}
				return
			}
			h := newBenchHeap(b, impl)
			b.ResetTimer()
			for i := range b.N {
				s, err := h.Alloc(sizes[i%len(sizes)], 16)
				if err != nil {
					b.Fatal(err)
				}
				s[0] = 1
				if err := h.Free(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChurn measures one Free and one Alloc of mixed sizes with a
// working set of 1024 live blocks (about 6 MiB): each iteration frees the
// oldest and allocates a new one, so blocks split and merge in a heap that
// stays in pieces, as a program's does.
func BenchmarkChurn(b *testing.B) {
	const live = 1024
	sizes := benchSizes(1 << 12)
	for _, impl := range impls {
		b.Run("impl="+impl, func(b *testing.B) {
			ring := make([][]byte, live)
			if impl == "make" {
				for i := range ring {
					ring[i] = make([]byte, sizes[i])
				}
				b.ResetTimer()
				for i := range b.N {
					s := make([]byte, sizes[(i+live)%len(sizes)])
					s[0] = 1
					ring[i%live] = s
				}
				return
			}
			h := newBenchHeap(b, impl)
			for i := range ring {
				s, err := h.Alloc(sizes[i], 16)
				if err != nil {
					b.Fatal(err)
				}
				ring[i] = s
			}
			b.ResetTimer()
			for i := range b.N {
				if err := h.Free(ring[i%live]); err != nil {
					b.Fatal(err)
				}
				s, err := h.Alloc(sizes[(i+live)%len(sizes)], 16)
				if err != nil {
					b.Fatal(err)
				}
				s[0] = 1
				ring[i%live] = s
			}
			b.StopTimer()
			s := h.Stats()
			b.ReportMetric(float64(s.Footprint)/float64(s.Live), "footprint/live")
			b.ReportMetric(float64(s.Commits+s.Decommits)/float64(b.N), "syscalls/op")
		})
	}
}

func newBenchHeap(b *testing.B, name string) *buddy.Heap {
	mode, err := buddy.ParseMode(name)
	if err != nil {
		b.Fatal(err)
	}
	h, err := buddy.New(mode)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}
