package sizeclass_test

import (
	"errors"
	"maps"
	"runtime"
	"slices"
	"testing"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/sizeclass"
)

// Helpers shared by the package's tests.

// page rounds n up to whole pages: a large object's size.
func page(n int) int {
	ps := mem.PageSize()
	return (n + ps - 1) / ps * ps
}

// mustNew returns a heap closed when the test ends.
func mustNew(t testing.TB, opts ...sizeclass.Option) *sizeclass.Heap {
	t.Helper()
	h, err := sizeclass.New(opts...)
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	t.Cleanup(func() { h.Close() })
	heaptest.MustCheck(t, h, "New")
	return h
}

// mustAlloc allocates and checks the heap and the block's shape.
func mustAlloc(t testing.TB, h *sizeclass.Heap, size, align int) []byte {
	t.Helper()
	b, err := h.Alloc(size, align)
	if err != nil {
		t.Fatalf("Alloc(%d, %d) = %v, want nil (stats %+v)", size, align, err, h.Stats().Stats)
	}
	if n, _ := h.UsableSize(b); b == nil || len(b) != size || cap(b) != n || heaptest.Addr(b)%uintptr(align) != 0 {
		t.Fatalf("Alloc(%d, %d) = %#x len %d cap %d, want non-nil, len %d, cap %d (UsableSize), aligned", size, align, heaptest.Addr(b), len(b), cap(b), size, n)
	}
	heaptest.MustCheck(t, h, "Alloc")
	return b
}

// mustFree frees and checks the heap.
func mustFree(t testing.TB, h *sizeclass.Heap, b []byte) {
	t.Helper()
	if err := h.Free(b); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(b), err)
	}
	heaptest.MustCheck(t, h, "Free")
}

// checkStats verifies the equations the heap's statistics obey.
func checkStats(t testing.TB, h *sizeclass.Heap) sizeclass.Stats {
	t.Helper()
	st := h.Stats()
	if len(st.Classes) != 80 {
		t.Fatalf("Stats() has %d classes, want 80", len(st.Classes))
	}
	var used, footprint int64
	for _, c := range st.Classes {
		if c.InUse+c.Free+c.Quarantined != c.Carved || c.Carved > c.Capacity || c.Footprint != c.Slabs*int64(c.SlabSize) ||
			c.Capacity != c.Slabs*int64(c.SlabSize/c.Size) {
			t.Fatalf("class %d: %+v breaks InUse + Free + Quarantined = Carved <= Capacity = Slabs * per slab", c.Size, c)
		}
		used += c.InUse * int64(c.Size)
		footprint += c.Footprint
	}
	switch {
	case st.Used != used+st.LargeBytes:
		t.Fatalf("Stats().Used = %d, want classes %d + large %d", st.Used, used, st.LargeBytes)
	case st.Footprint != footprint+st.LargeBytes:
		t.Fatalf("Stats().Footprint = %d, want classes %d + large %d", st.Footprint, footprint, st.LargeBytes)
	case st.Live < 0 || st.Live > st.Used || st.Used > st.Footprint:
		t.Fatalf("Stats() = %+v, want 0 <= Live <= Used <= Footprint", st.Stats)
	case runtime.GOOS == "linux" && st.Resident > st.Footprint:
		t.Fatalf("Stats() = %+v, want Resident <= Footprint", st.Stats)
	}
	return st
}

// inUse returns the classes with chunks in use: size -> chunks.
func inUse(st sizeclass.Stats) map[int]int64 {
	m := map[int]int64{}
	for _, c := range st.Classes {
		if c.InUse > 0 {
			m[c.Size] = c.InUse
		}
	}
	return m
}

// An op is one step of a table test, applied to the blocks named by id.
type op struct {
	kind        string // alloc, free, realloc, trim
	id          string
	size, align int
	err         error // wanted error, nil for success
	moved       bool  // realloc: the block must move (else stay)
}

func alloc(id string, size, align int) op { return op{kind: "alloc", id: id, size: size, align: align} }
func free(id string) op                   { return op{kind: "free", id: id} }
func realloc(id string, size int, moved bool) op {
	return op{kind: "realloc", id: id, size: size, moved: moved}
}
func trim() op { return op{kind: "trim"} }
func fails(o op, err error) op {
	o.err = err
	return o
}

