package fit_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// Helpers shared by the package's tests.

// mustCheck fails the test when the heap's invariants do not hold.
func mustCheck(t testing.TB, h *fit.Heap, step string) {
	t.Helper()
	if err := h.Check(); err != nil {
		t.Fatalf("Check() after %s = %v, want nil\nlayout: %s", step, err, layout(h, nil))
	}
}

// mustNew returns a heap, closed when the test ends.
func mustNew(t testing.TB, p fit.Policy, opts ...fit.Option) *fit.Heap {
	t.Helper()
	h, err := fit.New(p, opts...)
	if err != nil {
		t.Fatalf("New(%v) = %v, want nil", p, err)
	}
	t.Cleanup(func() { h.Close() })
	mustCheck(t, h, "New")
	return h
}

// mustAlloc allocates and checks the heap and the slice.
func mustAlloc(t testing.TB, h *fit.Heap, size, align int) []byte {
	t.Helper()
	b, err := h.Alloc(size, align)
	if err != nil {
		t.Fatalf("Alloc(%d, %d) = %v, want nil (stats %+v)", size, align, err, h.Stats())
	}
	if len(b) != size || cap(b) != size || b == nil {
		t.Fatalf("Alloc(%d, %d) = len %d cap %d (nil: %t), want len == cap == %d, not nil", size, align, len(b), cap(b), b == nil, size)
	}
	if heaptest.Addr(b)%uintptr(align) != 0 {
		t.Fatalf("Alloc(%d, %d) = %#x, want a multiple of %d", size, align, heaptest.Addr(b), align)
	}
	mustCheck(t, h, fmt.Sprintf("Alloc(%d, %d)", size, align))
	return b
}

// mustFree frees b and checks the heap.
func mustFree(t testing.TB, h *fit.Heap, b []byte) {
	t.Helper()
	if err := h.Free(b); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(b), err)
	}
	mustCheck(t, h, "Free")
}

// checkStats verifies the equations every heap's statistics obey.
func checkStats(t testing.TB, h *fit.Heap) fit.Stats {
	t.Helper()
	st := h.Stats()
	if st.HeaderBytes != st.Blocks*fit.HeaderSize {
		t.Fatalf("Stats().HeaderBytes = %d, want Blocks %d * %d", st.HeaderBytes, st.Blocks, fit.HeaderSize)
	}
	if st.Live < 0 || st.Live > st.Used-st.HeaderBytes || st.Used > st.Footprint || st.Resident > st.Footprint {
		t.Fatalf("Stats() = Live %d, Used %d, HeaderBytes %d, Footprint %d, Resident %d: want 0 <= Live <= Used - HeaderBytes, Used <= Footprint, Resident <= Footprint",
			st.Live, st.Used, st.HeaderBytes, st.Footprint, st.Resident)
	}
	if st.Footprint > 0 && st.Footprint != st.Used+st.FreeBytes+st.Top+8 {
		t.Fatalf("Stats() = Footprint %d, Used %d, FreeBytes %d, Top %d: want Footprint = Used + FreeBytes + Top + 8",
			st.Footprint, st.Used, st.FreeBytes, st.Top)
	}
	if st.Largest > st.FreeBytes || (st.FreeBlocks == 0) != (st.FreeBytes == 0) || st.FreeBytes < st.FreeBlocks*fit.MinBlock {
		t.Fatalf("Stats() = FreeBlocks %d, FreeBytes %d, Largest %d: want Largest <= FreeBytes, each free block at least %d",
			st.FreeBlocks, st.FreeBytes, st.Largest, fit.MinBlock)
	}
	if st.Footprint > h.Limit() || st.Footprint%int64(mem.PageSize()) != 0 {
		t.Fatalf("Stats().Footprint = %d, want whole pages up to the limit %d", st.Footprint, h.Limit())
	}
	if st.Metadata <= 0 {
		t.Fatalf("Stats().Metadata = %d, want the Go memory the heap keeps (> 0)", st.Metadata)
	}
	return st
}

