package arena

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
)

// newArena returns an arena built with opts that the test releases when
// it ends.
func newArena(t testing.TB, opts ...Option) *Arena {
	t.Helper()
	a, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	return a
}

// mustCheck fails the test if the arena's invariants are broken.
func mustCheck(t testing.TB, a *Arena, after string) {
	t.Helper()
	if err := a.check(); err != nil {
		t.Fatalf("after %s: check: %v", after, err)
	}
}

// owner returns the index of the block holding b, or -1. An empty b must
// still point inside a block.
func (a *Arena) owner(b []byte) int {
	p, n := heaptest.Addr(b), uintptr(max(len(b), 1))
	for i, bl := range a.blocks {
		lo := uintptr(bl.r.Base())
		if p >= lo && p+n <= lo+uintptr(bl.size) {
			return i
		}
	}
	return -1
}

// overlap returns an error naming two of bufs that share a byte.
func overlap(bufs [][]byte) error {
	sorted := slices.Clone(bufs)
	slices.SortFunc(sorted, func(x, y []byte) int { return int(heaptest.Addr(x)) - int(heaptest.Addr(y)) })
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1], sorted[i]
		if len(prev) > 0 && len(cur) > 0 && heaptest.Addr(prev)+uintptr(len(prev)) > heaptest.Addr(cur) {
			return fmt.Errorf("[%#x, +%d) overlaps [%#x, +%d)", heaptest.Addr(prev), len(prev), heaptest.Addr(cur), len(cur))
		}
	}
	return nil
}

// statsNoResident returns a's Stats without Resident, which depends on
// what the kernel keeps in memory.
func statsNoResident(a *Arena) Stats {
	s := a.Stats()
	s.Resident = 0
	return s
}

func TestNew(t *testing.T) {
	ps := mem.PageSize()
	tests := []struct {
		name      string
		opts      []Option
		wantErr   error
		wantBlock int
		wantLimit int64
	}{
		{"defaults", nil, nil, DefaultBlockSize, DefaultLimit},
		{"block size rounded up to a page", []Option{BlockSize(1)}, nil, ps, DefaultLimit},
		{"block size of whole pages kept", []Option{BlockSize(3 * ps)}, nil, 3 * ps, DefaultLimit},
		{"limit", []Option{Limit(1 << 20), BlockSize(1 << 20)}, nil, 1 << 20, 1 << 20},
		{"zero block size", []Option{BlockSize(0)}, ErrBadOption, 0, 0},
		{"negative block size", []Option{BlockSize(-1)}, ErrBadOption, 0, 0},
		{"block size over 1 TiB", []Option{BlockSize(1<<40 + 1)}, ErrBadOption, 0, 0},
		{"zero limit", []Option{Limit(0)}, ErrBadOption, 0, 0},
		{"negative limit", []Option{Limit(-4096)}, ErrBadOption, 0, 0},
		{"limit over 128 TiB", []Option{Limit(1<<47 + 1)}, ErrBadOption, 0, 0},
		{"block size over limit", []Option{BlockSize(2 << 20), Limit(1 << 20)}, ErrBadOption, 0, 0},
		{"zero option", []Option{{}}, ErrBadOption, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if a.blockBytes() != tt.wantBlock || a.limitBytes() != tt.wantLimit {
				t.Errorf("New: block size %d, limit %d; want %d, %d", a.blockBytes(), a.limitBytes(), tt.wantBlock, tt.wantLimit)
			}
			mustCheck(t, a, "New")
		})
	}
}

