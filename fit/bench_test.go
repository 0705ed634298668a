package fit_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/carvelab/carve/fit"
)

var sink []byte

// logUniform returns n sizes drawn log-uniformly from [lo, hi], from a
// fixed seed.
func logUniform(n, lo, hi int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 99))
	s := make([]int, n)
	for i := range s {
		s[i] = int(math.Exp(math.Log(float64(lo)) + r.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
	}
	return s
}

// BenchmarkPairs measures one alloc+free pair of mixed sizes (8 B to 4
// KiB, log-uniform) with 64 blocks live at a time: each iteration
// allocates a block and frees one allocated earlier, picked at random, for
// every policy and for the Go heap (make, with the garbage collector's
// share of the cost). Compare the rows side by side:
//
//	go test -run '^$' -bench Pairs -count 10 ./fit | benchstat -col /policy -
func BenchmarkPairs(b *testing.B) {
	const window = 64
	sizes := logUniform(4096, 8, 4096, 1)
	victims := make([]int, 4096)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range victims {
		victims[i] = r.IntN(window)
	}
	for _, p := range fit.Policies() {
		b.Run("policy="+p.String(), func(b *testing.B) {
			h, err := fit.New(p)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			var live [window][]byte
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
	sizes := logUniform(1<<16, 16, 64<<10, 3)
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
	sizes := logUniform(n, 16, 4096, 5)
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