// each runs f as a subtest for every policy.
func each(t *testing.T, f func(t *testing.T, p fit.Policy)) {
	for _, p := range fit.Policies() {
		t.Run("policy="+p.String(), func(t *testing.T) { f(t, p) })
	}
}

func TestPolicyNames(t *testing.T) {
	want := []string{"first-fit", "next-fit", "best-fit", "ao-first-fit"}
	ps := fit.Policies()
	if len(ps) != len(want) {
		t.Fatalf("Policies() = %v, want %d policies", ps, len(want))
	}
	consts := []fit.Policy{fit.FirstFit, fit.NextFit, fit.BestFit, fit.AddressOrderedFirstFit}
	for i, p := range ps {
		if p != consts[i] || p.String() != want[i] {
			t.Errorf("Policies()[%d] = %v (%d), want %s (%d)", i, p, int(p), want[i], int(consts[i]))
		}
		got, err := fit.ParsePolicy(want[i])
		if got != p || err != nil {
			t.Errorf("ParsePolicy(%q) = %v, %v, want %v, nil", want[i], got, err, p)
		}
	}
	for _, bad := range []string{"", "best", "First-Fit", "ao-first-fit ", "buddy"} {
		if _, err := fit.ParsePolicy(bad); !errors.Is(err, fit.ErrPolicy) {
			t.Errorf("ParsePolicy(%q) = %v, want %v", bad, err, fit.ErrPolicy)
		}
	}
	if s := fit.Policy(9).String(); s != "Policy(9)" {
		t.Errorf("Policy(9).String() = %q, want %q", s, "Policy(9)")
	}
}

func TestNew(t *testing.T) {
	page := int64(mem.PageSize())
	tests := []struct {
		name    string
		policy  fit.Policy
		opts    []fit.Option
		wantErr error
		limit   int64 // for a heap made: its Limit()
	}{
		{name: "defaults", policy: fit.BestFit, limit: fit.DefaultLimit},
		{name: "limit one page", policy: fit.FirstFit, opts: []fit.Option{fit.Limit(page), fit.TopPad(0)}, limit: page},
		{name: "limit rounded up to pages", policy: fit.NextFit, opts: []fit.Option{fit.Limit(page + 1)}, limit: 2 * page},
		{name: "limit 32 GiB", policy: fit.AddressOrderedFirstFit, opts: []fit.Option{fit.Limit(32 << 30)}, limit: 32 << 30},
		{name: "trim never", policy: fit.BestFit, opts: []fit.Option{fit.TrimThreshold(-1), fit.TopPad(1 << 20)}, limit: fit.DefaultLimit},
		{name: "trim equal to pad", policy: fit.BestFit, opts: []fit.Option{fit.TrimThreshold(4096), fit.TopPad(4096)}, limit: fit.DefaultLimit},
		{name: "policy negative", policy: -1, wantErr: fit.ErrPolicy},
		{name: "policy past the last", policy: 4, wantErr: fit.ErrPolicy},
		{name: "limit 0", policy: fit.BestFit, opts: []fit.Option{fit.Limit(0)}, wantErr: fit.ErrOption},
		{name: "limit negative", policy: fit.BestFit, opts: []fit.Option{fit.Limit(-1)}, wantErr: fit.ErrOption},
		{name: "limit over 32 GiB", policy: fit.BestFit, opts: []fit.Option{fit.Limit(32<<30 + 1)}, wantErr: fit.ErrOption},
		{name: "pad negative", policy: fit.BestFit, opts: []fit.Option{fit.TopPad(-1)}, wantErr: fit.ErrOption},
		{name: "trim below pad", policy: fit.BestFit, opts: []fit.Option{fit.TrimThreshold(1000), fit.TopPad(4096)}, wantErr: fit.ErrOption},
		{name: "trim huge", policy: fit.BestFit, opts: []fit.Option{fit.TrimThreshold(math.MaxInt64)}, wantErr: fit.ErrOption},
		{name: "zero option", policy: fit.BestFit, opts: []fit.Option{{}}, wantErr: fit.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limit > 1<<30 && runtime.GOOS != "linux" {
				t.Skip("reserves more than a Go heap slice should hold")
			}
			h, err := fit.New(tt.policy, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(%v) = %v, want %v", tt.policy, err, tt.wantErr)
			}
			if err != nil {
				if h != nil {
					t.Errorf("New(%v) = %p, %v, want a nil heap with the error", tt.policy, h, err)
				}
				return
			}
			defer h.Close()
			mustCheck(t, h, "New")
			st := checkStats(t, h)
			if st.Footprint != 0 || st.Used != 0 || st.Blocks != 0 || st.Policy != tt.policy || h.Policy() != tt.policy {
				t.Errorf("Stats() of a new heap = %+v, want nothing committed and policy %v", st, tt.policy)
			}
			if h.Limit() != tt.limit {
				t.Errorf("Limit() = %d, want %d", h.Limit(), tt.limit)
			}
		})
	}
}

