//go:build carvecheck

package pool_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/pool"
)

// The tests of checked builds (-tags carvecheck): double frees are refused,
// freed chunks are poisoned, and a chunk written after free is caught when
// it would be handed out again, quarantined, and the pool goes on.

// setLink overwrites the free-list link of the (freed) chunk c.
func setLink(c []byte, v uintptr) { *(*uintptr)(unsafe.Pointer(unsafe.SliceData(c))) = v }

func TestDoubleFree(t *testing.T) {
	tests := []struct {
		name  string
		make  func(t *testing.T) *pool.Pool
		freed []int // chunks freed once, in order
		again int   // the chunk freed a second time
	}{
		{"New, head of the free list", func(t *testing.T) *pool.Pool { return heaptest.MustNew(t, pool.New, 64) }, []int{1, 3}, 3},
		{"New, deep in the free list", func(t *testing.T) *pool.Pool { return heaptest.MustNew(t, pool.New, 64) }, []int{1, 3, 5}, 1},
		{"New, only free chunk", func(t *testing.T) *pool.Pool { return heaptest.MustNew(t, pool.New, 64) }, []int{0}, 0},
		{"Over", func(t *testing.T) *pool.Pool { return heaptest.MustOver(t, pool.Over, make([]byte, 8*64)[3:], 64) }, []int{2, 6}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.make(t)
			var cs [][]byte
			for range 7 {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			for _, i := range tt.freed {
				heaptest.MustFree(t, p, cs[i])
			}
			before := p.Stats()
			for range 2 {
				if err := p.Free(cs[tt.again]); !errors.Is(err, pool.ErrDoubleFree) {
					t.Fatalf("Free(chunk %d) again = %v, want %v", tt.again, err, pool.ErrDoubleFree)
				}
				heaptest.MustCheck(t, p, "double free")
			}
			if after := p.Stats(); after != before {
				t.Errorf("Stats() after a double free = %+v, want unchanged %+v", after, before)
			}
			// Each freed chunk comes back once, last freed first.
			for k := len(tt.freed) - 1; k >= 0; k-- {
				if c := heaptest.MustAlloc(t, p); heaptest.Addr(c) != heaptest.Addr(cs[tt.freed[k]]) {
					t.Fatalf("Alloc() = %#x, want chunk %d at %#x", heaptest.Addr(c), tt.freed[k], heaptest.Addr(cs[tt.freed[k]]))
				}
			}
			if st := checkStats(t, p); st.Free != 0 || st.InUse != 7 {
				t.Errorf("Stats() = Free %d, InUse %d, want 0, 7", st.Free, st.InUse)
			}
		})
	}
}

// TestDoubleFreeAfterTrim frees a chunk whose slab Trim gave back: the
// checked build refuses it instead of faulting on the decommitted page.
func TestDoubleFreeAfterTrim(t *testing.T) {
	const chunk, slab, perSlab = 1024, 64 << 10, 64
	tests := []struct {
		name  string
		alloc int // chunks carved
		slab  int // the slab freed and trimmed
		want  []error
	}{
		{"middle slab", 3 * perSlab, 1, []error{pool.ErrDoubleFree}},
		{"first slab", 2 * perSlab, 0, []error{pool.ErrDoubleFree}},
		// Trim drops the top slab and lowers the cursor: the address is
		// uncarved again, as foreign as any other there.
		{"cursor slab", 2*perSlab + 5, 2, []error{pool.ErrDoubleFree, pool.ErrForeign}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab))
			var cs, stale [][]byte
			for range tt.alloc {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			for _, c := range cs {
				if int((heaptest.Addr(c)-heaptest.Addr(cs[0]))/slab) == tt.slab {
					heaptest.MustFree(t, p, c)
					stale = append(stale, c)
				}
			}
			if n, err := p.Trim(); n != slab || err != nil {
				t.Fatalf("Trim() = %d, %v, want %d, nil", n, err, slab)
			}
			heaptest.MustCheck(t, p, "Trim")
			before := p.Stats()
			for _, c := range []([]byte){stale[0], stale[len(stale)/2], stale[len(stale)-1]} {
				err := p.Free(c)
				if !isAny(err, tt.want) {
					t.Fatalf("Free(%#x) after Trim = %v, want one of %v", heaptest.Addr(c), err, tt.want)
				}
				heaptest.MustCheck(t, p, "double free after Trim")
			}
			if after := p.Stats(); after != before {
				t.Errorf("Stats() after double frees = %+v, want unchanged %+v", after, before)
			}
		})
	}
}

