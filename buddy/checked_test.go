//go:build carvecheck

package buddy_test

import (
	"strings"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
)

// The tests of checked builds (-tags carvecheck): freed blocks are
// poisoned, and a block written after it was freed is caught, with a
// panic, when its bytes are handed out again.

// TestPoison checks that a freed block reads the poison byte, in both
// modes, headers included, and after a Realloc shrinks a block.
func TestPoison(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(1<<20))
			keep := mustAlloc(t, h, 16, 1) // keeps the granule committed
			b := mustAlloc(t, h, 1000, 1)
			heaptest.Fill(b, 1)
			mustFree(t, h, b)
			lo, _ := h.Bounds()
			whole := heaptest.At(b, -int(heaptest.Addr(b)-lo)+1024, 1024) // the block: 1024 bytes at offset 1024
			for i, c := range whole {
				if c != invariants.Poison {
					t.Fatalf("freed block: byte %d = %#x, want poison %#x", i, c, invariants.Poison)
				}
			}
			// Realloc cuts a block down: the halves it gives up are poisoned.
			r := mustAlloc(t, h, 4000, 1)
			heaptest.Fill(r, 2)
			r, err := h.Realloc(r, 10)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range heaptest.At(r, 64, 1000) {
				if c != invariants.Poison {
					t.Fatalf("half given up by Realloc: byte %d = %#x, want poison", 64+i, c)
				}
			}
			_ = keep
		})
	}
}

// TestWriteAfterFree writes into a freed block, then allocates it again:
// the heap must panic and say so.
func TestWriteAfterFree(t *testing.T) {
	tests := []struct {
		name  string
		mode  buddy.Mode
		write func(b []byte)
	}{
		{"first byte", buddy.Plain, func(b []byte) { b[0] = 1 }},
		{"last byte", buddy.Plain, func(b []byte) { b[len(b)-1] = 1 }},
		{"header mode, payload", buddy.Header, func(b []byte) { b[5] = 0 }},
		{"header mode, the header", buddy.Header, func(b []byte) { heaptest.At(b, -16, 16)[3] = 7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustNew(t, tt.mode, buddy.Limit(1<<20))
			keep := mustAlloc(t, h, 16, 1)
			b := mustAlloc(t, h, 100, 1)
			mustFree(t, h, b)
			tt.write(b)
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "written after its block was freed") {
					t.Errorf("Alloc of a block written after free: panic %q, want one about a write after free", msg)
				}
			}()
			_ = keep
			h.Alloc(100, 1)
			t.Errorf("Alloc of a block written after free returned")
		})
	}
}

// TestDecommittedPoisonForgotten frees a block whose granules go back to
// the OS: its bytes read as zero afterwards, and handing them out again
// must not be taken for a write after free.
func TestDecommittedPoisonForgotten(t *testing.T) {
	h := mustNew(t, buddy.Plain, buddy.Limit(16<<20), buddy.Retain(0))
	b := mustAlloc(t, h, 1<<20, 1)
	heaptest.Fill(b, 3)
	mustFree(t, h, b)
	if s := checkStats(t, h); s.Footprint != 0 {
		t.Fatalf("Footprint after Free = %d, want 0", s.Footprint)
	}
	b = mustAlloc(t, h, 1<<20, 1)
	for i, c := range b {
		if c != 0 {
			t.Fatalf("recommitted block: byte %d = %#x, want 0", i, c)
		}
	}
}