// TestStride is the block-allocator article's stride experiment: two
// 16-byte requests land 32 bytes apart and each can hold 24, for every
// policy; the header and the rounding show as Used - Live.
func TestStride(t *testing.T) {
	tests := []struct {
		size, stride int
	}{
		{0, 32}, {1, 32}, {16, 32}, {24, 32}, {25, 48}, {40, 48}, {56, 64}, {57, 80}, {100, 112}, {1000, 1008}, {1016, 1024}, {1017, 1040},
	}
	each(t, func(t *testing.T, p fit.Policy) {
		for _, tt := range tests {
			h := mustNew(t, p)
			const n = 4
			var prev []byte
			for i := range n {
				b := mustAlloc(t, h, tt.size, 1)
				if prev != nil && heaptest.Addr(b)-heaptest.Addr(prev) != uintptr(tt.stride) {
					t.Errorf("Alloc(%d) #%d at %#x, %d bytes after the previous, want the stride %d", tt.size, i, heaptest.Addr(b), heaptest.Addr(b)-heaptest.Addr(prev), tt.stride)
				}
				if u, err := h.UsableSize(b); u != tt.stride-fit.HeaderSize || err != nil {
					t.Errorf("UsableSize(Alloc(%d)) = %d, %v, want %d, nil", tt.size, u, err, tt.stride-fit.HeaderSize)
				}
				prev = b
			}
			st := checkStats(t, h)
			if st.Live != n*int64(tt.size) || st.Used != n*int64(tt.stride) || st.HeaderBytes != n*fit.HeaderSize {
				t.Errorf("Stats() after %d Alloc(%d) = Live %d, Used %d, HeaderBytes %d, want %d, %d, %d",
					n, tt.size, st.Live, st.Used, st.HeaderBytes, n*tt.size, n*tt.stride, n*fit.HeaderSize)
			}
		}
	})
}

// TestAllocZero checks that Alloc(0) returns a real, distinct, minimal
// block that Free takes back.
func TestAllocZero(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		a := mustAlloc(t, h, 0, 1)
		b := mustAlloc(t, h, 0, 64)
		if a == nil || b == nil || heaptest.Addr(a) == heaptest.Addr(b) {
			t.Fatalf("Alloc(0) twice = %#x, %#x, want two distinct non-nil slices", heaptest.Addr(a), heaptest.Addr(b))
		}
		st := checkStats(t, h)
		if st.Live != 0 || st.Blocks != 2 || st.Used < 2*fit.MinBlock {
			t.Errorf("Stats() after two Alloc(0) = Live %d, Blocks %d, Used %d, want 0, 2, at least %d", st.Live, st.Blocks, st.Used, 2*fit.MinBlock)
		}
		if u, err := h.UsableSize(a); u != fit.MinBlock-fit.HeaderSize || err != nil {
			t.Errorf("UsableSize(Alloc(0)) = %d, %v, want %d, nil", u, err, fit.MinBlock-fit.HeaderSize)
		}
		mustFree(t, h, a)
		mustFree(t, h, b)
		if st := checkStats(t, h); st.Used != 0 || st.Blocks != 0 {
			t.Errorf("Stats() after freeing both = Used %d, Blocks %d, want 0, 0", st.Used, st.Blocks)
		}
	})
}

