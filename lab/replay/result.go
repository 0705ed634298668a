package replay

import (
	"fmt"
	"sync/atomic"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
)

// Options tune a replay. The zero value checks every block, counts trace
// errors and samples every 4096 events.
type Options struct {
	// Strict makes the first trace error fatal: Run returns a *TraceError.
	Strict bool
	// NoCheck turns off the correctness checks (alignment, length,
	// overlap, the pattern written into blocks).
	NoCheck bool
	// SampleEvery is the number of events between two calls of the
	// allocator's Stats (0: 4096; 1: after every event, exact but slow).
	// For RunBatch it is also the most events one batch holds (at most
	// 4096).
	SampleEvery int
	// Marks are event numbers (counting from 1, increasing) after which
	// the replay takes a sample and keeps it in Result.Marks: the ends of
	// a trace's phases (gen.Generator.Phases), to tell how much the heap
	// grew in each.
	Marks []int64
	// Touch (Run only) writes every byte of every block the allocator
	// hands out (and of the part a realloc adds), untimed, as a program
	// would: the pages become resident, and resident memory measures them.
	// Without it only the checks' pattern is written (every byte of a
	// block of up to 64 bytes, else its first and last 8: see
	// writePattern). A BatchAllocator writes its blocks as it was made to
	// (see libc.NewLoop).
	Touch bool
	// StopAfter, when positive, ends the replay after that event (counting
	// from 1), the allocator left as the trace made it there: to look at
	// the heap at a moment (a map of it at its peak, say).
	StopAfter int64
	// Series keeps, in Result.Series, between Series and 2 × Series points
	// over the trace (one per reading of the footprint when there are
	// fewer), for charts of live memory, footprint and resident memory
	// over time (0: none). Each point holds the maxima of the
	// events it stands for.
	Series int
	// MaxRequest is the most bytes one request (an allocation, a
	// realloc's new size, a calloc's product) may ask for: one above it is
	// a trace error, counted and skipped before any allocator sees it (fatal
	// with Strict), and a later free of its object is absorbed (0:
	// DefaultMaxRequest).
	MaxRequest int64
	// MaxLive is the most live memory the replay may hold: a request that
	// would take it further stops the replay with an error wrapping
	// ErrBudget (0: the machine's physical memory).
	MaxLive int64
	// MaxMemory is the most memory the allocator may hold: a reading of
	// its footprint or of its resident bytes above it stops the replay
	// with an error wrapping ErrBudget (0: no bound). A row of a run
	// replays within its share of the run's budget so (package rows).
	MaxMemory int64
	// Progress, when not nil, has the events replayed added to it after
	// each read of the trace (up to 4096 events), for a progress display
	// in another goroutine.
	Progress *atomic.Int64
}

