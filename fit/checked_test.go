//go:build carvecheck

package fit_test

import (
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
)

// The tests of checked builds (-tags carvecheck): freed blocks are
// poisoned, merged boundary tags too, and a block written after free is
// caught when its bytes are handed out again.

// TestPoison frees blocks that merge and checks that the free block reads
// the poison everywhere but its links (first 8 bytes) and footer (last 8).
func TestPoison(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		a := mustAlloc(t, h, 100, 1) // 112
		b := mustAlloc(t, h, 200, 1) // 208
		c := mustAlloc(t, h, 100, 1) // 112
		mustAlloc(t, h, 16, 1)       // keeps the top away
		for _, x := range [][]byte{a, b, c} {
			heaptest.Fill(x, 5)
		}
		mustFree(t, h, a)
		mustFree(t, h, c)
		mustFree(t, h, b) // merges with both
		whole := heaptest.At(a, 0, 112+208+112-8)
		if i := heaptest.Poisoned(whole[8 : len(whole)-8]); i >= 0 {
			t.Fatalf("merged free block: byte %d = %#x, want poison %#x", 8+i, whole[8+i], invariants.Poison)
		}
		// It is handed out again whole (the only hole), poison and all.
		r := mustAlloc(t, h, 112+208+112-8, 1)
		if heaptest.Addr(r) != heaptest.Addr(a) {
			t.Fatalf("Alloc = %#x, want the merged hole %#x", heaptest.Addr(r), heaptest.Addr(a))
		}
	})
}

// TestWriteAfterFree writes into a freed block and allocates it again: the
// checked build stops with a panic naming the byte.
func TestWriteAfterFree(t *testing.T) {
	tests := []struct {
		name  string
		delta int // where the write lands, from the freed block's start
	}{
		{"after the links", 8},
		{"middle", 50},
		{"last poisoned byte", 112 - 17},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			each(t, func(t *testing.T, p fit.Policy) {
				h := mustNew(t, p)
				mustAlloc(t, h, 16, 1)
				a := mustAlloc(t, h, 100, 1)
				mustAlloc(t, h, 16, 1)
				mustFree(t, h, a)
				heaptest.At(a, tt.delta, 1)[0] = 1
				heaptest.MustPanic(t, "written after free", func() { h.Alloc(100, 1) })
			})
		})
	}
}

// TestWriteAfterFreeRealloc catches a write into the free block a Realloc
// grows into.
func TestWriteAfterFreeRealloc(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		a := mustAlloc(t, h, 40, 1)
		b := mustAlloc(t, h, 100, 1)
		mustAlloc(t, h, 16, 1)
		mustFree(t, h, b)
		heaptest.At(b, 30, 1)[0] = 1
		heaptest.MustPanic(t, "written after free", func() { h.Realloc(a, 120) })
	})
}
