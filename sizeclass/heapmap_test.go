package sizeclass_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/sizeclass"
)

// stats returns the heap's statistics without the resident bytes, which
// the OS may change at any time.
func stats(h *sizeclass.Heap) sizeclass.Stats {
	st := h.Stats()
	st.Resident = 0
	for i := range st.Classes {
		st.Classes[i].Resident = 0
	}
	return st
}

// checkMap checks the heap's map against its shape and the heap's
// statistics, as Heap.Map documents them, and returns it:
//
//	Live = Used, Size = Footprint;
//	one region per class in use, in order of size, then the large objects;
//	per class: Live = InUse * Size, Free = (Carved - InUse) * Size,
//	Unused = (Capacity - Carved) * Size, Padding = Slabs * the slab's tail;
//	every block handed out lies in a Live segment of its class's region.
//
// It also checks that taking the map changed nothing.
func checkMap(t *testing.T, h *sizeclass.Heap, blocks ...[]byte) heapmap.Map {
	t.Helper()
	m, before := heaptest.TakeMap(t, h, func() sizeclass.Stats { return stats(h) })
	st := m.Stats()
	if m.Name != "sizeclass" || m.Base != 0 || st.Live != before.Used || m.Size != before.Footprint || st.Header != 0 || st.Reserved != 0 {
		t.Fatalf("Map() %q at %#x adds up to %+v in %d bytes; Stats() Used %d, Footprint %d", m.Name, m.Base, st, m.Size, before.Used, before.Footprint)
	}
	// Per class, from the segments of each region.
	regions := m.Regions
	for _, cs := range before.Classes {
		if cs.Slabs == 0 {
			continue
		}
		if len(regions) == 0 || regions[0].Label != fmt.Sprintf("class %d B", cs.Size) {
			t.Fatalf("class %d B has %d slabs, the next region is %+v", cs.Size, cs.Slabs, regions)
		}
		r := regions[0]
		regions = regions[1:]
		sub := heapmap.Map{Size: r.Len}
		for _, s := range m.Segments {
			if s.Off >= r.Off && s.End() <= r.Off+r.Len {
				if s.Class != cs.Size {
					t.Fatalf("segment %+v in the region of class %d B", s, cs.Size)
				}
				sub.Segments = append(sub.Segments, heapmap.Segment{Off: s.Off - r.Off, Len: s.Len, Kind: s.Kind, Class: s.Class})
			}
		}
		if err := sub.Check(); err != nil {
			t.Fatalf("segments of class %d B: %v", cs.Size, err)
		}
		size, perSlab := int64(cs.Size), int64(cs.SlabSize/cs.Size)
		got := sub.Stats()
		want := heapmap.Stats{
			Live: cs.InUse * size, Free: (cs.Carved - cs.InUse) * size, Unused: (cs.Capacity - cs.Carved) * size,
			Padding: cs.Slabs * (int64(cs.SlabSize) - perSlab*size),
		}
		got.Holes, got.Largest = 0, 0
		if got != want {
			t.Fatalf("class %d B: map adds up to %+v, its statistics to %+v (%+v)", cs.Size, got, want, cs)
		}
	}
	if before.LargeObjects > 0 {
		if len(regions) != 1 || regions[0].Label != "large objects" || regions[0].Len != before.LargeBytes {
			t.Fatalf("regions after the classes %+v, want one of large objects, %d bytes", regions, before.LargeBytes)
		}
	} else if len(regions) != 0 {
		t.Fatalf("regions after the classes %+v, want none", regions)
	}
	// A block's class region must hold a live segment of its class. The
	// map does not say where in the region a block is (it has no single
	// base), only that the region holds enough live chunks of the class.
	for _, b := range blocks {
		class := sizeclass.ClassOf(cap(b), 1)
		if class != cap(b) {
			class = 0 // a large object, whose capacity is page-rounded
		}
		found := false
		for _, s := range m.Segments {
			found = found || s.Kind == heapmap.Live && s.Class == class
		}
		if !found {
			t.Fatalf("block of %d bytes (capacity %d): no live segment of class %d", len(b), cap(b), class)
		}
	}
	return m
}

