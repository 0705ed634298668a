package traces

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// cyclesText is a Go program's trace of two collections: four objects,
// two of them main.buf buffers, then a third, and the sweeps' frees.
const cyclesText = `# carve trace v3
l 1 main.buf size=1024 ptrbytes=0
a 1 1024 @1
a 2 100
a 3 1024 @1
a 4 50
G 3 4 1074 2148
f 1
a 5 1024 @1
f 2
a 6 10
G 7 8 1084 2168
f 3
`

// cyclesTrace writes text to a file and resolves it.
func cyclesTrace(t *testing.T, text string) Trace {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cycles.trace")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCycleHeap reads what a Go program's heap held over each of its
// collections: its peak between two marks' ends (before the sweep's
// frees, moved to the end of the mark that proved the objects dead) and
// the bytes of the named objects each mark found.
func TestCycleHeap(t *testing.T) {
	// Frees 1 and 2 (the sweep of the first collection) move to its
	// mark's end, after event 4: the heap peaked at 2198 bytes before
	// it, and the mark found buffer 3 (1024 of main.buf) and 50 bytes.
	// Then 1074 + 1024 + 10 = 2108 before the second mark's end, whose
	// sweep frees buffer 3: it found buffer 5. Object 4 (50 bytes) was
	// born while the first mark ran, object 6 (10) while the second did:
	// black. The first mark visited buffer 3 alone (4 is black): main.buf
	// is all of it; the second visited 4 and buffer 5: half.
	tr := cyclesTrace(t, cyclesText)
	got, err := tr.CycleHeap([]string{"main.buf"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (trace.CycleHeap{Peak: []uint64{2198, 2108}, Moved: []uint64{1024, 1024}, Black: []uint64{50, 10}, Share: []float64{1, 0.5}}); !reflect.DeepEqual(got, want) {
		t.Errorf("CycleHeap(main.buf) = %+v, want %+v", got, want)
	}
	got, err = tr.CycleHeap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (trace.CycleHeap{Peak: []uint64{2198, 2108}, Moved: []uint64{0, 0}, Black: []uint64{50, 10}, Share: []float64{0, 0}}); !reflect.DeepEqual(got, want) {
		t.Errorf("CycleHeap(none) = %+v, want %+v", got, want)
	}
	// At the sweep, no collection is known: nothing to say.
	got, err = tr.FreesAtSweep().CycleHeap(nil)
	if err != nil || got.Peak != nil {
		t.Errorf("CycleHeap at the sweep = %+v, %v; want none", got, err)
	}
}

// TestPlacedKept checks that OpenPlaced's streams, written once and read
// back on every later open, hold what placing the frees anew gives: the
// same events, positions and collections, for each placement.
func TestPlacedKept(t *testing.T) {
	tr := cyclesTrace(t, cyclesText+"a 7 1024 @1\nf 5\n").Spooled()
	type read struct {
		events []trace.Event
		lines  []int64
		cycles []trace.GoCycle
	}
	readAll := func(src trace.Source) read {
		var r read
		buf := make([]trace.Event, 2)
		for {
			n, err := src.Read(buf)
			for i, e := range buf[:n] {
				r.events = append(r.events, e)
				_, line := src.(trace.Positioned).Position(i)
				r.lines = append(r.lines, line)
			}
			if err != nil || n == 0 {
				break
			}
		}
		r.cycles = src.(interface{ MarkEnds() []trace.GoCycle }).MarkEnds()
		return r
	}
	for _, p := range []struct {
		moved                []string
		early, spread, alike bool
	}{{nil, false, true, false}, {nil, false, true, true}, {nil, true, true, true}, {[]string{"main.buf"}, false, true, false}, {[]string{"main.buf"}, true, true, false}, {[]string{"main.buf"}, true, false, false}} {
		// A what-if, or a baseline at a bound, frees every object where
		// it frees the moved ones.
		if mine, other := placements(len(p.moved) > 0 || p.alike, p.early, p.spread); p.spread && (len(p.moved) > 0 || p.alike) && mine != other {
			t.Errorf("%+v: the moved objects freed %v, the others %v", p, mine, other)
		}
		var reads []read
		for range 3 {
			src, closer, err := tr.OpenPlaced(p.moved, p.early, p.spread, p.alike)
			if err != nil {
				t.Fatal(err)
			}
			reads = append(reads, readAll(src))
			closer.Close()
		}
		// Placed anew, as the first open did before it kept the stream.
		src, closer, err := tr.Open()
		if err != nil {
			t.Fatal(err)
		}
		s := tr.spool
		labels := s.labels
		mine, other := placements(len(p.moved) > 0 || p.alike, p.early, p.spread)
		place := func(l uint32) trace.FreePlace {
			if l != 0 && len(p.moved) > 0 && labels.Name(l) == p.moved[0] {
				return mine
			}
			return other
		}
		want := readAll(trace.PlacedFrees(src, trace.MoveFrees(s.decoder(), s.decoder(), s.cycles), place))
		closer.Close()
		if len(want.events) == 0 {
			t.Fatalf("%+v: no events", p)
		}
		for i, got := range reads {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%+v: open %d read\n%+v\nplaced anew:\n%+v", p, i, got, want)
			}
		}
	}
}
