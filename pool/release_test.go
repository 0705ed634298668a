//go:build !carvecheck

package pool_test

import (
	"testing"

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
				p = mustNew(t, 64)
			} else {
				p = mustOver(t, make([]byte, 4*64), 64)
			}
			c := mustAlloc(t, p)
			fill(c, 9)
			mustFree(t, p, c)
			r := mustAlloc(t, p)
			if addr(r) != addr(c) {
				t.Fatalf("Alloc() = %#x, want the freed chunk %#x", addr(r), addr(c))
			}
			for i := pool.LinkSize; i < len(r); i++ {
				if r[i] != pattern(9, i) {
					t.Fatalf("reused chunk: byte %d = %#x, want the old %#x", i, r[i], pattern(9, i))
				}
			}
		})
	}
}