// TestAlignment allocates every size from 1 to 256 at every alignment from
// 1 to 4096, and a few larger ones, from one arena.
func TestAlignment(t *testing.T) {
	a := newArena(t)
	var all [][]byte
	for align := 1; align <= 4096; align *= 2 {
		for size := 1; size <= 256; size++ {
			b, err := a.Alloc(size, align)
			if err != nil {
				t.Fatalf("Alloc(%d, %d) = %v, want nil error", size, align, err)
			}
			if heaptest.Addr(b)%uintptr(align) != 0 || len(b) != size || cap(b) != size || a.owner(b) < 0 {
				t.Fatalf("Alloc(%d, %d) = %#x len %d cap %d in block %d, want aligned, len == cap == %d, in a block",
					size, align, heaptest.Addr(b), len(b), cap(b), a.owner(b), size)
			}
			all = append(all, b)
			mustCheck(t, a, fmt.Sprintf("Alloc(%d, %d)", size, align))
		}
	}
	for _, align := range []int{1 << 13, 1 << 16, 1 << 20, 1 << 24} {
		b, err := a.Alloc(100, align)
		if err != nil || heaptest.Addr(b)%uintptr(align) != 0 || a.owner(b) < 0 {
			t.Fatalf("Alloc(100, %d) = %#x, %v; want aligned in a block", align, heaptest.Addr(b), err)
		}
		all = append(all, b)
		mustCheck(t, a, fmt.Sprintf("Alloc(100, %d)", align))
	}
	if err := overlap(all); err != nil {
		t.Fatal(err)
	}
	var live int64
	for _, b := range all {
		live += int64(len(b))
	}
	if s := a.Stats(); s.Live != live || s.Used < s.Live {
		t.Errorf("Stats() = %+v, want Live %d", s, live)
	}
}

// step is one operation of a scripted test.
type step struct {
	op          string // "alloc", "reset", "release" or "prefault"
	size, align int
	wantErr     error
}

func alloc(size, align int) step         { return step{"alloc", size, align, nil} }
func fail(size, align int, e error) step { return step{"alloc", size, align, e} }

// run performs steps on a, checking each result and the invariants after
// each, and returns the allocations in order (nil for failed ones).
func run(t *testing.T, a *Arena, steps []step) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range steps {
		var err error
		switch s.op {
		case "alloc":
			before := statsNoResident(a)
			var b []byte
			b, err = a.Alloc(s.size, s.align)
			out = append(out, b)
			if err != nil {
				if after := statsNoResident(a); after != before {
					t.Fatalf("failed Alloc(%d, %d) changed the stats from %+v to %+v", s.size, s.align, before, after)
				}
				if b != nil {
					t.Fatalf("failed Alloc(%d, %d) returned a slice", s.size, s.align)
				}
			} else if len(b) != s.size || cap(b) != s.size || heaptest.Addr(b)%uintptr(s.align) != 0 || a.owner(b) < 0 {
				t.Fatalf("Alloc(%d, %d) = %#x len %d cap %d in block %d, want aligned, len == cap == size, in a block",
					s.size, s.align, heaptest.Addr(b), len(b), cap(b), a.owner(b))
			}
		case "reset":
			a.Reset()
		case "release":
			err = a.Release()
		case "prefault":
			err = a.Prefault(s.size)
		default:
			t.Fatalf("bad step %q", s.op)
		}
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s(%d, %d) = %v, want %v", s.op, s.size, s.align, err, s.wantErr)
		}
		mustCheck(t, a, fmt.Sprintf("%s(%d, %d)", s.op, s.size, s.align))
	}
	return out
}

