//go:build !carvecheck

package buddy_test

import (
	"testing"

	"github.com/carvelab/carve/buddy"
)

// TestReuseKeepsBytes pins the release build's contract: the heap never
// writes into a free block, so a block handed out again holds the bytes
// its last owner left, but for the header in Header mode (checked builds
// poison freed blocks instead, see checked_test.go).
func TestReuseKeepsBytes(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(1<<20))
			b := mustAlloc(t, h, 100, 1)
			fill(b, 9)
			mustFree(t, h, b)
			r := mustAlloc(t, h, 100, 1)
			if addr(r) != addr(b) {
				t.Fatalf("Alloc() = %#x, want the freed block %#x", addr(r), addr(b))
			}
			if i := intact(r, 9, len(r)); i >= 0 {
				t.Fatalf("reused block: byte %d = %#x, want the old %#x", i, r[i], pattern(9, i))
			}
		})
	}
}
