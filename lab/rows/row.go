package rows

import (
	"errors"
	"math"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/traces"
)

// Schema names the version of the JSON of a table of rows (carve replay
// --format json). Version 2 has one headline for every row, peak RSS /
// peak live; a real malloc's footprint with its start-up figure
// subtracted; and fragmentation at the end only where live memory is
// still a meaningful share of its peak. Version 3 adds, for a Go
// program's trace that records its collections, the marked heap after
// each and its peak, the headline over it, and how the go row collected;
// such a trace's frees are moved to the marks that proved the objects
// dead, so its peak live is of the bytes not yet known dead (see
// docs/json.md). Version 4 adds the recorded program's own RSS
// (Program), where the trace holds it, and the go row's difference from
// it (Row.VsProgram).
const Schema = "carve.replay/v4"

// Row is one allocator's replay of one trace, as every format prints it.
// The JSON field names are part of the versioned schema (Schema): fields
// are added, never renamed.
type Row struct {
	Trace     string `json:"trace"`
	Allocator string `json:"allocator"`
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"` // one of the Kind constants
	// Measured says how: "in process" (footprint from the allocator's
	// statistics, resident from mincore of its memory) or "child" (its own
	// process: resident is RSS above the child's baseline).
	Measured string `json:"measured,omitempty"`
	// GOGC is the go row's GOGC, set in its child.
	GOGC int `json:"gogc,omitempty"`

	// PeakRSS is the headline's numerator: the most resident memory the
	// row's allocator took. For a row in a process of its own, that
	// process's peak resident memory above its baseline: the larger of the
	// kernel's high-water mark and the samples taken at the peaks of live
	// memory. For carve's heaps in this process, their resident pages plus
	// their side metadata. RSSRatio = PeakRSS / PeakLive is the headline,
	// the same measure for every row.
	PeakRSS  int64   `json:"peak_rss"`
	RSSRatio float64 `json:"peak_rss_over_peak_live"`
	// RSSNote says why a row that replayed has no headline: its RSS
	// never rose a page above its baseline (NoRSS), the trace's live
	// bytes fitting in pages its process held already. RSSRatio is 0 then.
	RSSNote string `json:"rss_note,omitempty"`
	// Best marks the row with the lowest headline of its table.
	Best bool `json:"best,omitempty"`

	Events              int64    `json:"events"`
	Ops                 int64    `json:"ops"`
	NsPerOp             float64  `json:"ns_per_op"`
	TimedOps            int64    `json:"timed_ops"`
	OffCPU              int64    `json:"off_cpu_ns"`
	TraceErrors         int64    `json:"trace_errors"`
	FirstTraceError     string   `json:"first_trace_error,omitempty"`
	PeakLive            int64    `json:"peak_live"`
	PeakFootprint       int64    `json:"peak_footprint"`
	PeakFootprintAt     int64    `json:"peak_footprint_at_event"`
	PeakResident        int64    `json:"peak_resident"`
	PeakUsed            int64    `json:"peak_used"`
	FootprintAtPeakLive int64    `json:"footprint_at_peak_live"`
	LiveAtPeakFootprint int64    `json:"live_at_peak_footprint"`
	AvgRatio            float64  `json:"jw1_avg_footprint_over_live"`
	RatioAtPeakLive     float64  `json:"jw2_footprint_over_live_at_peak_live"`
	RatioAtPeakFP       float64  `json:"jw3_footprint_over_live_at_peak_footprint"`
	PeakRatio           float64  `json:"jw4_peak_footprint_over_peak_live"`
	Fragmentation       *float64 `json:"fragmentation_percent_at_end"` // null when live is 0 at the end
	Live                int64    `json:"live_at_end"`
	Internal            int64    `json:"internal_at_end"`
	External            int64    `json:"external_at_end"`
	Phases              []Phase  `json:"phases,omitempty"`
	// PeakRSSHWM is, for a row measured in a process of its own, the
	// kernel's high-water mark of its RSS above its baseline (VmHWM, reset
	// when the baseline was taken). StartupFootprint and StartupRSS are,
	// for a real malloc, its own footprint statistic and its process's
	// anonymous RSS at the baseline (after its first request,
	// free(malloc(1)), and before event 0): what the row's footprint and
	// resident figures are measured above.
	PeakRSSHWM       int64 `json:"peak_rss_above_baseline,omitempty"`
	StartupFootprint int64 `json:"startup_footprint,omitempty"`
	StartupRSS       int64 `json:"startup_rss,omitempty"`
	// Stable reports a row printed for --stable: the figures that vary
	// from run to run are left out (zero here, absent from the JSON), and
	// Unstable names them by their JSON keys (see ForStable).
	Stable   bool   `json:"stable,omitempty"`
	Unstable string `json:"unstable_left_out,omitempty"`
	// Series is the replay over time, for the report: points of the
	// largest live memory and footprint of the events each stands for,
	// and the resident bytes sampled.
	Series []replay.Point `json:"series,omitempty"`

	// For a Go program's trace that records its collections, its frees
	// moved to the ends of the marks that proved the objects dead
	// (trace.MoveFrees): PeakMarked is the largest marked heap, the live
	// bytes at a mark's end (PeakLive then counts the bytes allocated and
	// not yet known dead), MarkedRatio = PeakRSS / PeakMarked the
	// headline over it, and Cycles the marked heap after each collection.
	// Collected says how the go row collected: replay.ByProgram,
	// ByPacing or ByGOGC.
	PeakMarked  int64   `json:"peak_marked_heap,omitempty"`
	MarkedRatio float64 `json:"peak_rss_over_peak_marked_heap,omitempty"`
	Cycles      []Cycle `json:"cycles,omitempty"`
	Collected   string  `json:"collected,omitempty"`
	// Frees says where a Go program's trace had its frees
	// (traces.Frees.Name): "mark" or "sweep"; "" for another trace.
	Frees string `json:"frees,omitempty"`
	// Routed is, for a row with routes in front of its allocator, what
	// they held (replay.Routed): the same for the same routes in front of
	// any row that replays the same events (a go row with routes, on a
	// trace that records the program's collections, has its frees placed
	// for a paced heap: see Spec.paced), but what they held idle at the
	// row's own peak footprint. Its figures are in the row's too.
	Routed *replay.Routed `json:"routed,omitempty"`
	// Mesh is, for a row whose heap meshes, what meshing did (see
	// replay.Mesh).
	Mesh *replay.Mesh `json:"mesh,omitempty"`
	// VsProgram is, for the go row that collected where the program did,
	// its peak RSS against the recorded program's own (Table.Program),
	// when the trace holds that.
	VsProgram *VsProgram `json:"vs_program,omitempty"`
}

