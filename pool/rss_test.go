package pool_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// The tests of Trim: empty slabs go back to the OS (Footprint, Resident and
// the process's RSS drop), slabs with a chunk in use stay with their bytes,
// and the pool revives vacant slabs before it grows.

// rssOK reports whether this platform measures residency: elsewhere mem
// backs regions with Go memory and the RSS assertions are skipped.
func rssOK() bool { return runtime.GOOS == "linux" }

func TestTrimReleasesAll(t *testing.T) {
	const chunk, total = 1024, 64 << 20
	const slab = 64 << 10
	p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab))
	cs := make([][]byte, total/chunk)
	for i := range cs {
		c, err := p.Alloc()
		if err != nil {
			t.Fatalf("Alloc() #%d = %v, want nil", i, err)
		}
		for j := range c {
			c[j] = byte(i) | 1
		}
		cs[i] = c
	}
	heaptest.MustCheck(t, p, "filling 64 MiB")
	st := checkStats(t, p)
	if st.Slabs != total/slab || st.Footprint != total || st.InUse != total/chunk {
		t.Fatalf("Stats() after filling = %+v, want Slabs %d, Footprint %d, InUse %d", st, total/slab, total, total/chunk)
	}
	if rssOK() && st.Resident != total {
		t.Errorf("Stats().Resident after writing every chunk = %d, want %d", st.Resident, total)
	}
	for _, c := range cs {
		if err := p.Free(c); err != nil {
			t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(c), err)
		}
	}
	heaptest.MustCheck(t, p, "freeing everything")
	cs = nil
	rssBefore, rssErr := mem.RSS()

	released, err := p.Trim()
	if released != total || err != nil {
		t.Fatalf("Trim() = %d, %v, want %d, nil", released, err, total)
	}
	heaptest.MustCheck(t, p, "Trim")
	rssAfter, rssErr2 := mem.RSS()
	st = checkStats(t, p)
	want := pool.Stats{ChunkSize: chunk, Stride: chunk, Align: 8, SlabSize: slab}
	if st != want {
		t.Errorf("Stats() after Trim = %+v, want %+v", st, want)
	}
	if rssOK() {
		if rssErr != nil || rssErr2 != nil {
			t.Fatalf("mem.RSS() = %v, %v, want nil", rssErr, rssErr2)
		}
		if drop := rssBefore - rssAfter; drop < released/2 {
			t.Errorf("RSS went from %d to %d bytes over Trim: a drop of %d, want at least half of the %d released", rssBefore, rssAfter, drop, released)
		}
	}
	if n, err := p.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() again = %d, %v, want 0, nil", n, err)
	}

	// The pool starts again from its first slab, with fresh zero pages.
	c := heaptest.MustAlloc(t, p)
	if lo, _ := p.Bounds(); heaptest.Addr(c) != lo || !p.Committed(c) {
		t.Errorf("Alloc() after Trim = %#x, want the first chunk, %#x, committed", heaptest.Addr(c), lo)
	}
	for i, b := range c {
		if b != 0 {
			t.Fatalf("Alloc() after Trim: byte %d = %#x, want 0 (given back to the OS)", i, b)
		}
	}
	if st := checkStats(t, p); st.Slabs != 1 || st.Footprint != slab || st.InUse != 1 {
		t.Errorf("Stats() = Slabs %d, Footprint %d, InUse %d, want 1, %d, 1", st.Slabs, st.Footprint, st.InUse, slab)
	}
}

