package trace

import (
	"cmp"
	"io"
	"slices"
	"testing"
)

// earlyModel is EarlyFrees's rule on a slice of moved frees: each free of
// a matched object born in evs moves to the later of its birth + 1 and
// the start of the last mark that ended at or before it, if that is
// earlier; the frees that move to one place come in the order of their
// IDs, before the event there. It returns the events and the cycles at
// their positions in them.
func earlyModel(evs []Event, cycles []GoCycle, match func(uint32) bool) ([]Event, []GoCycle) {
	type moved struct {
		at int64
		id uint64
	}
	birth := map[uint64]int64{}
	var frees []moved
	drop := map[int]bool{}
	for p, e := range evs {
		switch {
		case born(e) && match(e.Label):
			birth[e.ID] = int64(p)
		case e.Op == Free:
			b, ok := birth[e.ID]
			if !ok {
				continue
			}
			delete(birth, e.ID)
			at := b + 1
			for _, c := range cycles {
				if c.End <= int64(p) {
					at = max(at, c.Start)
				}
			}
			if at < int64(p) {
				frees = append(frees, moved{at, e.ID})
				drop[p] = true
			}
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
func readEarly(t *testing.T, evs []Event, labels *Labels, cycles []GoCycle, match func(uint32) bool) (moved []Event, movedCycles []GoCycle, got []Event, gotCycles []GoCycle, err error) {
	t.Helper()
	moved, movedCycles, _, err = readMoved(t, evs, labels, cycles, nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	mover := func() Source { return MoveFrees(LabeledEvents(evs, labels), LabeledEvents(evs, labels), cycles) }
	src := EarlyFrees(mover(), mover(), match)
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
			// its free moves to 2; 5 was born after: to its birth.
			name:   "to the later of the birth and the previous mark's start",
			evs:    []Event{a(1), a(2), a(3), u(4), a(5), u(6), f(1), f(5), f(6)},
			cycles: []GoCycle{{Start: 2, End: 3}, {Start: 4, End: 6}},
			want:   []Event{a(1), a(2), f(1), a(3), u(4), a(5), f(5), u(6), f(6)},
			ends:   []int64{4, 9},
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
			_, _, got, gotCycles, err := readEarly(t, tt.evs, labels, tt.cycles, isT)
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
		match := func(l uint32) bool { return l == typeL }
		moved, movedCycles, got, gotCycles, err := readEarly(t, evs, labels, cycles, match)
		if err != nil {
			t.Fatal(err)
		}
		want, wantCycles := earlyModel(moved, movedCycles, match)
		if !slices.Equal(got, want) {
			t.Fatalf("events\n got %v\nwant %v\n(moved %v, cycles %v)", got, want, moved, movedCycles)
		}
		if !slices.Equal(gotCycles, wantCycles) {
			t.Fatalf("cycles %v, want %v (moved %v)", gotCycles, wantCycles, movedCycles)
		}
	})
}