// state is what a table test expects of the heap after its operations.
type state struct {
	usable    map[string]int // live blocks by id: UsableSize
	classes   map[int]int64  // class size -> chunks in use
	live      int64          // Stats().Live
	large     int64          // Stats().LargeObjects
	footprint int64          // Stats().Footprint
}

// TestOps runs operations on a new heap and compares the heap with the
// state expected after them: which class each block went to, the
// classes' counts, Live, large objects and the footprint. Every step
// also checks the invariants, and a step that must fail must leave the
// heap as it was.
func TestOps(t *testing.T) {
	ps := mem.PageSize()
	slab := int64(64 << 10)
	tests := []struct {
		name string
		ops  []op
		want state
	}{
		{"empty", nil, state{}},
		{"alloc 0 takes the smallest class, 0 bytes live",
			[]op{alloc("a", 0, 1)},
			state{usable: map[string]int{"a": 8}, classes: map[int]int64{8: 1}, footprint: slab}},
		{"alloc 0 aligned to 64 takes the 64-byte class",
			[]op{alloc("a", 0, 64)},
			state{usable: map[string]int{"a": 64}, classes: map[int]int64{64: 1}, footprint: slab}},
		{"class boundaries 8 9 16 17",
			[]op{alloc("a", 8, 1), alloc("b", 9, 1), alloc("c", 16, 1), alloc("d", 17, 1)},
			state{usable: map[string]int{"a": 8, "b": 16, "c": 16, "d": 24}, classes: map[int]int64{8: 1, 16: 2, 24: 1},
				live: 50, footprint: 3 * slab}},
		{"class boundaries 128 129 1024 1025",
			[]op{alloc("a", 128, 8), alloc("b", 129, 8), alloc("c", 1024, 8), alloc("d", 1025, 8)},
			state{usable: map[string]int{"a": 128, "b": 144, "c": 1024, "d": 1152},
				classes: map[int]int64{128: 1, 144: 1, 1024: 1, 1152: 1}, live: 2306, footprint: 4 * slab}},
		{"largest class and the first large object",
			[]op{alloc("a", 32768, 1), alloc("b", 32769, 1)},
			state{usable: map[string]int{"a": 32768, "b": page(32769)}, classes: map[int]int64{32768: 1},
				live: 65537, large: 1, footprint: 256<<10 + int64(page(32769))}},
		{"alignment bumps to an aligned class",
			[]op{alloc("a", 24, 16), alloc("b", 24, 64), alloc("c", 100, 4096), alloc("d", 5000, 4096), alloc("e", 1, 2048)},
			state{usable: map[string]int{"a": 32, "b": 64, "c": 4096, "d": 8192, "e": 2048},
				classes: map[int]int64{32: 1, 64: 1, 4096: 1, 8192: 1, 2048: 1}, live: 5149, footprint: 5 * slab}},
		{"alignment a class already has costs nothing",
			[]op{alloc("a", 48, 16), alloc("b", 1000, 8), alloc("c", 4096, 4096)},
			state{usable: map[string]int{"a": 48, "b": 1024, "c": 4096}, classes: map[int]int64{48: 1, 1024: 1, 4096: 1},
				live: 5144, footprint: 3 * slab}},
		{"large object is page-rounded and page-aligned",
			[]op{alloc("a", 100000, 4096)},
			state{usable: map[string]int{"a": page(100000)}, live: 100000, large: 1, footprint: int64(page(100000))}},
		{"free returns the chunk; the slab stays until Trim",
			[]op{alloc("a", 100, 1), free("a")},
			state{footprint: slab}},
		{"free of a large object returns its memory",
			[]op{alloc("a", 1<<20, 1), free("a")},
			state{}},
		{"realloc within the class stays",
			[]op{alloc("a", 100, 1), realloc("a", 97, false), realloc("a", 104, false)},
			state{usable: map[string]int{"a": 104}, classes: map[int]int64{104: 1}, live: 104, footprint: slab}},
		{"realloc to another class moves",
			[]op{alloc("a", 100, 1), realloc("a", 105, true), realloc("a", 10, true)},
			state{usable: map[string]int{"a": 16}, classes: map[int]int64{16: 1}, live: 10, footprint: 3 * slab}},
		{"realloc of a large object within its pages stays",
			[]op{alloc("a", 40000, 1), realloc("a", page(40000), false), realloc("a", page(40000)-ps+1, false)},
			state{usable: map[string]int{"a": page(40000)}, live: int64(page(40000) - ps + 1), large: 1,
				footprint: int64(page(40000))}},
		{"realloc of a large object across pages moves",
			[]op{alloc("a", 40000, 1), realloc("a", 80000, true), realloc("a", 1000, true)},
			state{usable: map[string]int{"a": 1024}, classes: map[int]int64{1024: 1}, live: 1000, footprint: slab}},
		{"realloc keeps alignment up to 16",
			[]op{alloc("a", 24, 16), realloc("a", 40, true)},
			state{usable: map[string]int{"a": 48}, classes: map[int]int64{48: 1}, live: 40, footprint: 2 * slab}},
		{"trim gives back empty slabs and keeps used ones",
			[]op{alloc("a", 64, 1), alloc("b", 200, 1), alloc("c", 3000, 1), free("a"), free("c"), trim()},
			state{usable: map[string]int{"b": 208}, classes: map[int]int64{208: 1}, live: 200, footprint: slab}},
		{"trim then alloc revives a slab",
			[]op{alloc("a", 64, 1), free("a"), trim(), alloc("b", 64, 1)},
			state{usable: map[string]int{"b": 64}, classes: map[int]int64{64: 1}, live: 64, footprint: slab}},

		// Bad input: an error, and the heap as it was.
		{"negative size", []op{fails(alloc("a", -1, 1), sizeclass.ErrSize)}, state{}},
		{"alignment 0", []op{fails(alloc("a", 8, 0), sizeclass.ErrAlign)}, state{}},
		{"alignment 3", []op{fails(alloc("a", 8, 3), sizeclass.ErrAlign)}, state{}},
		{"alignment 3 where the fast path would serve",
			[]op{alloc("a", 8, 8), fails(alloc("b", 8, 3), sizeclass.ErrAlign)},
			state{usable: map[string]int{"a": 8}, classes: map[int]int64{8: 1}, live: 8, footprint: slab}},
		{"alignment above the page", []op{fails(alloc("a", 8, 8192), sizeclass.ErrAlign)}, state{}},
		{"size over the limit", []op{fails(alloc("a", sizeclass.DefaultLimit+1, 1), sizeclass.ErrExhausted)}, state{}},
		{"double free of a chunk",
			[]op{alloc("a", 64, 1), alloc("b", 64, 1), free("a"), fails(free("a"), sizeclass.ErrDoubleFree)},
			state{usable: map[string]int{"b": 64}, classes: map[int]int64{64: 1}, live: 64, footprint: slab}},
		{"double free of a chunk after trim",
			[]op{alloc("a", 64, 1), free("a"), trim(), fails(free("a"), sizeclass.ErrDoubleFree)},
			state{}},
		{"double free of a large object",
			[]op{alloc("a", 50000, 1), free("a"), fails(free("a"), sizeclass.ErrDoubleFree)},
			state{}},
		{"realloc of a freed block",
			[]op{alloc("a", 64, 1), alloc("b", 64, 1), free("a"), fails(realloc("a", 10, false), sizeclass.ErrDoubleFree)},
			state{usable: map[string]int{"b": 64}, classes: map[int]int64{64: 1}, live: 64, footprint: slab}},
		{"realloc to a negative size",
			[]op{alloc("a", 64, 1), fails(realloc("a", -5, false), sizeclass.ErrSize)},
			state{usable: map[string]int{"a": 64}, classes: map[int]int64{64: 1}, live: 64, footprint: slab}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustNew(t)
			blocks := map[string][]byte{}
			freed := map[string][]byte{}
			for i, o := range tt.ops {
				before := h.Stats()
				var err error
				switch o.kind {
				case "alloc":
					var b []byte
					if b, err = h.Alloc(o.size, o.align); err == nil {
						if n, _ := h.UsableSize(b); len(b) != o.size || cap(b) != n || heaptest.Addr(b)%uintptr(o.align) != 0 {
							t.Fatalf("step %d: Alloc(%d, %d) = %#x len %d cap %d, want len == size, cap == UsableSize %d, aligned",
								i, o.size, o.align, heaptest.Addr(b), len(b), cap(b), n)
						}
						blocks[o.id] = b
					}
				case "free":
					b, ok := blocks[o.id]
					if !ok {
						b = freed[o.id]
					}
					if err = h.Free(b); err == nil {
						freed[o.id] = b
						delete(blocks, o.id)
					}
				case "realloc":
					b, ok := blocks[o.id]
					if !ok {
						b = freed[o.id]
					}
					var nb []byte
					if nb, err = h.Realloc(b, o.size); err == nil {
						if n, _ := h.UsableSize(nb); len(nb) != o.size || cap(nb) != n {
							t.Fatalf("step %d: Realloc(%d) = len %d cap %d, want cap == UsableSize %d", i, o.size, len(nb), cap(nb), n)
						}
						if moved := heaptest.Addr(nb) != heaptest.Addr(b); moved != o.moved {
							t.Fatalf("step %d: Realloc(%s, %d) moved = %v, want %v", i, o.id, o.size, moved, o.moved)
						}
						blocks[o.id] = nb
					}
				case "trim":
					_, err = h.Trim()
				}
				if !errors.Is(err, o.err) || (err == nil) != (o.err == nil) {
					t.Fatalf("step %d: %s %s = %v, want %v", i, o.kind, o.id, err, o.err)
				}
				heaptest.MustCheck(t, h, o.kind)
				if after := h.Stats(); err != nil && !sameStats(before, after) {
					t.Fatalf("step %d: failed %s changed the heap:\nbefore %+v\nafter  %+v", i, o.kind, before.Stats, after.Stats)
				}
			}

			st := checkStats(t, h)
			usable := map[string]int{}
			for id, b := range blocks {
				n, err := h.UsableSize(b)
				if err != nil {
					t.Fatalf("UsableSize(%s) = %v", id, err)
				}
				usable[id] = n
			}
			if !maps.Equal(usable, tt.want.usable) && len(usable)+len(tt.want.usable) > 0 {
				t.Errorf("usable sizes = %v, want %v", usable, tt.want.usable)
			}
			if got := inUse(st); !maps.Equal(got, tt.want.classes) && len(got)+len(tt.want.classes) > 0 {
				t.Errorf("classes in use = %v, want %v", got, tt.want.classes)
			}
			if st.Live != tt.want.live || st.LargeObjects != tt.want.large || st.Footprint != tt.want.footprint {
				t.Errorf("Live, LargeObjects, Footprint = %d, %d, %d; want %d, %d, %d",
					st.Live, st.LargeObjects, st.Footprint, tt.want.live, tt.want.large, tt.want.footprint)
			}
		})
	}
}

