package fit_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
)

var sink []byte

// BenchmarkPairs measures one alloc+free pair of mixed sizes (8 B to 4
// KiB, log-uniform) with 64 blocks live at a time: each iteration
// allocates a block and frees one allocated earlier, picked at random, for
// every policy and for the Go heap (make, with the garbage collector's
// share of the cost). Compare the rows side by side:
//
//	go test -run '^$' -bench Pairs -count 10 ./fit | benchstat -col /policy -
func BenchmarkPairs(b *testing.B) {
	const window = 64
	sizes, victims := pairSizes(window)
	for _, p := range fit.Policies() {
		b.Run("policy="+p.String(), func(b *testing.B) {
			h, err := fit.New(p)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			pairs(b, h, sizes, victims)
		})
	}
	b.Run("policy=make", func(b *testing.B) {
		var live [window][]byte
		for i := range b.N {
			c := make([]byte, sizes[i%len(sizes)])
			c[0] = 1
			live[victims[i%len(victims)]] = c
		}
		sink = live[0]
	})
}

// pairSizes returns BenchmarkPairs's request sizes and the window slots
// whose blocks each iteration frees.
func pairSizes(window int) (sizes, victims []int) {
	sizes = heaptest.LogUniform(4096, 8, 4096, 1)
	victims = make([]int, 4096)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range victims {
		victims[i] = r.IntN(window)
	}
	return sizes, victims
}

// pairs is BenchmarkPairs's loop over h: b.N alloc+free pairs, 64 blocks
// live.
func pairs(b *testing.B, h *fit.Heap, sizes, victims []int) {
	var live [64][]byte
	b.ResetTimer()
	for i := range b.N {
		c, err := h.Alloc(sizes[i%len(sizes)], 1)
		if err != nil {
			b.Fatal(err)
		}
		c[0] = 1
		v := &live[victims[i%len(victims)]]
		if *v != nil {
			if err := h.Free(*v); err != nil {
				b.Fatal(err)
			}
		}
		*v = c
	}
}

// impls are the two searches of first fit's and next fit's list, for the
// benchmarks to compare side by side: the index, and the linear walk it
// replaces, kept as the tests' reference.
var impls = []struct {
	name string
	opts []fit.Option
}{
	{"linear", []fit.Option{fit.LinearScan()}},
	{"indexed", nil},
}

// BenchmarkListPairs is BenchmarkPairs for first fit and next fit, with
// their index and with the linear walk: with 64 blocks live the list is
// short, and the index costs what its O(log n) updates cost on every
// Free.
//
//	go test -run '^$' -bench ListPairs -count 6 ./fit | benchstat -col /impl -
func BenchmarkListPairs(b *testing.B) {
	sizes, victims := pairSizes(64)
	for _, p := range []fit.Policy{fit.FirstFit, fit.NextFit} {
		for _, impl := range impls {
			b.Run("policy="+p.String()+"/impl="+impl.name, func(b *testing.B) {
				h, err := fit.New(p, impl.opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
				pairs(b, h, sizes, victims)
			})
		}
	}
}

// BenchmarkHoles measures the article's connection scenario at its own
// size where first fit and next fit walked their list: 100,000 scratch
// buffers of 1 KiB and 100,000 sessions of 64 bytes allocated in turn,
// the buffers freed, leaving 100,000 holes of 1040 bytes between live
// sessions, none large enough for the next 4 KiB buffer. Each iteration
// is that request, which the top serves, and its Free, which merges the
// block back into the top, so every iteration meets the same 100,000
// holes. The linear walk reads every hole; the index reads its root.
//
//	go test -run '^$' -bench Holes -count 6 ./fit | benchstat -col /impl -
func BenchmarkHoles(b *testing.B) {
	const n = 100_000
	for _, p := range []fit.Policy{fit.FirstFit, fit.NextFit} {
		for _, impl := range impls {
			b.Run("policy="+p.String()+"/impl="+impl.name, func(b *testing.B) {
				h, err := fit.New(p, append(impl.opts, fit.TrimThreshold(-1))...)
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
				heaptest.Connect(b, h, n)
				if st := h.Stats(); st.FreeBlocks != n || st.Largest != 1040 {
					b.Fatalf("after the connection scenario: %d free blocks, the largest %d bytes; want %d of 1040", st.FreeBlocks, st.Largest, n)
				}
				for b.Loop() {
					c, err := h.Alloc(4096, 8)
					if err != nil {
						b.Fatal(err)
					}
					if err := h.Free(c); err != nil {
						b.Fatal(err)
					}
				}
				if st := h.Stats(); st.FreeBlocks != n {
					b.Fatalf("after the loop: %d free blocks, want %d", st.FreeBlocks, n)
				}
			})
		}
	}
}

// BenchmarkScaling checks that best fit and address-ordered
// first fit search in O(log n), not O(n): the cost of an alloc+free pair
// with 1,000,000 free blocks in the heap must be at most 4 times the cost
// with 1,000.
//
// The heap is fragmented first: 2N blocks, alternately a hole (a request
// drawn log-uniformly from 16 B to 4 KiB) and a 16-byte separator, then
// every hole freed, so N free blocks lie between blocks in use. (Holes up
// to 64 KiB would make the 1M case commit some 8 GB; up to 4 KiB it is
// about 800 MB.) The timed loop then allocates requests drawn
// log-uniformly from 16 B to 64 KiB and frees, each time, one of the 64
// blocks it allocated before, picked at random: the free count stays near
// N, and a quarter of the holes (those of 1 KiB and more) are in best
// fit's tree. Automatic trimming is off, so no system call blurs the
// comparison. Run:
//
//	go test -run '^$' -bench Scaling -benchtime 2000000x ./fit
func BenchmarkScaling(b *testing.B) {
	const window = 64
	sizes := heaptest.LogUniform(1<<16, 16, 64<<10, 3)
	victims := make([]int, 1<<16)
	r := rand.New(rand.NewPCG(4, 4))
	for i := range victims {
		victims[i] = r.IntN(window)
	}
	for _, p := range []fit.Policy{fit.BestFit, fit.AddressOrderedFirstFit} {
		for _, n := range []int{1000, 1_000_000} {
			b.Run("policy="+p.String()+"/free="+strconv.Itoa(n), func(b *testing.B) {
				h, err := fit.New(p, fit.Limit(4<<30), fit.TrimThreshold(-1))
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
				fragment(b, h, n)
				var live [window][]byte
				i := 0
				for b.Loop() {
					c, err := h.Alloc(sizes[i%len(sizes)], 1)
					if err != nil {
						b.Fatal(err)
					}
					v := &live[victims[i%len(victims)]]
					if *v != nil {
						if err := h.Free(*v); err != nil {
							b.Fatal(err)
						}
					}
					*v = c
					i++
				}
				b.ReportMetric(float64(h.Stats().FreeBlocks), "free-blocks")
			})
		}
	}
}

// fragment leaves n free blocks in h, each between two blocks in use.
func fragment(b *testing.B, h *fit.Heap, n int) {
	holes := make([][]byte, n)
	sizes := heaptest.LogUniform(n, 16, 4096, 5)
	for i := range holes {
		var err error
		if holes[i], err = h.Alloc(sizes[i], 1); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Alloc(16, 1); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range holes {
		if err := h.Free(c); err != nil {
			b.Fatal(err)
		}
	}
	if st := h.Stats(); st.FreeBlocks != int64(n) {
		b.Fatalf("fragmented heap has %d free blocks, want %d", st.FreeBlocks, n)
	}
}