// TestAlign allocates at every alignment, from the top and from free
// blocks, and checks the addresses and that the gaps became free blocks.
func TestAlign(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		var bs [][]byte
		for log := 0; log <= 12; log++ {
			for _, size := range []int{0, 1, 40, 4000} {
				b := mustAlloc(t, h, size, 1<<log)
				heaptest.Fill(b, len(bs))
				bs = append(bs, b)
			}
		}
		// Free every other block, then allocate aligned blocks into the
		// holes (or the top).
		for i := 0; i < len(bs); i += 2 {
			if j := heaptest.Intact(bs[i], i); j >= 0 {
				t.Fatalf("block %d lost byte %d", i, j)
			}
			mustFree(t, h, bs[i])
			bs[i] = nil
		}
		for log := 5; log <= 12; log++ {
			b := mustAlloc(t, h, 100, 1<<log)
			heaptest.Fill(b, 1000+log)
			defer func() {
				if j := heaptest.Intact(b, 1000+log); j >= 0 {
					t.Errorf("aligned block %d lost byte %d", log, j)
				}
			}()
		}
		for i, b := range bs {
			if b != nil {
				if j := heaptest.Intact(b, i); j >= 0 {
					t.Fatalf("block %d lost byte %d", i, j)
				}
			}
		}
		checkStats(t, h)
	})
}

