package fit_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
)

// The placement tests of first fit's and next fit's index: two heaps of
// the same policy and options, one searching its index and one walking
// its free list (fit.LinearScan, the reference), are given the same
// operations, and every block must land at the same offset in both, every
// failure must fail in both, and their statistics must agree.

// A pair input is a configuration byte and a string of operations.
//
// cfg: policy = first fit for even cfg, next fit for odd; trimming =
// cfg/2 % 4 (default; threshold 0 and no pad; never; 64 KiB threshold and
// 16 KiB pad); limit = 1 MiB when cfg/8 % 4 == 3 (the heap fills up and
// requests fail), else 64 MiB.
//
// Each operation is a kind byte, kind%8, and its arguments:
//
//	0, 1, 2  Alloc(size, align)        size: 3 bytes, align: 1 byte
//	3        Free(live[idx])           idx: 1 byte
//	4        Free(live[idx][:cut:cut]) idx, cut: 1 byte each
//	5        Realloc(live[idx], size)
//	6        Trim
//	7        Alloc(size, 1) of a small size (1 byte: 0 to 2 KiB)
//
// Sizes and alignments decode as in FuzzFit (see heaptest.Ops).

// pairRun holds the two heaps and the blocks they handed out, in the same
// order: live[i] in the indexed heap is ref[i] in the reference.
type pairRun struct {
	t         testing.TB
	h, ref    *fit.Heap
	live, rlv [][]byte
	*heaptest.Ops
	every   int   // Check both heaps every so many operations
	maxFree int64 // the most free blocks compare saw
}

func newPair(t testing.TB, cfg byte, ops []byte, every int) *pairRun {
	p := fit.FirstFit
	if cfg%2 == 1 {
		p = fit.NextFit
	}
	var opts []fit.Option
	switch cfg / 2 % 4 {
	case 1:
		opts = append(opts, fit.TrimThreshold(0), fit.TopPad(0))
	case 2:
		opts = append(opts, fit.TrimThreshold(-1))
	case 3:
		opts = append(opts, fit.TrimThreshold(64<<10), fit.TopPad(16<<10))
	}
	if cfg/8%4 == 3 {
		opts = append(opts, fit.Limit(1<<20))
	} else {
		opts = append(opts, fit.Limit(64<<20))
	}
	r := &pairRun{t: t, Ops: heaptest.NewOps(ops), every: every}
	r.h = mustNew(t, p, opts...)
	r.ref = mustNew(t, p, append(opts, fit.LinearScan())...)
	return r
}

// off returns b's offset in h.
func off(h *fit.Heap, b []byte) int {
	lo, _ := h.Bounds()
	return int(heaptest.Addr(b) - lo)
}

// same checks that the two heaps answered an operation alike.
func (r *pairRun) same(op string, b, rb []byte, err, rerr error) {
	r.t.Helper()
	switch {
	case (err == nil) != (rerr == nil) || err != nil && !errors.Is(err, fit.ErrExhausted):
		r.t.Fatalf("%s at byte %d: indexed %v, linear %v; want both nil or both %v", op, r.Pos(), err, rerr, fit.ErrExhausted)
	case err == nil && off(r.h, b) != off(r.ref, rb):
		r.t.Fatalf("%s at byte %d: indexed heap put the block at offset %d, the linear scan at %d\nindexed: %s\nlinear:  %s",
			op, r.Pos(), off(r.h, b), off(r.ref, rb), layout(r.h, nil), layout(r.ref, nil))
	}
}

// run runs every operation on both heaps and compares them after each.
func (r *pairRun) run() {
	for n := 0; r.More(); n++ {
		switch kind := r.Byte(); kind % 8 {
		case 0, 1, 2:
			r.alloc(r.Size(), r.Align())
		case 3:
			if len(r.live) > 0 {
				r.free(int(r.Byte())%len(r.live), -1)
			}
		case 4:
			if len(r.live) > 0 {
				r.free(int(r.Byte())%len(r.live), int(r.Byte()))
			}
		case 5:
			if len(r.live) > 0 {
				r.realloc(int(r.Byte())%len(r.live), r.Size())
			}
		case 6:
			r.trim()
		case 7:
			r.alloc(int(r.Byte())*8, 1)
		}
		r.compare(n)
	}
	r.compare(-1)
	for len(r.live) > 0 { // free in a scrambled order: more pushes, more merges
		r.free(len(r.live)*7/13, -1)
	}
	r.compare(-1)
}