// sameStats compares the figures a failed operation must not change
// (Resident may drift as the OS pleases).
func sameStats(a, b sizeclass.Stats) bool {
	strip := func(s sizeclass.Stats) sizeclass.Stats {
		s.Resident = 0
		s.Classes = slices.Clone(s.Classes)
		for i := range s.Classes {
			s.Classes[i].Resident = 0
		}
		return s
	}
	a, b = strip(a), strip(b)
	return a.Stats == b.Stats && a.LargeObjects == b.LargeObjects && a.LargeBytes == b.LargeBytes &&
		slices.Equal(a.Classes, b.Classes)
}

// TestFreeByCapacity frees blocks whose capacity no longer names their
// class (cut by reslicing, or naming another class): Free finds the class
// from the address instead, and still tells a double free. (The length is
// kept: Free subtracts it from Live.)
func TestFreeByCapacity(t *testing.T) {
	h := mustNew(t)
	for _, tt := range []struct {
		name        string
		size, align int
		slice       func([]byte) []byte
	}{
		{"as returned", 100, 8, func(b []byte) []byte { return b }},
		{"capacity cut to the length", 100, 8, func(b []byte) []byte { return b[:100:100] }},
		{"capacity naming another class", 40, 64, func(b []byte) []byte { return b[:40:48] }},
		{"large object, capacity cut", 40000, 8, func(b []byte) []byte { return b[:40000:40000] }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.slice(mustAlloc(t, h, tt.size, tt.align))
			if err := h.Free(b); err != nil {
				t.Fatalf("Free = %v, want nil", err)
			}
			heaptest.MustCheck(t, h, "Free")
			if err := h.Free(b); !errors.Is(err, sizeclass.ErrDoubleFree) {
				t.Fatalf("second Free = %v, want ErrDoubleFree", err)
			}
			if st := h.Stats(); st.Live != 0 {
				t.Fatalf("Live = %d after freeing everything, want 0", st.Live)
			}
		})
	}
}

