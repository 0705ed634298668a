package sizeclass_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/pool"
	"github.com/carvelab/carve/sizeclass"
)

var sink []byte

// BenchmarkPair compares one allocate+free pair of 64 bytes: the heap
// (class lookup from the size, the class pool's pop, the double-free bit
// set; class lookup from the address, the bit tested and cleared, the
// pool's push), the pool of that one size (its pop and push inlined into
// the loop), the same pool behind two calls that the compiler does not
// inline (the floor for any allocator whose Alloc and Free are too large
// to inline, as a heap's are), and the Go heap:
//
//	go test -run '^$' -bench Pair -count 10 ./sizeclass | benchstat -col /impl -
//
// The loops count to b.N rather than use b.Loop, whose guarantee that
// results stay live spills them to the stack on every iteration.
func BenchmarkPair(b *testing.B) {
	const size = 64
	b.Run("impl=sizeclass", func(b *testing.B) {
		h := newHeap(b)
		for range b.N {
			c, err := h.Alloc(size, 8)
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			if err := h.Free(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=pool", func(b *testing.B) {
		p := newPool(b, size)
		for range b.N {
			c, err := p.Alloc()
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			if err := p.Free(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=pool-call", func(b *testing.B) {
		p := newPool(b, size)
		for range b.N {
			c, err := poolAlloc(p)
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			if err := poolFree(p, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=make", func(b *testing.B) {
		for range b.N {
			c := make([]byte, size)
			c[0] = 1
			sink = c
		}
	})
}

//go:noinline
func poolAlloc(p *pool.Pool) ([]byte, error) { return p.Alloc() }

//go:noinline
func poolFree(p *pool.Pool, c []byte) error { return p.Free(c) }

// BenchmarkMixed allocates and frees blocks of sizes drawn log-uniformly
// from 16 B to 64 KiB (a fixed seed), each freed right after its
// allocation: the class lookups of every size and, for the one request in
// twelve above 32 KiB, a large object's mmap, mprotect and munmap, which
// dominate the average. max=32KiB draws from 16 B to 32 KiB instead: the
// classes alone. Against the Go heap's make (which zeroes, and leaves the
// freeing to the garbage collector).
//
//	go test -run '^$' -bench Mixed -count 10 ./sizeclass | benchstat -col /impl -
func BenchmarkMixed(b *testing.B) {
	for _, top := range []int{64 << 10, 32 << 10} {
		sizes := mixedSizes(4096, top)
		b.Run("max="+strconv.Itoa(top>>10)+"KiB", func(b *testing.B) {
			b.Run("impl=sizeclass", func(b *testing.B) {
				h := newHeap(b)
				for i := range b.N {
					c, err := h.Alloc(sizes[i%len(sizes)], 8)
					if err != nil {
						b.Fatal(err)
					}
					c[0] = 1
					if err := h.Free(c); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("impl=make", func(b *testing.B) {
				for i := range b.N {
					c := make([]byte, sizes[i%len(sizes)])
					c[0] = 1
					sink = c
				}
			})
		})
	}
}

// BenchmarkMixedLive is BenchmarkMixed with 1024 blocks live at a time:
// each step frees the block allocated 1024 steps earlier, so the classes'
// free lists and the span table see a working set, not one block.
func BenchmarkMixedLive(b *testing.B) {
	sizes := mixedSizes(4096, 64<<10)
	const window = 1024
	b.Run("impl=sizeclass", func(b *testing.B) {
		h := newHeap(b)
		var live [window][]byte
		for i := range b.N {
			if c := live[i%window]; c != nil {
				if err := h.Free(c); err != nil {
					b.Fatal(err)
				}
			}
			c, err := h.Alloc(sizes[i%len(sizes)], 8)
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			live[i%window] = c
		}
	})
	b.Run("impl=make", func(b *testing.B) {
		var live [window][]byte
		for i := range b.N {
			c := make([]byte, sizes[i%len(sizes)])
			c[0] = 1
			live[i%window] = c
		}
		sink = live[0]
	})
}

// mixedSizes returns n sizes log-uniform over [16, top], from a fixed
// seed.
func mixedSizes(n, top int) []int {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = int(math.Exp(math.Log(16) + r.Float64()*(math.Log(float64(top))-math.Log(16))))
	}
	return sizes
}

func newHeap(b *testing.B) *sizeclass.Heap {
	h, err := sizeclass.New(sizeclass.Limit(4 << 30))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

func newPool(b *testing.B, size int) *pool.Pool {
	p, err := pool.New(size)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkClassOf compares the two ways Free can find the class of an
// address, over blocks of all 80 classes: the span table (a hash of the
// address's granule, one probe mostly, two compares) and bisection of the
// reservations sorted by address (log2(80) ~ 6 dependent, unpredictable
// branches).
func BenchmarkClassOf(b *testing.B) {
	h := newHeap(b)
	var addrs []uintptr // a block of every multiple of 8 bytes: every class
	for s := 8; s <= sizeclass.MaxClassSize; s += 8 {
		blk, err := h.Alloc(s, 8)
		if err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, heaptest.Addr(blk))
	}
	r := rand.New(rand.NewPCG(5, 6))
	r.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	bases, classes := h.Reservations()
	reserve := uintptr(h.Reserve())
	for _, a := range addrs {
		if got, want := bisect(bases, classes, reserve, a), h.ClassAt(a); got != want || got == 0 {
			b.Fatalf("class of %#x: bisection %d, span table %d", a, got, want)
		}
	}
	b.Run("impl=spans", func(b *testing.B) {
		n := 0
		for i := range b.N {
			n += h.ClassAt(addrs[i%len(addrs)])
		}
		classSink = n
	})
	b.Run("impl=bisect", func(b *testing.B) {
		n := 0
		for i := range b.N {
			n += bisect(bases, classes, reserve, addrs[i%len(addrs)])
		}
		classSink = n
	})
}

var classSink int

// bisect finds the reservation that holds a among reservations of
// reserve bytes starting at bases (sorted), and returns its class.
func bisect(bases []uintptr, classes []int, reserve, a uintptr) int {
	lo, hi := 0, len(bases)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bases[m] <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || a-bases[lo-1] >= reserve {
		return 0
	}
	return classes[lo-1]
}
