package summary

import (
	"slices"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// TestSummaryMarked: a summary of moved frees counts, at each mark's end,
// the bytes the mark found reachable, and its peak live is that of the
// objects not yet known dead; without the move, live holds the garbage.
func TestSummaryMarked(t *testing.T) {
	a := func(id, size uint64) trace.Event { return trace.Event{Op: trace.Alloc, ID: id, Size: size} }
	f := func(id uint64) trace.Event { return trace.Event{Op: trace.Free, ID: id} }
	// 1 (100 B) stays; 2 and 3 (1000 B each) die before the first mark,
	// 4 before the second; the sweeps free them after each mark's end.
	evs := []trace.Event{a(1, 100), a(2, 1000), a(3, 1000), a(4, 1000), f(2), f(3), a(5, 10), f(4)}
	cycles := []trace.GoCycle{{Start: 3, End: 4, Marked: 1100}, {Start: 6, End: 7, Marked: 110}}
	s, err := OfSource(trace.MoveFrees(trace.Events(evs), trace.Events(evs), cycles))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, c := range s.Cycles {
		got = append(got, c.Live)
	}
	if want := []uint64{1100, 110}; !slices.Equal(got, want) || s.PeakMarked != 1100 {
		t.Errorf("marked heaps %v (peak %d), want %v (peak 1100)", got, s.PeakMarked, want)
	}
	if s.PeakLive != 3100 {
		t.Errorf("peak live %d, want 3100 (all four born before the first mark ended)", s.PeakLive)
	}
	plain, err := OfSource(trace.Events(evs))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Cycles != nil || plain.PeakLive != 3100 {
		t.Errorf("without the move: cycles %v, peak live %d", plain.Cycles, plain.PeakLive)
	}
}