// TestForeign frees, reallocates and sizes slices the heap did not hand
// out: each is refused with ErrForeign, and the heap is unchanged.
func TestForeign(t *testing.T) {
	h := mustNew(t)
	small := mustAlloc(t, h, 100, 1) // a 104-byte chunk
	large := mustAlloc(t, h, 50000, 1)
	other := mustNew(t)
	otherBlock := mustAlloc(t, other, 100, 1)
	goMem := make([]byte, 64)
	cases := map[string][]byte{
		"nil":                         nil,
		"Go memory":                   goMem,
		"Go memory, cap of a class":   make([]byte, 10, 104),
		"inside a chunk":              sizeclass.At(small, 8, 8),
		"in the tail of a slab":       sizeclass.At(small, 630*104, 8),
		"past the reservation":        sizeclass.At(small, int(h.Reserve()), 8),
		"inside a large object":       sizeclass.At(large, 4096, 8),
		"another heap's chunk":        otherBlock,
		"just before a class's range": sizeclass.At(small, -1, 1),
	}
	before := h.Stats()
	for name, b := range cases {
		if err := h.Free(b); !errors.Is(err, sizeclass.ErrForeign) {
			t.Errorf("Free(%s) = %v, want ErrForeign", name, err)
		}
		if b != nil { // Realloc(nil, n) allocates
			if _, err := h.Realloc(b, 10); !errors.Is(err, sizeclass.ErrForeign) {
				t.Errorf("Realloc(%s) = %v, want ErrForeign", name, err)
			}
		}
		if _, err := h.UsableSize(b); !errors.Is(err, sizeclass.ErrForeign) {
			t.Errorf("UsableSize(%s) = %v, want ErrForeign", name, err)
		}
		heaptest.MustCheck(t, h, "Free("+name+")")
	}
	if after := h.Stats(); !sameStats(before, after) {
		t.Errorf("refused frees changed the heap: before %+v, after %+v", before.Stats, after.Stats)
	}
	mustFree(t, h, small)
	mustFree(t, h, large)
}