func (r *pairRun) alloc(size, align int) {
	r.t.Helper()
	b, err := r.h.Alloc(size, align)
	rb, rerr := r.ref.Alloc(size, align)
	r.same("Alloc("+strconv.Itoa(size)+", "+strconv.Itoa(align)+")", b, rb, err, rerr)
	if err == nil {
		r.live, r.rlv = append(r.live, b), append(r.rlv, rb)
	}
}

// free frees live[j], through a slice cut to cut bytes if cut >= 0, and
// moves the last block to index j.
func (r *pairRun) free(j, cut int) {
	r.t.Helper()
	b, rb := r.live[j], r.rlv[j]
	if cut >= 0 {
		cut = min(cut, len(b))
		b, rb = b[:cut:cut], rb[:cut:cut]
	}
	if err, rerr := r.h.Free(b), r.ref.Free(rb); err != nil || rerr != nil {
		r.t.Fatalf("Free at byte %d = %v (indexed), %v (linear), want nil", r.Pos(), err, rerr)
	}
	last := len(r.live) - 1
	r.live[j], r.rlv[j] = r.live[last], r.rlv[last]
	r.live, r.rlv = r.live[:last], r.rlv[:last]
}

func (r *pairRun) realloc(j, size int) {
	r.t.Helper()
	b, err := r.h.Realloc(r.live[j], size)
	rb, rerr := r.ref.Realloc(r.rlv[j], size)
	r.same("Realloc(live["+strconv.Itoa(j)+"], "+strconv.Itoa(size)+")", b, rb, err, rerr)
	if err == nil {
		r.live[j], r.rlv[j] = b, rb
	}
}

func (r *pairRun) trim() {
	r.t.Helper()
	n, err := r.h.Trim()
	rn, rerr := r.ref.Trim()
	if n != rn || err != nil || rerr != nil {
		r.t.Fatalf("Trim at byte %d = %d, %v (indexed), %d, %v (linear); want the same bytes, nil", r.Pos(), n, err, rn, rerr)
	}
}

// compare checks that the heaps agree on their footprints; every 32nd
// step (or every step r.every, if less) on all their statistics; every
// r.every steps that both pass Check and have the same blocks. At the end
// (n < 0) it checks everything.
func (r *pairRun) compare(n int) {
	r.t.Helper()
	if fp, rfp := r.h.Footprint(), r.ref.Footprint(); fp != rfp {
		r.t.Fatalf("after byte %d: Footprint() = %d (indexed), %d (linear); want the same", r.Pos(), fp, rfp)
	}
	if n >= 0 && n%min(r.every, 32) != 0 {
		return
	}
	st, rst := r.h.Stats(), r.ref.Stats() // a mincore each: not at every step
	st.Metadata, rst.Metadata = 0, 0      // the index costs what the list does not
	st.Resident, rst.Resident = 0, 0
	if st != rst {
		r.t.Fatalf("after byte %d: Stats() = %+v (indexed), %+v (linear); want the same", r.Pos(), st, rst)
	}
	r.maxFree = max(r.maxFree, st.FreeBlocks)
	if n >= 0 && n%r.every != 0 {
		return
	}
	mustCheck(r.t, r.h, "byte "+strconv.Itoa(r.Pos()))
	mustCheck(r.t, r.ref, "byte "+strconv.Itoa(r.Pos())+" (linear)")
	if l, rl := layout(r.h, nil), layout(r.ref, nil); l != rl {
		r.t.Fatalf("after byte %d: blocks differ\nindexed: %s\nlinear:  %s", r.Pos(), l, rl)
	}
}

// pairOps returns n random operations in phases that grow, churn and
// shrink the heap, so that the free list gets long, its index is
// renumbered, grows and shrinks, and requests of every size meet it.
func pairOps(r *rand.Rand, n int) []byte {
	var ops []byte
	size := func() []byte {
		if r.IntN(4) == 0 { // up to 1 MiB, as FuzzFit
			return []byte{byte(r.IntN(21)), byte(r.Uint32()), byte(r.Uint32())}
		}
		return []byte{byte(6 + r.IntN(7)), byte(r.Uint32()), byte(r.Uint32())} // 0 to 8 KiB
	}
	for len(ops) < n {
		free := []int{1, 4, 8}[r.IntN(3)] // in 10: the phase's share of frees
		for range 50 + r.IntN(400) {
			switch k := r.IntN(10); {
			case k < free:
				if r.IntN(8) == 0 {
					ops = append(ops, 4, byte(r.Uint32()), byte(r.Uint32()))
				} else {
					ops = append(ops, 3, byte(r.Uint32()))
				}
			case k == 9 && r.IntN(2) == 0:
				ops = append(ops, 5, byte(r.Uint32()))
				ops = append(ops, size()...)
			case k == 9 && r.IntN(20) == 0:
				ops = append(ops, 6)
			case r.IntN(3) == 0:
				ops = append(ops, 7, byte(r.Uint32()))
			default:
				ops = append(ops, byte(r.IntN(3)))
				ops = append(ops, size()...)
				ops = append(ops, byte(r.Uint32()))
			}
		}
	}
	return ops
}

