package trace

import (
	"cmp"
	"io"
	"slices"
	"testing"
)

// earlyModel is PlacedFrees's rule on a slice of moved frees: each free
// of an object born in evs whose label place puts early moves to the
// later of its birth + 1 and the start of the last mark that ended at or
// before it, one it spreads that far and then the fraction spread(ID) of
// the way to where it was, if that is earlier; the frees that move to
// one place come in the order of their IDs, before the event there. It
// returns the events and the cycles at their positions in them.
func earlyModel(evs []Event, cycles []GoCycle, place func(uint32) FreePlace) ([]Event, []GoCycle) {
	type moved struct {
		at int64
		id uint64
	}
	birth := map[uint64]int64{}
	spreads := map[uint64]bool{}
	atStart := map[uint64]bool{}
	var frees []moved
	drop := map[int]bool{}
	for p, e := range evs {
		switch {
		case born(e) && place(e.Label) != FreeLate:
			birth[e.ID] = int64(p)
			spreads[e.ID] = place(e.Label) == FreeSpread
			atStart[e.ID] = place(e.Label) == FreeMarkStart
		case e.Op == Free:
			b, ok := birth[e.ID]
			if !ok {
				continue
			}
			delete(birth, e.ID)
			at, end := b+1, int64(p)
			for _, c := range cycles {
				if c.End <= int64(p) {
					at = max(at, c.Start)
				}
			}
			for _, c := range cycles {
				if c.End > int64(p) {
					end = min(end, c.Start) // the mark whose end it is at
					break
				}
			}
			switch {
			case spreads[e.ID] && at < end:
				at += int64(spread(e.ID) * float64(end-at))
			case atStart[e.ID]:
				at = max(at, end)
			}
			if at < int64(p) {
				frees = append(frees, moved{at, e.ID})
				drop[p] = true
			}
		}
	}
	// An object the events never free, whose free moves early, dies as
	// early as the later of its birth and the last mark's start.
	var last int64
	if len(cycles) > 0 {
		last = cycles[len(cycles)-1].Start
	}
	for id, b := range birth {
		if at := max(b+1, last); !spreads[id] && !atStart[id] && at < int64(len(evs)) {
			frees = append(frees, moved{at, id})
		}
	}
	slices.SortFunc(frees, func(a, b moved) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	var out []Event
	starts := make([]int64, len(cycles))
	ends := make([]int64, len(cycles))
	k := 0
	for p := 0; p <= len(evs); p++ {
		for ; k < len(frees) && frees[k].at <= int64(p); k++ {
			out = append(out, Event{Op: Free, ID: frees[k].id})
		}
		for i, c := range cycles {
			if c.Start == int64(p) {
				starts[i] = int64(len(out))
			}
			if c.End == int64(p) {
				ends[i] = int64(len(out))
			}
		}
		if p < len(evs) && !drop[p] {
			out = append(out, evs[p])
		}
	}
	var outCycles []GoCycle
	for i, c := range cycles {
		c.Start, c.End = starts[i], ends[i]
		outCycles = append(outCycles, c)
	}
	return out, outCycles
}

// readEarly reads everything EarlyFrees gives over MoveFrees for evs,
// in small batches, and MoveFrees's own events and cycles.
func readEarly(t *testing.T, evs []Event, labels *Labels, cycles []GoCycle, place func(uint32) FreePlace) (moved []Event, movedCycles []GoCycle, got []Event, gotCycles []GoCycle, err error) {
	t.Helper()
	moved, movedCycles, _, err = readMoved(t, evs, labels, cycles, nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	mover := func() Source { return MoveFrees(LabeledEvents(evs, labels), LabeledEvents(evs, labels), cycles) }
	src := PlacedFrees(mover(), mover(), place)
	buf := make([]Event, 3)
	for {
		n, rerr := src.Read(buf)
		got = append(got, buf[:n]...)
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			return moved, movedCycles, got, src.(*earlyFreer).MarkEnds(), err
		}
	}
}

func TestEarlyFrees(t *testing.T) {
	labels := &Labels{}
	typeL, _ := labels.Intern(Label{Name: "myapp.T"})
	otherL, _ := labels.Intern(Label{Name: "myapp.U"})
	a := func(id uint64) Event { return Event{Op: Alloc, ID: id, Size: 16, Label: typeL} }
	u := func(id uint64) Event { return Event{Op: Alloc, ID: id, Size: 16, Label: otherL} }
	f := func(id uint64) Event { return Event{Op: Free, ID: id} }
	isT := func(l uint32) bool { return l == typeL }
	tests := []struct {
		name   string
		evs    []Event
		cycles []GoCycle
		want   []Event
		ends   []int64
	}{
		{
			name: "no cycle: a free moves to its object's birth",
			evs:  []Event{a(1), a(2), u(3), f(1), f(3), f(2)},
			want: []Event{a(1), f(1), a(2), f(2), u(3), f(3)},
		},
		{
			// Moved frees: the sweep after cycle 2 (mark 4..6) freed 1
			// and 5; cycle 1's mark started at 2. 1 was born before it:
			// its free moves to 2; 5 was born after: to its birth. 2 and 3
			// are never freed: they die as early as the last mark's
			// start, 4, before 5's birth.
			name:   "to the later of the birth and the previous mark's start",
			evs:    []Event{a(1), a(2), a(3), u(4), a(5), u(6), f(1), f(5), f(6)},
			cycles: []GoCycle{{Start: 2, End: 3}, {Start: 4, End: 6}},
			want:   []Event{a(1), a(2), f(1), a(3), u(4), f(2), f(3), a(5), f(5), u(6), f(6)},
			ends:   []int64{4, 11},
		},
		{
			name:   "a free in the first cycle's sweep moves to the birth",
			evs:    []Event{a(1), u(2), a(3), f(1), f(2), f(3)},
			cycles: []GoCycle{{Start: 1, End: 3}},
			want:   []Event{a(1), f(1), u(2), a(3), f(3), f(2)},
			ends:   []int64{6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, got, gotCycles, err := readEarly(t, tt.evs, labels, tt.cycles, early(isT))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events\n got %v\nwant %v", got, tt.want)
			}
			var ends []int64
			for _, c := range gotCycles {
				ends = append(ends, c.End)
			}
			if !slices.Equal(ends, tt.ends) {
				t.Errorf("ends %v, want %v", ends, tt.ends)
			}
		})
	}
}