// TestExhausted fills a heap with a small limit: Alloc fails with
// ErrExhausted once the next slab or large object would pass the limit,
// the footprint never does, and freed memory serves again.
func TestExhausted(t *testing.T) {
	const limit = 256 << 10
	h := mustNew(t, sizeclass.Limit(limit))
	var blocks [][]byte
	for {
		b, err := h.Alloc(1000, 8)
		if errors.Is(err, sizeclass.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatalf("Alloc(1000) = %v", err)
		}
		blocks = append(blocks, b)
	}
	st := checkStats(t, h)
	if st.Footprint > limit || st.Footprint < limit-64<<10 {
		t.Fatalf("Footprint %d when exhausted, want within a slab below the limit %d", st.Footprint, limit)
	}
	if _, err := h.Alloc(100, 8); !errors.Is(err, sizeclass.ErrExhausted) {
		t.Errorf("Alloc(100) in a new class = %v, want ErrExhausted", err)
	}
	if _, err := h.Alloc(100000, 8); !errors.Is(err, sizeclass.ErrExhausted) {
		t.Errorf("Alloc(100000) = %v, want ErrExhausted", err)
	}
	heaptest.MustCheck(t, h, "exhausted")
	mustFree(t, h, blocks[0])
	blocks[0] = mustAlloc(t, h, 1000, 8)
	for _, b := range blocks {
		mustFree(t, h, b)
	}
	if n, err := h.Trim(); err != nil || n != st.Footprint {
		t.Errorf("Trim() = %d, %v; want %d, nil", n, err, st.Footprint)
	}
	big := mustAlloc(t, h, 200000, 8)
	mustFree(t, h, big)
}

// TestBadOptions checks New's refusals.
func TestBadOptions(t *testing.T) {
	for name, opt := range map[string]sizeclass.Option{
		"zero option": {},
		"limit 0":     sizeclass.Limit(0),
		"limit -1":    sizeclass.Limit(-1),
		"limit huge":  sizeclass.Limit(1 << 50),
	} {
		if _, err := sizeclass.New(opt); !errors.Is(err, sizeclass.ErrBadOption) {
			t.Errorf("New(%s) = %v, want ErrBadOption", name, err)
		}
	}
}

