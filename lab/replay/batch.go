package replay

import (
	"fmt"
	"runtime"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
)

// BatchAllocator is an allocator the replayer drives a batch of events at
// a time rather than a call per event: the C allocators (package libc),
// whose every call from Go would cross into C at a cost larger than the
// call itself.
//
// Apply performs evs in order and returns the nanoseconds spent in the
// allocator's calls, timed as Run times them (see callClock), and those
// it took off them as the thread was off the CPU (Result.OffCPU). The
// replayer has checked the events against the trace's live objects
// first: an allocation names a free slot, a free or a realloc a live one.
// An event's ID is a slot, not the trace's object ID: a small number the
// replayer hands out and takes back when its object is freed, so that the
// allocator can keep its blocks in an array. Apply stops at the first
// failure and returns an error; the replay stops too.
//
// A BatchAllocator that routes objects by their label (package rows's
// C rows, through a Router) has UseLabels too: RunBatch calls it with the
// trace's label table before the first event, as Run does for a
// LabeledAllocator, and leaves each event's Label for Apply to read.
//
// Stats is called at the end of each batch. Its Footprint, Used and
// Resident are the allocator's (Used 0 when it does not know it); its
// Live is ignored: the replayer sets it to the trace's live memory, and
// takes it as the floor of the footprint, which an allocator's own count
// can trail.
type BatchAllocator interface {
	Apply(evs []trace.Event) (nanos, offCPU int64, err error)
	Stats() (carve.Stats, error)
	Close() error
}

// maxBatch is the most events one Apply gets.
const maxBatch = 4096

// batchReplayer is the batch engine: it collects the events the ledger
// passes it and hands them to the allocator when the ledger samples.
type batchReplayer struct {
	l     *ledger
	a     BatchAllocator
	batch []trace.Event
}

// RunBatch replays src through a, a batch of events at a time, and
// returns what it measured, as Run does, with these differences:
//
//   - The footprint and resident bytes are read at the end of each batch,
//     not after every event: a batch holds Options.SampleEvery events (at
//     most and by default 4096), and also ends at each of Options.Marks
//     and before live memory falls from a peak more than 1/128 above the
//     last peak sampled, so that FootprintAtPeakLive is read at the event
//     of a peak of live memory within 1/128 of PeakLive (a peak that
//     rose less since the last sample keeps the footprint read there).
//     The peaks are those of the samples, and Johnstone and Wilson's
//     measure #1 counts each event of a batch at the footprint read at
//     the batch's end.
//   - The replayer cannot see the blocks: there are no correctness
//     checks (Options.NoCheck is implied).
//   - The allocator times its calls and returns their sum for each
//     batch (package libc's loop.c times each as Run does); NsPerOp is
//     that time over the calls, and Options.Touch does not apply.
//
// Like Run, RunBatch locks its goroutine to one OS thread, and trace
// errors are counted and skipped (Options.Strict makes the first fatal).
// With Options.SampleEvery 1, a batch is one event and every field of the
// Result but the timings and Samples is what Run measures of the same
// allocator with the same Options.
func RunBatch(src trace.Source, a BatchAllocator, opt Options) (Result, error) {
	if opt.SampleEvery <= 0 || opt.SampleEvery > maxBatch {
		opt.SampleEvery = maxBatch
	}
	// One OS thread for the whole replay: a C allocator keeps per-thread
	// state (glibc's arenas, jemalloc's and tcmalloc's caches, mimalloc's
	// heaps), and a replay that wandered between threads would see blocks
	// freed by one thread and reused by another, which the trace never did.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if la, ok := a.(interface{ UseLabels(*trace.Labels) }); ok {
		la.UseLabels(trace.LabelsOf(src))
	}
	r := &batchReplayer{a: a, batch: make([]trace.Event, 0, opt.SampleEvery)}
	l, err := newLedger(opt, r, false)
	if err != nil {
		return Result{}, err
	}
	if ra, ok := a.(Routing); ok {
		l.routes = ra.Router()
	}
	r.l = l
	return l.replay(src)
}

// do adds e to the batch, naming its object by slot.
func (r *batchReplayer) do(e trace.Event, slot uint32, _ int64) error {
	e.ID = uint64(slot)
	r.batch = append(r.batch, e)
	return nil
}

func (r *batchReplayer) footprint() int64 {
	panic("replay: a batch replay reads no footprint per event")
}

// sample applies the batch and reads the allocator's figures.
func (r *batchReplayer) sample() (carve.Stats, error) {
	if len(r.batch) > 0 {
		nanos, off, err := r.a.Apply(r.batch)
		res := &r.l.res
		res.OffCPU += off
		res.Ops += int64(len(r.batch))
		res.TimedOps += int64(len(r.batch))
		res.Nanos += nanos
		r.batch = r.batch[:0]
		if err != nil {
			return carve.Stats{}, fmt.Errorf("replay: the batch ending at event %d: %w", r.l.n, err)
		}
	}
	st, err := r.a.Stats()
	if err != nil {
		return carve.Stats{}, fmt.Errorf("replay: stats after event %d: %w", r.l.n, err)
	}
	st.Live = r.l.live
	// An allocator's own count of its bytes can trail the blocks it holds
	// (jemalloc's thread cache): its footprint is never below the live
	// bytes.
	st.Footprint = max(st.Footprint, st.Live)
	return st, nil
}
