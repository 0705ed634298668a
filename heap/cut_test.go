package heap_test

import (
	"errors"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

// TestFreeCutSlice frees and reallocates slots and blocks through slices
// that are not the one Alloc or Realloc returned last: cut shorter (b[:n],
// b[:n:n], b[:0]), or stale after a Realloc in place. The heap accounts
// the block by what was asked of it, whatever the slice's length: Live is
// exact after every step (and 0 once nothing is in use), and the checker,
// which checked builds run when the heap next grows, passes.
func TestFreeCutSlice(t *testing.T) {
	tests := []struct {
		name        string
		size, align int // what Alloc asks for
		// do frees or reallocates the block b through some slice of it
		// and returns the block still in use, if any, and what was asked
		// of it.
		do func(t *testing.T, h *heap.Heap, b []byte) ([]byte, int)
	}{
		{"free b[:10] of a block", 5000, 1, free(func(b []byte) []byte { return b[:10] })},
		{"free b[:10:10] of a block", 5000, 1, free(func(b []byte) []byte { return b[:10:10] })},
		{"free b[:0] of a block", 5000, 1, free(func(b []byte) []byte { return b[:0] })},
		{"free b[:1] of a slot", 100, 1, free(func(b []byte) []byte { return b[:1] })},
		{"free b[:0] of a slot", 100, 1, free(func(b []byte) []byte { return b[:0] })},
		{"free b[:3:3] of an exact slot", 4089, 1, free(func(b []byte) []byte { return b[:3:3] })},
		{"free b[:1] of an aligned slot", 40, 64, free(func(b []byte) []byte { return b[:1] })},
		{"free b[len(b):] of a 0-byte block", 0, 1, free(func(b []byte) []byte { return b[len(b):] })},
		{"stale slot after Realloc in its class", 100, 1, stale(97)},
		{"stale block after Realloc shrinks it", 5000, 1, stale(2990)},
		{"stale block after Realloc grows it at the top", 5000, 1, stale(8000)},
		{"stale block after Realloc to a slot's size", 5000, 1, stale(20)},
		{"realloc b[:10] of a block, moved", 5000, 1, realloc(10, 20000)},
		{"realloc b[:10] of a block, in place", 5000, 1, realloc(10, 4000)},
		{"realloc b[:1] of a slot, in place", 100, 1, realloc(1, 98)},
		{"realloc b[:1] of a slot, moved", 100, 1, realloc(1, 300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeap(t)
			keep := mustAlloc(t, h, 48, 1) // other blocks in use, which must stay accounted
			guard := mustAlloc(t, h, 3000, 1)
			b := mustAlloc(t, h, tt.size, tt.align)
			heaptest.Fill(b, 3)
			live, asked := tt.do(t, h, b)
			wantLive(t, h, tt.name, int64(48+3000+asked))
			// An unrelated Alloc that grows the heap: checked builds run
			// the checker there.
			big := mustAlloc(t, h, 1<<20, 1)
			wantLive(t, h, "a later Alloc", int64(48+3000+asked+1<<20))
			for _, x := range [][]byte{big, live, guard, keep} {
				if x != nil {
					if err := h.Free(x); err != nil {
						t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(x), err)
					}
				}
			}
			if st := wantLive(t, h, "freeing everything", 0); st.Used != 0 || st.Slots != 0 || st.Blocks != 0 {
				t.Fatalf("Stats() after freeing everything = Used %d, %d slots, %d blocks, want 0, 0, 0", st.Used, st.Slots, st.Blocks)
			}
		})
	}
}

// free returns a TestFreeCutSlice step that frees b through cut(b).
func free(cut func([]byte) []byte) func(*testing.T, *heap.Heap, []byte) ([]byte, int) {
	return func(t *testing.T, h *heap.Heap, b []byte) ([]byte, int) {
		if err := h.Free(cut(b)); err != nil {
			t.Fatalf("Free(cut slice of %d bytes) = %v, want nil", len(b), err)
		}
		return nil, 0
	}
}

