//go:build !carvecheck

package fit_test

import (
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
)

// TestReuseKeepsBytes pins the release build's contract: a reused block
// holds its old bytes except its first 8 (the index links) and the 8
// before its end (the footer); checked builds poison them instead.
func TestReuseKeepsBytes(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		a := mustAlloc(t, h, 100, 1) // a block of 112: usable 104, footer at 96
		mustAlloc(t, h, 16, 1)
		heaptest.Fill(a, 9)
		mustFree(t, h, a)
		r := mustAlloc(t, h, 100, 1)
		if heaptest.Addr(r) != heaptest.Addr(a) {
			t.Fatalf("Alloc = %#x, want the freed block %#x", heaptest.Addr(r), heaptest.Addr(a))
		}
		for i := 8; i < 96; i++ {
			if r[i] != heaptest.Pattern(9, i) {
				t.Fatalf("reused block: byte %d = %#x, want the old %#x", i, r[i], heaptest.Pattern(9, i))
			}
		}
	})
}
