package fit_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// The tests of the top: the heap grows in whole pages plus the pad, gives
// a free top back to the OS when it exceeds the threshold or when Trim is
// called (Footprint, Resident and the process's RSS drop), and keeps the
// blocks below the top.

// rssOK reports whether this platform measures residency: elsewhere mem
// backs regions with Go memory and the RSS assertions are skipped.
func rssOK() bool { return runtime.GOOS == "linux" }

func roundPage(n int64) int64 {
	ps := int64(mem.PageSize())
	return (n + ps - 1) / ps * ps
}

func TestGrowth(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		t.Run("no pad", func(t *testing.T) {
			h := mustNew(t, p, fit.TopPad(0), fit.TrimThreshold(-1))
			for k := int64(1); k <= 5; k++ {
				mustAlloc(t, h, 4000, 1) // blocks of 4016 bytes
				if st := checkStats(t, h); st.Footprint != roundPage(8+k*4016) {
					t.Errorf("Stats().Footprint after %d Alloc(4000) = %d, want %d: the blocks' end rounded up to a page", k, st.Footprint, roundPage(8+k*4016))
				}
			}
		})
		t.Run("default pad", func(t *testing.T) {
			h := mustNew(t, p)
			mustAlloc(t, h, 16, 1)
			want := roundPage(8 + 32 + fit.DefaultTopPad)
			if st := checkStats(t, h); st.Footprint != want {
				t.Errorf("Stats().Footprint after Alloc(16) = %d, want %d: the block and the pad", st.Footprint, want)
			}
			// Requests inside the pad commit nothing more.
			for range 100 {
				mustAlloc(t, h, 500, 1)
			}
			if st := checkStats(t, h); st.Footprint != want {
				t.Errorf("Stats().Footprint after 50 KiB more = %d, want still %d", st.Footprint, want)
			}
		})
	})
}

// TestTrimTop fills a heap, frees everything (in random order, so that
// the blocks merge from both sides into the top), and trims: Footprint and
// Resident go to zero, RSS drops, and the heap starts again afresh.
func TestTrimTop(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		const size, total = 1000, 16 << 20
		h := mustNew(t, p, fit.TrimThreshold(-1), fit.TopPad(0))
		bs := make([][]byte, total/(size+8))
		for i := range bs {
			bs[i] = mustAllocFast(t, h, size)
			heaptest.Fill(bs[i], i)
		}
		mustCheck(t, h, "filling")
		st := checkStats(t, h)
		if rssOK() && st.Resident != st.Footprint {
			t.Errorf("Stats().Resident after writing every block = %d, want the footprint %d", st.Resident, st.Footprint)
		}
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		for _, b := range bs {
			if err := h.Free(b); err != nil {
				t.Fatalf("Free = %v, want nil", err)
			}
		}
		mustCheck(t, h, "freeing everything")
		bs = nil
		before := checkStats(t, h)
		if before.Footprint != st.Footprint || before.Used != 0 || before.FreeBlocks != 0 || before.Top != before.Footprint-8 {
			t.Fatalf("Stats() after freeing everything, no automatic trim = %+v, want footprint %d kept, all of it the top", before, st.Footprint)
		}
		rssBefore, rssErr := mem.RSS()
		n, err := h.Trim()
		if n != before.Footprint || err != nil {
			t.Fatalf("Trim() = %d, %v, want %d, nil", n, err, before.Footprint)
		}
		rssAfter, rssErr2 := mem.RSS()
		mustCheck(t, h, "Trim")
		after := checkStats(t, h)
		if after.Footprint != 0 || after.Resident != 0 || after.Top != 0 {
			t.Errorf("Stats() after Trim = %+v, want nothing committed", after)
		}
		if rssOK() {
			if rssErr != nil || rssErr2 != nil {
				t.Fatalf("mem.RSS() = %v, %v, want nil", rssErr, rssErr2)
			}
			if drop := rssBefore - rssAfter; drop < n/2 {
				t.Errorf("RSS went from %d to %d over Trim: a drop of %d, want at least half of the %d released", rssBefore, rssAfter, drop, n)
			}
		}
		if n, err := h.Trim(); n != 0 || err != nil {
			t.Errorf("Trim() again = %d, %v, want 0, nil", n, err)
		}
		// Fresh pages read as zero.
		b := mustAlloc(t, h, 100000, 1)
		for i, c := range b {
			if c != 0 {
				t.Fatalf("Alloc after Trim: byte %d = %#x, want 0 (the OS's fresh pages)", i, c)
			}
		}
		if lo, _ := h.Bounds(); heaptest.Addr(b) != lo+16 {
			t.Errorf("Alloc after Trim = %#x, want the first block %#x", heaptest.Addr(b), lo+16)
		}
	})
}

