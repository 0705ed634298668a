package pool_test

import (
	"sync"
	"testing"

	"github.com/carvelab/carve/pool"
)

var sink []byte

// BenchmarkPair compares one allocate+free pair of a 64-byte chunk: carve's
// pool (free-list pop and push, with the foreign-free check), sync.Pool
// Get and Put, and the Go heap (make, with the GC's share of the cost).
// Run the three side by side and compare the ratios, not the absolute
// times: go test -run '^$' -bench Pair -count 10 ./pool | benchstat -
func BenchmarkPair(b *testing.B) {
	const size = 64
	b.Run("pool", func(b *testing.B) {
		p, err := pool.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		for b.Loop() {
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
	b.Run("syncpool", func(b *testing.B) {
		sp := sync.Pool{New: func() any { return new([size]byte) }}
		for b.Loop() {
			c := sp.Get().(*[size]byte)
			c[0] = 1
			sp.Put(c)
		}
	})
	b.Run("make", func(b *testing.B) {
		for b.Loop() {
			c := make([]byte, size)
			c[0] = 1
			sink = c
		}
	})
}