// TestClose checks that Close gives everything back and that the heap
// refuses every call afterwards.
func TestClose(t *testing.T) {
	h, err := sizeclass.New()
	if err != nil {
		t.Fatal(err)
	}
	b := mustAlloc(t, h, 64, 8)
	large := mustAlloc(t, h, 1<<20, 8)
	if err := h.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	heaptest.MustCheck(t, h, "Close")
	if st := h.Stats(); st.Stats != (carve.Stats{}) || st.LargeObjects != 0 || st.LargeBytes != 0 {
		t.Errorf("Stats() after Close = %+v, %d large objects of %d bytes, want zeros", st.Stats, st.LargeObjects, st.LargeBytes)
	}
	if n := h.Footprint(); n != 0 {
		t.Errorf("Footprint() after Close = %d, want 0", n)
	}
	if m := h.Map(); len(m.Segments) != 0 || m.Size != 0 {
		t.Errorf("Map() after Close = %d segments over %d bytes, want none", len(m.Segments), m.Size)
	}
	for _, size := range []int{64, 1 << 20} {
		if got, err := h.Alloc(size, 8); got != nil || !errors.Is(err, sizeclass.ErrClosed) {
			t.Errorf("Alloc(%d, 8) after Close = %#x, %v, want nil, ErrClosed", size, heaptest.Addr(got), err)
		}
	}
	if got, err := h.Realloc(nil, 10); got != nil || !errors.Is(err, sizeclass.ErrClosed) {
		t.Errorf("Realloc(nil, 10) after Close = %#x, %v, want nil, ErrClosed", heaptest.Addr(got), err)
	}
	for _, x := range [][]byte{b, large, nil, make([]byte, 64)} {
		if err := h.Free(x); !errors.Is(err, sizeclass.ErrClosed) {
			t.Errorf("Free(%#x) after Close = %v, want ErrClosed", heaptest.Addr(x), err)
		}
		if got, err := h.Realloc(x, 10); got != nil || !errors.Is(err, sizeclass.ErrClosed) {
			t.Errorf("Realloc(%#x, 10) after Close = %#x, %v, want nil, ErrClosed", heaptest.Addr(x), heaptest.Addr(got), err)
		}
		if n, err := h.UsableSize(x); n != 0 || !errors.Is(err, sizeclass.ErrClosed) {
			t.Errorf("UsableSize(%#x) after Close = %d, %v, want 0, ErrClosed", heaptest.Addr(x), n, err)
		}
		if h.Contains(x) {
			t.Errorf("Contains(%#x) after Close = true, want false", heaptest.Addr(x))
		}
	}
	if _, err := h.Trim(); !errors.Is(err, sizeclass.ErrClosed) {
		t.Errorf("Trim after Close = %v, want ErrClosed", err)
	}
	if err := h.Close(); !errors.Is(err, sizeclass.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

// TestReallocNil checks that Realloc(nil, n) allocates, and that the
// bytes of a moved block come along.
func TestReallocNil(t *testing.T) {
	h := mustNew(t)
	b, err := h.Realloc(nil, 20)
	if err != nil || len(b) != 20 {
		t.Fatalf("Realloc(nil, 20) = len %d, %v; want 20, nil", len(b), err)
	}
	for i := range b {
		b[i] = byte(i + 1)
	}
	for _, size := range []int{200, 40000, 100000, 30, 20} {
		nb, err := h.Realloc(b, size)
		if err != nil {
			t.Fatalf("Realloc(%d) = %v", size, err)
		}
		for i := range min(20, size) {
			if nb[i] != byte(i+1) {
				t.Fatalf("Realloc(%d): byte %d = %d, want %d", size, i, nb[i], i+1)
			}
		}
		b = nb
		heaptest.MustCheck(t, h, "Realloc")
	}
	mustFree(t, h, b)
}

// TestTrimLowersResident writes into many chunks of several classes,
// frees them, and checks that Trim gives their pages back: Resident and
// Footprint fall to what the one remaining chunk's slab holds.
func TestTrimLowersResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("resident bytes are measured on Linux only")
	}
	h := mustNew(t)
	keep := mustAlloc(t, h, 64, 8)
	var blocks [][]byte
	for i := range 4000 {
		b := mustAlloc(t, h, 64+i%7*100, 8)
		for j := range b {
			b[j] = 1
		}
		blocks = append(blocks, b)
	}
	full := checkStats(t, h)
	for _, b := range blocks {
		mustFree(t, h, b)
	}
	n, err := h.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v", err)
	}
	heaptest.MustCheck(t, h, "Trim")
	st := checkStats(t, h)
	if st.Footprint != 64<<10 || n != full.Footprint-st.Footprint {
		t.Errorf("after Trim: Footprint %d (want one slab), released %d (want %d)", st.Footprint, n, full.Footprint-st.Footprint)
	}
	if st.Resident > 64<<10 || full.Resident < 1<<20 {
		t.Errorf("Resident %d before Trim, %d after; want over 1 MiB, then at most a slab", full.Resident, st.Resident)
	}
	mustFree(t, h, keep)
}