// Cycle is one collection of a Go program in a row's replay: the event
// after which its mark ended, the marked heap there as the trace's
// objects count it, and the runtime's own count and the goal it set.
type Cycle struct {
	Event         int64  `json:"event"`
	Marked        int64  `json:"marked_heap"`
	RuntimeMarked uint64 `json:"runtime_marked_heap"`
	Goal          uint64 `json:"goal"`
}

// Phase is the state at the end of one phase of a generated trace.
type Phase struct {
	Name      string `json:"name"`
	EndEvent  int64  `json:"end_event"`
	Live      int64  `json:"live"`
	Footprint int64  `json:"footprint"`
	Resident  int64  `json:"resident"`
}

// The kinds of a row's error, as the JSON's error_kind names them.
const (
	KindInput       = "input"       // the trace could not be read, or this machine cannot hold it
	KindCheck       = "check"       // a violation, or a strict trace error
	KindAllocator   = "allocator"   // the allocator failed (exhausted, say): a result, not a failure of carve's
	KindUnavailable = "unavailable" // the allocator is not on this machine
)

// ErrorKind classifies the error a replay stopped with.
func ErrorKind(err error) string {
	var te *replay.TraceError
	var v *replay.Violation
	switch {
	case errors.Is(err, replay.ErrSource), errors.Is(err, replay.ErrBudget), errors.Is(err, ErrUnrouted):
		return KindInput
	case errors.As(err, &v), errors.As(err, &te):
		return KindCheck
	case errors.Is(err, ErrUnavailable):
		return KindUnavailable
	}
	return KindAllocator
}

// MinTimedOps is the fewest timed calls a row's time per call rests on
// for the tables to show it.
const MinTimedOps = 1000

// Timed reports whether the row's time per call rests on enough calls
// to show (MinTimedOps).
func (rw Row) Timed() bool { return rw.TimedOps >= MinTimedOps }

// fill completes a row from a replay of t's result, or its error.
func (rw Row) fill(t traces.Trace, res replay.Result, err error) Row {
	if err != nil {
		rw.Error, rw.ErrorKind = err.Error(), ErrorKind(err)
		return rw
	}
	rw.Events, rw.Ops, rw.NsPerOp, rw.TimedOps, rw.OffCPU, rw.TraceErrors = res.Events, res.Ops, res.NsPerOp, res.TimedOps, res.OffCPU, res.TraceErrors
	rw.PeakLive, rw.PeakFootprint, rw.PeakResident, rw.PeakUsed = res.PeakLive, res.PeakFootprint, res.PeakResident, res.PeakUsed
	rw.PeakFootprintAt = res.PeakFootprintAt
	rw.FootprintAtPeakLive, rw.LiveAtPeakFootprint = res.FootprintAtPeakLive, res.LiveAtPeakFootprint
	rw.AvgRatio, rw.RatioAtPeakLive, rw.RatioAtPeakFP, rw.PeakRatio = res.AvgRatio, res.RatioAtPeakLive, res.RatioAtPeakFootprint, res.PeakRatio
	rw.Live, rw.Internal, rw.External = res.Live, res.Internal, res.External
	rw.Series = res.Series
	if !math.IsNaN(res.Fragmentation) {
		f := res.Fragmentation
		rw.Fragmentation = &f
	}
	if res.FirstTraceError != nil {
		rw.FirstTraceError = res.FirstTraceError.Error()
	}
	for i, m := range res.Marks {
		rw.Phases = append(rw.Phases, Phase{Name: t.Phases[i].Name, EndEvent: m.Event, Live: m.Live, Footprint: m.Stats.Footprint, Resident: m.Stats.Resident})
	}
	rw.PeakMarked = res.PeakMarked
	rw.Mesh = res.Mesh
	for _, c := range res.Cycles {
		rw.Cycles = append(rw.Cycles, Cycle{Event: c.Event, Marked: c.Live, RuntimeMarked: c.Marked, Goal: c.Goal})
	}
	rw.setRSS(0)
	return rw
}