// TestBadInput feeds every entry point what it must refuse, and checks
// that the heap is unchanged and whole afterwards.
func TestBadInput(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p, fit.Limit(1<<20))
		other := mustNew(t, p)
		ob := mustAlloc(t, other, 64, 1)

		a := mustAlloc(t, h, 40, 1)
		b := mustAlloc(t, h, 200, 1)
		c := mustAlloc(t, h, 40, 1)
		d := mustAlloc(t, h, 40, 1)
		e := mustAlloc(t, h, 40, 1)
		f := mustAlloc(t, h, 40, 1)
		bigLive := mustAlloc(t, h, 200<<10, 1)
		bigFree := mustAlloc(t, h, 200<<10, 1)
		last := mustAlloc(t, h, 16, 1)
		mustFree(t, h, b) // a hole between a and c
		mustFree(t, h, d) // d and e merge: e freed after d
		mustFree(t, h, e)
		mustFree(t, h, bigFree)
		lo, _ := h.Bounds()
		top := h.TopOffset()

		allocs := []struct {
			name        string
			size, align int
			want        error
		}{
			{"negative size", -1, 1, fit.ErrSize},
			{"min int size", math.MinInt, 16, fit.ErrSize},
			{"size over the limit", 1<<20 + 1, 1, fit.ErrExhausted},
			{"size far over the limit", math.MaxInt, 1, fit.ErrExhausted},
			{"size at the limit", 1 << 20, 1, fit.ErrExhausted}, // plus the header: one block too many
			{"align 0", 16, 0, fit.ErrAlign},
			{"align negative", 16, -16, fit.ErrAlign},
			{"align 3", 16, 3, fit.ErrAlign},
			{"align 48", 16, 48, fit.ErrAlign},
			{"align 8192", 16, 8192, fit.ErrAlign},
		}
		for _, tt := range allocs {
			before := h.Stats()
			got, err := h.Alloc(tt.size, tt.align)
			if got != nil || !errors.Is(err, tt.want) {
				t.Errorf("Alloc(%d, %d) (%s) = %#x, %v, want nil, %v", tt.size, tt.align, tt.name, heaptest.Addr(got), err, tt.want)
			}
			mustCheck(t, h, "a refused Alloc")
			if after := h.Stats(); after != before {
				t.Errorf("Stats() after a refused Alloc (%s) = %+v, want unchanged %+v", tt.name, after, before)
			}
		}

		frees := []struct {
			name string
			b    []byte
			want error
		}{
			{"nil", nil, fit.ErrForeign},
			{"empty non-nil Go slice", []byte{}, fit.ErrForeign},
			{"Go memory", make([]byte, 64), fit.ErrForeign},
			{"another heap's block", ob, fit.ErrForeign},
			{"interior, aligned", a[16:], fit.ErrForeign},
			{"interior, misaligned", a[1:], fit.ErrForeign},
			{"header of a block", heaptest.At(a, -8, 8), fit.ErrForeign},
			{"the base, before the first block", heaptest.At(a, int(lo)-int(heaptest.Addr(a)), 8), fit.ErrForeign},
			{"the free hole", b, fit.ErrDoubleFree},
			{"inside the free hole", heaptest.At(b, 32, 8), fit.ErrDoubleFree},
			{"merged into its neighbour", e, fit.ErrDoubleFree},
			{"deep inside a block in use", bigLive[150<<10:], fit.ErrForeign},
			{"deep inside a free block", bigFree[150<<10:], fit.ErrDoubleFree},
			{"the first of two merged", d, fit.ErrDoubleFree},
			{"the top", heaptest.At(a, int(lo)+top-int(heaptest.Addr(a)), 8), fit.ErrDoubleFree},
			{"past the top", heaptest.At(a, int(lo)+top+4096-int(heaptest.Addr(a)), 8), fit.ErrDoubleFree},
			{"past the reservation", heaptest.At(a, int(lo)+(1<<20)-int(heaptest.Addr(a))+4096, 8), fit.ErrForeign},
		}
		for _, tt := range frees {
			before := h.Stats()
			if err := h.Free(tt.b); !errors.Is(err, tt.want) {
				t.Errorf("Free(%s) = %v, want %v", tt.name, err, tt.want)
			}
			if got, err := h.Realloc(tt.b, 8); got != nil || !errors.Is(err, tt.want) {
				t.Errorf("Realloc(%s, 8) = %#x, %v, want nil, %v", tt.name, heaptest.Addr(got), err, tt.want)
			}
			if n, err := h.UsableSize(tt.b); n != 0 || !errors.Is(err, tt.want) {
				t.Errorf("UsableSize(%s) = %d, %v, want 0, %v", tt.name, n, err, tt.want)
			}
			mustCheck(t, h, "a refused Free ("+tt.name+")")
			if after := h.Stats(); after != before {
				t.Errorf("Stats() after a refused Free (%s) = %+v, want unchanged %+v", tt.name, after, before)
			}
		}

		// Realloc refuses bad sizes and keeps the block.
		heaptest.Fill(c, 7)
		for _, size := range []int{-1, 1<<20 + 1} {
			before := h.Stats()
			if got, err := h.Realloc(c, size); got != nil || err == nil {
				t.Errorf("Realloc(c, %d) = %#x, %v, want an error", size, heaptest.Addr(got), err)
			}
			if after := h.Stats(); after != before {
				t.Errorf("Stats() after a refused Realloc = %+v, want unchanged %+v", after, before)
			}
		}
		if j := heaptest.Intact(c, 7); j >= 0 {
			t.Errorf("block c lost byte %d in a refused Realloc", j)
		}
		mustFree(t, h, c)
		mustFree(t, h, a)
		mustFree(t, h, f)
		mustFree(t, h, bigLive)
		mustFree(t, h, last)
		if st := checkStats(t, h); st.Blocks != 0 || st.Used != 0 || st.Live != 0 {
			t.Errorf("Stats() after freeing everything = %+v, want nothing in use", st)
		}

		// After Close everything is refused.
		if err := h.Close(); err != nil {
			t.Fatalf("Close() = %v, want nil", err)
		}
		mustCheck(t, h, "Close")
		if err := h.Close(); !errors.Is(err, fit.ErrClosed) {
			t.Errorf("Close() again = %v, want %v", err, fit.ErrClosed)
		}
		if got, err := h.Alloc(16, 1); got != nil || !errors.Is(err, fit.ErrClosed) {
			t.Errorf("Alloc after Close = %#x, %v, want nil, %v", heaptest.Addr(got), err, fit.ErrClosed)
		}
		if err := h.Free(a); !errors.Is(err, fit.ErrClosed) {
			t.Errorf("Free after Close = %v, want %v", err, fit.ErrClosed)
		}
		if _, err := h.Realloc(a, 8); !errors.Is(err, fit.ErrClosed) {
			t.Errorf("Realloc after Close = %v, want %v", err, fit.ErrClosed)
		}
		if _, err := h.UsableSize(a); !errors.Is(err, fit.ErrClosed) {
			t.Errorf("UsableSize after Close = %v, want %v", err, fit.ErrClosed)
		}
		if _, err := h.Trim(); !errors.Is(err, fit.ErrClosed) {
			t.Errorf("Trim after Close = %v, want %v", err, fit.ErrClosed)
		}
		if st := h.Stats(); st.Footprint != 0 || st.Used != 0 || st.Blocks != 0 {
			t.Errorf("Stats() after Close = %+v, want nothing committed", st)
		}
	})
}

