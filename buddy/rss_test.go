package buddy_test

import (
	"runtime"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// The tests of giving memory back: a granule with no block in use goes
// back to the OS (Footprint, Resident and the process's RSS drop) once the
// idle memory passes Retain, the highest granules first; Trim gives back
// the rest.

// rssOK reports whether this platform measures residency: elsewhere mem
// backs regions with Go memory and the RSS assertions are skipped.
func rssOK() bool { return runtime.GOOS == "linux" }

// touch writes every byte of b.
func touch(b []byte) {
	for i := range b {
		b[i] = byte(i) | 1
	}
}

// TestDecommitWhollyFree frees a large block in a heap that retains
// nothing: its granules go back to the OS at once.
func TestDecommitWhollyFree(t *testing.T) {
	const size = 16 << 20
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(256<<20), buddy.Retain(0))
			b := mustAlloc(t, h, size, 1)
			touch(b)
			s := checkStats(t, h)
			block := int64(blockOf(mode, size, 1, 16))
			if s.Footprint != block || s.Used != block || s.Idle != 0 {
				t.Fatalf("Stats() after Alloc(%d) = Footprint %d, Used %d, Idle %d, want %d, %d, 0", size, s.Footprint, s.Used, s.Idle, block, block)
			}
			if rssOK() && (s.Resident < size || s.Resident > size+int64(s.Granule)) {
				t.Errorf("Stats().Resident after writing %d bytes = %d, want that, give or take a granule", size, s.Resident)
			}
			rssBefore, err1 := mem.RSS()
			mustFree(t, h, b)
			rssAfter, err2 := mem.RSS()
			s = checkStats(t, h)
			if s.Footprint != 0 || s.Resident != 0 || s.Idle != 0 || s.Decommits != 1 {
				t.Errorf("Stats() after Free = Footprint %d, Resident %d, Idle %d, Decommits %d, want 0, 0, 0, 1", s.Footprint, s.Resident, s.Idle, s.Decommits)
			}
			if rssOK() {
				if err1 != nil || err2 != nil {
					t.Fatalf("mem.RSS() = %v, %v, want nil", err1, err2)
				}
				if drop := rssBefore - rssAfter; drop < size/2 {
					t.Errorf("RSS went from %d to %d over Free: a drop of %d, want at least half of the %d freed", rssBefore, rssAfter, drop, size)
				}
			}
			// The same request again starts from fresh, zero pages.
			b = mustAlloc(t, h, size, 1)
			for i := 0; i < len(b); i += 4096 {
				if b[i] != 0 {
					t.Fatalf("Alloc after the decommit: byte %d = %#x, want 0", i, b[i])
				}
			}
		})
	}
}

// TestDecommitAfterMerge frees two buddies one after the other: the first
// one's granules go at once, the second one's when it merges.
func TestDecommitAfterMerge(t *testing.T) {
	const half = 4 << 20
	h := mustNew(t, buddy.Plain, buddy.Limit(64<<20), buddy.Retain(0))
	small := mustAlloc(t, h, 100, 1) // keeps the first granule in use
	a := mustAlloc(t, h, half, 1)
	b := mustAlloc(t, h, half, 1)
	touch(small)
	touch(a)
	touch(b)
	g := int64(checkStats(t, h).Granule)
	if s := checkStats(t, h); s.Footprint != 2*half+g {
		t.Fatalf("Footprint = %d, want %d", s.Footprint, 2*half+g)
	}
	// The small block's granule is committed whole but resident only in
	// the page the block touched.
	ps := int64(mem.PageSize())
	mustFree(t, h, a)
	if s := checkStats(t, h); s.Footprint != half+g || (rssOK() && s.Resident != half+ps) {
		t.Errorf("after freeing one buddy: Footprint %d, Resident %d, want %d, %d", s.Footprint, s.Resident, half+g, half+ps)
	}
	mustFree(t, h, b)
	if s := checkStats(t, h); s.Footprint != g || (rssOK() && s.Resident != ps) {
		t.Errorf("after freeing both: Footprint %d, Resident %d, want the small block's granule, %d, and page, %d", s.Footprint, s.Resident, g, ps)
	}
	mustFree(t, h, small)
	if s := checkStats(t, h); s.Footprint != 0 || h.Layout() != "67108864F" {
		t.Errorf("after freeing everything: Footprint %d, layout %s, want 0, one free root", s.Footprint, h.Layout())
	}
}

