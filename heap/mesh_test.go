package heap

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
	"unsafe"
)

// meshedPair makes a meshing heap with two slabs of the 2048-byte class
// (two slots a page), the first holding a block in slot 0 and the second
// in slot 1, and meshes the second onto the first. It returns the heap,
// the two blocks and the two pages.
func meshedPair(t testing.TB) (h *Heap, a, b []byte, pa, pb int) {
	t.Helper()
	return pairOf(t, true)
}

// pairOf makes meshedPair's two slabs, and meshes them if mesh.
func pairOf(t testing.TB, mesh bool) (h *Heap, a, b []byte, pa, pb int) {
	t.Helper()
	if !canMesh() {
		if os.Getenv("CI") == "true" {
			t.Fatal("heaps do not mesh in this build, and CI=true: CI runs on Linux")
		}
		t.Skip("heaps do not mesh in this build")
	}
	h, err := New(Mesh())
	if err != nil {
		t.Fatal(err)
	}
	if mesh {
		t.Cleanup(func() { h.Close() })
	}
	z := &h.small
	// Four blocks fill two slabs; keep the one at slot 0 of the first
	// page and the one at slot 1 of the second.
	var bs [4][]byte
	for i := range bs {
		if bs[i], err = h.Alloc(2048, 1); err != nil {
			t.Fatal(err)
		}
	}
	slot := func(b []byte) (int, int) {
		off := addr(b) - uintptr(z.base)
		return int(off >> pageShift), int(off&(pageSize-1)) / 2048
	}
	pages := map[int]bool{}
	for _, x := range bs {
		pg, _ := slot(x)
		pages[pg] = true
	}
	if len(pages) != 2 {
		t.Fatalf("four 2048-byte blocks on %d pages, want 2", len(pages))
	}
	pa, pb = -1, -1
	for _, x := range bs {
		pg, s := slot(x)
		switch {
		case pa < 0 && s == 0:
			pa, a = pg, x
		case pa >= 0 && pg != pa && s == 1 && b == nil:
			pb, b = pg, x
		}
	}
	if a == nil || b == nil {
		t.Fatal("no slot 0 and slot 1 on two pages")
	}
	for _, x := range bs {
		if &x[0] != &a[0] && &x[0] != &b[0] {
			if err := h.Free(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range a {
		a[i], b[i] = 'a', 'b'
	}
	cl := &z.classes[z.slabs[pa].class]
	if !z.disjoint(cl, pa, pb) {
		t.Fatal("slot 0 of one page and slot 1 of another are not disjoint")
	}
	if mesh {
		if err := h.meshOnto(cl, pa, pb); err != nil {
			t.Fatal(err)
		}
	}
	return h, a, b, pa, pb
}

// meshedPairUnmeshed is meshedPair but the mesh, for the benchmark.
func meshedPairUnmeshed(t testing.TB) (h *Heap, a, b []byte, pa, pb int) {
	return pairOf(t, false)
}

// TestMeshedPagesShareMemory: after a mesh the two pages of the
// reservation read and write one page of memory, the blocks keep their
// bytes, the heap counts a page fewer, and when both blocks are freed
// the follower's page is its own again.
func TestMeshedPagesShareMemory(t *testing.T) {
	h, a, b, pa, pb := meshedPair(t)
	z := &h.small
	for i := range a {
		if a[i] != 'a' || b[i] != 'b' {
			t.Fatalf("after the mesh byte %d reads %q and %q, want 'a' and 'b'", i, a[i], b[i])
		}
	}
	// b's slot 1 seen through a's page, and a's slot 0 through b's page.
	viaA := unsafe.Slice((*byte)(unsafe.Add(z.pageAddr(pa), 2048)), 2048)
	viaB := unsafe.Slice((*byte)(z.pageAddr(pb)), 2048)
	if viaA[0] != 'b' || viaB[0] != 'a' {
		t.Fatalf("page %d's slot 1 reads %q, page %d's slot 0 %q: want one page of memory behind both", pa, viaA[0], pb, viaB[0])
	}
	b[7] = 'x'
	if viaA[7] != 'x' {
		t.Fatal("a write through the follower's page is not seen through the leader's")
	}
	if fa, fb, ok := pfns(t, z.pageAddr(pa), z.pageAddr(pb)); ok && fa != fb {
		t.Fatalf("pagemap: page frames %#x and %#x, want one", fa, fb)
	}
	st := h.Stats()
	if st.Meshes != 1 || st.Meshed != pageSize || st.Footprint != st.Committed-st.Clean-st.Meshed {
		t.Fatalf("Stats() = %d meshes, %d bytes meshed, Footprint %d of Committed %d less Clean %d: want 1, a page, Footprint = Committed - Clean - Meshed",
			st.Meshes, st.Meshed, st.Footprint, st.Committed, st.Clean)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Trim(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Meshed != 0 || st.Unmeshed != 1 || st.Footprint != 0 {
		t.Fatalf("after freeing both and Trim: %d bytes meshed, %d unmeshed, Footprint %d; want 0, 1, 0", st.Meshed, st.Unmeshed, st.Footprint)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	// The follower's page reads its own memory again: zeros.
	if viaB[0] != 0 {
		t.Fatalf("page %d reads %q after its unmesh, want its own page, zero", pb, viaB[0])
	}
}

// TestMeshFreeThroughEitherPage: a block meshed onto another page is
// freed through its own address into the one slab, and a double free
// through either page is refused.
func TestMeshFreeThroughEitherPage(t *testing.T) {
	h, a, b, _, _ := meshedPair(t)
	if err := h.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(b); err == nil {
		t.Fatal("a second Free of the meshed block succeeded")
	}
	if n, err := h.UsableSize(a); err != nil || n != 2048 {
		t.Fatalf("UsableSize(a) = %d, %v", n, err)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
}

// TestUnmeshedPageTakenAgain: a follower let go of when its leader's slab
// leaves its class makes no system call then; when the zone takes its
// page again for a slab, the page is mapped back onto its own memory, and
// what is written through it is no longer seen through the old leader's.
func TestUnmeshedPageTakenAgain(t *testing.T) {
	h, a, b, pa, pb := meshedPair(t)
	z := &h.small
	if err := h.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(b); err != nil {
		t.Fatal(err)
	}
	h.unkeepAll() // the empty slab leaves its class: the follower is let go
	if !z.mesh.isStale(pb) || z.mesh.nstale != 1 || z.mesh.followers != 0 {
		t.Fatalf("after the leader's slab left: page %d let go %t (%d pages), %d followers; want true, 1, 0", pb, z.mesh.isStale(pb), z.mesh.nstale, z.mesh.followers)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	// The 16-byte class's next slabs take the free pages: pa first
	// (dirty, no fault), then the lowest free one.
	for i := 0; z.slabs[pb].class == 0; i++ {
		if _, err := h.Alloc(16, 1); err != nil || i > 4*pageSize/16 {
			t.Fatalf("block %d of 16 bytes: %v, page %d not taken", i, err, pb)
		}
	}
	if z.mesh.isStale(pb) || z.mesh.nstale != 0 {
		t.Fatalf("page %d taken for a slab is still let go of (%d pages)", pb, z.mesh.nstale)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	viaA := unsafe.Slice((*byte)(z.pageAddr(pa)), pageSize)
	viaB := unsafe.Slice((*byte)(z.pageAddr(pb)), pageSize)
	before := viaA[100]
	viaB[100] = before + 1
	if viaA[100] != before {
		t.Fatal("a write through the page taken again is seen through its old leader's")
	}
	if fa, fb, ok := pfns(t, z.pageAddr(pa), z.pageAddr(pb)); ok && fa == fb {
		t.Fatalf("pagemap: both pages on frame %#x, want two", fa)
	}
}

// pfns returns the page frames behind two pages from /proc/self/pagemap,
// where the process may read them (frames read as 0 without
// CAP_SYS_ADMIN).
func pfns(t *testing.T, p, q unsafe.Pointer) (uint64, uint64, bool) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	read := func(a unsafe.Pointer) uint64 {
		var b [8]byte
		if _, err := f.ReadAt(b[:], int64(uintptr(a)/pageSize)*8); err != nil {
			return 0
		}
		return binary.LittleEndian.Uint64(b[:]) & (1<<55 - 1)
	}
	fp, fq := read(p), read(q)
	if fp == 0 || fq == 0 {
		t.Log("/proc/self/pagemap gives no page frames here: checked by writes only")
		return 0, 0, false
	}
	return fp, fq, true
}

// BenchmarkMesh measures one mesh of two slabs of the 2048-byte class,
// a block in each (the copy of one slot, the mmap and the fallocate);
// making and freeing the pair is not timed.
//
//	go test -run '^$' -bench Mesh ./heap
func BenchmarkMesh(b *testing.B) {
	for range b.N {
		b.StopTimer()
		h, _, _, pa, pb := meshedPairUnmeshed(b)
		cl := &h.small.classes[h.small.slabs[pa].class]
		b.StartTimer()
		if err := h.meshOnto(cl, pa, pb); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.Close()
	}
}

// TestRandomSlot: the random slot choice hands out only free slots, each
// once, reaches every free slot of a slab, and leaves the bitmap with the
// slot taken off.
func TestRandomSlot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots int
		used  func(i int) bool // the slots in use to start with
	}{
		{"empty, one word", 64, func(int) bool { return false }},
		{"every other, one word", 64, func(i int) bool { return i%2 == 0 }},
		{"one free, last word", 170, func(i int) bool { return i != 169 }},
		{"runs, four words", 256, func(i int) bool { return i%40 < 30 }},
		{"two slots", 2, func(i int) bool { return i == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words := (tc.slots + 63) / 64
			cl := &class{slots: tc.slots, words: words, bits: make([]uint64, 2*words)}
			free := 0
			for i := range tc.slots {
				if !tc.used(i) {
					cl.bits[i/64] |= 1 << (i % 64)
					free++
				}
			}
			start := append([]uint64(nil), cl.bits...)
			m := &meshState{rng: meshSeed}
			seen := map[int]int{}
			for round := range 200 {
				copy(cl.bits, start)
				for range free {
					s := m.randomSlot(cl, 0)
					if s < 0 || s >= tc.slots || tc.used(s) {
						t.Fatalf("round %d: slot %d, not a free slot of %d", round, s, tc.slots)
					}
					if cl.bits[s/64]&(1<<(s%64)) != 0 {
						t.Fatalf("round %d: slot %d handed out and still marked free", round, s)
					}
					seen[s]++
				}
				for w := range words {
					if cl.bits[w] != 0 {
						t.Fatalf("round %d: %d free slots handed out, word %d still has %#x free", round, free, w, cl.bits[w])
					}
				}
			}
			if len(seen) != free {
				t.Fatalf("%d free slots, %d handed out over the rounds", free, len(seen))
			}
			// The first slot handed out varies: not the lowest-slot rule.
			first := map[int]bool{}
			for range 400 {
				copy(cl.bits, start)
				first[m.randomSlot(cl, 0)] = true
			}
			if want := min(free, 8); len(first) < want {
				t.Errorf("the first slot handed out was one of %d slots over 400 tries, want at least %d", len(first), want)
			}
		})
	}
}

// TestMeshChance: the estimate that two slabs with free slots mesh.
func TestMeshChance(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		slots, slabs, partial int
		inUse                 int64
		want                  float64
	}{
		{"all free", 16, 4, 4, 0, 1},
		{"one slab with free slots", 16, 4, 1, 3*16 + 8, 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75 * 0.75},
		{"two slots, half used", 2, 10, 10, 10, 0.75 * 0.75},
		{"none with free slots", 16, 4, 0, 64, 0},
	} {
		cl := &class{slots: tc.slots, slabs: tc.slabs, inUse: tc.inUse}
		for pg := range tc.partial {
			cl.partial.grow(pg + 1)
			cl.partial.add(pg)
		}
		if got := meshChance(cl); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: meshChance = %g, want %g", tc.name, got, tc.want)
		}
	}
}