// TestGrowth runs scripts of requests against small blocks and checks the
// arena's statistics after each script.
func TestGrowth(t *testing.T) {
	ps := mem.PageSize()
	bs := 4 * ps
	// allocs documents each script's count of allocations.
	st := func(live, used, footprint, allocs int64, blocks int, align, tail int64) Stats {
		return Stats{
			Stats:  carve.Stats{Live: live, Used: used, Footprint: footprint},
			Blocks: blocks, AlignWaste: align, TailWaste: tail,
			Free: footprint - used - tail,
		}
	}
	b := int64(bs)
	tests := []struct {
		name  string
		limit int64
		steps []step
		want  Stats
	}{
		{"empty", 0, nil, Stats{}},
		{"first request maps a block", 0, []step{alloc(10, 1)}, st(10, 10, b, 1, 1, 0, 0)},
		{"a full block", 0, []step{alloc(bs, 1)}, st(b, b, b, 1, 1, 0, 0)},
		{"padding is AlignWaste", 0, []step{alloc(1, 1), alloc(1, 64)}, st(2, 65, b, 2, 1, 63, 0)},
		{"chains a block when one is full", 0,
			[]step{alloc(bs-10, 1), alloc(100, 1)},
			st(b-10+100, b-10+100, 2*b, 2, 2, 0, 10)},
		{"a request of a whole block chains too", 0,
			[]step{alloc(1, 1), alloc(bs, 8)},
			st(1+b, 1+b, 2*b, 2, 2, 0, b-1)},
		{"oversized request gets a block of its own", 0,
			[]step{alloc(100, 1), alloc(bs+1, 1), alloc(100, 1)},
			st(b+201, b+201, b+b+int64(ps), 3, 2, 0, int64(ps)-1)},
		{"oversized first request becomes the current block", 0,
			[]step{alloc(bs+1, 1), alloc(10, 1)},
			st(b+11, b+11, b+int64(ps), 2, 1, 0, 0)},
		{"limit stops growth", 2 * b,
			[]step{alloc(bs, 1), alloc(bs, 1), fail(1, 1, ErrExhausted), fail(0, 1, ErrExhausted)},
			st(2*b, 2*b, 2*b, 2, 2, 0, 0)},
		{"a request over the limit", 2 * b,
			[]step{alloc(10, 1), fail(2*bs+1, 1, ErrExhausted), fail(1<<62, 1, ErrExhausted), alloc(10, 1)},
			st(20, 20, b, 2, 1, 0, 0)},
		{"still usable after exhaustion", b + 2*int64(ps),
			[]step{alloc(bs-ps, 1), fail(bs+ps, 1, ErrExhausted), alloc(ps, 1), alloc(2*ps, 1), fail(1, 1, ErrExhausted)},
			st(b+2*int64(ps), b+2*int64(ps), b+2*int64(ps), 3, 2, 0, 0)},
		{"a smaller last block uses the whole limit", b + int64(ps),
			[]step{alloc(bs, 1), alloc(ps, 1)},
			st(b+int64(ps), b+int64(ps), b+int64(ps), 2, 2, 0, 0)},
		{"empty requests take no bytes", 0,
			[]step{alloc(0, 1), alloc(0, 1), alloc(0, 16)},
			st(0, 0, b, 3, 1, 0, 0)},
		{"an empty request at a block's end chains", 0,
			[]step{alloc(bs, 1), alloc(0, 1)},
			st(b, b, 2*b, 2, 2, 0, 0)},
		{"reset keeps the blocks", 0,
			[]step{alloc(bs, 1), alloc(bs, 1), {op: "reset"}, alloc(5, 1)},
			st(5, 5, 2*b, 1, 2, 0, 0)},
		{"release empties the arena", 0,
			[]step{alloc(bs, 1), alloc(bs+1, 1), {op: "release"}},
			Stats{}},
		{"usable after release", 0,
			[]step{alloc(bs, 1), {op: "release"}, alloc(7, 1)},
			st(7, 7, b, 1, 1, 0, 0)},
		{"prefault adds a spare block", 0,
			[]step{alloc(10, 1), {op: "prefault", size: 3 * bs}},
			st(10, 10, b+roundUp(2*b+10, int64(ps)), 1, 2, 0, 0)},
		{"prefault counts the current block's rest", 0,
			[]step{alloc(10, 1), {op: "prefault", size: bs - 10}},
			st(10, 10, b, 1, 1, 0, 0)},
		{"prefault over the limit", b,
			[]step{{op: "prefault", size: bs + 1, wantErr: ErrExhausted}},
			Stats{}},
		{"negative prefault", 0,
			[]step{{op: "prefault", size: -1, wantErr: ErrSize}},
			Stats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{BlockSize(bs)}
			if tt.limit != 0 {
				opts = append(opts, Limit(tt.limit))
			}
			a := newArena(t, opts...)
			run(t, a, tt.steps)
			got := statsNoResident(a)
			// The block list's capacity depends on how append grew it:
			// check the bound, then leave it out of the comparison.
			if least := int64(got.Blocks) * int64(unsafe.Sizeof(block{})); got.Metadata < least || got.Metadata > 2*least+256 {
				t.Errorf("Stats().Metadata = %d for %d blocks, want in [%d, %d]", got.Metadata, got.Blocks, least, 2*least+256)
			}
			got.Metadata = 0
			if got != tt.want {
				t.Errorf("Stats() = %+v\nwant %+v", got, tt.want)
			}
			if fp := a.Footprint(); fp != tt.want.Footprint {
				t.Errorf("Footprint() = %d, want %d", fp, tt.want.Footprint)
			}
		})
	}
}