// TestErrorMessages checks that errors say what was expected.
func TestErrorMessages(t *testing.T) {
	h := mustNew(t, fit.BestFit, fit.Limit(1<<20))
	a := mustAlloc(t, h, 40, 1)
	mustAlloc(t, h, 40, 1)
	tests := []struct {
		err  error
		want string
	}{
		{func() error { _, err := h.Alloc(-5, 1); return err }(), "fit: bad size: Alloc(-5, 1): size is negative (want >= 0)"},
		{func() error { _, err := h.Alloc(8, 24); return err }(), "fit: bad alignment: Alloc(8, 24): want a power of two from 1 to 4096"},
		{func() error { _, err := h.Alloc(2<<20, 1); return err }(), "fit: limit reached: Alloc(2097152, 1): size exceeds the limit 1048576"},
		{h.Free(nil), "fit: not a block of this heap: nil"},
		{h.Free(a[16:]), fmt.Sprintf("fit: not a block of this heap: %#x (offset 32) lies inside the block at offset 16 (48 bytes), not at its start", heaptest.Addr(a)+16)},
		{func() error { _, err := fit.ParsePolicy("worst-fit"); return err }(), `fit: unknown policy: "worst-fit" (want one of first-fit, next-fit, best-fit, ao-first-fit)`},
	}
	for _, tt := range tests {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error = %v\nwant    %s", tt.err, tt.want)
		}
	}
	mustFree(t, h, a)
	err := h.Free(a)
	if want := fmt.Sprintf("fit: block is not in use (freed twice?): the block at %#x (offset 16) is free", heaptest.Addr(a)); err == nil || err.Error() != want {
		t.Errorf("Free twice = %v\nwant         %s", err, want)
	}
}