// TestPoison checks that freed chunks read the poison byte past the link,
// also the chunks of a revived slab.
func TestPoison(t *testing.T) {
	const chunk = 60 // stride 64: the padding is poisoned too
	p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(4096))
	var cs [][]byte
	for i := range 3 * 64 {
		c := heaptest.MustAlloc(t, p)
		heaptest.Fill(c, i)
		cs = append(cs, c)
	}
	poisoned := func(c []byte) int {
		whole := unsafe.Slice(unsafe.SliceData(c), p.Stride())
		for i := pool.LinkSize; i < len(whole); i++ {
			if whole[i] != invariants.Poison {
				return i
			}
		}
		return -1
	}
	for _, c := range cs[:64] {
		heaptest.MustFree(t, p, c)
		if i := poisoned(c); i >= 0 {
			t.Fatalf("freed chunk %#x: byte %d = %#x, want poison %#x", heaptest.Addr(c), i, c[i], invariants.Poison)
		}
	}
	// Trim gives the first slab back; the next Alloc revives it.
	if n, err := p.Trim(); n != 4096 || err != nil {
		t.Fatalf("Trim() = %d, %v, want 4096, nil", n, err)
	}
	for _, c := range cs[64:] {
		heaptest.MustFree(t, p, c)
	}
	heaptest.MustAlloc(t, p)
	for _, c := range cs[64:127] {
		if i := poisoned(c); i >= 0 {
			t.Fatalf("freed chunk %#x: byte %d = %#x, want poison %#x", heaptest.Addr(c), i, c[i], invariants.Poison)
		}
	}
	// The free list holds slabs 1 and 2; empty it, then see the revived
	// slab 0 poisoned.
	for range 127 {
		heaptest.MustAlloc(t, p)
	}
	r := heaptest.MustAlloc(t, p)
	if heaptest.Addr(r) != heaptest.Addr(cs[0]) {
		t.Fatalf("Alloc() = %#x, want the first chunk of the revived slab, %#x", heaptest.Addr(r), heaptest.Addr(cs[0]))
	}
	for _, c := range cs[1:64] {
		if i := poisoned(c); i >= 0 {
			t.Fatalf("revived chunk %#x: byte %d = %#x, want poison %#x", heaptest.Addr(c), i, c[i], invariants.Poison)
		}
	}
}

