//go:build !carvecheck

package buddy_test

import (
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
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
			heaptest.Fill(b, 9)
			mustFree(t, h, b)
			r := mustAlloc(t, h, 100, 1)
			if heaptest.Addr(r) != heaptest.Addr(b) {
				t.Fatalf("Alloc() = %#x, want the freed block %#x", heaptest.Addr(r), heaptest.Addr(b))
			}
			if i := heaptest.Intact(r, 9); i >= 0 {
				t.Fatalf("reused block: byte %d = %#x, want the old %#x", i, r[i], heaptest.Pattern(9, i))
			}
		})
	}
}
