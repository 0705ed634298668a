package fit_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
)

// FuzzFit runs random sequences of Alloc, Free, Realloc, Trim and misuse,
// decoded from the input, against a reference model: a map from each live
// block's address to its extent and the id whose pattern fills it. After
// every operation the blocks must lie inside the heap's committed memory,
// aligned as asked, overlapping no other; the bytes written into them must
// be intact; Stats must agree with the model (Live exactly) and with its
// own equations; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzFit -fuzztime 2m ./fit
// (and again with -tags carvecheck).
func FuzzFit(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.cfg, s.ops)
	}
	f.Fuzz(func(t *testing.T, cfg byte, ops []byte) {
		runOps(t, cfg, ops)
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) { heaptest.RandomInputs(t, 3, 4, 5000, runOps) }

// A fuzz input is a configuration byte and a string of operations, which
// heaptest.Run decodes (a probe is a misuse, or a UsableSize check).
//
// cfg: policy = cfg % 4; limit = fuzzLimits[cfg/4 % 3];
// trimming = cfg/16 % 4 (default; threshold 0 and no pad; never; 64 KiB
// threshold and 16 KiB pad).
var fuzzLimits = [3]int64{1 << 20, 8 << 20, 64 << 20}

var fuzzSeeds = []struct {
	cfg byte
	ops []byte
}{
	{0, []byte{0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 3, 0, 0, 4, 1, 0, 7}},
	{1, []byte{0, 8, 200, 0, 0, 0, 4, 1, 0, 0, 0, 9, 7, 0, 200, 3, 0, 0, 10, 1, 0, 0, 3, 1, 6, 4, 6, 5, 6, 2, 15}},
	{2, []byte{0, 12, 3, 0, 0, 0, 6, 3, 0, 0, 0, 12, 3, 0, 0, 3, 1, 5, 0, 14, 9, 9, 6, 0, 6, 1, 6, 3, 7}},
	{3, []byte{0, 18, 0, 1, 255, 0, 5, 5, 5, 0, 0, 11, 77, 1, 0, 4, 0, 5, 0, 20, 255, 255, 6, 4, 6, 5, 15}},
	{4*1 + 16*1 + 2, []byte{0, 20, 255, 255, 0, 0, 20, 255, 255, 0, 3, 0, 0, 2, 1, 1, 0, 7, 0, 6, 7}},
	{4*2 + 16*2 + 3, []byte{0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 3, 1, 3, 0, 0, 17, 5, 0, 2, 6, 4, 15, 7}},
	{16*3 + 1, []byte{0, 5, 9, 9, 200, 0, 5, 9, 9, 210, 0, 5, 9, 9, 220, 3, 1, 0, 10, 1, 1, 250, 5, 1, 15, 3, 3, 6, 0}},
}

// runner holds a heap under test and its reference model.
type runner struct {
	t     *testing.T
	h     *fit.Heap
	other *fit.Heap // for blocks of another heap
	limit int64
	m     *heaptest.Model
}

func runOps(t *testing.T, cfg byte, ops []byte) {
	policy := fit.Policies()[cfg%4]
	r := &runner{t: t, m: heaptest.NewModel(t), limit: fuzzLimits[cfg/4%3]}
	opts := []fit.Option{fit.Limit(r.limit)}
	switch cfg / 16 % 4 {
	case 1:
		opts = append(opts, fit.TrimThreshold(0), fit.TopPad(0))
	case 2:
		opts = append(opts, fit.TrimThreshold(-1))
	case 3:
		opts = append(opts, fit.TrimThreshold(64<<10), fit.TopPad(16<<10))
	}
	h, err := fit.New(policy, opts...)
	if err != nil {
		t.Fatalf("New(%v) = %v, want nil", policy, err)
	}
	defer h.Close()
	r.h = h
	if r.other, err = fit.New(policy, fit.Limit(1<<20)); err != nil {
		t.Fatalf("New(%v) = %v, want nil", policy, err)
	}
	defer r.other.Close()
	heaptest.Run(r, ops)
	if st := h.Stats(); st.Used != 0 || st.Live != 0 || st.FreeBlocks != 0 {
		t.Fatalf("Stats() after freeing everything = %+v, want no blocks, all merged into the top", st)
	}
}

func (r *runner) Model() *heaptest.Model { return r.m }

// blockSize is the block a request of n bytes needs.
func blockSize(n int) int { return max((n+8+15)&^15, fit.MinBlock) }

// lastEnd returns where the last block ends: the start of the top.
func (r *runner) lastEnd() int64 {
	st := r.h.Stats()
	return 8 + st.Used + st.FreeBytes
}

// Alloc allocates, checks the block against the model and fills it.
func (r *runner) Alloc(size, align int) {
	t := r.t
	end := r.lastEnd()
	b, err := r.h.Alloc(size, align)
	if err != nil {
		// Only a request the top cannot hold may fail.
		need := int64(blockSize(size))
		if align > fit.Granule {
			need += int64(align) + fit.Granule
		}
		if b != nil || !errors.Is(err, fit.ErrExhausted) || end+need <= r.limit {
			t.Fatalf("Alloc(%d, %d) = %#x, %v; want a block, or nil and %v with the top at %d, the limit %d",
				size, align, heaptest.Addr(b), err, fit.ErrExhausted, end, r.limit)
		}
		return
	}
	heaptest.CheckSlice(t, b, size, align, fmt.Sprintf("Alloc(%d, %d)", size, align))
	r.add(b, "Alloc")
}

// add checks a new block against the heap and gives it to the model.
func (r *runner) add(b []byte, op string) {
	t := r.t
	a := heaptest.Addr(b)
	usable, err := r.h.UsableSize(b)
	if err != nil || usable < blockSize(len(b))-8 || usable >= blockSize(len(b))-8+fit.MinBlock {
		t.Fatalf("%s(%d): UsableSize = %d, %v, want %d to %d", op, len(b), usable, err, blockSize(len(b))-8, blockSize(len(b))-8+fit.MinBlock-1)
	}
	whole := heaptest.At(b, -8, usable+8) // header and payload
	lo, hi := r.h.Bounds()
	if a-8 < lo || a+uintptr(usable) > hi || !r.h.Committed(whole) {
		t.Fatalf("%s(%d) = [%#x, %#x), want inside committed memory of [%#x, %#x)", op, len(b), a-8, a+uintptr(usable), lo, hi)
	}
	r.m.Add(b, usable, a-8, a+uintptr(usable), op)
}

func (r *runner) Free(a uintptr) { r.m.Free(r.h, a) }

func (r *runner) Realloc(a uintptr, size int) {
	t := r.t
	x := r.m.Live(a)
	end := r.lastEnd()
	b, err := r.h.Realloc(x.B, size)
	if err != nil {
		// Only a block that must grow at the top or move there may fail:
		// either way the top falls short of the new size.
		if b != nil || !errors.Is(err, fit.ErrExhausted) || end+int64(blockSize(size)) <= r.limit {
			t.Fatalf("Realloc(%#x, %d) = %#x, %v; want a block, or nil and %v with the top at %d, the limit %d",
				a, size, heaptest.Addr(b), err, fit.ErrExhausted, end, r.limit)
		}
		if i := heaptest.Intact(x.B, x.ID); i >= 0 {
			t.Fatalf("block %#x lost byte %d in a failed Realloc", a, i)
		}
		return
	}
	heaptest.CheckSlice(t, b, size, fit.Granule, fmt.Sprintf("Realloc(%#x, %d)", a, size))
	r.m.Reallocated(a, b, "Realloc")
	r.add(b, "Realloc")
}

// Probe hands Free, Realloc and UsableSize what they must refuse, and
// checks that they refuse it with the right error and change nothing.
func (r *runner) Probe(v int) {
	t := r.t
	var b []byte
	want := fit.ErrForeign
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
		if some == nil {
			return
		}
		b = heaptest.At(some.B, 16, 8)
	case 3:
		if some == nil {
			return
		}
		b = heaptest.At(some.B, 1+v%15, 8)
	case 4: // a freed block: a double free unless its place is taken
		freed := r.m.Freed()
		if len(freed) == 0 {
			return
		}
		a := freed[v%len(freed)]
		if r.m.Live(a) != nil {
			return // handed out again: freeing it would be legal
		}
		want = fit.ErrDoubleFree
		if r.m.Covering(a) != nil {
			want = fit.ErrForeign // inside the block in use that took its place
		}
		lo, _ := r.h.Bounds()
		b = r.h.At(int(a-lo), 8)
	case 5: // the top
		lo, hi := r.h.Bounds()
		if lo+uintptr(r.h.TopOffset()) >= hi {
			return
		}
		want = fit.ErrDoubleFree
		b = r.h.At(r.h.TopOffset(), 8)
	case 6:
		if some == nil {
			return
		}
		if u, err := r.h.UsableSize(some.B); u != some.Usable || err != nil {
			t.Fatalf("UsableSize(%#x) = %d, %v, want %d, nil", heaptest.Addr(some.B), u, err, some.Usable)
		}
		return
	case 7:
		o, err := r.other.Alloc(v, 1)
		if err != nil {
			return
		}
		b = o
	}
	heaptest.Refused(t, r.h, b, v, []error{want}, func() any { return r.h.Stats() }, v%8)
}