// TestWriteAfterFree writes into a freed chunk in the ways programs do,
// then allocates: the pool must report ErrCorrupt for that chunk, keep it
// out of use, and go on handing out the other chunks, each exactly once.
func TestWriteAfterFree(t *testing.T) {
	const chunk = 60 // stride 64
	tests := []struct {
		name   string
		victim int // the chunk written after free; freed last, so first out
		write  func(c []byte, cs [][]byte, base uintptr)
	}{
		{"one byte past the link", 5, func(c []byte, _ [][]byte, _ uintptr) { c[pool.LinkSize] = 1 }},
		{"last byte", 5, func(c []byte, _ [][]byte, _ uintptr) { c[len(c)-1] ^= 0xff }},
		{"padding past the chunk size", 5, func(c []byte, _ [][]byte, _ uintptr) { heaptest.At(c, chunk+3, 1)[0] = 7 }},
		{"link garbage", 5, func(c []byte, _ [][]byte, _ uintptr) { setLink(c, 0x12345) }},
		{"link past the cursor", 5, func(c []byte, _ [][]byte, _ uintptr) { setLink(c, 64*64) }},
		{"link to a live chunk", 5, func(c []byte, cs [][]byte, base uintptr) { setLink(c, heaptest.Addr(cs[2])-base) }},
		{"link to itself", 5, func(c []byte, _ [][]byte, base uintptr) { setLink(c, heaptest.Addr(c)-base) }},
		{"link cut (all ones)", 5, func(c []byte, _ [][]byte, _ uintptr) { setLink(c, ^uintptr(0)) }},
		{"cleared", 5, func(c []byte, _ [][]byte, _ uintptr) { clear(c) }},
		{"cleared, chunk at offset 0", 0, func(c []byte, _ [][]byte, _ uintptr) { clear(c) }},
		{"filled with ones", 5, func(c []byte, _ [][]byte, _ uintptr) {
			for i := range c {
				c[i] = 0xff
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(4096))
			base, _ := p.Bounds()
			var cs [][]byte
			for range 8 {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			free := map[uintptr]bool{}
			for _, i := range []int{0, 1, 3, 5} {
				if i != tt.victim {
					heaptest.MustFree(t, p, cs[i])
					free[heaptest.Addr(cs[i])] = true
				}
			}
			heaptest.MustFree(t, p, cs[tt.victim])
			victim := cs[tt.victim]
			tt.write(victim, cs, base)

			// The checker that slow paths run reads no chunk: the write
			// must come out as ErrCorrupt, not as a panic in the checker.
			p.CheckDue()
			c, err := p.Alloc()
			if c != nil || !errors.Is(err, pool.ErrCorrupt) {
				t.Fatalf("Alloc() after a write into freed chunk %#x = %#x, %v, want nil, %v", heaptest.Addr(victim), heaptest.Addr(c), err, pool.ErrCorrupt)
			}
			heaptest.MustCheck(t, p, "Alloc of a corrupt chunk")
			if st := checkStats(t, p); st.Quarantined != 1 || st.InUse != 4 || st.Free != 3 {
				t.Fatalf("Stats() = Quarantined %d, InUse %d, Free %d, want 1, 4, 3", st.Quarantined, st.InUse, st.Free)
			}
			// The other free chunks come out once each, then fresh ones;
			// the corrupt chunk never.
			for k := range 3 + 4 {
				c := heaptest.MustAlloc(t, p)
				switch a := heaptest.Addr(c); {
				case a == heaptest.Addr(victim):
					t.Fatalf("Alloc() #%d = the quarantined chunk %#x", k, a)
				case k < 3 && !free[a]:
					t.Fatalf("Alloc() #%d = %#x, want one of the 3 other free chunks", k, a)
				case k >= 3 && a < heaptest.Addr(cs[7]):
					t.Fatalf("Alloc() #%d = %#x, want a fresh chunk", k, a)
				}
				delete(free, heaptest.Addr(c))
			}
			if st := checkStats(t, p); st.Quarantined != 1 || st.InUse != 11 || st.Free != 0 {
				t.Errorf("Stats() = Quarantined %d, InUse %d, Free %d, want 1, 11, 0", st.Quarantined, st.InUse, st.Free)
			}
		})
	}
}

// TestQuarantinedFreedAgain frees a chunk that was written after free and
// quarantined: it was freed already, so this is a double free, and the
// counts must not move.
func TestQuarantinedFreedAgain(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	a, b := heaptest.MustAlloc(t, p), heaptest.MustAlloc(t, p)
	heaptest.MustFree(t, p, a)
	a[pool.LinkSize] = 1
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrCorrupt) {
		t.Fatalf("Alloc() after a write into a freed chunk = %v, want %v", err, pool.ErrCorrupt)
	}
	heaptest.MustCheck(t, p, "Alloc of a corrupt chunk")
	before := p.Stats()
	if err := p.Free(a); !errors.Is(err, pool.ErrDoubleFree) {
		t.Errorf("Free(quarantined chunk) = %v, want %v", err, pool.ErrDoubleFree)
	}
	heaptest.MustCheck(t, p, "Free of the quarantined chunk")
	if after := checkStats(t, p); after != before || after.InUse != 1 || after.Quarantined != 1 {
		t.Errorf("Stats() after Free(quarantined chunk) = %+v, want unchanged %+v (InUse 1, Quarantined 1)", after, before)
	}
	heaptest.MustFree(t, p, b)
	if st := checkStats(t, p); st.InUse != 0 || st.Quarantined != 1 {
		t.Errorf("Stats() = InUse %d, Quarantined %d, want 0, 1", st.InUse, st.Quarantined)
	}
}

