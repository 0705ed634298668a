package heap_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

// FuzzHeap runs random sequences of Alloc, Free, Realloc, Trim and misuse,
// decoded from the input, against a reference model: a map from each live
// block's address to its extent and the id whose pattern fills it. Free
// and Realloc are given the block's slice cut shorter one time in two (see
// cut), which must change nothing of what the heap accounts. After
// every operation the blocks must lie inside the heap's memory, aligned as
// asked, overlapping no other; the bytes written into them must be intact;
// Stats must agree with the model (Live exactly) and with its own
// equations; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzHeap -fuzztime 2m ./heap
// (and again with -tags carvecheck).
func FuzzHeap(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.cfg, s.ops)
	}
	f.Fuzz(func(t *testing.T, cfg byte, ops []byte) {
		runOps(t, cfg, ops)
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) { heaptest.RandomInputs(t, 19, 20, 3000, runOps) }

// A fuzz input is a configuration byte and a string of operations, which
// heaptest.Run decodes (a probe is a misuse, or a UsableSize check; a
// verification of every block's bytes checks the map as well). Nearly
// half of the sizes fall in the size classes: those of e <= 8 (below 256
// bytes, see heaptest.Ops) and half of those of e = 9.
//
// cfg: limit = fuzzLimits[cfg % 3]; retain = fuzzRetains[cfg/3 % 3];
// with cfg/9 odd the heap meshes (Mesh), and meshes what it can after
// every step.
var (
	fuzzLimits  = [3]int64{1 << 20, 8 << 20, 64 << 20}
	fuzzRetains = [3]int64{0, heap.RetainFloor, heap.DefaultRetain}
)

var fuzzSeeds = []struct {
	cfg byte
	ops []byte
}{
	{0, []byte{0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 3, 0, 0, 4, 1, 0, 7}},
	{1, []byte{0, 8, 200, 0, 0, 0, 4, 1, 0, 0, 0, 9, 7, 0, 200, 3, 0, 0, 10, 1, 0, 0, 3, 1, 6, 4, 6, 5, 6, 2, 15}},
	{2, []byte{0, 12, 3, 0, 0, 0, 6, 3, 0, 0, 0, 12, 3, 0, 0, 3, 1, 5, 0, 14, 9, 9, 6, 0, 6, 1, 6, 3, 7}},
	{3, []byte{0, 18, 0, 1, 255, 0, 5, 5, 5, 0, 0, 11, 77, 1, 0, 4, 0, 5, 0, 20, 255, 255, 6, 4, 6, 5, 15}},
	{4, []byte{0, 20, 255, 255, 0, 0, 20, 255, 255, 0, 3, 0, 0, 2, 1, 1, 0, 7, 0, 6, 7}},
	{5, []byte{0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 3, 1, 3, 0, 0, 17, 5, 0, 2, 6, 4, 15, 7}},
	{6, []byte{0, 5, 9, 9, 200, 0, 5, 9, 9, 210, 0, 5, 9, 9, 220, 3, 1, 0, 10, 1, 1, 250, 5, 1, 15, 3, 3, 6, 0}},
	{7, []byte{0, 3, 0, 40, 0, 0, 3, 0, 40, 0, 0, 3, 0, 40, 0, 3, 0, 3, 0, 3, 0, 6, 3, 6, 7, 6, 2, 15}},
	{8, []byte{0, 7, 1, 1, 0, 1, 7, 1, 1, 0, 2, 7, 1, 1, 0, 5, 0, 16, 128, 0, 5, 1, 6, 2, 0, 3, 1, 6, 3, 6, 4, 6, 5, 7}},
	// Meshing: many small slots, every other one freed, then Trim.
	{9, []byte{0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 3, 0, 3, 2, 3, 4, 7, 0, 4, 1, 0, 15}},
	{13, []byte{0, 11, 0, 2, 0, 0, 11, 0, 2, 0, 0, 11, 0, 2, 0, 0, 11, 0, 2, 0, 3, 1, 3, 3, 5, 0, 11, 0, 2, 7, 3, 0, 15}},
}

// runner holds a heap under test and its reference model.
type runner struct {
	t     *testing.T
	h     *heap.Heap
	other *heap.Heap // for blocks of another heap
	limit int64
	mesh  bool // mesh after every step
	m     *heaptest.Model
}

func runOps(t *testing.T, cfg byte, ops []byte) {
	r := &runner{t: t, m: heaptest.NewModel(t), limit: fuzzLimits[cfg%3], mesh: cfg/9%2 == 1}
	opts := []heap.Option{heap.Limit(r.limit), heap.Retain(min(fuzzRetains[cfg/3%3], r.limit))}
	if r.mesh {
		opts = append(opts, heap.Mesh())
	}
	r.h = newHeap(t, opts...)
	r.other = newHeap(t, heap.Limit(1<<20))
	heaptest.Run(r, ops)
	st := r.h.Stats()
	if st.Used != 0 || st.Live != 0 || st.Slabs != st.Kept || st.FreeBlocks != 0 || st.Footprint > fuzzRetains[cfg/3%3]+st.Kept*4096 {
		t.Fatalf("Stats() after freeing everything = %+v (%d slabs, %d kept), want no slab but the kept, no block, every free block merged into the top, at most the Retain and the kept slabs resident", st.Stats, st.Slabs, st.Kept)
	}
	if _, err := r.h.Trim(); err != nil || heap.CanPurge() && r.h.Footprint() != 0 {
		t.Fatalf("Trim() = %v, then Footprint() = %d, want nil, 0 (where pages go back to the OS)", err, r.h.Footprint())
	}
}

func (r *runner) Model() *heaptest.Model { return r.m }

// isSmall reports whether a lies in the heap's small zone.
func (r *runner) isSmall(a uintptr) bool {
	lo, hi, _, _ := r.h.Zones()
	return a >= lo && a < hi
}

// blockSize is the best-fit block a request of n bytes needs.
func blockSize(n int) int { return max((n+8+15)&^15, 32) }

// exhausted reports whether a request of need bytes may have been refused
// for the limit: the footprint was within need plus two pages of it.
func (r *runner) exhausted(err error, footprint int64, need int) bool {
	return errors.Is(err, heap.ErrExhausted) && footprint+int64(need)+2*heap.PageSize > r.limit
}

// Alloc allocates, checks the block against the model and fills it.
func (r *runner) Alloc(size, align int) {
	t := r.t
	fp := r.h.Footprint()
	b, err := r.h.Alloc(size, align)
	if err != nil {
		if b != nil || !r.exhausted(err, fp, size+align) {
			t.Fatalf("Alloc(%d, %d) = %#x, %v; want a block, or nil and %v with the footprint %d near the limit %d",
				size, align, heaptest.Addr(b), err, heap.ErrExhausted, fp, r.limit)
		}
		return
	}
	heaptest.CheckSlice(t, b, size, align, fmt.Sprintf("Alloc(%d, %d)", size, align))
	r.add(b, "Alloc")
}

// add checks a new block against the heap and gives it to the model: a
// slot of a size class occupies its usable bytes, a best-fit block its
// header as well.
func (r *runner) add(b []byte, op string) {
	t := r.t
	a := heaptest.Addr(b)
	usable, err := r.h.UsableSize(b)
	small := r.isSmall(a)
	switch {
	case err != nil:
		t.Fatalf("%s(%d) = %#x: UsableSize = %v, want nil", op, len(b), a, err)
	case small && (usable < len(b) || slices.Index(heap.ClassSizes(), usable) < 0 || len(b) > heap.MaxSmall && usable-len(b) >= 8):
		t.Fatalf("%s(%d) = %#x, a slot of %d bytes: want a class size at least the request (above %d, less than 8 bytes more)", op, len(b), a, usable, heap.MaxSmall)
	case !small && (usable < blockSize(len(b))-8 || usable >= blockSize(len(b))-8+32):
		t.Fatalf("%s(%d): UsableSize = %d, want %d to %d", op, len(b), usable, blockSize(len(b))-8, blockSize(len(b))-8+31)
	case !r.h.Contains(heaptest.At(b, 0, usable)):
		t.Fatalf("%s(%d) = [%#x, %#x), not inside the heap", op, len(b), a, a+uintptr(usable))
	}
	lo := a - 8
	if small {
		lo = a
	}
	r.m.Add(b, usable, lo, a+uintptr(usable), op)
}

// cut returns b as a caller may hand it to Free or Realloc, variant v:
// whole, or cut shorter as b[:0], b[:n/2] or b[:1:1] (b[:0:0] if b is
// empty). Each starts where b does, and has a capacity unless b is empty
// (an empty slice of capacity 0 is what b[len(b):] is: see Probe).
func cut(b []byte, v int) []byte {
	n := len(b)
	switch v % 4 {
	case 1:
		return b[:0]
	case 2:
		return b[:n/2]
	case 3:
		return b[:min(n, 1):min(n, 1)]
	}
	return b
}

func (r *runner) Free(a uintptr) {
	id := r.m.Live(a).ID
	r.m.FreeCut(r.h, a, func(b []byte) []byte { return cut(b, id) })
}

func (r *runner) Realloc(a uintptr, size int) {
	t := r.t
	x := r.m.Live(a)
	fp := r.h.Footprint()
	from := cut(x.B, x.ID/4)
	b, err := r.h.Realloc(from, size)
	if err != nil {
		if b != nil || !r.exhausted(err, fp, size) {
			t.Fatalf("Realloc(%#x, %d) = %#x, %v; want a block, or nil and %v with the footprint %d near the limit %d",
				a, size, heaptest.Addr(b), err, heap.ErrExhausted, fp, r.limit)
		}
		if i := heaptest.Intact(x.B, x.ID); i >= 0 {
			t.Fatalf("block %#x lost byte %d in a failed Realloc", a, i)
		}
		return
	}
	heaptest.CheckSlice(t, b, size, 8, fmt.Sprintf("Realloc(%#x, %d)", a, size))
	r.m.ReallocatedKeeping(a, b, len(from), "Realloc")
	r.add(b, "Realloc")
}

// Probe hands Free, Realloc and UsableSize what they must refuse, and
// checks that they refuse it with the right error and change nothing.
func (r *runner) Probe(v int) {
	t := r.t
	var b []byte
	want := []error{heap.ErrForeign}
	var some *heaptest.Block
	if addrs := r.m.Addrs(); len(addrs) > 0 {
		some = r.m.Live(addrs[v%len(addrs)])
	}
	switch v % 8 {
	case 0:
		b = nil
	case 1:
		b = make([]byte, 32)
	case 2: // inside a live block
		if some == nil || some.Usable < 2 {
			return
		}
		b = heaptest.At(some.B, 1+v%(some.Usable-1), 8)
	case 3: // past a live block's end: b[len(b):], which Go gives b's pointer
		if some == nil || len(some.B) == 0 {
			return
		}
		b = some.B[len(some.B):]
	case 4: // a freed block: a double free unless its place is taken
		freed := r.m.Freed()
		if len(freed) == 0 {
			return
		}
		a := freed[v%len(freed)]
		if r.m.Live(a) != nil {
			return // handed out again: freeing it would be legal
		}
		switch {
		case r.m.Covering(a) != nil:
			// inside the block in use that took its place
		case r.isSmall(a):
			// A slot freed, or a free page; or, once its page is a slab
			// of another class, no slot's start.
			want = []error{heap.ErrDoubleFree, heap.ErrForeign}
		default:
			want = []error{heap.ErrDoubleFree}
		}
		b = r.h.At(a, 8)
	case 5: // the top
		_, _, lo, hi := r.h.Zones()
		if lo+uintptr(r.h.TopOffset()) >= hi {
			return
		}
		want = []error{heap.ErrDoubleFree}
		b = r.h.At(lo+uintptr(r.h.TopOffset()), 8)
	case 6:
		if some == nil {
			return
		}
		if u, err := r.h.UsableSize(some.B); u != some.Usable || err != nil {
			t.Fatalf("UsableSize(%#x) = %d, %v, want %d, nil", heaptest.Addr(some.B), u, err, some.Usable)
		}
		return
	case 7:
		o, err := r.other.Alloc(v*37, 1)
		if err != nil {
			return
		}
		b = o
	}
	heaptest.Refused(t, r.h, b, v, want, func() any { return r.h.Stats() }, v%8)
}

// Trim gives every free page back and checks that nothing else moved.
func (r *runner) Trim() {
	t := r.t
	before := r.h.Stats()
	n, err := r.h.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	after := r.h.Stats()
	meshed := (after.Meshes - before.Meshes) * 4096     // the pages Trim's meshes gave back
	emptied := (before.Slabs-after.Slabs)*4096 - meshed // the kept slabs that were empty
	if after.Footprint != before.Footprint-n || after.Used != before.Used || after.Dirty != 0 || after.Kept != 0 || n != before.Dirty+emptied+meshed || emptied > before.Kept*4096 || emptied < 0 {
		t.Fatalf("Trim() = %d: Stats() went from %+v (dirty %d, %d slabs, %d kept) to %+v (dirty %d, %d slabs, %d kept), want the dirty pages and the empty kept slabs given back, nothing else changed",
			n, before.Stats, before.Dirty, before.Slabs, before.Kept, after.Stats, after.Dirty, after.Slabs, after.Kept)
	}
	r.VerifyAll()
}

// Verify checks the heap's invariants and counts against the model.
func (r *runner) Verify(step string) {
	t := r.t
	t.Helper()
	heaptest.MustCheck(t, r.h, step)
	if r.mesh {
		r.h.MeshAll()
		heaptest.MustCheck(t, r.h, step+" and a mesh")
	}
	st := checkStats(t, r.h)
	if st.Live != r.m.Bytes() || st.Slots+st.Blocks != int64(r.m.Blocks()) {
		t.Fatalf("Stats() after %s = Live %d, %d slots and %d blocks, want %d, %d", step, st.Live, st.Slots, st.Blocks, r.m.Bytes(), r.m.Blocks())
	}
}

// VerifyAll checks every live block's bytes (see Model.VerifyBytes) and
// the heap's map.
func (r *runner) VerifyAll() {
	r.m.VerifyBytes()
	checkMap(r.t, r.h)
}

// TestRandomOpsMeshing runs the fuzz body with meshing on, a mesh tried
// after every step.
func TestRandomOpsMeshing(t *testing.T) {
	if !heap.CanMesh() {
		t.Skip("heaps do not mesh in this build")
	}
	heaptest.RandomInputs(t, 23, 29, 3000, func(t *testing.T, cfg byte, ops []byte) {
		runOps(t, 9+cfg%9, ops)
	})
}