func FuzzEarlyFrees(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 2, 0, 1, 4, 3, 1})
	f.Add([]byte{0, 4, 0, 8, 4, 2, 14, 4, 12, 4, 26, 20, 4, 2, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return
		}
		evs, labels, cycles, _ := fuzzGoTrace(in)
		typeL, _ := labels.Intern(Label{Name: "T"})
		// T's frees early (or, for an input of odd length, at the start
		// of the mark that proved them dead), the unlabelled objects'
		// spread, the stacks' where they are.
		mine := FreeEarly
		if len(in)%2 == 1 {
			mine = FreeMarkStart
		}
		place := func(l uint32) FreePlace {
			switch l {
			case typeL:
				return mine
			case 0:
				return FreeSpread
			}
			return FreeLate
		}
		moved, movedCycles, got, gotCycles, err := readEarly(t, evs, labels, cycles, place)
		if err != nil {
			t.Fatal(err)
		}
		want, wantCycles := earlyModel(moved, movedCycles, place)
		if !slices.Equal(got, want) {
			t.Fatalf("events\n got %v\nwant %v\n(moved %v, cycles %v)", got, want, moved, movedCycles)
		}
		if !slices.Equal(gotCycles, wantCycles) {
			t.Fatalf("cycles %v, want %v (moved %v)", gotCycles, wantCycles, movedCycles)
		}
	})
}

// early places the frees of the labels match accepts early, the others
// late: EarlyFrees's rule.
func early(match func(uint32) bool) func(uint32) FreePlace {
	return func(l uint32) FreePlace {
		if match(l) {
			return FreeEarly
		}
		return FreeLate
	}
}

// TestSpreadFrees spreads the frees of many objects that the sweep after
// the second of two cycles freed: each lands in its span, from the start
// of the first mark (or its birth) to the end of the second, before the
// object's free was, and together they spread over it evenly (a mean
// fraction of a half), the same on every read.
func TestSpreadFrees(t *testing.T) {
	labels := &Labels{}
	const n = 4000
	var evs []Event
	for i := range uint64(n) {
		evs = append(evs, Event{Op: Alloc, ID: i + 1, Size: 16})
	}
	// Mark 1 runs over events n..n+10, mark 2 over 3n..3n+10; fillers
	// in between.
	for i := range uint64(3*n + 10 - n) {
		evs = append(evs, Event{Op: Alloc, ID: n + 1 + i, Size: 8})
	}
	cycles := []GoCycle{{Start: n, End: n + 10}, {Start: 3 * n, End: 3*n + 10}}
	for i := range uint64(n) {
		evs = append(evs, Event{Op: Free, ID: i + 1})
	}
	spreadAll := func(uint32) FreePlace { return FreeSpread }
	_, _, got, _, err := readEarly(t, evs, labels, cycles, spreadAll)
	if err != nil {
		t.Fatal(err)
	}
	_, _, again, _, err := readEarly(t, evs, labels, cycles, spreadAll)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, again) {
		t.Fatal("two reads spread the frees differently")
	}
	// Once moved, the free of object j is the event at 3n+9+j, at the
	// end of mark 2, which started at 3n: its span is [n, 3n+9+j), and
	// the object died before 3n. A free returned is placed before main's
	// event at the count of main's events returned before it: those of
	// the other objects and the allocations.
	var sum float64
	seen := 0
	var mainPos int64
	for _, e := range got {
		if e.Op != Free || e.ID > n {
			mainPos++
			continue
		}
		const dead = 3 * n
		if mainPos < n || mainPos >= dead {
			t.Fatalf("the free of %d before main's event %d: outside [%d, %d), where it died", e.ID, mainPos, n, dead)
		}
		sum += float64(mainPos-n) / float64(dead-n)
		seen++
	}
	if seen != n {
		t.Fatalf("%d frees of the first objects, want %d", seen, n)
	}
	if mean := sum / n; mean < 0.47 || mean > 0.53 {
		t.Errorf("the frees' mean place in their span %.3f, want about 0.5", mean)
	}
}
