package trace

import (
	"errors"
	"io"
	"slices"
	"testing"
)

// moveModel is MoveFrees's rule written the plain way, over the whole
// trace at once: for each free, the last mark end at or before it, and
// whether the object was allocated before that end.
func moveModel(evs []Event, labels *Labels, cycles []GoCycle, samples []GoHeapSample) ([]Event, []GoCycle, []GoHeapSample) {
	bornAt := map[uint64]int{}
	stack := map[uint64]bool{}
	moved := make([]bool, len(evs))
	dueAt := map[int64][]Event{}
	lastEnd := func(p int) int64 {
		e := int64(-1)
		for _, c := range cycles {
			if c.End <= int64(p) {
				e = c.End
			}
		}
		return e
	}
	for p, e := range evs {
		switch {
		case born(e):
			bornAt[e.ID] = p
			if e.Label != 0 && labels.Name(e.Label) == goStackLabel {
				stack[e.ID] = true
			}
		case e.Op == Free:
			at, ok := bornAt[e.ID]
			if end := lastEnd(p); end >= 0 && ok && int64(at) < end && !stack[e.ID] {
				moved[p] = true
				dueAt[end] = append(dueAt[end], Event{Op: Free, ID: e.ID})
			}
			delete(stack, e.ID)
		}
	}
	var out []Event
	var outCycles []GoCycle
	outSamples := slices.Clone(samples)
	starts := make([]int64, len(cycles))
	for p := 0; p <= len(evs); p++ {
		for i, c := range cycles {
			if c.Start == int64(p) {
				starts[i] = int64(len(out))
			}
		}
		done := map[int64]bool{}
		for i, c := range cycles {
			if c.End == int64(p) {
				if !done[c.End] {
					out = append(out, dueAt[c.End]...)
					done[c.End] = true
				}
				c.Start, c.End = starts[i], int64(len(out))
				outCycles = append(outCycles, c)
			}
		}
		for i, s := range samples {
			if s.Events == int64(p) {
				outSamples[i].Events = int64(len(out))
			}
		}
		if p < len(evs) && !moved[p] {
			out = append(out, evs[p])
		}
	}
	return out, outCycles, outSamples
}

// readMoved reads everything MoveFrees gives for evs.
func readMoved(t *testing.T, evs []Event, labels *Labels, cycles []GoCycle, samples []GoHeapSample) ([]Event, []GoCycle, []GoHeapSample, error) {
	t.Helper()
	main := &sampledSlice{labeledSlice{sliceSource{evs: evs}, labels}, samples}
	lead := LabeledEvents(evs, labels)
	src := MoveFrees(main, lead, cycles)
	var got []Event
	buf := make([]Event, 3) // small batches: a mark end's frees span reads
	for {
		n, err := src.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			m := src.(*freeMover)
			return got, m.MarkEnds(), m.GoHeap(), err
		}
	}
}

// sampledSlice is a labelled slice of events with samples of the Go heap.
type sampledSlice struct {
	labeledSlice
	samples []GoHeapSample
}

func (s *sampledSlice) GoHeap() []GoHeapSample { return s.samples }

func TestMoveFrees(t *testing.T) {
	labels := &Labels{}
	stackL, _ := labels.Intern(Label{Name: goStackLabel})
	typeL, _ := labels.Intern(Label{Name: "myapp.T"})
	a := func(id uint64) Event { return Event{Op: Alloc, ID: id, Size: 16, Label: typeL} }
	st := func(id uint64) Event { return Event{Op: Alloc, ID: id, Size: 8192, Label: stackL} }
	f := func(id uint64) Event { return Event{Op: Free, ID: id} }
	tests := []struct {
		name   string
		evs    []Event
		cycles []GoCycle
		want   []Event
		ends   []int64 // the cycles' ends in the events returned
	}{
		{
			name: "no cycle: nothing moves",
			evs:  []Event{a(1), a(2), f(1), f(2)},
			want: []Event{a(1), a(2), f(1), f(2)},
		},
		{
			name:   "the sweep's frees move to the mark's end",
			evs:    []Event{a(1), a(2), a(3), a(4), f(2), a(5), f(1), f(5)},
			cycles: []GoCycle{{Start: 2, End: 3, Marked: 32}},
			// 5 was born after the mark: its free stays.
			want: []Event{a(1), a(2), a(3), f(2), f(1), a(4), a(5), f(5)},
			ends: []int64{5},
		},
		{
			name:   "frees before the first mark end stay",
			evs:    []Event{a(1), f(1), a(2), a(3), f(2)},
			cycles: []GoCycle{{Start: 2, End: 4}},
			// f(2), right after the end, moves to it: the end is after it.
			want: []Event{a(1), f(1), a(2), a(3), f(2)},
			ends: []int64{5},
		},
		{
			name:   "each free goes to the last mark end before it",
			evs:    []Event{a(1), a(2), a(3), f(1), a(4), a(5), f(4), f(2)},
			cycles: []GoCycle{{Start: 1, End: 3}, {Start: 4, End: 6}},
			want:   []Event{a(1), a(2), a(3), f(1), a(4), a(5), f(4), f(2)},
			ends:   []int64{4, 8},
		},
		{
			name:   "goroutine stacks stay",
			evs:    []Event{st(1), a(2), a(3), f(1), f(2)},
			cycles: []GoCycle{{Start: 1, End: 3}},
			want:   []Event{st(1), a(2), a(3), f(2), f(1)},
			ends:   []int64{4},
		},
		{
			name:   "a mark end at the trace's end",
			evs:    []Event{a(1), a(2)},
			cycles: []GoCycle{{Start: 0, End: 2}},
			want:   []Event{a(1), a(2)},
			ends:   []int64{2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cycles, _, err := readMoved(t, tt.evs, labels, tt.cycles, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events\n got %v\nwant %v", got, tt.want)
			}
			var ends []int64
			for _, c := range cycles {
				ends = append(ends, c.End)
			}
			if !slices.Equal(ends, tt.ends) {
				t.Errorf("cycle ends %v, want %v", ends, tt.ends)
			}
			model, _, _ := moveModel(tt.evs, labels, tt.cycles, nil)
			if !slices.Equal(model, tt.want) {
				t.Errorf("the model gives %v, want %v", model, tt.want)
			}
		})
	}
}