// mustAllocFast allocates without checking the heap: for the tests that
// build large heaps.
func mustAllocFast(t testing.TB, h *fit.Heap, size int) []byte {
	t.Helper()
	b, err := h.Alloc(size, 1)
	if err != nil {
		t.Fatalf("Alloc(%d) = %v, want nil", size, err)
	}
	return b
}

// TestTrimKeepsBlocks trims a heap with blocks in use and free blocks
// below the top: only the top goes, the rest keeps its bytes.
func TestTrimKeepsBlocks(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p, fit.TrimThreshold(-1), fit.TopPad(0))
		a := mustAlloc(t, h, 100, 1)
		hole := mustAlloc(t, h, 1<<20, 1)
		c := mustAlloc(t, h, 100, 1)
		top := mustAlloc(t, h, 4<<20, 1)
		heaptest.Fill(a, 1)
		heaptest.Fill(hole, 2)
		heaptest.Fill(c, 3)
		heaptest.Fill(top, 4)
		mustFree(t, h, hole)
		mustFree(t, h, top)
		before := checkStats(t, h)
		n, err := h.Trim()
		// c ends 8 + 112 + (1<<20 + 16) + 112 bytes into the heap.
		end := int64(8 + 112 + (1<<20 + 16) + 112)
		if err != nil || n != before.Footprint-roundPage(end) {
			t.Fatalf("Trim() = %d, %v, want %d, nil: the pages past the last block", n, err, before.Footprint-roundPage(end))
		}
		mustCheck(t, h, "Trim")
		after := checkStats(t, h)
		if after.Footprint != roundPage(end) || after.FreeBytes != before.FreeBytes || after.Used != before.Used {
			t.Errorf("Stats() after Trim = %+v, want Footprint %d, the free hole and the blocks kept", after, roundPage(end))
		}
		if rssOK() && after.Resident < after.Footprint-roundPage(1<<20) {
			t.Errorf("Stats().Resident after Trim = %d, want about the footprint %d (the hole was written)", after.Resident, after.Footprint)
		}
		if j := heaptest.Intact(a, 1); j >= 0 {
			t.Errorf("block a lost byte %d in Trim", j)
		}
		if j := heaptest.Intact(c, 3); j >= 0 {
			t.Errorf("block c lost byte %d in Trim", j)
		}
		if !h.Committed(a) || !h.Committed(c) {
			t.Errorf("blocks in use are no longer committed after Trim")
		}
	})
}

