//go:build carvecheck

package heap_test

import (
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
)

// The tests of checked builds (-tags carvecheck): freed slots and blocks
// are poisoned, and memory written after free is caught when it is handed
// out again.

func TestPoisonSlot(t *testing.T) {
	h := newHeap(t)
	keep, _ := h.Alloc(64, 1)
	b, _ := h.Alloc(64, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := heaptest.Poisoned(b); i >= 0 {
		t.Fatalf("freed slot byte %d = %#x, want poison", i, b[i])
	}
	b[10] = 0 // written after free
	heaptest.MustPanic(t, "written after free", func() { h.Alloc(64, 1) })
	_ = keep
}

func TestPoisonBlock(t *testing.T) {
	h := newHeap(t)
	b, _ := h.Alloc(3000, 1)
	guard, _ := h.Alloc(3000, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := heaptest.Poisoned(b[8 : 3000-16]); i >= 0 {
		t.Fatalf("freed block byte %d = %#x, want poison", 8+i, b[8+i])
	}
	b[100] = 0 // written after free
	heaptest.MustPanic(t, "written after free", func() { h.Alloc(3000, 1) })
	_ = guard
}