// TestMoveFreesBirthOrder: a trace whose objects are not numbered in
// order of birth is refused, not replayed with wrong frees.
func TestMoveFreesBirthOrder(t *testing.T) {
	evs := []Event{{Op: Alloc, ID: 5, Size: 8}, {Op: Alloc, ID: 3, Size: 8}, {Op: Free, ID: 5}}
	_, _, _, err := readMoved(t, evs, &Labels{}, []GoCycle{{Start: 0, End: 1}}, nil)
	if !errors.Is(err, ErrBirthOrder) {
		t.Errorf("err = %v, want %v", err, ErrBirthOrder)
	}
}

// FuzzMoveFrees checks MoveFrees against the plain model on traces made
// from the input: allocations (some of goroutine stacks), frees of live,
// dead and unknown objects, mark ends, samples.
func FuzzMoveFrees(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 2, 0, 1, 4, 3, 1})
	f.Add([]byte{0, 0, 0, 3, 1, 1, 4, 1, 1, 2, 3, 5, 0, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return
		}
		evs, labels, cycles, samples := fuzzGoTrace(in)
		got, gotCycles, gotSamples, err := readMoved(t, evs, labels, cycles, samples)
		if err != nil {
			t.Fatal(err)
		}
		want, wantCycles, wantSamples := moveModel(evs, labels, cycles, samples)
		if !slices.Equal(got, want) {
			t.Fatalf("events\n got %v\nwant %v\n(from %v, cycles %v)", got, want, evs, cycles)
		}
		if !slices.Equal(gotCycles, wantCycles) {
			t.Fatalf("cycles %v, want %v", gotCycles, wantCycles)
		}
		if !slices.Equal(gotSamples, wantSamples) {
			t.Fatalf("samples %v, want %v", gotSamples, wantSamples)
		}
	})
}

// fuzzGoTrace makes a Go program's trace of in, a byte an event: births
// (some of goroutine stacks, some of type "T"), frees (some unknown,
// some twice), the starts and ends of marks and samples of the Go heap.
func fuzzGoTrace(in []byte) ([]Event, *Labels, []GoCycle, []GoHeapSample) {
	labels := &Labels{}
	stackL, _ := labels.Intern(Label{Name: goStackLabel})
	typeL, _ := labels.Intern(Label{Name: "T"})
	var evs []Event
	var live []uint64
	var cycles []GoCycle
	var samples []GoHeapSample
	start := int64(-1)
	id := uint64(0)
	for i := 0; i < len(in); i++ {
		b := in[i]
		switch b % 6 {
		case 0, 1:
			id++
			e := Event{Op: Alloc, ID: id, Size: uint64(b)}
			switch {
			case b%12 == 1:
				e.Label = stackL
			case b%4 == 0:
				e.Label = typeL
			}
			evs = append(evs, e)
			live = append(live, id)
		case 2, 3:
			if len(live) == 0 {
				evs = append(evs, Event{Op: Free, ID: id + 7}) // unknown
				continue
			}
			k := int(b/6) % len(live)
			evs = append(evs, Event{Op: Free, ID: live[k]})
			if b%12 != 3 { // sometimes freed twice
				live = append(live[:k], live[k+1:]...)
			}
		case 4:
			if start < 0 {
				start = int64(len(evs))
			} else {
				cycles = append(cycles, GoCycle{Start: start, End: int64(len(evs)), Marked: uint64(b)})
				start = -1
			}
		case 5:
			samples = append(samples, GoHeapSample{Events: int64(len(evs)), Objects: uint64(b)})
		}
	}
	return evs, labels, cycles, samples
}