// TestNoGoAllocs checks that the fast paths allocate nothing on the Go
// heap.
func TestNoGoAllocs(t *testing.T) {
	if invariants.Enabled {
		t.Skip("checked builds verify and may allocate on every call")
	}
	h := mustNew(t)
	mustFree(t, h, mustAlloc(t, h, 64, 8))
	mustFree(t, h, mustAlloc(t, h, 5000, 64))
	if n := testing.AllocsPerRun(1000, func() {
		b, _ := h.Alloc(64, 8)
		h.Free(b)
		b, _ = h.Alloc(5000, 64)
		b, _ = h.Realloc(b, 4800)
		h.Free(b)
	}); n != 0 {
		t.Errorf("Alloc, Realloc and Free allocate %v times per run, want 0", n)
	}
}

// TestFreeOtherLength frees blocks through slices whose length is not the
// one handed out, which Free accepts (it subtracts the length it is
// given from Live): an unrelated allocation afterwards, on a slow path
// where checked builds run the checker, must succeed, and Stats must
// still read 0 <= Live <= Used <= Footprint.
func TestFreeOtherLength(t *testing.T) {
	for _, tt := range []struct {
		name  string
		size  int
		slice func([]byte) []byte
	}{
		{"shorter, capacity cut", 100, func(b []byte) []byte { return b[:50:50] }},
		{"shorter", 100, func(b []byte) []byte { return b[:50] }},
		{"longer, to the capacity", 100, func(b []byte) []byte { return b[:cap(b)] }},
		{"large object, shorter, capacity cut", 40000, func(b []byte) []byte { return b[:50:50] }},
		{"large object, longer", 40000, func(b []byte) []byte { return b[:cap(b)] }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := mustNew(t)
			b := mustAlloc(t, h, tt.size, 8)
			if err := h.Free(tt.slice(b)); err != nil {
				t.Fatalf("Free(%d bytes of a %d-byte block) = %v, want nil", len(tt.slice(b)), tt.size, err)
			}
			checkStats(t, h)
			// Classes never used before: each takes the slow path.
			for _, size := range []int{8, 2000, 30000} {
				mustAlloc(t, h, size, 8)
				checkStats(t, h)
			}
		})
	}
}

// TestMetadata checks that Stats.Metadata, the Go memory of the heap's
// bookkeeping, is zero for a new heap, grows as a class commits slabs (a
// bit per chunk), as more classes open and as large objects come, and is
// zero again after Close.
func TestMetadata(t *testing.T) {
	h := mustNew(t)
	if st := h.Stats(); st.Metadata != 0 {
		t.Errorf("Stats().Metadata of a new heap = %d, want 0", st.Metadata)
	}
	last := int64(0)
	grew := func(step string, least int64) {
		t.Helper()
		st := h.Stats()
		if st.Metadata <= last || st.Metadata-last < least {
			t.Errorf("after %s: Stats().Metadata = %d, want at least %d more than %d", step, st.Metadata, least, last)
		}
		last = st.Metadata
	}
	mustAlloc(t, h, 16, 8)
	grew("the first chunk", 8) // a bitmap word at least
	for range 1 << 16 {
		if _, err := h.Alloc(16, 8); err != nil {
			t.Fatal(err)
		}
	}
	grew("65536 more 16-byte chunks", (1<<16)/8) // their bits
	for _, size := range []int{100, 1000, 10000} {
		mustAlloc(t, h, size, 8)
	}
	grew("three more classes", 3*8)
	for range 10 {
		mustAlloc(t, h, 100<<10, 8)
	}
	grew("ten large objects", 10*16)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Metadata != 0 {
		t.Errorf("Stats().Metadata after Close = %d, want 0", st.Metadata)
	}
}