// TestIndexPlacement replays random operations through indexed and
// linear heaps of first fit and next fit in every configuration, and
// requires the same placement: a few seeds by default, many with
// CARVE_LONG=1.
func TestIndexPlacement(t *testing.T) {
	seeds, n := 1, 20000
	if testing.Short() {
		seeds, n = 1, 5000
	}
	if os.Getenv("CARVE_LONG") == "1" {
		seeds, n = 8, 100000
	}
	for seed := range seeds {
		for cfg := range 32 {
			name := strconv.Itoa(seed) + "/cfg=" + strconv.Itoa(cfg)
			if !t.Run(name, func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(uint64(seed), uint64(cfg)))
				ops := pairOps(rnd, n)
				r := newPair(t, byte(cfg), ops, 256)
				r.run()
				t.Logf("%d bytes of operations, up to %d free blocks", len(ops), r.maxFree)
			}) {
				break
			}
		}
	}
}

// TestIndexRenumber drives heaps of both policies through every case of
// renumbering the index's keys: its slots grow, stay (the keys move down
// in place) and shrink (when a push finds the keys run out, and when a
// hole taken leaves too few blocks), with next fit's rover on a block, on
// the key of a block taken away, or before every block. All holes have one size, so
// next fit's choice among them is its rover's alone. Both heaps are
// checked against each other after every step.
func TestIndexRenumber(t *testing.T) {
	for _, cfg := range []byte{0, 1} {
		t.Run(fit.Policies()[cfg].String(), func(t *testing.T) {
			r := newPair(t, cfg, nil, 1)
			var grew, stayed, shrank, shrankOnTake bool
			step := func(f func()) {
				t.Helper()
				slots, next, _ := r.h.IndexState()
				blocks := len(r.live)
				f()
				r.compare(0)
				switch s, n, _ := r.h.IndexState(); {
				case s > slots:
					grew = true
				case s < slots:
					shrank = true
					shrankOnTake = shrankOnTake || len(r.live) > blocks // an Alloc took a hole
				case n < next:
					stayed = true
				}
			}
			// 200 holes of 320 bytes between 16-byte blocks: 200 pushes.
			for range 200 {
				step(func() { r.alloc(312, 1) })
				step(func() { r.alloc(16, 1) })
			}
			for j := 199; j >= 0; j-- {
				step(func() { r.free(2*j, -1) }) // the last block moves to 2j: a separator
			}
			// Take 190 holes back (their keys leave, the rover stays),
			// then churn: free one, take one, over and over, so that the
			// keys run out while few blocks are free.
			for range 190 {
				step(func() { r.alloc(312, 1) })
			}
			for i := range 3000 {
				j := len(r.live) - 1 - i%97
				if len(r.h.Blocks()) > 0 && i%5 == 0 {
					step(func() { r.alloc(312, 1) })
					continue
				}
				if b, _ := r.h.UsableSize(r.live[j]); b == 312 {
					step(func() { r.free(j, -1) })
				}
			}
			if !grew || !stayed || !shrank || !shrankOnTake {
				t.Errorf("renumbering: grew %t, stayed %t, shrank %t (when a hole was taken: %t); want every case", grew, stayed, shrank, shrankOnTake)
			}
			r.run()
		})
	}
}

// FuzzIndexPlacement is TestIndexPlacement's body over fuzzed inputs of
// up to 4096 bytes, both heaps checked every 16 operations (Check walks
// every block: at every step a long input would take seconds).
//
//	go test -run '^$' -fuzz FuzzIndexPlacement -fuzztime 2m ./fit
func FuzzIndexPlacement(f *testing.F) {
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, cfg := range []byte{0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 30, 31} {
		f.Add(cfg, pairOps(rnd, 2000))
	}
	f.Fuzz(func(t *testing.T, cfg byte, ops []byte) {
		if len(ops) > 4096 {
			ops = ops[:4096]
		}
		newPair(t, cfg, ops, 16).run()
	})
}