// TestRetain frees a large block under the default Retain: the heap keeps
// the lowest Retain/2 bytes committed, and reuses them without a system
// call; Trim gives them back.
func TestRetain(t *testing.T) {
	const size = 8 << 20
	h := mustNew(t, buddy.Plain, buddy.Limit(64<<20))
	b := mustAlloc(t, h, size, 1)
	touch(b)
	mustFree(t, h, b)
	s := checkStats(t, h)
	if s.Footprint != buddy.DefaultRetain/2 || s.Idle != s.Footprint || s.Commits != 1 || s.Decommits != 1 {
		t.Fatalf("Stats() after Free = Footprint %d, Idle %d, Commits %d, Decommits %d, want %d, the same, 1, 1",
			s.Footprint, s.Idle, s.Commits, s.Decommits, buddy.DefaultRetain/2)
	}
	lo, _ := h.Bounds()
	kept := heaptest.At(b, int(lo-heaptest.Addr(b)), buddy.DefaultRetain/2)
	if !h.Committed(kept) || h.Committed(heaptest.At(b, buddy.DefaultRetain/2, 1)) {
		t.Errorf("the granules kept are not the lowest %d bytes", buddy.DefaultRetain/2)
	}
	// Churn within the retained memory makes no system call.
	for range 100 {
		c := mustAlloc(t, h, 200<<10, 1)
		touch(c)
		mustFree(t, h, c)
	}
	if s := checkStats(t, h); s.Commits != 1 || s.Decommits != 1 {
		t.Errorf("churn in retained memory: Commits %d, Decommits %d, want 1, 1", s.Commits, s.Decommits)
	}
	n, err := h.Trim()
	if n != buddy.DefaultRetain/2 || err != nil {
		t.Errorf("Trim() = %d, %v, want %d, nil", n, err, buddy.DefaultRetain/2)
	}
	mustCheck(t, h, "Trim")
	if s := checkStats(t, h); s.Footprint != 0 || s.Idle != 0 || s.Resident != 0 {
		t.Errorf("after Trim: Footprint %d, Idle %d, Resident %d, want 0", s.Footprint, s.Idle, s.Resident)
	}
	if n, err := h.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() again = %d, %v, want 0, nil", n, err)
	}
}

// TestFootprintFollowsLive allocates blocks at the bottom of the heap and
// frees the upper ones: with address-ordered allocation the free memory
// gathers at the top, and goes back.
func TestFootprintFollowsLive(t *testing.T) {
	h := mustNew(t, buddy.Header, buddy.Limit(256<<20), buddy.Retain(0))
	var bs [][]byte
	for range 64 {
		b := mustAlloc(t, h, 1<<20, 1) // 2 MiB blocks in Header mode
		touch(b)
		bs = append(bs, b)
	}
	if s := checkStats(t, h); s.Footprint != 128<<20 || s.Used != 128<<20 || s.Live != 64<<20 {
		t.Fatalf("Stats() = %+v, want Footprint and Used 128 MiB, Live 64 MiB", s.Stats)
	}
	for _, b := range bs[8:] {
		mustFree(t, h, b)
	}
	if s := checkStats(t, h); s.Footprint != 16<<20 || (rssOK() && s.Resident > 16<<20) {
		t.Errorf("after freeing the upper 56 blocks: Footprint %d, Resident %d, want 16 MiB", s.Footprint, s.Resident)
	}
}