// TestTrimPartial frees every chunk of some slabs and some chunks of
// another: only the empty slabs go, the others keep their bytes, and the
// pool hands out the remaining free chunks, then revives the vacant slabs
// in address order, then grows.
func TestTrimPartial(t *testing.T) {
	const chunk, slab, perSlab, nslabs = 1024, 64 << 10, 64, 8
	p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab))
	cs := make([][]byte, nslabs*perSlab)
	for i := range cs {
		cs[i] = heaptest.MustAlloc(t, p)
		heaptest.Fill(cs[i], i)
	}
	base := heaptest.Addr(cs[0])
	slabOf := func(c []byte) int { return int((heaptest.Addr(c) - base) / slab) }
	empty := map[int]bool{1: true, 3: true, 4: true, 7: true} // 7 holds the cursor
	live := map[int]bool{}
	var halfFreed []int
	for i, c := range cs {
		switch s := slabOf(c); {
		case empty[s]:
			heaptest.MustFree(t, p, c)
		case s == 2 && i%2 == 0:
			heaptest.MustFree(t, p, c)
			halfFreed = append(halfFreed, i)
		default:
			live[i] = true
		}
	}
	released, err := p.Trim()
	if released != int64(len(empty)*slab) || err != nil {
		t.Fatalf("Trim() = %d, %v, want %d, nil", released, err, len(empty)*slab)
	}
	heaptest.MustCheck(t, p, "Trim")
	st := checkStats(t, p)
	kept := nslabs - len(empty)
	if st.Slabs != kept || st.Footprint != int64(kept*slab) || st.Carved != int64(kept*perSlab) ||
		st.Capacity != int64(kept*perSlab) || st.Free != int64(len(halfFreed)) || st.InUse != int64(len(live)) {
		t.Fatalf("Stats() after Trim = %+v, want Slabs %d, Footprint %d, Carved and Capacity %d, Free %d, InUse %d",
			st, kept, kept*slab, kept*perSlab, len(halfFreed), len(live))
	}
	if rssOK() && st.Resident != st.Footprint {
		t.Errorf("Stats().Resident after Trim = %d, want the %d bytes of the slabs kept, all written", st.Resident, st.Footprint)
	}
	for i := range live {
		if j := heaptest.Intact(cs[i], i); j >= 0 {
			t.Fatalf("chunk %d (slab %d) lost byte %d in Trim", i, slabOf(cs[i]), j)
		}
		if !p.Committed(cs[i]) {
			t.Fatalf("chunk %d (slab %d) is no longer committed", i, slabOf(cs[i]))
		}
	}

	// What comes next: slab 2's free chunks, last freed first; then the
	// vacant slabs 1, 3 and 4, each in address order; then slab 7 afresh.
	var want []uintptr
	for k := len(halfFreed) - 1; k >= 0; k-- {
		want = append(want, heaptest.Addr(cs[halfFreed[k]]))
	}
	for _, s := range []int{1, 3, 4, 7} {
		for k := range perSlab {
			want = append(want, base+uintptr(s*slab+k*chunk))
		}
	}
	for k, w := range want {
		c := heaptest.MustAlloc(t, p)
		if heaptest.Addr(c) != w {
			t.Fatalf("Alloc() #%d after Trim = %#x (slab %d), want %#x (slab %d)", k, heaptest.Addr(c), slabOf(c), w, int((w-base)/slab))
		}
		if heaptest.Addr(c)%8 != 0 || !p.Committed(c) {
			t.Fatalf("Alloc() #%d after Trim = %#x, want aligned and committed", k, heaptest.Addr(c))
		}
		wantSlabs := kept
		if k >= len(halfFreed) {
			wantSlabs += (k-len(halfFreed))/perSlab + 1
		}
		if st := checkStats(t, p); st.Slabs != wantSlabs || st.Footprint != int64(wantSlabs*slab) {
			t.Fatalf("Stats() after Alloc() #%d = Slabs %d, Footprint %d, want %d, %d", k, st.Slabs, st.Footprint, wantSlabs, wantSlabs*slab)
		}
	}
	for i := range live {
		if j := heaptest.Intact(cs[i], i); j >= 0 {
			t.Fatalf("chunk %d lost byte %d after the revival", i, j)
		}
	}
}