// TestExhausted fills a small heap: Alloc then fails with ErrExhausted,
// changing nothing, and the heap goes on serving what fits.
func TestExhausted(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		const limit = 64 << 10
		h := mustNew(t, p, fit.Limit(limit), fit.TopPad(0))
		var bs [][]byte
		for {
			b, err := h.Alloc(1000, 1)
			if err != nil {
				if b != nil || !errors.Is(err, fit.ErrExhausted) {
					t.Fatalf("Alloc(1000) on a full heap = %#x, %v, want nil, %v", heaptest.Addr(b), err, fit.ErrExhausted)
				}
				break
			}
			bs = append(bs, b)
		}
		// 8 bytes unused at the start, 1008 per block.
		if want := (limit - 8) / 1008; len(bs) != want {
			t.Errorf("a %d-byte heap held %d blocks of 1008 bytes, want %d", limit, len(bs), want)
		}
		st := checkStats(t, h)
		if st.Footprint != limit {
			t.Errorf("Stats().Footprint = %d, want the limit %d", st.Footprint, limit)
		}
		before := st
		if _, err := h.Alloc(1000, 64); !errors.Is(err, fit.ErrExhausted) {
			t.Errorf("Alloc(1000, 64) on a full heap = %v, want %v", err, fit.ErrExhausted)
		}
		if _, err := h.Realloc(bs[len(bs)-1], 2000); !errors.Is(err, fit.ErrExhausted) {
			t.Errorf("Realloc of the last block past the limit = %v, want %v", err, fit.ErrExhausted)
		}
		if _, err := h.Realloc(bs[0], 2000); !errors.Is(err, fit.ErrExhausted) {
			t.Errorf("Realloc that must move on a full heap = %v, want %v", err, fit.ErrExhausted)
		}
		mustCheck(t, h, "refused requests")
		if after := h.Stats(); after != before {
			t.Errorf("Stats() after refused requests = %+v, want unchanged %+v", after, before)
		}
		mustFree(t, h, bs[3])
		again := mustAlloc(t, h, 1000, 1)
		if heaptest.Addr(again) != heaptest.Addr(bs[3]) {
			t.Errorf("Alloc(1000) after freeing block 3 = %#x, want its place %#x", heaptest.Addr(again), heaptest.Addr(bs[3]))
		}
	})
}

// TestUsableSize checks UsableSize against the block sizes and that a
// Realloc within it stays in place.
func TestUsableSize(t *testing.T) {
	each(t, func(t *testing.T, p fit.Policy) {
		h := mustNew(t, p)
		for _, size := range []int{0, 1, 23, 24, 25, 100, 4096, 100000} {
			b := mustAlloc(t, h, size, 1)
			u, err := h.UsableSize(b)
			if want := max(size+8+15, fit.MinBlock) &^ 15; u != want-8 || err != nil {
				t.Errorf("UsableSize(Alloc(%d)) = %d, %v, want %d, nil", size, u, err, want-8)
			}
			mustAlloc(t, h, 16, 1) // keep the next Realloc from growing at the top
			r, err := h.Realloc(b, u)
			if err != nil || heaptest.Addr(r) != heaptest.Addr(b) || len(r) != u {
				t.Errorf("Realloc(Alloc(%d), UsableSize %d) = %#x len %d, %v, want in place at %#x", size, u, heaptest.Addr(r), len(r), err, heaptest.Addr(b))
			}
			mustCheck(t, h, "Realloc to the usable size")
		}
	})
}

// TestContains: a block is inside the heap, Go memory is not, and after
// Close nothing is.
func TestContains(t *testing.T) {
	h, err := fit.New(fit.FirstFit)
	if err != nil {
		t.Fatal(err)
	}
	heaptest.ContainsUntilClose(t, h, mustAlloc(t, h, 100, 16))
}

