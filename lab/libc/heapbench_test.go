package libc_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/libc/internal/cloop"
	"github.com/carvelab/carve/pool"
)

// sink keeps the Go heap's blocks escaping, as a program's do.
var sink []byte

// BenchmarkHeapPair is the small fast path of carve's heap beside its
// peers in one binary: a pair of Alloc(64, 8), a write of the block's
// first byte, and Free of it, the heap otherwise empty (its slab comes
// and goes with the block unless the heap keeps it); make([]byte, 64)
// (the block dropped: the Go heap's collections included); sync.Pool's
// Get and Put of a 64-byte buffer; carve's pool of 64-byte chunks; and
// the process's malloc(64) and free in one C loop behind a cgo call per
// 4096 pairs (impl=libc: glibc unless LD_PRELOAD says otherwise).
//
//	taskset -c 1 go test -run '^$' -bench HeapPair -count 8 ./lab/libc | benchstat -col /impl -
//
// The loops count to b.N rather than use b.Loop, whose guarantee that
// results stay live spills them to the stack on every iteration.
func BenchmarkHeapPair(b *testing.B) {
	const size = 64
	b.Run("impl=heap", func(b *testing.B) {
		h, err := heap.New()
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		b.ResetTimer()
		for range b.N {
			p, err := h.Alloc(size, 8)
			if err != nil {
				b.Fatal(err)
			}
			p[0] = 1
			if err := h.Free(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=make", func(b *testing.B) {
		b.ResetTimer()
		for range b.N {
			p := make([]byte, size)
			p[0] = 1
			sink = p
		}
	})
	b.Run("impl=sync.Pool", func(b *testing.B) {
		sp := sync.Pool{New: func() any { p := make([]byte, size); return &p }}
		b.ResetTimer()
		for range b.N {
			p := sp.Get().(*[]byte)
			(*p)[0] = 1
			sp.Put(p)
		}
	})
	b.Run("impl=pool", func(b *testing.B) {
		p, err := pool.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
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
	b.Run("impl="+cmp.Or(libc.Active().Name, "libc"), func(b *testing.B) {
		if !libc.Available() {
			b.Skip("built without cgo: no C allocator")
		}
		const batch = 4096
		for i := 0; i < b.N; i += batch {
			if err := cloop.Pairs(min(batch, b.N-i), size); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// windowSizes are BenchmarkHeapWindow's request sizes: log-uniform from
// 16 to 4016 bytes, a fixed seed.
func windowSizes() []int32 {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int32, 1<<16)
	for i := range sizes {
		sizes[i] = int32(math.Exp(math.Log(16) + r.Float64()*(math.Log(4016)-math.Log(16))))
	}
	return sizes
}

// BenchmarkHeapWindow keeps 1,024 blocks live, of sizes drawn from 16 to
// 4016 bytes, and replaces the oldest by a new one per op (its first
// byte written): carve's heap (Alloc(size, 8) and Free), the Go heap
// (make, the old block dropped: its collections included) and the
// process's malloc in one C loop behind a cgo call per 4096 ops.
//
//	taskset -c 1 go test -run '^$' -bench HeapWindow -count 8 ./lab/libc | benchstat -col /impl -
func BenchmarkHeapWindow(b *testing.B) {
	const live = 1024
	sizes := windowSizes()
	b.Run("impl=heap", func(b *testing.B) {
		h, err := heap.New()
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		ring := make([][]byte, live)
		for i := range ring {
			if ring[i], err = h.Alloc(int(sizes[i]), 8); err != nil {
				b.Fatal(err)
			}
		}
		i := live
		b.ResetTimer()
		for range b.N {
			slot := i % live
			if err := h.Free(ring[slot]); err != nil {
				b.Fatal(err)
			}
			p, err := h.Alloc(int(sizes[i%len(sizes)]), 8)
			if err != nil {
				b.Fatal(err)
			}
			p[0] = 1
			ring[slot] = p
			i++
		}
	})
	b.Run("impl=make", func(b *testing.B) {
		ring := make([][]byte, live)
		for i := range ring {
			ring[i] = make([]byte, sizes[i])
		}
		i := live
		b.ResetTimer()
		for range b.N {
			p := make([]byte, sizes[i%len(sizes)])
			p[0] = 1
			ring[i%live] = p
			i++
		}
	})
	b.Run("impl="+cmp.Or(libc.Active().Name, "libc"), func(b *testing.B) {
		if !libc.Available() {
			b.Skip("built without cgo: no C allocator")
		}
		w, err := cloop.NewWindow(live, sizes)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		const batch = 4096
		b.ResetTimer()
		for i := 0; i < b.N; i += batch {
			if err := w.Run(min(batch, b.N-i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
