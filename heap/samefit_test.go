package heap

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/fit"
)

// The heap's best-fit zone and fit's BestFit heap run the same block
// mechanics (package tags) over two indexes of their own: the zone's
// treap is threaded through its free blocks, fit's lives in Go memory.
// FuzzSameAsFit holds the two to each other: given the same sequence of
// Alloc, Free and Realloc of sizes the zone serves, each block must land
// at the same offset from its region's base, and after every step the
// two must count the same blocks in use, free blocks and free bytes and
// the same largest free block. fit is the reference: its index is the
// simpler one, and fit's own tests hold it to a linear model.
func FuzzSameAsFit(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 31, 1 << 40} {
		f.Add(seed, uint16(3000))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		h, err := New()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ref, err := fit.New(fit.BestFit)
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		addr := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
		// fit's first block of an empty heap lies at firstBlock: that gives
		// its base, which fit does not export.
		first, err := ref.Alloc(1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		refBase := addr(first) - uintptr(firstBlock)
		if err := ref.Free(first); err != nil {
			t.Fatal(err)
		}
		off := func(b, c []byte) (int, int) {
			return int(addr(b) - uintptr(h.mid.base)), int(addr(c) - refBase)
		}
		var zoneLive, refLive [][]byte
		r := rand.New(rand.NewPCG(seed, seed))
		size := func(align int) int { // a size the best-fit zone serves
			for {
				n := 257 + r.IntN(1<<r.IntN(17)+1)
				if classFor(n, align) == 0 {
					return n
				}
			}
		}
		for i := range int(steps) {
			switch op := r.IntN(10); {
			case op < 5 || len(zoneLive) == 0:
				align := 1
				if r.IntN(8) == 0 {
					align = 32 << r.IntN(8)
				}
				n := size(align)
				b, err := h.Alloc(n, align)
				if err != nil {
					t.Fatalf("step %d: heap: Alloc(%d, %d): %v", i, n, align, err)
				}
				c, err := ref.Alloc(n, align)
				if err != nil {
					t.Fatalf("step %d: fit: Alloc(%d, %d): %v", i, n, align, err)
				}
				if x, y := off(b, c); x != y {
					t.Fatalf("step %d: Alloc(%d, %d) at offset %d in the heap's zone, %d in fit", i, n, align, x, y)
				}
				zoneLive, refLive = append(zoneLive, b), append(refLive, c)
			case op < 8:
				k := r.IntN(len(zoneLive))
				if err := h.Free(zoneLive[k]); err != nil {
					t.Fatalf("step %d: heap: Free: %v", i, err)
				}
				if err := ref.Free(refLive[k]); err != nil {
					t.Fatalf("step %d: fit: Free: %v", i, err)
				}
				last := len(zoneLive) - 1
				zoneLive[k], refLive[k] = zoneLive[last], refLive[last]
				zoneLive, refLive = zoneLive[:last], refLive[:last]
			default:
				k, n := r.IntN(len(zoneLive)), size(1)
				b, err := h.Realloc(zoneLive[k], n)
				if err != nil {
					t.Fatalf("step %d: heap: Realloc(%d): %v", i, n, err)
				}
				c, err := ref.Realloc(refLive[k], n)
				if err != nil {
					t.Fatalf("step %d: fit: Realloc(%d): %v", i, n, err)
				}
				if x, y := off(b, c); x != y {
					t.Fatalf("step %d: Realloc(%d) at offset %d in the heap's zone, %d in fit", i, n, x, y)
				}
				zoneLive[k], refLive[k] = b, c
			}
			zs, rs := h.Stats(), ref.Stats()
			got := [4]int64{zs.Blocks, zs.FreeBlocks, zs.FreeBytes, zs.Largest}
			want := [4]int64{rs.Blocks, rs.FreeBlocks, rs.FreeBytes, rs.Largest}
			if got != want {
				t.Fatalf("step %d: heap's zone: blocks, free blocks, free bytes, largest %v; fit: %v", i, got, want)
			}
		}
	})
}
