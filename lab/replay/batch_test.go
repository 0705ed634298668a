package replay

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/trace"
)

// batched drives a carve heap as a BatchAllocator: blocks by slot.
type batched struct {
	a      Allocator
	blocks [][]byte
	fail   int // Apply fails at this event of the replay when > 0
	seen   int
}

func (b *batched) Apply(evs []trace.Event) (int64, error) {
	t := time.Now()
	for _, e := range evs {
		b.seen++
		if b.seen == b.fail {
			return int64(time.Since(t)), errors.New("injected failure")
		}
		for int(e.ID) >= len(b.blocks) {
			b.blocks = append(b.blocks, nil)
		}
		var err error
		switch e.Op {
		case trace.Alloc, trace.Calloc, trace.Memalign:
			if b.blocks[e.ID] != nil {
				return 0, errors.New("slot in use")
			}
			b.blocks[e.ID], err = b.a.Alloc(int(e.Size), int(e.Align))
		case trace.Free:
			err = b.a.Free(b.blocks[e.ID])
			b.blocks[e.ID] = nil
		case trace.Realloc:
			b.blocks[e.ID], err = b.a.Realloc(b.blocks[e.ID], int(e.Size))
		}
		if err != nil {
			return 0, err
		}
	}
	return int64(time.Since(t)), nil
}

func (b *batched) Stats() (Stats, error) {
	st := b.a.Stats()
	return Stats{Footprint: st.Footprint, Resident: st.Resident}, nil
}

func (b *batched) Close() error { return b.a.Close() }

// TestRunBatch replays the carving scenario through first fit both ways:
// event by event (Run) and in batches (RunBatch). Live memory, the marks
// and the peaks of live agree exactly; the batch replay's peak footprint
// is a sample, at most Run's.
func TestRunBatch(t *testing.T) {
	const n = 3000
	evs := generate(t, "carving", trace.Args{"n": n})
	// A trace error in the middle: a free of an object never allocated.
	evs = append(evs[:100:100], append([]trace.Event{free(1 << 50)}, evs[100:]...)...)
	marks := []int64{2 * n, 3*n + 1, 4*n + 1, 5*n + 1}
	want, err := Run(trace.Events(evs), newAlloc(t, "first-fit"), Options{Marks: marks})
	if err != nil {
		t.Fatal(err)
	}
	got, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit")}, Options{Marks: marks})
	if err != nil {
		t.Fatal(err)
	}
	if got.Events != want.Events || got.Ops != want.Ops || got.TraceErrors != 1 || got.PeakLive != want.PeakLive || got.Live != want.Live {
		t.Errorf("batch: events %d, ops %d, trace errors %d, peak live %d, live %d; want %d, %d, 1, %d, %d",
			got.Events, got.Ops, got.TraceErrors, got.PeakLive, got.Live, want.Events, want.Ops, want.PeakLive, want.Live)
	}
	if len(got.Marks) != len(want.Marks) {
		t.Fatalf("batch: %d marks, want %d", len(got.Marks), len(want.Marks))
	}
	for i := range got.Marks {
		if g, w := got.Marks[i], want.Marks[i]; g.Event != w.Event || g.Live != w.Live || g.Stats.Footprint != w.Stats.Footprint {
			t.Errorf("mark %d: event %d, live %d, footprint %d; want %d, %d, %d", i, g.Event, g.Live, g.Stats.Footprint, w.Event, w.Live, w.Stats.Footprint)
		}
	}
	if got.PeakFootprint > want.PeakFootprint || got.FootprintAtPeakLive != want.FootprintAtPeakLive {
		t.Errorf("batch: peak footprint %d, at peak live %d; want <= %d, and %d", got.PeakFootprint, got.FootprintAtPeakLive, want.PeakFootprint, want.FootprintAtPeakLive)
	}
	if got.NsPerOp <= 0 || got.AvgRatio < 1 {
		t.Errorf("batch: ns/op %v, avg ratio %v", got.NsPerOp, got.AvgRatio)
	}

	// Strict: the trace error stops the replay.
	if _, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit")}, Options{Strict: true}); !errors.As(err, new(*TraceError)) {
		t.Errorf("strict: %v, want a *TraceError", err)
	}
	// A failing allocator stops it with the allocator's error.
	if res, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit"), fail: 5000}, Options{}); err == nil || !strings.Contains(err.Error(), "injected failure") || res.Events >= int64(len(evs)) {
		t.Errorf("failure: %v after %d events, want the injected failure before the end", err, res.Events)
	}
	if _, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit")}, Options{Marks: []int64{5, 5}}); err == nil {
		t.Error("bad marks accepted")
	}
}