// TestOversizedKeepsCurrent checks that an oversized request does not end
// the current block: the next small request lands right after the
// previous one.
func TestOversizedKeepsCurrent(t *testing.T) {
	bs := 4 * mem.PageSize()
	a := newArena(t, BlockSize(bs))
	got := run(t, a, []step{alloc(100, 1), alloc(3*bs, 1), alloc(100, 1)})
	if heaptest.Addr(got[2]) != heaptest.Addr(got[0])+100 {
		t.Errorf("Alloc(100, 1) after an oversized request = %#x, want %#x", heaptest.Addr(got[2]), heaptest.Addr(got[0])+100)
	}
	if a.owner(got[1]) == a.owner(got[0]) {
		t.Errorf("oversized Alloc(%d, 1) shares block %d with a small one", 3*bs, a.owner(got[1]))
	}
}

// TestResetReplays checks that after Reset the same requests get the same
// addresses, across chained and oversized blocks, without new blocks.
func TestResetReplays(t *testing.T) {
	ps := mem.PageSize()
	bs := 4 * ps
	a := newArena(t, BlockSize(bs))
	script := []step{
		alloc(24, 8), alloc(bs-100, 1), alloc(300, 16), // the third chains a block
		alloc(5*bs, 64), // its own block
		alloc(1, 1), alloc(0, 1), alloc(bs, 4096), alloc(2*ps, 2*ps),
	}
	first := run(t, a, script)
	before := a.Stats()

	a.Reset()
	mustCheck(t, a, "Reset")
	s := statsNoResident(a)
	want := Stats{
		Stats:  carve.Stats{Footprint: before.Footprint, Metadata: before.Metadata},
		Blocks: before.Blocks, Free: before.Footprint,
	}
	if s != want {
		t.Errorf("Stats() after Reset = %+v\nwant %+v", s, want)
	}

	second := run(t, a, script)
	for i := range first {
		if heaptest.Addr(first[i]) != heaptest.Addr(second[i]) {
			t.Errorf("after Reset, Alloc(%d, %d) = %#x, want %#x as before", script[i].size, script[i].align, heaptest.Addr(second[i]), heaptest.Addr(first[i]))
		}
	}
	if after := a.Stats(); after.Blocks != before.Blocks || after.Footprint != before.Footprint ||
		after.Used != before.Used || after.TailWaste != before.TailWaste {
		t.Errorf("Stats() after the replay = %+v\nwant %+v", after, before)
	}
}

// TestResetKeepsBytes checks that Alloc does not zero: after Reset the
// memory holds what was written before (poison in carvecheck builds).
func TestResetKeepsBytes(t *testing.T) {
	a := newArena(t)
	b, err := a.Alloc(64, 8)
	if err != nil {
		t.Fatalf("Alloc(64, 8) = %v, want nil error", err)
	}
	for i := range b {
		b[i] = 0xa5
	}
	a.Reset()
	b, err = a.Alloc(64, 8)
	if err != nil {
		t.Fatalf("Alloc(64, 8) = %v, want nil error", err)
	}
	want := byte(0xa5)
	if invariants.Enabled {
		want = invariants.Poison
	}
	for i, c := range b {
		if c != want {
			t.Fatalf("byte %d after Reset = %#x, want %#x (Alloc does not zero)", i, c, want)
		}
	}
}