// TestFreeShortSlice frees and reallocates blocks through slices cut
// shorter than Alloc returned them, which the contract accepts in every
// build: the whole block goes, the heap stays whole (checked builds run
// the invariant checker when the heap next grows, and must not panic),
// Live stays within the usable bytes of the blocks in use, and it is 0
// once no block is in use.
func TestFreeShortSlice(t *testing.T) {
	tests := []struct {
		name string
		cut  func(b []byte) []byte
		op   string // "free", or "realloc" to the size 300 before a Free of the result
	}{
		{"free b[:50:50]", func(b []byte) []byte { return b[:50:50] }, "free"},
		{"free b[:0]", func(b []byte) []byte { return b[:0] }, "free"},
		{"realloc b[:50:50]", func(b []byte) []byte { return b[:50:50] }, "realloc"},
		{"realloc b[:1] smaller", func(b []byte) []byte { return b[:1] }, "realloc 40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			each(t, func(t *testing.T, p fit.Policy) {
				h := mustNew(t, p)
				b := mustAlloc(t, h, 100, 1)
				c := mustAlloc(t, h, 16, 1)
				switch tt.op {
				case "free":
					mustFree(t, h, tt.cut(b))
				case "realloc", "realloc 40":
					size := 300
					if tt.op == "realloc 40" {
						size = 40
					}
					r, err := h.Realloc(tt.cut(b), size)
					if err != nil || len(r) != size {
						t.Fatalf("Realloc(cut slice, %d) = len %d, %v, want len %d, nil", size, len(r), err, size)
					}
					mustCheck(t, h, "Realloc of a cut slice")
					mustFree(t, h, r)
				}
				checkStats(t, h)
				// An unrelated Alloc that grows the heap: checked builds
				// check every invariant there.
				big := mustAlloc(t, h, 1<<20, 1)
				checkStats(t, h)
				mustFree(t, h, big)
				mustFree(t, h, c)
				if st := checkStats(t, h); st.Live != 0 || st.Used != 0 || st.Blocks != 0 {
					t.Errorf("Stats() after freeing every block = Live %d, Used %d, Blocks %d, want 0, 0, 0", st.Live, st.Used, st.Blocks)
				}
			})
		})
	}
	// Live, overstated by a cut slice up to the usable bytes, must stay
	// within them when a block shrinks in place: the block's old slack (12
	// bytes) is more than its new one (0), and the rest it gives back to
	// the top is enough for the heap to trim itself, which runs the
	// checker in checked builds.
	t.Run("shrink after a cut free", func(t *testing.T) {
		each(t, func(t *testing.T, p fit.Policy) {
			h := mustNew(t, p)
			b := mustAlloc(t, h, 100, 1)
			c := mustAlloc(t, h, 199980, 1) // a block of 200000 bytes, 199992 usable
			mustFree(t, h, b[:0])
			r, err := h.Realloc(c, 24)
			if err != nil || heaptest.Addr(r) != heaptest.Addr(c) {
				t.Fatalf("Realloc(c, 24) = %#x, %v, want in place at %#x", heaptest.Addr(r), err, heaptest.Addr(c))
			}
			mustCheck(t, h, "Realloc")
			checkStats(t, h)
			mustFree(t, h, r)
			if st := checkStats(t, h); st.Live != 0 {
				t.Errorf("Stats().Live after freeing every block = %d, want 0", st.Live)
			}
		})
	})
}

// TestMetadata checks the Go memory each policy reports after the
// connection scenario, n holes of 1040 bytes between live sessions,
// against what its Stats doc counts: the block-start bitmap (at least
// 1/128 of the footprint, at most twice that after its growth by append),
// and the policy's index. The figure must reach carve.Stats, where the
// lab reads it.
func TestMetadata(t *testing.T) {
	const n = 5000
	for _, p := range fit.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			h, err := fit.New(p)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			heaptest.Connect(t, h, n)
			st := h.Stats()
			bitmap := st.Footprint / 128
			var lo, hi int64 // the index's bytes
			switch p {
			case fit.FirstFit, fit.NextFit:
				// A tree of 12-byte slots, a power of two at least twice the
				// free blocks when last renumbered, and more than the keys
				// given since: between 8192 and 16384 for 5000 holes.
				lo, hi = 12*8192, 12*16384
			case fit.BestFit:
				lo, hi = 16*n, 2*(16+4)*n+64 // every hole of 1040 bytes has a node
			case fit.AddressOrderedFirstFit:
				groups := st.Footprint / 4096
				lo, hi = bitmap+8*groups, 2*bitmap+512+16*groups
			}
			if got := st.Stats.Metadata; got < bitmap+lo || got > 2*bitmap+512+hi {
				t.Errorf("Stats().Stats.Metadata = %d with %d free blocks, footprint %d: want %d to %d",
					got, st.FreeBlocks, st.Footprint, bitmap+lo, 2*bitmap+512+hi)
			}
			t.Logf("%v: footprint %d KiB, %d free blocks, metadata %d KiB", p, st.Footprint>>10, st.FreeBlocks, st.Metadata>>10)
		})
	}
}
