package rows

import (
	"fmt"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
)

// Program is the recorded program's own resident memory, as carve record
// sampled it while the program ran (trace.ProcessRSS): the figure the
// rows' peak RSS stand beside.
type Program struct {
	Trace string `json:"trace"`
	// Of names the process sampled (trace.RSSTestBinary, RSSProgram or
	// RSSValgrind: "test", "program", "valgrind"); OfText says it in
	// words ("the test binary").
	Of     string `json:"of"`
	OfText string `json:"of_text"`
	// PeakHWM is the kernel's high-water mark of the process's RSS
	// (VmHWM) at the last sample: the run's peak, to the last sample's
	// time. PeakRSS is the largest VmRSS sampled.
	PeakHWM int64 `json:"peak_hwm"`
	PeakRSS int64 `json:"peak_rss"`
	// Samples counts the samples; Placed says they are placed among the
	// events (by a Go execution trace's clock), where a trace without a
	// clock holds the run's peak only.
	Samples int  `json:"samples"`
	Placed  bool `json:"placed"`
	// PeakHeapObjects is, for a Go program, the largest heap the
	// runtime's /memory/classes/heap/objects:bytes reported in the trace
	// (trace.GoHeapSample.Objects): its live objects and its dead ones
	// not yet swept.
	PeakHeapObjects int64 `json:"peak_heap_objects,omitempty"`
}

// Program returns what the trace of t holds of the recorded program's
// own RSS, or nil for a trace without it (one not recorded by carve
// record, recorded from a service, or by an older carve).
func (t Table) Program() *Program {
	samples := t.Trace.ProcessRSS()
	if len(samples) == 0 {
		return nil
	}
	rss, hwm, _ := trace.RSSPeak(samples)
	p := &Program{
		Trace:   t.Trace.Label,
		Of:      samples[0].Of,
		OfText:  trace.RSSOfText(samples[0].Of),
		PeakHWM: int64(hwm),
		PeakRSS: int64(rss),
		Samples: len(samples),
		Placed:  samples[0].Event >= 0,
	}
	for _, s := range t.Trace.GoHeap() {
		p.PeakHeapObjects = max(p.PeakHeapObjects, int64(s.Objects))
	}
	return p
}

// VsProgram is a go row's peak RSS against the program's own (Program),
// split where the trace allows: the heap's objects, the runtime's own
// metric in the row's process against the program's, and the rest of
// the process. Each is the row's figure less the program's, at their
// peaks.
type VsProgram struct {
	// RSS is the row's PeakRSS less the program's PeakHWM.
	RSS int64 `json:"rss_bytes"`
	// HeapObjects is the row's PeakUsed (its heap's objects at their
	// peak) less the program's PeakHeapObjects; Rest is RSS less it:
	// the runtime's own memory, stacks, free pages kept, and what the
	// program held besides its heap (its binary, its libraries, the
	// trace's own buffers while it was recorded), which the row, measured
	// above its process's baseline, leaves out.
	HeapObjects int64 `json:"heap_objects_bytes"`
	Rest        int64 `json:"rest_bytes"`
	// Heap says the split is there: the trace has the heap's metric.
	Heap bool `json:"heap_split"`
}

// vsProgram sets, on each row of t that replays the Go heap where the
// program collected, its difference from the program's RSS.
func (t Table) vsProgram() {
	p := t.Program()
	if p == nil {
		return
	}
	for i, r := range t.Rows {
		if r.Error != "" || r.Collected != replay.ByProgram || r.PeakRSS == 0 {
			continue
		}
		v := &VsProgram{RSS: r.PeakRSS - p.PeakHWM}
		if p.PeakHeapObjects > 0 && r.PeakUsed > 0 {
			v.Heap = true
			v.HeapObjects = r.PeakUsed - p.PeakHeapObjects
			v.Rest = v.RSS - v.HeapObjects
		}
		t.Rows[i].VsProgram = v
	}
}

// String says what p is, in a sentence's words: "117.92 MiB at its
// peak (VmHWM of the test binary, 32 samples taken while carve recorded
// it)".
func (p *Program) String() string {
	how := fmt.Sprintf("%d samples taken while carve recorded it", p.Samples)
	if !p.Placed {
		how = "its peak, taken while carve recorded it"
	}
	return fmt.Sprintf("%s at its peak (VmHWM of %s, %s)", size.Format(p.PeakHWM), p.OfText, how)
}

// Text says how the row r stands against the program p: "peak RSS
// 1.16 MiB below the program's (-1.0%); its heap's objects 2.59 MiB above the
// program's at their peaks (110.79 MiB, 108.20 MiB), the rest of its
// process 3.75 MiB below (the runtime's own memory, ...)".
func (v *VsProgram) Text(p *Program, r Row) string {
	s := fmt.Sprintf("peak RSS %s the program's (%+.1f%%)", aboveBelow(v.RSS), 100*float64(v.RSS)/float64(p.PeakHWM))
	if v.Heap {
		s += fmt.Sprintf("; its heap's objects %s the program's at their peaks (%s, %s), the rest of its process %s (the runtime's own memory, stacks, free pages, and what the program held besides its heap, the binary and the recorder's buffers: the row is measured above its process's baseline)",
			aboveBelow(v.HeapObjects), size.Format(r.PeakUsed), size.Format(p.PeakHeapObjects), aboveBelow(v.Rest))
	}
	return s
}

// aboveBelow writes a difference: "2.59 MiB above", "3.75 MiB below".
func aboveBelow(n int64) string {
	if n < 0 {
		return size.Format(-n) + " below"
	}
	return size.Format(n) + " above"
}