func TestRelease(t *testing.T) {
	bs := 4 * mem.PageSize()
	a := newArena(t, BlockSize(bs))
	for _, b := range run(t, a, []step{alloc(bs, 1), alloc(10, 1), alloc(3*bs, 8)}) {
		clear(b) // touch the pages, so that they are resident
	}
	if s := a.Stats(); s.Footprint == 0 || s.Resident == 0 || s.Blocks != 3 {
		t.Fatalf("Stats() before Release = %+v, want 3 blocks, some resident", s)
	}
	if err := a.Release(); err != nil {
		t.Fatalf("Release() = %v, want nil", err)
	}
	mustCheck(t, a, "Release")
	if s := a.Stats(); s != (Stats{}) {
		t.Errorf("Stats() after Release = %+v, want zero", s)
	}
	if err := a.Release(); err != nil {
		t.Errorf("second Release() = %v, want nil (nothing to release)", err)
	}
	b := run(t, a, []step{alloc(100, 16)})[0]
	for i := range b {
		b[i] = byte(i)
	}
	if s := a.Stats(); s.Live != 100 || s.Footprint != int64(bs) || s.Blocks != 1 {
		t.Errorf("Stats() after Release and Alloc(100, 16) = %+v, want Live 100, one block", s)
	}
	if a.blockBytes() != bs {
		t.Errorf("block size after Release = %d, want %d kept", a.blockBytes(), bs)
	}
}

// TestBadInput checks that invalid requests fail with the right sentinel
// and leave the arena as it was.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name        string
		size, align int
		want        error
	}{
		{"negative size", -1, 8, ErrSize},
		{"very negative size", -1 << 62, 1, ErrSize},
		{"zero alignment", 8, 0, ErrAlign},
		{"negative alignment", 8, -8, ErrAlign},
		{"alignment not a power of two", 8, 24, ErrAlign},
		{"alignment three", 8, 3, ErrAlign},
		{"alignment over MaxAlign", 8, MaxAlign * 2, ErrAlign},
		{"zero size, zero alignment", 0, 0, ErrAlign},
	}
	a := newArena(t)
	if _, err := a.Alloc(40, 8); err != nil { // a current block with room left
		t.Fatalf("Alloc(40, 8) = %v, want nil", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := statsNoResident(a)
			b, err := a.Alloc(tt.size, tt.align)
			if !errors.Is(err, tt.want) || b != nil {
				t.Errorf("Alloc(%d, %d) = %v, %v, want nil, %v", tt.size, tt.align, b, err, tt.want)
			}
			if after := statsNoResident(a); after != before {
				t.Errorf("Alloc(%d, %d) changed the stats from %+v to %+v", tt.size, tt.align, before, after)
			}
			mustCheck(t, a, fmt.Sprintf("Alloc(%d, %d)", tt.size, tt.align))
		})
	}
}

// TestEmptyAlloc checks malloc(0)'s analogue: a non-nil, empty, aligned
// slice inside a block, counting nothing live.
func TestEmptyAlloc(t *testing.T) {
	a := newArena(t, BlockSize(mem.PageSize()))
	for _, align := range []int{1, 8, 4096, 1 << 16} {
		b, err := a.Alloc(0, align)
		if err != nil || b == nil || len(b) != 0 || cap(b) != 0 || heaptest.Addr(b)%uintptr(align) != 0 || a.owner(b) < 0 {
			t.Fatalf("Alloc(0, %d) = %#x (nil %v, len %d, cap %d, block %d), %v; want non-nil, empty, aligned, inside a block",
				align, heaptest.Addr(b), b == nil, len(b), cap(b), a.owner(b), err)
		}
		mustCheck(t, a, fmt.Sprintf("Alloc(0, %d)", align))
	}
	if s := a.Stats(); s.Live != 0 {
		t.Errorf("Stats() = %+v, want Live 0", s)
	}
}