// TestTrimCursorSlab trims slabs around the cursor: the carving goes on
// where it was, and a trimmed cursor slab starts afresh.
func TestTrimCursorSlab(t *testing.T) {
	const chunk, slab, perSlab = 1024, 64 << 10, 64
	tests := []struct {
		name       string
		alloc      int   // chunks carved at first
		free       []int // slabs whose chunks are all freed
		released   int
		nextOffset []int // offsets (from the first chunk) of the next Allocs
	}{
		{
			name:  "cursor slab partly carved goes",
			alloc: perSlab + 10, free: []int{1}, released: slab,
			nextOffset: []int{slab, slab + chunk},
		},
		{
			name:  "middle slab goes, cursor slab carves on first",
			alloc: 2*perSlab + 22, free: []int{1}, released: slab,
			nextOffset: slices.Concat(seq(2*slab+22*chunk, chunk, perSlab-22), seq(slab, chunk, perSlab), seq(3*slab, chunk, 2)),
		},
		{
			name:  "everything goes",
			alloc: 3*perSlab + 1, free: []int{0, 1, 2, 3}, released: 4 * slab,
			nextOffset: seq(0, chunk, 2*perSlab),
		},
		{
			name:  "first slab goes, revived before growing",
			alloc: 2 * perSlab, free: []int{0}, released: slab,
			nextOffset: slices.Concat(seq(0, chunk, perSlab), seq(2*slab, chunk, 2)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab))
			var cs [][]byte
			for range tt.alloc {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			base := heaptest.Addr(cs[0])
			for _, c := range cs {
				for _, s := range tt.free {
					if int((heaptest.Addr(c)-base)/slab) == s {
						heaptest.MustFree(t, p, c)
					}
				}
			}
			if n, err := p.Trim(); n != int64(tt.released) || err != nil {
				t.Fatalf("Trim() = %d, %v, want %d, nil", n, err, tt.released)
			}
			heaptest.MustCheck(t, p, "Trim")
			checkStats(t, p)
			for k, off := range tt.nextOffset {
				if c := heaptest.MustAlloc(t, p); heaptest.Addr(c) != base+uintptr(off) {
					t.Fatalf("Alloc() #%d after Trim = offset %d, want %d", k, int(heaptest.Addr(c)-base), off)
				}
				checkStats(t, p)
			}
		})
	}
}

// seq returns n offsets from start, step apart.
func seq(start, step, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = start + i*step
	}
	return s
}

// TestReviveAtLimit checks that a pool at its limit revives a trimmed slab
// rather than report exhaustion, and commits no more than that slab.
func TestReviveAtLimit(t *testing.T) {
	const chunk, slab, perSlab = 1024, 64 << 10, 64
	p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab), pool.Limit(2*slab))
	var cs [][]byte
	for range 2 * perSlab {
		cs = append(cs, heaptest.MustAlloc(t, p))
	}
	for _, c := range cs[:perSlab] {
		heaptest.MustFree(t, p, c)
	}
	if n, err := p.Trim(); n != slab || err != nil {
		t.Fatalf("Trim() = %d, %v, want %d, nil", n, err, slab)
	}
	heaptest.MustCheck(t, p, "Trim")
	for k := range perSlab {
		c, err := p.Alloc()
		if err != nil {
			t.Fatalf("Alloc() #%d after Trim = %v, want chunk %d of the revived slab (stats %+v)", k, err, k, p.Stats())
		}
		if heaptest.Addr(c) != heaptest.Addr(cs[k]) {
			t.Fatalf("Alloc() #%d after Trim = %#x, want %#x", k, heaptest.Addr(c), heaptest.Addr(cs[k]))
		}
		heaptest.MustCheck(t, p, "Alloc")
		if st := checkStats(t, p); st.Slabs != 2 || st.Footprint != 2*slab {
			t.Fatalf("Stats() after Alloc() #%d = Slabs %d, Footprint %d, want 2, %d", k, st.Slabs, st.Footprint, 2*slab)
		}
	}
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		t.Errorf("Alloc() with both slabs in use = %v, want %v", err, pool.ErrExhausted)
	}
}