// stale returns a TestFreeCutSlice step that reallocates b in place to
// size bytes, then frees it through b, the slice from before.
func stale(size int) func(*testing.T, *heap.Heap, []byte) ([]byte, int) {
	return func(t *testing.T, h *heap.Heap, b []byte) ([]byte, int) {
		r, err := h.Realloc(b, size)
		if err != nil || heaptest.Addr(r) != heaptest.Addr(b) {
			t.Fatalf("Realloc(%d bytes, %d) = %#x, %v, want in place at %#x", len(b), size, heaptest.Addr(r), err, heaptest.Addr(b))
		}
		wantLive(t, h, "the Realloc", int64(48+3000+size))
		if err := h.Free(b); err != nil {
			t.Fatalf("Free(the slice from before the Realloc) = %v, want nil", err)
		}
		return nil, 0
	}
}

// realloc returns a TestFreeCutSlice step that reallocates b[:n] to size
// bytes: the first n bytes are kept.
func realloc(n, size int) func(*testing.T, *heap.Heap, []byte) ([]byte, int) {
	return func(t *testing.T, h *heap.Heap, b []byte) ([]byte, int) {
		r, err := h.Realloc(b[:n], size)
		if err != nil || len(r) != size {
			t.Fatalf("Realloc(b[:%d], %d) = len %d, %v, want len %d, nil", n, size, len(r), err, size)
		}
		if i := heaptest.Intact(r[:n], 3); i >= 0 {
			t.Fatalf("Realloc(b[:%d], %d) lost byte %d", n, size, i)
		}
		return r, size
	}
}

// TestFreePastEnd hands Free, Realloc and UsableSize an empty slice of
// capacity 0 at a block's start, which is what b[len(b):] is (Go keeps b's
// pointer when no capacity is left): for a block of more than 0 bytes
// they refuse it with ErrForeign and change nothing; a block of 0 bytes,
// whose own slice that is, is freed by it.
func TestFreePastEnd(t *testing.T) {
	for _, size := range []int{1, 100, 4089, 5000} {
		h := newHeap(t)
		b := mustAlloc(t, h, size, 1)
		end := b[len(b):]
		if heaptest.Addr(end) != heaptest.Addr(b) {
			t.Skipf("b[len(b):] = %#x, b = %#x: this Go advances the pointer", heaptest.Addr(end), heaptest.Addr(b))
		}
		heaptest.Refused(t, h, end, 10, []error{heap.ErrForeign}, func() any { return h.Stats() }, size)
		heaptest.MustCheck(t, h, "refusals")
		if err := h.Free(b); err != nil {
			t.Fatalf("Free(b) of %d bytes after the refusals = %v, want nil", size, err)
		}
		wantLive(t, h, "Free(b)", 0)
	}
	h := newHeap(t)
	for _, align := range []int{1, 64, heap.MaxAlign} {
		b := mustAlloc(t, h, 0, align)
		if n, err := h.UsableSize(b[len(b):]); err != nil || n == 0 {
			t.Fatalf("UsableSize(b[len(b):]) of Alloc(0, %d) = %d, %v, want > 0, nil", align, n, err)
		}
		if err := h.Free(b[len(b):]); err != nil {
			t.Fatalf("Free(b[len(b):]) of Alloc(0, %d) = %v, want nil", align, err)
		}
		if err := h.Free(b); !errors.Is(err, heap.ErrDoubleFree) {
			t.Fatalf("Free(b) of Alloc(0, %d) after = %v, want %v", align, err, heap.ErrDoubleFree)
		}
	}
	wantLive(t, h, "freeing the 0-byte blocks", 0)
}

// mustAlloc allocates size bytes aligned to align, or fails the test.
func mustAlloc(t testing.TB, h *heap.Heap, size, align int) []byte {
	t.Helper()
	b, err := h.Alloc(size, align)
	if err != nil {
		t.Fatalf("Alloc(%d, %d) = %v, want nil", size, align, err)
	}
	return b
}

// wantLive checks the heap's invariants and that Stats().Live is live.
func wantLive(t testing.TB, h *heap.Heap, step string, live int64) heap.Stats {
	t.Helper()
	heaptest.MustCheck(t, h, step)
	st := checkStats(t, h)
	if st.Live != live {
		t.Fatalf("Stats().Live after %s = %d, want %d", step, st.Live, live)
	}
	return st
}