// TestZeroArena checks that the zero Arena works with the defaults.
func TestZeroArena(t *testing.T) {
	var a Arena
	defer a.Release()
	mustCheck(t, &a, "nothing")
	b, err := a.Alloc(10, 2)
	if err != nil || len(b) != 10 {
		t.Fatalf("Alloc(10, 2) = %v, want 10 bytes", err)
	}
	mustCheck(t, &a, "Alloc(10, 2)")
	if s := a.Stats(); s.Footprint != DefaultBlockSize {
		t.Errorf("Stats().Footprint = %d, want %d", s.Footprint, DefaultBlockSize)
	}
}

func TestPrefault(t *testing.T) {
	bs := 4 * mem.PageSize()
	a := newArena(t, BlockSize(bs))
	const n = 1 << 20
	if err := a.Prefault(n); err != nil {
		t.Fatalf("Prefault(%d) = %v, want nil", n, err)
	}
	mustCheck(t, a, "Prefault")
	s := a.Stats()
	if s.Footprint < n || s.Resident < n {
		t.Errorf("Stats() after Prefault(%d) = %+v, want Footprint and Resident >= %d", n, s, n)
	}
	for i := range n / 64 {
		if _, err := a.Alloc(64, 64); err != nil {
			t.Fatalf("Alloc(64, 64) #%d = %v, want nil", i, err)
		}
	}
	mustCheck(t, a, "allocating the prefaulted bytes")
	if got := a.Stats(); got.Blocks != s.Blocks || got.Footprint != s.Footprint {
		t.Errorf("allocating %d prefaulted bytes mapped more: %+v, want as after Prefault %+v", n, got, s)
	}
}

// TestAllocsPerRun checks that the fast paths allocate nothing on the Go
// heap.
func TestAllocsPerRun(t *testing.T) {
	a := newArena(t)
	if err := a.Prefault(1 << 20); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := a.Alloc(64, 8); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Alloc(64, 8): %v Go heap allocations per run, want 0", n)
	}
	type rec struct {
		A, B int64
		C    [3]float32
	}
	recs, err := NewOf[rec](a)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := recs.New(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Of[rec].New: %v Go heap allocations per run, want 0", n)
	}
}

// TestWriteAfterReset is deliberate misuse: in carvecheck builds, a write
// through an allocation that Reset invalidated is caught when the bytes
// are handed out again.
func TestWriteAfterReset(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags carvecheck")
	}
	a := newArena(t)
	b, err := a.Alloc(32, 8)
	if err != nil {
		t.Fatal(err)
	}
	a.Reset()
	b[5] = 1 // the bug: b died with the Reset
	defer func() {
		if recover() == nil {
			t.Error("Alloc(32, 8) over a write after Reset did not panic")
		}
	}()
	a.Alloc(32, 8)
}

// TestPrefaultSpares checks that Prefault after Reset touches the blocks
// the arena kept instead of mapping new ones.
func TestPrefaultSpares(t *testing.T) {
	bs := 4 * mem.PageSize()
	a := newArena(t, BlockSize(bs))
	run(t, a, []step{alloc(bs, 1), alloc(bs, 1), alloc(bs, 1), {op: "reset"}})
	before := statsNoResident(a)
	if err := a.Prefault(3 * bs); err != nil {
		t.Fatalf("Prefault(%d) = %v, want nil", 3*bs, err)
	}
	mustCheck(t, a, "Prefault")
	if s := a.Stats(); s.Resident < int64(3*bs) {
		t.Errorf("Stats().Resident after Prefault(%d) = %d, want all of it", 3*bs, s.Resident)
	}
	if after := statsNoResident(a); after != before {
		t.Errorf("Prefault over spare blocks changed the stats from %+v to %+v", before, after)
	}
}