// TestQuarantineSurvivesTrim checks that a slab holding a quarantined chunk
// is not given back (the chunk is not free) and that the pool stays whole.
func TestQuarantineSurvivesTrim(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64, pool.SlabSize(4096))
	var cs [][]byte
	for range 2 * 64 {
		cs = append(cs, heaptest.MustAlloc(t, p))
	}
	for _, c := range cs[:64] {
		heaptest.MustFree(t, p, c)
	}
	cs[63][pool.LinkSize] = 1 // the last freed: the head
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrCorrupt) {
		t.Fatalf("Alloc() = %v, want %v", err, pool.ErrCorrupt)
	}
	if n, err := p.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() with a quarantined chunk in the only free slab = %d, %v, want 0, nil", n, err)
	}
	heaptest.MustCheck(t, p, "Trim")
	if st := checkStats(t, p); st.Slabs != 2 || st.Quarantined != 1 || st.Free != 63 {
		t.Errorf("Stats() = Slabs %d, Quarantined %d, Free %d, want 2, 1, 63", st.Slabs, st.Quarantined, st.Free)
	}
}

// TestSlowPathCheck breaks the pool's bookkeeping as a bug would: the next
// slow path on which the checker is due must stop the program.
func TestSlowPathCheck(t *testing.T) {
	for _, op := range []string{"Alloc", "Free", "Trim"} {
		t.Run(op, func(t *testing.T) {
			p := heaptest.MustNew(t, pool.New, 64, pool.SlabSize(4096))
			c := heaptest.MustAlloc(t, p)
			heaptest.MustAlloc(t, p)
			p.BreakLiveCount()
			p.CheckDue()
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "pool: invariant broken: ") {
					t.Errorf("%s with broken bookkeeping: recovered %v, want a panic of the checker", op, r)
				}
			}()
			switch op {
			case "Alloc":
				p.Alloc()
			case "Free":
				p.Free(c)
			case "Trim":
				p.Trim()
			}
		})
	}
}

// TestSlowPathCheckLinear checks that the checker runs on the slow paths
// while a pool grows and shrinks, and that its steps stay within the calls
// made, so that checked builds stay linear.
func TestSlowPathCheckLinear(t *testing.T) {
	const n = 1 << 15
	p := heaptest.MustNew(t, pool.New, 16, pool.SlabSize(4096))
	cs := make([][]byte, 0, n)
	for range n {
		c, err := p.Alloc()
		if err != nil {
			t.Fatalf("Alloc() = %v", err)
		}
		cs = append(cs, c)
	}
	_, grown, _ := p.CheckCounts()
	for _, c := range cs {
		if err := p.Free(c); err != nil {
			t.Fatalf("Free() = %v", err)
		}
	}
	calls, runs, work := p.CheckCounts()
	t.Logf("%d slow-path calls: %d checker runs, %d steps", calls, runs, work)
	// Growing to n chunks runs the checker about log2(n) times, and the n
	// frees at least once more.
	if grown < 10 || runs < grown+1 {
		t.Errorf("checker ran %d times while the pool grew to %d chunks and %d in all, want at least 10 and more after", grown, n, runs)
	}
	if work > calls+uint64(n) {
		t.Errorf("checker took %d steps over %d calls: more than the calls, the checks are not linear", work, calls)
	}
	heaptest.MustCheck(t, p, "the frees")
}

