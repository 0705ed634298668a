package replay

import (
	"math"
	"slices"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// collecting is an allocator that notes where the replay asks it to
// collect.
type collecting struct {
	Allocator
	live func() int64
	at   []int64 // the live memory at each Collect
}

func (c *collecting) Collect(trace.GoCycle) { c.at = append(c.at, c.live()) }

// TestCycles: a replay of moved frees books the marked heap at each
// mark's end, and a Collector collects there, after the frees moved to it.
func TestCycles(t *testing.T) {
	// 1 (100 B) stays; 2 and 3 die before the first mark, 4 before the
	// second; the sweeps free them after each mark's end.
	evs := []trace.Event{alloc(1, 100), alloc(2, 1000), alloc(3, 1000), alloc(4, 1000), free(2), free(3), alloc(5, 10), free(4)}
	cycles := []trace.GoCycle{{Start: 3, End: 4, Marked: 1100, Goal: 2200}, {Start: 6, End: 7, Marked: 110, Goal: 4 << 20}}
	for _, moved := range []bool{true, false} {
		src := trace.Events(evs)
		if moved {
			src = trace.MoveFrees(trace.Events(evs), trace.Events(evs), cycles)
		}
		c := &collecting{Allocator: newAlloc(t, "best-fit")}
		var l *ledger
		c.live = func() int64 { return l.live }
		r := &replayer{a: c, clock: newCallClock()}
		l, _ = newLedger(Options{}, r, true)
		l.collector = c
		r.l = l
		res, err := l.replay(src)
		if err != nil {
			t.Fatal(err)
		}
		if !moved {
			if res.Cycles != nil || res.PeakMarked != 0 || c.at != nil {
				t.Errorf("frees at the sweep: cycles %v, peak marked %d, collections %v, want none", res.Cycles, res.PeakMarked, c.at)
			}
			continue
		}
		want := []Cycle{{Event: 6, Live: 1100, Marked: 1100, Goal: 2200}, {Event: 8, Live: 110, Marked: 110, Goal: 4 << 20}}
		if !slices.Equal(res.Cycles, want) || res.PeakMarked != 1100 {
			t.Errorf("cycles %v (peak marked %d), want %v (1100)", res.Cycles, res.PeakMarked, want)
		}
		if !slices.Equal(c.at, []int64{1100, 110}) {
			t.Errorf("collections with %v live, want after the moved frees: [1100 110]", c.at)
		}
	}
}

// TestProgramGoHeap: the Go heap of NewProgramGoHeap collects at the
// program's mark ends, after the frees moved there, so that its objects
// are then the marked heap; NewGoHeap's pacer, which last collected with
// everything live, still holds the garbage.
func TestProgramGoHeap(t *testing.T) {
	const n, mib = 64, 1 << 20
	var evs []trace.Event
	for i := uint64(1); i <= n; i++ {
		evs = append(evs, alloc(i, mib))
	}
	for i := uint64(2); i <= n; i++ {
		evs = append(evs, free(i)) // the sweep of the cycle that ended at n
	}
	evs = append(evs, alloc(n+1, 16))
	cycles := []trace.GoCycle{{Start: n - 4, End: n, Marked: mib}}
	used := func(a Allocator) int64 {
		t.Helper()
		defer a.Close()
		src := trace.MoveFrees(trace.Events(evs), trace.Events(evs), cycles)
		res, err := Run(src, a, Options{Marks: []int64{int64(len(evs))}, Touch: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Cycles) != 1 || res.Cycles[0].Live != mib {
			t.Fatalf("cycles %v, want one of 1 MiB live", res.Cycles)
		}
		return res.Marks[0].Stats.Used
	}
	if u := used(NewProgramGoHeap()); u > 3*mib {
		t.Errorf("the program's collections: %d B of objects after the mark's end, want about 1 MiB", u)
	}
	if u := used(NewGoHeap(100)); u < 32*mib {
		t.Errorf("the pacer's collections: %d B of objects after the mark's end, want the garbage still held", u)
	}
}

// TestPacedGoHeap: a paced heap takes its goal from each of the
// program's collections: the program's marked heap less the moved bytes
// its mark found, times how far the program's heap grew over its marked
// heap before the next mark ended (or, without that, its goal over its
// marked heap), and less the black bytes of its mark times the moved
// objects' share of what the mark visited; before the first, 1 +
// GOGC/100.
func TestPacedGoHeap(t *testing.T) {
	const mib = 1 << 20
	peaks := []uint64{0, 140 * mib} // the program's heap grew to 140 MiB after its first mark
	g := NewPacedGoHeap(100, trace.CycleHeap{Peak: peaks, Moved: []uint64{30 * mib, 0, 200 * mib},
		Black: []uint64{10 * mib}, Share: []float64{0.5}}).(*goHeap)
	defer g.Close()
	if g.goal < 4*mib {
		t.Errorf("first goal %d, want at least the runtime's 4 MiB", g.goal)
	}
	g.Collect(trace.GoCycle{Marked: 100 * mib, Goal: 150 * mib})
	// 100 MiB marked, 30 of them moved, and 10 allocated black by a
	// mark half of whose objects moved: 65 MiB; the heap grew to 140.
	if math.Abs(g.ratio-1.4) > 1e-9 || g.goal != 91*mib || g.headroom != 26*mib {
		t.Errorf("ratio %g, goal %d, headroom %d; want 1.4, 91 MiB, 26 MiB", g.ratio, g.goal, g.headroom)
	}
	g.Collect(trace.GoCycle{Marked: 0, Goal: 8 * mib}) // no marked heap: no ratio
	if math.Abs(g.ratio-1.4) > 1e-9 || g.goal != 91*mib {
		t.Errorf("ratio %g, goal %d after a cycle without a marked heap, want them kept", g.ratio, g.goal)
	}
	// No peak known for the cycle after: the program's goal over its
	// marked heap; all of it moved: the runtime's minimum heap.
	g.Collect(trace.GoCycle{Marked: 100 * mib, Goal: 200 * mib})
	if g.ratio != 2 || g.goal != 4*mib {
		t.Errorf("with all the marked heap moved: ratio %g, goal %d, want 2 and the runtime's minimum", g.ratio, g.goal)
	}
	// At other GOGCs the ratio's excess over 1 scales.
	h := NewPacedGoHeap(50, trace.CycleHeap{}).(*goHeap)
	defer h.Close()
	h.Collect(trace.GoCycle{Marked: 100 * mib, Goal: 200 * mib})
	if h.ratio != 1.5 || h.goal != 150*mib {
		t.Errorf("at GOGC 50, a program's ratio of 2: ratio %g, goal %d; want 1.5, 150 MiB", h.ratio, h.goal)
	}
}

// TestCollectThrough: the wrappers in front of the Go heap pass the
// program's collections to it.
func TestCollectThrough(t *testing.T) {
	g := NewPacedGoHeap(100, trace.CycleHeap{})
	defer g.Close()
	pooled, err := WithPool(64, g)
	if err != nil {
		t.Fatal(err)
	}
	routed, err := WithRoutes([]Route{{Label: "T"}}, pooled)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := routed.(Collector)
	if !ok {
		t.Fatal("a routed heap is not a Collector")
	}
	c.Collect(trace.GoCycle{Marked: 10 << 20, Goal: 25 << 20})
	if r := g.(*goHeap).ratio; r != 2.5 {
		t.Errorf("the heap behind took ratio %g, want 2.5", r)
	}
}