// Result is what a replay measured. Live memory is the sum of the sizes
// the trace asked for and has not freed, kept exactly after every event.
// The footprint is read by Run after every event (Allocator.Footprint:
// exact for carve's heaps, the runtime's figure for the Go heap) and by
// RunBatch at each sample. "Time" is counted in
// events. Run and RunBatch set every field.
type Result struct {
	// Events is the number of events read; Ops the allocator calls made
	// (Alloc, Free, Realloc); TimedOps those of them timed (every one that
	// was made); Nanos the time spent inside them, the clock's own cost
	// taken off (see Run and RunBatch), and NsPerOp = Nanos / Ops.
	// OffCPU is the time taken off the calls' as the thread spent it off
	// the CPU (preempted or blocked; Run only, see callClock).
	Events, Ops, TimedOps, Nanos, OffCPU int64
	NsPerOp                              float64
	// TraceErrors counts the events skipped because they named a dead or
	// unknown object, reused a live one's ID, or asked for an impossible
	// size or one above Options.MaxRequest; FirstTraceError is the first
	// of them.
	TraceErrors     int64
	FirstTraceError *TraceError
	// Samples counts the calls of the allocator's Stats.
	Samples int64
	// Slots is the most objects live at once, and LedgerBytes the Go
	// memory the replay's own tables of the trace's objects held at the
	// end (they only grow): what a replay of the trace costs besides the
	// allocator's memory.
	Slots, LedgerBytes int64

	// PeakLive is the largest live memory; FootprintAtPeakLive the
	// footprint when live memory first reached it (refreshed by a sample
	// taken while live memory still stood at the peak). RunBatch reads the
	// footprint only when it samples, so its FootprintAtPeakLive may be
	// that of an earlier peak, lower by less than 1/128 (see RunBatch).
	PeakLive, FootprintAtPeakLive int64
	// PeakFootprint is the largest footprint read; LiveAtPeakFootprint the
	// live memory when it was first read, and PeakFootprintAt the event
	// after which it was (for RunBatch, the last event of the batch).
	PeakFootprint, LiveAtPeakFootprint int64
	PeakFootprintAt                    int64
	// PeakResident is the largest Resident of the samples.
	PeakResident int64
	// PeakUsed is the largest Used of the samples: for the Go heap, its
	// objects' bytes (/memory/classes/heap/objects:bytes), which peak
	// where it collects; a Collector is sampled before each collection.
	PeakUsed int64

	// Johnstone and Wilson's four measures (ISMM 1998), as ratios of heap
	// to live memory (1 is no fragmentation); 0 when the denominator is.
	//   AvgRatio             #1: sum over events of footprint / sum of live
	//   RatioAtPeakLive      #2: FootprintAtPeakLive / PeakLive
	//   RatioAtPeakFootprint #3: PeakFootprint / LiveAtPeakFootprint
	//   PeakRatio            #4: PeakFootprint / PeakLive
	AvgRatio, RatioAtPeakLive, RatioAtPeakFootprint, PeakRatio float64

	// Cycles are the collections of a Go program's trace whose frees were
	// moved to the ends of the marks that proved the objects dead
	// (trace.MoveFrees), one for each mark end the replay reached, with
	// the live memory there: the marked heap, as the trace's objects
	// count it. PeakMarked is the largest of those. Live memory elsewhere
	// is the bytes allocated and not yet known dead. Both are zero for a
	// trace without collections, and for one whose frees stay at the
	// sweep (its live memory then holds a cycle of garbage).
	Cycles     []Cycle
	PeakMarked int64

	// Marks are the allocator's Stats after each of Options.Marks that the
	// trace reached, with the live memory there.
	Marks []Mark
	// Series is the replay over time (Options.Series).
	Series []Point

	// Live is the live memory at the end of the trace, End the allocator's
	// Stats there.
	Live int64
	End  carve.Stats
	// Mesh is, for a heap that meshes (MapsPagesTwice), what meshing did
	// over the replay; nil for another allocator.
	Mesh *Mesh
	// Fragmentation is the FREENIX paper's 100 × (End.Footprint / Live -
	// 1) at the end, NaN when Live is below a tenth of PeakLive or below
	// MinLiveForFragmentation.
	Fragmentation float64
	// Internal = End.Used - End.Live and External = End.Footprint -
	// End.Used: the end's fragmentation split.
	Internal, External int64
}

// Cycle is a Go program's collection in a replay: the event after which
// its mark ended (counting from 1; 0 is before the first), the live
// memory there, and the trace's own account of it: the bytes the mark
// found (trace.GoCycle.Marked) and the goal set from them.
type Cycle struct {
	Event        int64
	Live         int64
	Marked, Goal uint64
}

// Mark is the state of a replay after one event.
type Mark struct {
	Event int64 // the event's number, counting from 1
	Live  int64 // the live memory the trace asked for
	Stats carve.Stats
}

// TraceError is an event that does not fit the objects alive at its
// point of the trace.
type TraceError struct {
	Event  int64 // the event's number, counting from 1
	Ev     trace.Event
	Reason string
	// File and Line say where the event was read, when its source tells
	// (trace.Positioned); Line is 0 otherwise.
	File string
	Line int64
}

func (e *TraceError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: replay: trace error at event %d (%v): %s", e.File, e.Line, e.Event, e.Ev, e.Reason)
	}
	return fmt.Sprintf("replay: trace error at event %d (%v): %s", e.Event, e.Ev, e.Reason)
}

// Violation is an allocator found wrong by the checks: a block of the
// wrong length or alignment, outside the allocator's memory (for a
// Container), overlapping another live block, or whose bytes changed
// while the replayer held it.
type Violation struct {
	Event  int64 // the event's number, counting from 1
	Ev     trace.Event
	ID     uint64  // the object at fault
	Addr   uintptr // its block's address
	Other  uint64  // the object it overlaps, or 0
	OAddr  uintptr // that block's address
	Reason string
}

func (v *Violation) Error() string {
	s := fmt.Sprintf("replay: violation at event %d (%v): object %d at %#x: %s", v.Event, v.Ev, v.ID, v.Addr, v.Reason)
	if v.Other != 0 || v.OAddr != 0 {
		s += fmt.Sprintf(" (object %d at %#x)", v.Other, v.OAddr)
	}
	return s
}

// Mesh is what a heap that meshes (heap.Mesh) did over a replay: the
// meshes it made, the bytes of pages meshed onto another's memory at the
// end (given back: its footprint leaves them out), the meshed pages freed
// when their slab left its class, and the system calls of meshing the
// kernel refused.
type Mesh struct {
	Meshes   int64 `json:"meshes"`
	Meshed   int64 `json:"meshed_bytes_at_end"`
	Unmeshed int64 `json:"unmeshed"`
	Refused  int64 `json:"refused,omitempty"`
}