// Trim gives the top back and checks that nothing else moved.
func (r *runner) Trim() {
	t := r.t
	before := r.h.Stats()
	n, err := r.h.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	after := r.h.Stats()
	if after.Footprint != before.Footprint-n || after.Used != before.Used || after.FreeBytes != before.FreeBytes || after.Top > before.Top {
		t.Fatalf("Trim() = %d: Stats() went from %+v to %+v, want only the top to shrink", n, before, after)
	}
	r.VerifyAll()
}

// Verify checks the heap's invariants and counts against the model.
func (r *runner) Verify(step string) {
	t := r.t
	t.Helper()
	if err := r.h.Check(); err != nil {
		t.Fatalf("Check() after %s = %v, want nil", step, err)
	}
	st := checkStats(t, r.h)
	if st.Live != r.m.Bytes() || st.Blocks != int64(r.m.Blocks()) {
		t.Fatalf("Stats() after %s = Live %d, Blocks %d, want %d, %d", step, st.Live, st.Blocks, r.m.Bytes(), r.m.Blocks())
	}
	if st.Footprint > r.limit {
		t.Fatalf("Stats().Footprint after %s = %d, over the limit %d", step, st.Footprint, r.limit)
	}
}

// VerifyAll checks that every live block is still committed and holds
// its bytes (see Model.VerifyBytes).
func (r *runner) VerifyAll() {
	for _, a := range r.m.Addrs() {
		if !r.h.Committed(r.m.Live(a).B) {
			r.t.Fatalf("live block %#x is no longer committed", a)
		}
	}
	r.m.VerifyBytes()
}
