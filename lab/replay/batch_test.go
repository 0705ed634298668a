package replay

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
)

// batched drives a carve heap as a BatchAllocator: blocks by slot, each
// written whole as Options.Touch has Run write them, with the calls Run
// makes for each event.
type batched struct {
	a      Allocator
	blocks [][]byte
	fail   int // Apply fails at this event of the replay when > 0
	seen   int
	ends   []int // the events applied when each Stats was called
}

func (b *batched) Apply(evs []trace.Event) (nanos, offCPU int64, err error) {
	t := time.Now()
	for _, e := range evs {
		b.seen++
		if b.seen == b.fail {
			return int64(time.Since(t)), 0, errors.New("injected failure")
		}
		for int(e.ID) >= len(b.blocks) {
			b.blocks = append(b.blocks, nil)
		}
		var err error
		switch e.Op {
		case trace.Alloc, trace.Calloc, trace.Memalign:
			if b.blocks[e.ID] != nil {
				return 0, 0, errors.New("slot in use")
			}
			align := int(e.Align)
			if e.Op == trace.Calloc {
				align = 0
			}
			b.blocks[e.ID], err = b.a.Alloc(int(e.Size), align)
			clear(b.blocks[e.ID])
		case trace.Free:
			err = b.a.Free(b.blocks[e.ID])
			b.blocks[e.ID] = nil
		case trace.Realloc:
			old := len(b.blocks[e.ID])
			b.blocks[e.ID], err = b.a.Realloc(b.blocks[e.ID], int(e.Size))
			if err == nil && len(b.blocks[e.ID]) > old {
				clear(b.blocks[e.ID][old:])
			}
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return int64(time.Since(t)), 0, nil
}

func (b *batched) Stats() (carve.Stats, error) {
	b.ends = append(b.ends, b.seen)
	return b.a.Stats(), nil
}

func (b *batched) Close() error { return b.a.Close() }

// untimed returns res without the figures that differ between two
// replays of the same trace through the same heap: the timings and the
// number of samples.
func untimed(res Result) Result {
	res.TimedOps, res.Nanos, res.OffCPU, res.NsPerOp, res.Samples = 0, 0, 0, 0, 0
	if math.IsNaN(res.Fragmentation) {
		res.Fragmentation = -1 // NaN is not equal to itself
	}
	return res
}

// TestRunBatchSameAsRun replays traces through carve's heaps both ways:
// event by event (Run) and in batches (RunBatch) of one event each, both
// sampling after every event. The two engines keep one ledger, so every
// figure but the timings and the number of samples must be the same.
func TestRunBatchSameAsRun(t *testing.T) {
	const n = 2000
	carving := generate(t, "carving", gen.Args{"n": n})
	// Trace errors in the middle: a free of an object never allocated,
	// and a double free.
	carving = append(carving[:100:100], append([]trace.Event{free(1 << 50), free(carving[5].ID)}, carving[100:]...)...)
	mixed := []trace.Event{
		alloc(1, 100), alloc(2, 0), memalign(3, 200, 256), calloc(4, 10, 80),
		realloc(1, 5000), realloc(4, 8), alloc(5, 64), free(2), realloc(5, 64),
		free(3), alloc(1<<40, 24), free(1 << 40), alloc(6, 100000), free(6), free(6), realloc(9, 1),
	}
	for _, tc := range []struct {
		name  string
		evs   []trace.Event
		marks []int64
	}{
		{"carving", carving, []int64{2 * n, 3*n + 1, 4*n + 1, 5*n + 1}},
		{"mixed", mixed, []int64{3, 9}},
	} {
		for _, heap := range []string{"first-fit", "next-fit", "best-fit", "ao-first-fit", "buddy", "buddy-header", "sizeclass"} {
			t.Run(tc.name+"/"+heap, func(t *testing.T) {
				opt := Options{SampleEvery: 1, Marks: tc.marks, Touch: true, Series: 8}
				want, err := Run(trace.Events(tc.evs), newAlloc(t, heap), opt)
				if err != nil {
					t.Fatal(err)
				}
				got, err := RunBatch(trace.Events(tc.evs), &batched{a: newAlloc(t, heap)}, opt)
				if err != nil {
					t.Fatal(err)
				}
				if want.TraceErrors == 0 || want.PeakFootprintAt == 0 || len(want.Marks) != len(tc.marks) {
					t.Fatalf("Run: %d trace errors, peak footprint at %d, %d marks: the test needs all three", want.TraceErrors, want.PeakFootprintAt, len(want.Marks))
				}
				if g, w := untimed(got), untimed(want); !reflect.DeepEqual(g, w) {
					t.Errorf("RunBatch differs from Run:\n got %+v\nwant %+v", g, w)
				}
			})
		}
	}
}

// TestRunBatch replays the carving scenario through first fit both ways,
// RunBatch at its default batch size: the exact figures (events, calls,
// trace errors, live memory, the marks' live memory) agree; the batch
// replay's peak footprint is a sample, at most Run's, read at the end of
// the batch that holds Run's peak.
func TestRunBatch(t *testing.T) {
	const n = 3000
	evs := generate(t, "carving", gen.Args{"n": n})
	marks := []int64{2 * n, 3*n + 1, 4*n + 1, 5*n + 1}
	want, err := Run(trace.Events(evs), newAlloc(t, "first-fit"), Options{Marks: marks})
	if err != nil {
		t.Fatal(err)
	}
	ba := &batched{a: newAlloc(t, "first-fit")}
	got, err := RunBatch(trace.Events(evs), ba, Options{Marks: marks})
	if err != nil {
		t.Fatal(err)
	}
	if got.Events != want.Events || got.Ops != want.Ops || got.TraceErrors != want.TraceErrors || got.PeakLive != want.PeakLive || got.Live != want.Live {
		t.Errorf("batch: events %d, ops %d, trace errors %d, peak live %d, live %d; want %d, %d, %d, %d, %d",
			got.Events, got.Ops, got.TraceErrors, got.PeakLive, got.Live, want.Events, want.Ops, want.TraceErrors, want.PeakLive, want.Live)
	}
	if len(got.Marks) != len(want.Marks) {
		t.Fatalf("batch: %d marks, want %d", len(got.Marks), len(want.Marks))
	}
	for i := range got.Marks {
		if g, w := got.Marks[i], want.Marks[i]; g.Event != w.Event || g.Live != w.Live {
			t.Errorf("mark %d: event %d, live %d; want %d, %d", i, g.Event, g.Live, w.Event, w.Live)
		}
	}
	if got.PeakFootprint > want.PeakFootprint {
		t.Errorf("batch: peak footprint %d, want at most Run's %d", got.PeakFootprint, want.PeakFootprint)
	}
	// The trace has no trace error: the events applied are the events read.
	start := 0
	for _, end := range ba.ends {
		if int64(end) >= want.PeakFootprintAt {
			break
		}
		start = end
	}
	if got.PeakFootprintAt <= int64(start) || got.PeakFootprintAt < want.PeakFootprintAt || got.PeakFootprintAt-int64(start) > maxBatch {
		t.Errorf("batch: peak footprint at event %d, want the end of the batch after event %d that holds Run's %d", got.PeakFootprintAt, start, want.PeakFootprintAt)
	}
	if got.NsPerOp <= 0 || got.AvgRatio < 1 {
		t.Errorf("batch: ns/op %v, avg ratio %v", got.NsPerOp, got.AvgRatio)
	}
}

// TestRunBatchErrors: a strict trace error, a failing allocator and bad
// marks stop a batch replay.
func TestRunBatchErrors(t *testing.T) {
	evs := generate(t, "carving", gen.Args{"n": 3000})
	evs = append(evs[:100:100], append([]trace.Event{free(1 << 50)}, evs[100:]...)...)
	if _, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit")}, Options{Strict: true}); !errors.As(err, new(*TraceError)) {
		t.Errorf("strict: %v, want a *TraceError", err)
	}
	if res, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit"), fail: 5000}, Options{}); err == nil || !strings.Contains(err.Error(), "injected failure") || res.Events >= int64(len(evs)) {
		t.Errorf("failure: %v after %d events, want the injected failure before the end", err, res.Events)
	}
	if _, err := RunBatch(trace.Events(evs), &batched{a: newAlloc(t, "first-fit")}, Options{Marks: []int64{5, 5}}); err == nil {
		t.Error("bad marks accepted")
	}
}
