package replay

import (
	"fmt"
	"io"
	"math"
	"runtime"

	"github.com/carvelab/carve/lab/trace"
)

// BatchAllocator is an allocator the replayer drives a batch of events at
// a time rather than a call per event: the C allocators (package libc),
// whose every call from Go would cross into C at a cost larger than the
// call itself.
//
// Apply performs evs in order and returns the nanoseconds spent in the
// allocator's calls. The replayer has checked the events against the
// trace's live objects first: an allocation names a free slot, a free or a
// realloc a live one. An event's ID is a slot, not the trace's object ID:
// a small number the replayer hands out and takes back when its object is
// freed, so that the allocator can keep its blocks in an array. Apply
// stops at the first failure and returns an error; the replay stops too.
//
// Stats is called after every batch; its Footprint and Resident are the
// replay's figures (Live and Used may be 0 when the allocator does not
// know them).
type BatchAllocator interface {
	Apply(evs []trace.Event) (nanos int64, err error)
	Stats() (Stats, error)
	Close() error
}

// Stats is what a BatchAllocator reports after a batch.
type Stats struct {
	Footprint, Resident int64
}

// batchSize is the most events one Apply gets.
const batchSize = 4096

// bobject is one object of a batch replay.
type bobject struct {
	slot  uint32 // slot + 1; 0 while the object is not live
	state uint8
	size  int64
}

type batchReplayer struct {
	a       BatchAllocator
	opt     Options
	objects table[bobject]
	free    []uint32 // slots given back
	slots   uint32   // slots handed out so far
	batch   []trace.Event
	res     Result
	live    int64
	n       int64
	ev      trace.Event
	marks   []int64

	series        series
	batchLive     int64 // the most live memory since the last sample
	peakSampled   int64 // live memory at the last peak of live sampled
	sumFP, sumLiv float64
	since         int64 // events since the last sample
}

// RunBatch replays src through a, a batch of events at a time, and
// returns what it measured, as Run does, with these differences:
//
//   - The footprint and resident bytes are read after each batch (of up to
//     4096 events; a batch also ends at each of Options.Marks, and before
//     live memory falls from a new peak, so that the footprint at peak
//     live is exact to the event), not after every event: the peaks are
//     those of the samples, and Johnstone and Wilson's measure #1 counts
//     each event of a batch at the footprint after it.
//   - The replayer cannot see the blocks: there are no correctness
//     checks (Options.NoCheck is implied), and Result.End holds only the
//     Footprint and Resident of the last sample.
//   - Every call is timed, by the allocator, in one reading of the clock
//     per batch: NsPerOp is the batch time over the calls.
//
// Like Run, RunBatch locks its goroutine to one OS thread. Trace errors
// are counted and skipped as Run does (Options.Strict makes
// the first fatal); Options.TimeEvery and SampleEvery do not apply, and
// the series has a point per sample at most.
func RunBatch(src trace.Source, a BatchAllocator, opt Options) (Result, error) {
	for i, m := range opt.Marks {
		if m < 1 || i > 0 && m <= opt.Marks[i-1] {
			return Result{}, fmt.Errorf("replay: Marks %v: want increasing event numbers from 1", opt.Marks)
		}
	}
	// One OS thread for the whole replay: a C allocator keeps per-thread
	// state (glibc's arenas, jemalloc's and tcmalloc's caches, mimalloc's
	// heaps), and a replay that wandered between threads would see blocks
	// freed by one thread and reused by another, which the trace never did.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &batchReplayer{a: a, opt: opt, batch: make([]trace.Event, 0, batchSize), marks: opt.Marks, series: newSeries(opt.Series)}
	err := r.run(src)
	if err == nil {
		err = r.flush()
	}
	r.finish()
	return r.res, err
}

func (r *batchReplayer) run(src trace.Source) error {
	buf := make([]trace.Event, 4096)
	for {
		n, err := src.Read(buf)
		for i := range n {
			r.n++
			r.res.Events++
			r.ev = buf[i]
			if err := r.event(buf[i]); err != nil {
				return err
			}
			r.sumLiv += float64(r.live)
			r.batchLive = max(r.batchLive, r.live)
			r.since++
			atMark := len(r.marks) > 0 && r.n == r.marks[0]
			if len(r.batch) == batchSize || atMark {
				if err := r.flush(); err != nil {
					return err
				}
			}
			if atMark {
				r.res.Marks = append(r.res.Marks, Mark{Event: r.n, Live: r.live, Stats: r.res.End})
				r.marks = r.marks[1:]
			}
		}
		if r.opt.Progress != nil {
			r.opt.Progress.Add(int64(n))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w after event %d: %w", ErrSource, r.n, err)
		}
	}
}