// TestMapConnection: after the block-allocator article's connection
// scenario, the heap's map shows the sessions packed in the 64-byte class
// and the scratch buffers' class all free, one hole per slab: the memory a
// 1 KiB request reuses, not holes between sessions.
func TestMapConnection(t *testing.T) {
	for _, tc := range []struct {
		n        int
		holes    int   // slabs of the 1 KiB class: 64 chunks each
		unused1K int64 // bytes of the last slab's chunks not carved
		unused64 int64
	}{
		{n: 1, holes: 1, unused1K: 63 * 1024, unused64: 1023 * 64},
		{n: 100, holes: 2, unused1K: 28 * 1024, unused64: 924 * 64},
		{n: 10000, holes: 157, unused1K: 48 * 1024, unused64: 240 * 64},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			h, err := sizeclass.New()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			m := checkMap(t, h, heaptest.Connect(t, h, tc.n)...)
			st := m.Stats()
			if st.Holes != tc.holes || st.Live != int64(tc.n)*64 || st.Free != int64(tc.n)*1024 || st.Unused != tc.unused1K+tc.unused64 {
				t.Errorf("Map(): %+v; want %d holes, %d bytes live, %d free, %d unused", st, tc.holes, tc.n*64, tc.n*1024, tc.unused1K+tc.unused64)
			}
			if len(m.Regions) != 2 || m.Regions[0].Label != "class 64 B" || m.Regions[1].Label != "class 1024 B" {
				t.Errorf("Map() regions %+v, want the 64 B class and the 1 KiB class", m.Regions)
			}
		})
	}
}

// TestMapSlabs draws the slabs of one class (1 KiB, 64 chunks a slab) as
// blocks come and go, Trim included.
func TestMapSlabs(t *testing.T) {
	const perSlab, chunk = 64, 1024
	type step struct {
		free []int // slabs whose chunks to free
		trim bool
	}
	for _, tc := range []struct {
		name  string
		slabs int // slabs filled with blocks first,
		tail  int // and blocks in the next
		steps []step
		// The kinds of the class's segments, a letter per slab they reach
		// into: L (live), F (free), U (unused: not carved); "" when the
		// positions of slabs of free chunks are not the heap's to know
		// (see Heap.Map).
		kinds string
	}{
		{"full", 3, 0, nil, "LLL"},
		{"a hole in the middle", 3, 0, []step{{free: []int{1}}}, "LFL"},
		{"holes at both ends", 3, 0, []step{{free: []int{0, 2}}}, "FLF"},
		{"a slab given back", 3, 0, []step{{free: []int{1}, trim: true}}, "LL"},
		{"the top given back", 3, 0, []step{{free: []int{2}, trim: true}}, "LL"},
		{"given back, then freed below", 4, 0, []step{{free: []int{2}, trim: true}, {free: []int{1}}}, "LFL"},
		{"given back, then freed above", 5, 0, []step{{free: []int{1}, trim: true}, {free: []int{3}}}, ""},
		{"everything given back", 2, 0, []step{{free: []int{0, 1}, trim: true}}, ""},
		{"a partly carved slab", 2, 10, nil, "LLLU"},
		{"a partly carved slab, freed", 2, 10, []step{{free: []int{2}}}, "LLFU"},
		// The slab the pool carves from holds no block, and a slab below it
		// was given back: the pool says which slabs are committed.
		{"a partly carved slab, freed after a slab was given back", 2, 10, []step{{free: []int{0}, trim: true}, {free: []int{2}}}, "LFU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := sizeclass.New()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			blocks := make([][]byte, tc.slabs*perSlab+tc.tail)
			for i := range blocks {
				if blocks[i], err = h.Alloc(chunk, 8); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.steps {
				for _, slab := range s.free {
					for i := slab * perSlab; i < min((slab+1)*perSlab, len(blocks)); i++ {
						if err := h.Free(blocks[i]); err != nil {
							t.Fatal(err)
						}
						blocks[i] = nil
					}
				}
				if s.trim {
					if _, err := h.Trim(); err != nil {
						t.Fatal(err)
					}
				}
			}
			var live [][]byte
			for _, b := range blocks {
				if b != nil {
					live = append(live, b)
				}
			}
			m := checkMap(t, h, live...)
			if tc.kinds == "" {
				return
			}
			var kinds string
			for _, s := range m.Segments {
				kinds += strings.Repeat(string("LFHPUR"[s.Kind]), int((s.Len+perSlab*chunk-1)/(perSlab*chunk)))
			}
			if kinds != tc.kinds {
				t.Errorf("Map() slabs %s, want %s: %+v", kinds, tc.kinds, m.Segments)
			}
		})
	}
}