// TestOfDoubleFree frees a *T twice through the typed handle: the second
// Free must be refused before it touches the chunk, so that the pool stays
// whole (the next New works and hands out a zeroed T) and a chunk whose
// slab Trim gave back is not written.
func TestOfDoubleFree(t *testing.T) {
	type rec struct{ A, B, C, D int64 }
	t.Run("freed", func(t *testing.T) {
		o, err := pool.NewOf[rec]()
		if err != nil {
			t.Fatalf("NewOf[rec] = %v, want nil", err)
		}
		defer o.Pool().Close()
		a, _ := o.New()
		b, _ := o.New()
		*b = rec{1, 2, 3, 4}
		if err := o.Free(a); err != nil {
			t.Fatalf("Free(a) = %v, want nil", err)
		}
		before := o.Pool().Stats()
		if err := o.Free(a); !errors.Is(err, pool.ErrDoubleFree) {
			t.Fatalf("Free(a) again = %v, want %v", err, pool.ErrDoubleFree)
		}
		heaptest.MustCheck(t, o.Pool(), "a double free of a *T")
		if after := o.Pool().Stats(); after != before {
			t.Fatalf("Stats() after a double free = %+v, want unchanged %+v", after, before)
		}
		c, err := o.New()
		if err != nil || c != a || *c != (rec{}) {
			t.Fatalf("New() after a refused double free = %p (%+v), %v, want %p, zeroed, nil", c, c, err, a)
		}
		if *b != (rec{1, 2, 3, 4}) {
			t.Errorf("the live *T next to it = %+v, want it untouched", *b)
		}
	})
	t.Run("after Trim", func(t *testing.T) {
		o, err := pool.NewOf[[1024]byte](pool.SlabSize(64 << 10))
		if err != nil {
			t.Fatalf("NewOf = %v, want nil", err)
		}
		defer o.Pool().Close()
		var vs []*[1024]byte
		for range 2 * 64 {
			v, err := o.New()
			if err != nil {
				t.Fatalf("New() = %v, want nil", err)
			}
			vs = append(vs, v)
		}
		for _, v := range vs[:64] {
			if err := o.Free(v); err != nil {
				t.Fatalf("Free() = %v, want nil", err)
			}
		}
		if n, err := o.Pool().Trim(); n != 64<<10 || err != nil {
			t.Fatalf("Trim() = %d, %v, want %d, nil", n, err, 64<<10)
		}
		if err := o.Free(vs[5]); !errors.Is(err, pool.ErrDoubleFree) {
			t.Fatalf("Free(a *T of a trimmed slab) = %v, want %v", err, pool.ErrDoubleFree)
		}
		heaptest.MustCheck(t, o.Pool(), "a double free into a trimmed slab")
	})
}

// TestCloseQuarantined closes a pool holding a quarantined chunk: Stats
// afterwards reports an empty pool, not a negative InUse.
func TestCloseQuarantined(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	a := heaptest.MustAlloc(t, p)
	heaptest.MustAlloc(t, p)
	heaptest.MustFree(t, p, a)
	a[pool.LinkSize] = 1
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrCorrupt) {
		t.Fatalf("Alloc() after a write into a freed chunk = %v, want %v", err, pool.ErrCorrupt)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if st := checkStats(t, p); st.InUse != 0 || st.Quarantined != 0 || st.Carved != 0 {
		t.Errorf("Stats() after Close = InUse %d, Quarantined %d, Carved %d, want 0, 0, 0", st.InUse, st.Quarantined, st.Carved)
	}
}

// TestCheckLiveBitOutside marks a chunk past the cursor live: the checker
// of the pool's bookkeeping must find it.
func TestCheckLiveBitOutside(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64, pool.SlabSize(4096))
	heaptest.MustAlloc(t, p)
	p.BreakLiveBit()
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("Check() with a live bit past the cursor = %v, want an error about a bit outside the carved chunks", err)
	}
}
