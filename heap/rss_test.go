package heap_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// randomFree allocates n blocks of sizes uniform in [lo, hi], writing every
// byte, frees nine in ten of them in random order (a fixed seed), and
// returns the heap's statistics before and after.
func randomFree(t *testing.T, n, lo, hi int) (peak, st heap.Stats) {
	h := newHeap(t)
	r := rand.New(rand.NewPCG(19, 90))
	bs := make([][]byte, n)
	for i := range bs {
		b, err := h.Alloc(lo+r.IntN(hi-lo+1), 1)
		if err != nil {
			t.Fatal(err)
		}
		for j := range b {
			b[j] = byte(i)
		}
		bs[i] = b
	}
	peak = h.Stats()
	for _, i := range r.Perm(n)[:n*9/10] {
		if err := h.Free(bs[i]); err != nil {
			t.Fatal(err)
		}
	}
	heaptest.MustCheck(t, h, "freeing nine in ten")
	return peak, checkStats(t, h)
}

// TestRandomFreeLarge frees 90% of blocks of 4 to 64 KiB at random: with
// no top to trim, the heap's resident memory, its side metadata included,
// must come within 1.3 times the live bytes. 2,000 blocks by default,
// 100,000 (about 3.2 GiB at the peak) with CARVE_LONG=1.
func TestRandomFreeLarge(t *testing.T) {
	if mem.PageSize() != heap.PageSize {
		t.Skipf("the OS page is %d bytes: the heap gives back no free page", mem.PageSize())
	}
	n := 2000
	if os.Getenv("CARVE_LONG") == "1" {
		n = 100000
	}
	_, st := randomFree(t, n, 4<<10, 64<<10)
	ratio := float64(st.Resident+st.Metadata) / float64(st.Live)
	t.Logf("%d blocks of 4-64 KiB, 90%% freed: live %.1f MiB, resident %.1f MiB + metadata %.2f MiB: %.3f x live",
		n, mib(st.Live), mib(st.Resident), mib(st.Metadata), ratio)
	if ratio > 1.3 {
		t.Fatalf("resident + metadata = %.3f x live, want at most 1.3", ratio)
	}
}

// TestRandomFreeSmall is the same with blocks of 16 to 256 bytes, whose
// slabs hold 16 to 256 slots each: only a slab all of whose slots die
// gives its page back (past the few kept), so the heap keeps most of its pages (what it
// reaches is logged). It must give back at least one page in twenty.
func TestRandomFreeSmall(t *testing.T) {
	if mem.PageSize() != heap.PageSize {
		t.Skipf("the OS page is %d bytes: the heap gives back no free page", mem.PageSize())
	}
	n := 100000
	peak, st := randomFree(t, n, 16, 256)
	ratio := float64(st.Resident+st.Metadata) / float64(st.Live)
	t.Logf("%d blocks of 16-256 B, 90%% freed: live %.2f MiB, resident %.2f MiB + metadata %.2f MiB: %.2f x live; %.1f%% of the peak's resident pages given back",
		n, mib(st.Live), mib(st.Resident), mib(st.Metadata), ratio, 100-100*float64(st.Resident)/float64(peak.Resident))
	if st.Resident > peak.Resident*19/20 {
		t.Fatalf("resident %d after freeing 90%%, %d at the peak: want at least one page in twenty given back", st.Resident, peak.Resident)
	}
}