// TestMapLarge draws large objects after the classes, page-rounded.
func TestMapLarge(t *testing.T) {
	h, err := sizeclass.New()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var blocks [][]byte
	for _, size := range []int{100000, 40000, 16} {
		b, err := h.Alloc(size, 8)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	m := checkMap(t, h, blocks...)
	last := m.Regions[len(m.Regions)-1]
	if last.Label != "large objects" || last.Len != int64(cap(blocks[0])+cap(blocks[1])) {
		t.Errorf("Map()'s last region %+v, want the large objects, %d bytes", last, cap(blocks[0])+cap(blocks[1]))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if m := h.Map(); m.Size != 0 || len(m.Segments) != 0 || len(m.Regions) != 0 {
		t.Errorf("Map() of a closed heap = %+v, want empty", m)
	}
}

// FuzzMap runs random Alloc, Free, Realloc and Trim calls, decoded from
// the input, and checks the map after each against the heap's statistics
// (see checkMap).
func FuzzMap(f *testing.F) {
	f.Add([]byte("\x10\x20\x30\x81\x40\x82\xc0\xff"))
	f.Add([]byte("aaaaaaaa\x80\x80\x80\x80bbbb\xf0"))
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x85\x86\x87\x88\xe0\x10\xff"))
	f.Add([]byte("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\x83\x84\x85\x86\x87\x88\x89\x8a\xff\x8b\x8c\x8d\xe9"))
	f.Fuzz(runMapOps)
}

// runMapOps is FuzzMap's body.
func runMapOps(t *testing.T, ops []byte) {
	h, err := sizeclass.New(sizeclass.Limit(64 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var live [][]byte
	for i, op := range ops {
		switch {
		case op < 0x80: // Alloc: a few sizes, so that slabs fill and empty
			size := []int{8, 24, 64, 1000, 1024, 3000, 40000}[op%7] + int(op)/7
			if b, err := h.Alloc(size, 1<<(op%4)); err == nil {
				for range int(op) % 5 * 16 { // more of the same
					if b, err := h.Alloc(size, 8); err == nil {
						live = append(live, b)
					}
				}
				live = append(live, b)
			}
		case op < 0xe0 && len(live) > 0: // Free a run of blocks
			j := int(op) % len(live)
			for range min(len(live)-j, int(op)%3*20+1) {
				if err := h.Free(live[j]); err != nil {
					t.Fatalf("op %d: Free = %v", i, err)
				}
				live[j] = live[len(live)-1]
				live = live[:len(live)-1]
			}
		case op < 0xf8 && len(live) > 0: // Realloc
			j := int(op) % len(live)
			if b, err := h.Realloc(live[j], int(op-0xe0)*480); err == nil {
				live[j] = b
			}
		default:
			if _, err := h.Trim(); err != nil {
				t.Fatalf("op %d: Trim = %v", i, err)
			}
		}
		checkMap(t, h, live...)
	}
}

// TestMapRandom runs FuzzMap's body over pseudo-random inputs from a fixed
// seed.
func TestMapRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 8 {
		ops := make([]byte, 100)
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runMapOps(t, ops) })
	}
}
