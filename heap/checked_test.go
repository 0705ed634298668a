//go:build carvecheck

package heap_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
)

// The tests of checked builds (-tags carvecheck): freed slots and blocks
// are poisoned, and memory written after free is caught when it is handed
// out again.

// mustPanic runs f and fails unless it panics with a message containing
// want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), want) {
			t.Fatalf("panic = %v, want one saying %q", r, want)
		}
	}()
	f()
}

func poisoned(b []byte) int {
	for i, c := range b {
		if c != invariants.Poison {
			return i
		}
	}
	return -1
}

func TestPoisonSlot(t *testing.T) {
	h := newHeap(t)
	keep, _ := h.Alloc(64, 1)
	b, _ := h.Alloc(64, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := poisoned(b); i >= 0 {
		t.Fatalf("freed slot byte %d = %#x, want poison", i, b[i])
	}
	b[10] = 0 // written after free
	mustPanic(t, "written after free", func() { h.Alloc(64, 1) })
	_ = keep
}

func TestPoisonBlock(t *testing.T) {
	h := newHeap(t)
	b, _ := h.Alloc(3000, 1)
	guard, _ := h.Alloc(3000, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := poisoned(b[8 : 3000-16]); i >= 0 {
		t.Fatalf("freed block byte %d = %#x, want poison", 8+i, b[8+i])
	}
	b[100] = 0 // written after free
	mustPanic(t, "written after free", func() { h.Alloc(3000, 1) })
	_ = guard
}
