package record

import (
	"fmt"
	"io"
	"os"
	"time"

	xtrace "golang.org/x/exp/trace"

	"github.com/carvelab/carve/lab/trace"
)

// startTraceSTW is the name golang.org/x/exp/trace gives the range of
// the stop-the-world pause in which the execution trace starts (the
// runtime's reason "start trace").
const startTraceSTW = "stop-the-world (start trace)"

// goTraceHead is what the first generation of a Go execution trace tells
// before it is converted.
type goTraceHead struct {
	startPause time.Duration // the pause that started it, 0 if none is recorded
}

// readGoHead reads the first generation of the Go execution trace at
// path for the length of the stop-the-world pause in which it started,
// a generation bounded by maxGen (trace.ReaderOptions.MaxGoGeneration).
// It buffers that generation whole (x/exp/trace does): run it on a trace
// that package trace's reader has read.
//
// The runtime records that pause from the moment tracing is on, the world
// already stopped, to the moment the world starts again: inside it, with
// GODEBUG=traceallocfree=1, the runtime writes an event for every span,
// object and goroutine stack of the heap. The time it took to stop the
// world is before it, and not in the trace.
func readGoHead(path string, maxGen int64) (h goTraceHead, err error) {
	f, err := os.Open(path)
	if err != nil {
		return h, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	defer func() {
		if p := recover(); p != nil { // x/exp/trace on a malformed trace
			err = fmt.Errorf("record: %s: %w: x/exp/trace failed: %v", path, trace.ErrGoTrace, p)
		}
	}()
	bound := trace.NewGoBound(f, maxGen) // x/exp/trace holds the generation before its first event
	r, err := xtrace.NewReader(bound)
	if err := bound.Err(); err != nil {
		return h, fmt.Errorf("record: %s: %w", path, err)
	}
	if err != nil {
		return h, fmt.Errorf("record: %s: %w: %w", path, trace.ErrGoTrace, err)
	}
	syncs := 0
	var begin xtrace.Time
	begun := false
	for {
		e, err := r.ReadEvent()
		if err := bound.Err(); err != nil {
			return h, fmt.Errorf("record: %s: %w", path, err)
		}
		if err == io.EOF {
			return h, nil
		}
		if err != nil {
			return h, fmt.Errorf("record: %s: %w: %w", path, trace.ErrGoTrace, err)
		}
		switch e.Kind() {
		case xtrace.EventSync:
			if syncs++; syncs > 1 {
				return h, nil // the second generation: the pause would have ended in the first
			}
		case xtrace.EventRangeBegin:
			if e.Range().Name == startTraceSTW {
				begin, begun = e.Time(), true
			}
		case xtrace.EventRangeEnd:
			if e.Range().Name == startTraceSTW && begun {
				h.startPause = e.Time().Sub(begin)
				return h, nil
			}
		}
	}
}
