package rows

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/traces"
)

// withBudget makes the program's budget total bytes for the test.
func withBudget(t *testing.T, total int64) *budget {
	t.Helper()
	b := newBudget(total)
	old := runBudget
	runBudget = func() *budget { return b }
	t.Cleanup(func() { runBudget = old })
	return b
}

// TestBudgetHoldsTheRun: with a budget that holds one row and not two, a
// trace's rows replay at --jobs 3 as they do at --jobs 1, one at a time
// (in this process and in a child), the rows running never holding more
// than the budget; a row whose need alone passes the budget fails at
// once with replay.ErrBudget, at any --jobs.
func TestBudgetHoldsTheRun(t *testing.T) {
	tr, err := traces.Resolve("gen:connection:n=2000,next=4096")
	if err != nil {
		t.Fatal(err)
	}
	specs := []Spec{{Alloc: "best-fit"}, {Alloc: "first-fit"}, {Alloc: "go"}, {Alloc: "buddy"}}
	m := measureTrace(tr, Options{})
	if m.err != nil || m.peakLive < 2000*4096 {
		t.Fatalf("measure: %+v, want the scenario's peak live", m)
	}
	// The go row's need is the largest (twice the others' under the race
	// detector, raceGoNeed): a budget of it and half the least holds no
	// two rows with it, nor more than its need's worth of the others.
	need, least := m.need(Spec{Alloc: "go"}), m.need(specs[0])
	for _, s := range specs {
		least = min(least, m.need(s))
	}
	one := withBudget(t, need+least/2)
	for _, jobs := range []int{1, 3} {
		for _, r := range Run([]traces.Trace{tr}, specs, Options{Touch: true}, jobs, nil)[0].Rows {
			if r.Error != "" || r.PeakLive != m.peakLive {
				t.Errorf("--jobs %d, a budget of one row: %s: %q, peak live %d, want %d", jobs, r.Allocator, r.Error, r.PeakLive, m.peakLive)
			}
		}
	}
	if one.peak > need || one.held != 0 {
		t.Errorf("the rows held %d at once (%d at the end), want at most one row's %d", one.peak, one.held, need)
	}

	withBudget(t, least/2)
	for _, jobs := range []int{1, 2} {
		for _, r := range Run([]traces.Trace{tr}, specs[:2], Options{Touch: true}, jobs, nil)[0].Rows {
			if r.ErrorKind != KindInput || !strings.Contains(r.Error, replay.ErrBudget.Error()) || r.Events != 0 {
				t.Errorf("--jobs %d, a budget below a row: %s: %q (%s), %d events, want ErrBudget before the replay", jobs, r.Allocator, r.Error, r.ErrorKind, r.Events)
			}
			if !errors.Is(r.Err(), replay.ErrSource) {
				t.Errorf("%s: %v does not match ErrSource (exit 2)", r.Allocator, r.Err())
			}
		}
	}
}

// TestHeapHeldToItsShare: a heap in this process that takes more than
// its share (--max-rss lowers it) stops with replay.ErrBudget instead of
// taking the memory other rows reserved.
func TestHeapHeldToItsShare(t *testing.T) {
	tr, err := traces.Resolve("gen:connection:n=20000,next=4096")
	if err != nil {
		t.Fatal(err)
	}
	r := Replay(tr, Spec{Alloc: "best-fit"}, Options{Touch: true, MaxRSS: 8 << 20}, nil)
	if r.ErrorKind != KindInput || !strings.Contains(r.Error, replay.ErrBudget.Error()) || !strings.Contains(r.Error, "8.00 MiB") {
		t.Errorf("a heap over its share: %q (%s), want ErrBudget naming 8 MiB", r.Error, r.ErrorKind)
	}
}

// TestChildGetsDecodedEvents: the trace is decoded once, in this process:
// the go row's child and an isolated heap's child replay its events from
// their standard input, and open no file (the trace's is gone by then).
func TestChildGetsDecodedEvents(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.trace")
	var b strings.Builder
	b.WriteString("# carve trace v1\n")
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&b, "a %d %d\n", i, 16+i%300)
		if i%3 == 0 {
			fmt.Fprintf(&b, "f %d\n", i-1)
		}
	}
	b.WriteString("f 999999\n") // a trace error, with its line
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := traces.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	tr = tr.Spooled()
	here := Replay(tr, Spec{Alloc: "best-fit"}, Options{}, nil) // decodes the trace
	if here.Error != "" {
		t.Fatal(here.Error)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{}, {Isolate: true}} {
		for _, s := range []Spec{{Alloc: "go"}, {Alloc: "best-fit"}} {
			if s.Alloc == "best-fit" && !o.Isolate {
				continue
			}
			r := Replay(tr, s, o, nil)
			if r.Error != "" || r.Measured != "child" || r.Events != here.Events || r.PeakLive != here.PeakLive || r.TraceErrors != 1 ||
				!strings.Contains(r.FirstTraceError, p+":") {
				t.Errorf("%s in a child, the file gone: %q, %d events, peak live %d, trace errors %d (%s); want %d, %d, 1 naming %s",
					s.Label(), r.Error, r.Events, r.PeakLive, r.TraceErrors, r.FirstTraceError, here.Events, here.PeakLive, p)
			}
		}
	}
}