// TestCheck is deliberate corruption: check must notice each broken
// invariant.
func TestCheck(t *testing.T) {
	bs := 4 * mem.PageSize()
	tests := []struct {
		name    string
		corrupt func(a *Arena)
	}{
		{"padding above used", func(a *Arena) { a.padding = a.retired + int64(a.off) + 1 }},
		{"negative padding", func(a *Arena) { a.padding = -1 }},
		{"offset past the block's end", func(a *Arena) { a.off = a.end + 1 }},
		{"current block's size wrong", func(a *Arena) { a.end-- }},
		{"current index outside the blocks in use", func(a *Arena) { a.cur = a.n }},
		{"more blocks in use than held", func(a *Arena) { a.n = len(a.blocks) + 1 }},
		{"footprint miscounted", func(a *Arena) { a.footprint -= int64(bs) }},
		{"tail miscounted", func(a *Arena) { a.tail++ }},
		{"retired bytes miscounted", func(a *Arena) { a.retired-- }},
		{"block used past its size", func(a *Arena) { a.blocks[0].used = a.blocks[0].size + 1 }},
		{"spare block marked used", func(a *Arena) { a.blocks[len(a.blocks)-1].used = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newArena(t, BlockSize(bs))
			// Two chained blocks, one block of its own, one spare.
			run(t, a, []step{alloc(bs-10, 1), alloc(100, 1), alloc(3*bs, 8), {op: "prefault", size: 2 * bs}})
			tt.corrupt(a)
			if err := a.check(); err == nil {
				t.Errorf("check() = nil after corruption, want an error")
			}
		})
	}
}

// TestMetadata checks that Stats.Metadata, the Go memory of the block
// list, is there once the arena holds a block, grows with the blocks it
// chains, stays over Reset (which keeps them) and goes with Release.
func TestMetadata(t *testing.T) {
	a := newArena(t, BlockSize(mem.PageSize()))
	if s := a.Stats(); s.Metadata != 0 {
		t.Errorf("Stats().Metadata of an empty arena = %d, want 0", s.Metadata)
	}
	last := int64(0)
	for _, blocks := range []int{1, 10, 100} {
		for a.Stats().Blocks < blocks {
			if _, err := a.Alloc(mem.PageSize(), 1); err != nil {
				t.Fatalf("Alloc = %v", err)
			}
		}
		s := a.Stats()
		least := int64(s.Blocks) * int64(unsafe.Sizeof(block{}))
		if s.Metadata < least || s.Metadata <= last || s.Metadata > 2*least+256 {
			t.Errorf("%d blocks: Stats().Metadata = %d, want above %d (the last) and in [%d, %d]", s.Blocks, s.Metadata, last, least, 2*least+256)
		}
		last = s.Metadata
	}
	a.Reset()
	if s := a.Stats(); s.Metadata != last {
		t.Errorf("Stats().Metadata after Reset = %d, want %d: the blocks stay", s.Metadata, last)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Metadata != 0 {
		t.Errorf("Stats().Metadata after Release = %d, want 0", s.Metadata)
	}
}

// TestOwns: every allocation since the last Reset is the arena's, in the
// current block and in those left behind; a Go slice, the free rest of a
// block, and anything after a Reset are not.
func TestOwns(t *testing.T) {
	bs := 4 * mem.PageSize()
	a := newArena(t, BlockSize(bs))
	var got [][]byte
	for _, size := range []int{10, bs / 2, bs, 3 * bs, 7, 0} {
		b, err := a.Alloc(size, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	for i, b := range got {
		if !a.Owns(b) {
			t.Errorf("allocation %d (%d bytes): Owns = false", i, len(b))
		}
	}
	last := got[4]
	rest := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), len(last)+1)), 1)
	if a.Owns(rest) {
		t.Error("Owns: true for the current block's untaken rest")
	}
	if a.Owns(make([]byte, 8)) {
		t.Error("Owns: true for a Go slice")
	}
	a.Reset()
	if a.Owns(got[0]) {
		t.Error("Owns: true after Reset")
	}
}