// TestAutoTrim checks the threshold: a free top above it is trimmed down
// to the pad by Free and Realloc, one at or below it stays.
func TestAutoTrim(t *testing.T) {
	const pad, threshold = 64 << 10, 256 << 10
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p, fit.TopPad(pad), fit.TrimThreshold(threshold))
		a := mustAlloc(t, h, 100, 1) // block 112: the top starts at 120
		small := mustAlloc(t, h, 150<<10, 1)
		mustFree(t, h, small)
		st := checkStats(t, h)
		if want := roundPage(120 + 150<<10 + 16 + pad); st.Footprint != want {
			t.Errorf("Stats().Footprint after freeing 150 KiB = %d, want %d: a free top under the threshold stays", st.Footprint, want)
		}

		big := mustAlloc(t, h, 1<<20, 1)
		heaptest.Fill(big, 9)
		grown := checkStats(t, h)
		rssBefore, _ := mem.RSS()
		mustFree(t, h, big)
		rssAfter, _ := mem.RSS()
		st = checkStats(t, h)
		if want := roundPage(120 + pad); st.Footprint != want || st.Top != want-120 {
			t.Errorf("Stats() after freeing 1 MiB at the top = Footprint %d, Top %d, want %d, %d: trimmed down to the pad", st.Footprint, st.Top, want, want-120)
		}
		if rssOK() {
			if st.Resident > st.Footprint || grown.Resident < 1<<20 {
				t.Errorf("Stats().Resident = %d before, %d after the trim, want at least 1 MiB before and at most the footprint %d after", grown.Resident, st.Resident, st.Footprint)
			}
			if rssBefore-rssAfter < 1<<19 {
				t.Errorf("RSS went from %d to %d over the trim, want a drop of about 1 MiB", rssBefore, rssAfter)
			}
		}

		// Realloc shrinking the last block trims too.
		b := mustAlloc(t, h, 2<<20, 1)
		r, err := h.Realloc(b, 100)
		if err != nil || heaptest.Addr(r) != heaptest.Addr(b) {
			t.Fatalf("Realloc(2 MiB block, 100) = %#x, %v, want in place at %#x", heaptest.Addr(r), err, heaptest.Addr(b))
		}
		mustCheck(t, h, "Realloc")
		if st := checkStats(t, h); st.Footprint != roundPage(120+112+pad) {
			t.Errorf("Stats().Footprint after shrinking the last block = %d, want %d", st.Footprint, roundPage(120+112+pad))
		}
		// An empty heap whose top is under the threshold keeps it, until
		// Trim.
		mustFree(t, h, r)
		mustFree(t, h, a)
		if st := checkStats(t, h); st.Footprint != roundPage(120+112+pad) || st.Top != st.Footprint-8 {
			t.Errorf("Stats() of an empty heap = Footprint %d, Top %d, want %d, all of it the top", st.Footprint, st.Top, roundPage(120+112+pad))
		}
		if n, err := h.Trim(); n != roundPage(120+112+pad) || err != nil {
			t.Errorf("Trim() of an empty heap = %d, %v, want %d, nil", n, err, roundPage(120+112+pad))
		}
		mustCheck(t, h, "Trim")
	})
}

// TestLargeOffsets puts blocks past 4 GiB into the heap, where offsets no
// longer fit 32 bits (links count granules, so they still do), and works
// the index there. Only the pages written become resident.
func TestLargeOffsets(t *testing.T) {
	if !rssOK() || testing.Short() {
		t.Skip("commits 5 GiB of address space: Linux only")
	}
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p, fit.Limit(8<<30), fit.TopPad(0))
		huge := mustAllocFast(t, h, 5<<30)
		var bs [][]byte
		for i := range 8 {
			b := mustAllocFast(t, h, 1000+i*1000)
			heaptest.Fill(b, i)
			bs = append(bs, b)
		}
		mustCheck(t, h, "allocating past 4 GiB")
		lo, _ := h.Bounds()
		if off := heaptest.Addr(bs[0]) - lo; off < 5<<30 {
			t.Fatalf("block after 5 GiB at offset %d, want past 5 GiB", off)
		}
		mustFree(t, h, bs[2])
		mustFree(t, h, bs[5])
		mustFree(t, h, bs[3]) // merges with 2
		again := mustAlloc(t, h, 1000, 1)
		// The holes: bs[2] and bs[3] merged (7024 bytes), freed last, at
		// the lower address; bs[5] (6016 bytes).
		want := map[fit.Policy][]byte{fit.FirstFit: bs[2], fit.NextFit: bs[2], fit.BestFit: bs[5], fit.AddressOrderedFirstFit: bs[2]}[p]
		if heaptest.Addr(again) != heaptest.Addr(want) {
			t.Errorf("Alloc(1000) = offset %d, want %d", heaptest.Addr(again)-lo, heaptest.Addr(want)-lo)
		}
		for i, b := range bs {
			if i != 2 && i != 3 && i != 5 {
				if j := heaptest.Intact(b, i); j >= 0 {
					t.Errorf("block %d lost byte %d", i, j)
				}
			}
		}
		st := checkStats(t, h)
		if st.Footprint < 5<<30 || st.Resident > 64<<20 {
			t.Errorf("Stats() = Footprint %d, Resident %d, want at least 5 GiB committed, little of it resident", st.Footprint, st.Resident)
		}
		// Everything goes back to the top, the huge block last (a free
		// block below the top would be poisoned whole in checked builds).
		for _, i := range []int{7, 6, 4, 1, 0} {
			mustFree(t, h, bs[i])
		}
		mustFree(t, h, again)
		mustFree(t, h, huge)
		if st := checkStats(t, h); st.FreeBlocks != 0 || st.Used != 0 || st.Resident > 64<<20 {
			t.Errorf("Stats() after freeing everything = %+v, want all of it the top, little of it resident", st)
		}
	})
}