// NoRSS is the RSSNote of a row whose RSS never rose above its baseline.
const NoRSS = "its RSS never rose a page above its baseline: the trace's live bytes fit in pages its process held before the replay"

// setRSS sets the headline from the samples' peak and hwm, the kernel's
// high-water mark (0 when the row has none). A mark above every sample is
// drawn at the sample nearest below it, so that the series' highest point
// is the table's peak.
func (rw *Row) setRSS(hwm int64) {
	rw.PeakRSSHWM = hwm
	rw.PeakRSS = max(rw.PeakResident, hwm)
	rw.RSSRatio, rw.RSSNote, rw.MarkedRatio = 0, "", 0
	if rw.PeakLive > 0 {
		rw.RSSRatio = float64(rw.PeakRSS) / float64(rw.PeakLive)
	}
	if rw.PeakMarked > 0 {
		rw.MarkedRatio = float64(rw.PeakRSS) / float64(rw.PeakMarked)
	}
	if rw.PeakLive > 0 && rw.PeakRSS == 0 && rw.Error == "" {
		rw.RSSNote = NoRSS
	}
	top := -1
	for i, p := range rw.Series {
		if top < 0 || p.Resident > rw.Series[top].Resident {
			top = i
		}
	}
	if top >= 0 && rw.Series[top].Resident < rw.PeakRSS {
		rw.Series[top].Resident = rw.PeakRSS
	}
}

// MarkBest marks the row of rs with the lowest headline (peak RSS / peak
// live) among those that replayed the trace, and returns its index, or -1.
func MarkBest(rs []Row) int {
	best := -1
	for i, r := range rs {
		if r.Error == "" && r.RSSRatio > 0 && (best < 0 || r.RSSRatio < rs[best].RSSRatio) {
			best = i
		}
	}
	for i := range rs {
		rs[i].Best = i == best
	}
	return best
}

// Growth returns how much the footprint grew in the last phase beyond
// the most it held at the end of an earlier phase, and the phase's name,
// or ok false when the row has fewer than two phases. The most, not the
// phase before: a heap that gave memory back in between and takes it
// again has not grown (the connection scenario's scratch buffers freed,
// then as many bytes of new buffers).
func (rw Row) Growth() (name string, grew int64, ok bool) {
	fp := func(p Phase) int64 { return p.Footprint }
	n := len(rw.Phases)
	if n < 2 {
		return "", 0, false
	}
	return rw.Phases[n-1].Name, rw.Phases[n-1].Footprint - maxBefore(rw.Phases, n-1, fp), true
}

// maxBefore returns the most of f over phases[:i].
func maxBefore(phases []Phase, i int, f func(Phase) int64) int64 {
	m := f(phases[0])
	for _, p := range phases[1:i] {
		m = max(m, f(p))
	}
	return m
}

// ResidentGrowth is Growth in resident bytes.
func (rw Row) ResidentGrowth() (grew int64, ok bool) {
	n := len(rw.Phases)
	if n < 2 {
		return 0, false
	}
	return rw.Phases[n-1].Resident - maxBefore(rw.Phases, n-1, func(p Phase) int64 { return p.Resident }), true
}

// Table is the rows of one trace, in the order of the specs.
type Table struct {
	Trace traces.Trace
	Rows  []Row
}

// ErrCheck is matched (errors.Is) by the error of a row whose replay
// failed a check: a violation, or a trace error under Options.Strict.
var ErrCheck = errors.New("a check failed")

// Err returns the row's failure as an error, or nil: errors.Is matches
// replay.ErrSource for a trace that could not be read, ErrCheck for a
// failed check, ErrUnavailable for an allocator this machine lacks.
func (rw Row) Err() error {
	if rw.Error == "" {
		return nil
	}
	return &rowError{kind: rw.ErrorKind, msg: rw.Allocator + " on " + rw.Trace + ": " + rw.Error}
}

type rowError struct{ kind, msg string }

func (e *rowError) Error() string { return e.msg }

func (e *rowError) Is(target error) bool {
	switch e.kind {
	case KindInput:
		return target == replay.ErrSource
	case KindCheck:
		return target == ErrCheck
	case KindUnavailable:
		return target == ErrUnavailable
	}
	return false
}
