package diff_test

import (
	"os"

	"github.com/carvelab/carve/lab/diff"
)

// Two tables of rows (carve replay --format json), of one trace recorded
// before a change and after it under another name: their rows match by
// allocator.
func ExampleCompareReplays() {
	before := diff.Replay{File: "before.json", Schema: "carve.replay/v4", Rows: []diff.ReplayRow{
		{Trace: "before.trace", Allocator: "go", PeakRSS: 375 << 20, PeakLive: 300 << 20},
		{Trace: "before.trace", Allocator: "glibc", PeakRSS: 320 << 20, PeakLive: 300 << 20},
	}}
	after := diff.Replay{File: "after.json", Schema: "carve.replay/v4", Rows: []diff.ReplayRow{
		{Trace: "after.trace", Allocator: "go", PeakRSS: 274 << 20, PeakLive: 240 << 20},
	}}
	diff.CompareReplays(before, after).WriteText(os.Stdout)
	// Output:
	// A: before.json (carve.replay/v4)
	// B: after.json (carve.replay/v4)
	// rows matched by allocator
	//
	//                         trace  allocator  peak RSS A           B       change     %  peak live A           B      change     %
	//   before.trace -> after.trace         go  375.00 MiB  274.00 MiB  -101.00 MiB  -27%   300.00 MiB  240.00 MiB  -60.00 MiB  -20%
	//
	// only in A:
	//   before.trace glibc
}
