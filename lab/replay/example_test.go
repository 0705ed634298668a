package replay_test

import (
	"fmt"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
)

// Replay a tiny trace through best fit: two objects, one resized, one
// freed.
func Example() {
	a, err := replay.New("best-fit")
	if err != nil {
		panic(err)
	}
	defer a.Close()
	evs := []trace.Event{
		{Op: trace.Alloc, ID: 1, Size: 100},
		{Op: trace.Memalign, ID: 2, Size: 64, Align: 64},
		{Op: trace.Realloc, ID: 1, Size: 300},
		{Op: trace.Free, ID: 2},
		{Op: trace.Free, ID: 9}, // a trace error: counted and skipped
	}
	res, err := replay.Run(trace.Events(evs), a, replay.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("events:", res.Events, "trace errors:", res.TraceErrors)
	fmt.Println("peak live:", res.PeakLive, "live at the end:", res.Live)
	fmt.Println("footprint at least peak live:", res.PeakFootprint >= res.PeakLive)
	fmt.Println(res.FirstTraceError)
	// Output:
	// events: 5 trace errors: 1
	// peak live: 364 live at the end: 300
	// footprint at least peak live: true
	// replay: trace error at event 5 (f 9): free of object 9, never allocated
}