// flush applies the batch and samples the allocator.
func (r *batchReplayer) flush() error {
	if len(r.batch) > 0 {
		nanos, err := r.a.Apply(r.batch)
		r.res.Ops += int64(len(r.batch))
		r.res.TimedOps += int64(len(r.batch))
		r.res.Nanos += nanos
		if err != nil {
			return fmt.Errorf("replay: the batch ending at event %d: %w", r.n, err)
		}
	}
	st, err := r.a.Stats()
	if err != nil {
		return fmt.Errorf("replay: stats after event %d: %w", r.n, err)
	}
	r.res.Samples++
	if r.since > 0 {
		// One point per sample: the batch's most live memory and the
		// footprint after it.
		r.series.add(r.n, max(r.batchLive, r.live), st.Footprint, st.Resident)
	}
	r.batchLive = 0
	r.sumFP += float64(st.Footprint) * float64(r.since)
	r.batch = r.batch[:0]
	r.since = 0
	if st.Footprint > r.res.PeakFootprint {
		r.res.PeakFootprint, r.res.LiveAtPeakFootprint = st.Footprint, r.live
	}
	if r.live == r.res.PeakLive {
		r.res.FootprintAtPeakLive = st.Footprint
		r.peakSampled = r.live
	}
	r.res.PeakResident = max(r.res.PeakResident, st.Resident)
	r.res.End.Footprint, r.res.End.Resident = st.Footprint, st.Resident
	return nil
}

// lowering is called before an event lowers live memory: a new peak of
// live memory well above the last one sampled is sampled first.
func (r *batchReplayer) lowering() error {
	if r.live == r.res.PeakLive && r.live > r.peakSampled+r.peakSampled>>7 {
		return r.flush()
	}
	return nil
}

func (r *batchReplayer) grow(d int64) {
	r.live += d
	r.res.PeakLive = max(r.res.PeakLive, r.live)
}

func (r *batchReplayer) traceError(reason string) error {
	return r.res.traceError(r.opt, r.n, r.ev, reason)
}

func (r *batchReplayer) takeSlot() uint32 {
	if n := len(r.free); n > 0 {
		s := r.free[n-1]
		r.free = r.free[:n-1]
		return s
	}
	r.slots++
	return r.slots - 1
}

func (r *batchReplayer) event(e trace.Event) error {
	if e.Op != trace.Free && e.Size > math.MaxInt {
		return r.traceError(fmt.Sprintf("size %d is too large", e.Size))
	}
	o := r.objects.get(e.ID)
	switch e.Op {
	case trace.Alloc, trace.Calloc, trace.Memalign:
		if o.state == stLive {
			return r.traceError(fmt.Sprintf("object %d is already live", e.ID))
		}
		s := r.takeSlot()
		o.slot, o.state, o.size = s+1, stLive, int64(e.Size)
		e.ID = uint64(s)
		r.batch = append(r.batch, e)
		r.grow(int64(e.Size))
	case trace.Free:
		switch o.state {
		case stNone:
			return r.traceError(fmt.Sprintf("free of object %d, never allocated", e.ID))
		case stDead:
			return r.traceError(fmt.Sprintf("double free of object %d", e.ID))
		}
		if err := r.lowering(); err != nil {
			return err
		}
		o = r.objects.get(e.ID)
		e.ID = uint64(o.slot - 1)
		r.batch = append(r.batch, e)
		r.free = append(r.free, o.slot-1)
		r.live -= o.size
		o.slot, o.state, o.size = 0, stDead, 0
	case trace.Realloc:
		if o.state != stLive {
			return r.traceError(fmt.Sprintf("realloc of object %d, not live", e.ID))
		}
		if int64(e.Size) < o.size {
			if err := r.lowering(); err != nil {
				return err
			}
			o = r.objects.get(e.ID)
		}
		old := o.size
		o.size = int64(e.Size)
		e.ID = uint64(o.slot - 1)
		r.batch = append(r.batch, e)
		r.live -= old
		r.grow(int64(e.Size))
	default:
		return r.traceError(fmt.Sprintf("invalid op %v", e.Op))
	}
	return nil
}

func (r *batchReplayer) finish() {
	r.res.finish(r.live, r.sumFP, r.sumLiv, r.series.done())
}
