//go:build !carvecheck

package pool_test

import (
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/pool"
)

// TestReuseKeepsBytes pins the release build's contract: a reused chunk
// holds its old bytes except the first LinkSize, which the free list
// overwrote (checked builds poison them instead, see checked_test.go).
func TestReuseKeepsBytes(t *testing.T) {
	for _, kind := range []string{"New", "Over"} {
		t.Run(kind, func(t *testing.T) {
			var p *pool.Pool
			if kind == "New" {
				p = heaptest.MustNew(t, pool.New, 64)
			} else {
				p = heaptest.MustOver(t, pool.Over, make([]byte, 4*64), 64)
			}
			c := heaptest.MustAlloc(t, p)
			heaptest.Fill(c, 9)
			heaptest.MustFree(t, p, c)
			r := heaptest.MustAlloc(t, p)
			if heaptest.Addr(r) != heaptest.Addr(c) {
				t.Fatalf("Alloc() = %#x, want the freed chunk %#x", heaptest.Addr(r), heaptest.Addr(c))
			}
			for i := pool.LinkSize; i < len(r); i++ {
				if r[i] != heaptest.Pattern(9, i) {
					t.Fatalf("reused chunk: byte %d = %#x, want the old %#x", i, r[i], heaptest.Pattern(9, i))
				}
			}
		})
	}
}

// TestDoubleFreeCorrupts pins what the contract says a release build does
// with a double free: Free returns nil, the chunk is on the free list
// twice, and the next two Allocs hand out the same chunk (checked builds
// refuse it, see checked_test.go). If release builds learn to detect it,
// this test and the contract change together.
func TestDoubleFreeCorrupts(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	c := heaptest.MustAlloc(t, p)
	heaptest.MustAlloc(t, p)
	if err := p.Free(c); err != nil {
		t.Fatalf("Free(c) = %v, want nil", err)
	}
	if err := p.Free(c); err != nil {
		t.Fatalf("Free(c) again = %v, want nil: release builds do not detect it", err)
	}
	a, b := mustAllocNoCheck(t, p), mustAllocNoCheck(t, p)
	if heaptest.Addr(a) != heaptest.Addr(c) || heaptest.Addr(b) != heaptest.Addr(c) {
		t.Errorf("Alloc(), Alloc() after a double free = %#x, %#x, want the freed chunk %#x twice", heaptest.Addr(a), heaptest.Addr(b), heaptest.Addr(c))
	}
}

// mustAllocNoCheck allocates without checking the pool, which a double
// free has broken.
func mustAllocNoCheck(t *testing.T, p *pool.Pool) []byte {
	t.Helper()
	c, err := p.Alloc()
	if err != nil {
		t.Fatalf("Alloc() = %v, want nil", err)
	}
	return c
}
