package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/mem"
)

// This file is the core both engines share: the ledger of a replay. It
// reads the trace, holds every event to the rules of the trace's objects
// (an allocation names an object not live, a free or a realloc a live
// one), keeps live memory and its peak exactly, the footprint's peak at
// every reading, Johnstone and Wilson's sums, the marks and the series,
// and decides when the allocator is sampled. An engine performs the
// events on its allocator and reads its figures:
//
//	Run       calls the allocator for each event, checks every block, and
//	          reads the footprint after every event (Allocator.Footprint);
//	RunBatch  hands the events to a BatchAllocator a batch at a time and
//	          reads the footprint only when it samples, at the end of a
//	          batch.
//
// Objects live in slots: a small number the ledger hands out when an
// object is born and takes back when it dies, so that an engine can keep
// what it holds of each live object (Run: its block; the C allocators:
// their pointer) in an array as long as the most objects ever live at
// once, not as long as the trace.

// engine is what an engine adds to the ledger.
type engine interface {
	// do performs event e, which the ledger has found valid, on the
	// object in slot (for an allocation, the slot the object is born in),
	// whose size before the event was old (0 for an allocation). An
	// error stops the replay.
	do(e trace.Event, slot uint32, old int64) error
	// footprint returns the allocator's footprint after the event just
	// done, for an engine that reads one after every event.
	footprint() int64
	// sample returns the allocator's full figures now (RunBatch first
	// applies the events it holds).
	sample() (carve.Stats, error)
}

// The states of an object ID in the ledger's table: never born, dead,
// refused (born above the budget: its free is absorbed), or live in slot s
// (stored as s + stLive).
const (
	stNone uint32 = iota
	stDead
	stRefused
	stLive

	denseIDs  = 1 << 24 // IDs below this are kept in pages, others in a map
	pageShift = 12      // IDs per page: 4096, 16 KiB
)

// objects holds the state of every object ID the trace named: 4 bytes an
// ID below denseIDs, in pages made when an ID in them is first used and
// never copied as the IDs grow; a map entry for each ID above.
type objects struct {
	dense  [][]uint32 // page i holds IDs i<<pageShift to (i+1)<<pageShift - 1; nil until used
	sparse map[uint64]uint32
}

func (t *objects) get(id uint64) uint32 {
	if id < denseIDs {
		p := id >> pageShift
		if p >= uint64(len(t.dense)) || t.dense[p] == nil {
			return stNone
		}
		return t.dense[p][id&(1<<pageShift-1)]
	}
	return t.sparse[id]
}

func (t *objects) set(id uint64, st uint32) {
	if id < denseIDs {
		p := int(id >> pageShift)
		if p >= len(t.dense) {
			t.dense = append(t.dense, make([][]uint32, p+1-len(t.dense))...)
		}
		if t.dense[p] == nil {
			t.dense[p] = make([]uint32, 1<<pageShift)
		}
		t.dense[p][id&(1<<pageShift-1)] = st
		return
	}
	if t.sparse == nil {
		t.sparse = map[uint64]uint32{}
	}
	t.sparse[id] = st
}

// ledger is one replay's bookkeeping; see the top of this file.
type ledger struct {
	opt      Options
	eng      engine
	perEvent bool // the engine reads the footprint after every event
	res      Result

	objects objects
	sizes   paged[int64]  // by slot: the live object's size
	free    paged[uint32] // slots given back, reused last in, first out

	live  int64
	n     int64 // the current event's number, counting from 1
	ev    trace.Event
	pos   trace.Positioned // the source, if it tells where events come from
	bi    int              // the current event's index in its batch
	marks []int64          // Options.Marks not reached yet

	goCycles  []trace.GoCycle // the source's collections reached so far
	collector Collector       // the engine's allocator, if it collects at them
	routes    *Router         // the routes in front of it, told of each peak of the footprint; or nil

	series      series
	pointLive   int64 // the most live memory since the last series point
	pointEvents int64 // the events since then
	pointFP     int64 // the largest footprint read since then
	sinceSample int   // events since the last sample
	peakSampled int64 // live memory at the last peak of live sampled
	peakAt      int64 // the event that set the peak of live memory
	unread      int64 // events not yet counted in sumFP
	resident    int64 // the last sample's
	sumFP       float64
	sumLiv      float64
}

// newLedger checks opt and returns the ledger of a replay through eng.
func newLedger(opt Options, eng engine, perEvent bool) (*ledger, error) {
	if opt.SampleEvery <= 0 {
		opt.SampleEvery = 4096
	}
	if opt.MaxRequest <= 0 {
		opt.MaxRequest = DefaultMaxRequest()
	}
	if opt.MaxLive <= 0 {
		opt.MaxLive = physical()
	}
	for i, m := range opt.Marks {
		if m < 1 || i > 0 && m <= opt.Marks[i-1] {
			return nil, fmt.Errorf("replay: Marks %v: want increasing event numbers from 1", opt.Marks)
		}
	}
	return &ledger{opt: opt, eng: eng, perEvent: perEvent, marks: opt.Marks, series: newSeries(opt.Series)}, nil
}

// ErrSource is wrapped, with the source's own error, by the error of a
// replay whose trace could not be read: malformed, truncated, unreadable.
var ErrSource = errors.New("replay: reading the trace")

// MinLiveForFragmentation is the least live memory at the end for which a
// replay reports the FREENIX paper's fragmentation (Result.Fragmentation),
// with a tenth of the peak: below either, the trace freed nearly all it
// held, and a heap of any size over next to nothing reads thousands of
// percent.
const MinLiveForFragmentation = 1 << 20

// ErrBudget is wrapped by the error of a replay stopped because its live
// memory would pass Options.MaxLive (a trace this machine cannot hold),
// or because the allocator held more than Options.MaxMemory.
var ErrBudget = errors.New("replay: over the memory budget")

// DefaultMaxRequest returns the budget of one request unless
// Options.MaxRequest sets another: the smaller of DefaultBudget and
// 64 GiB.
func DefaultMaxRequest() int64 { return min(DefaultBudget(), 64<<30) }

// DefaultBudget returns the memory all the replays of a run may hold at
// once: half the physical memory, the rest left to the system and to
// whatever else runs (package rows shares it out among a run's rows).
func DefaultBudget() int64 { return physical() / 2 }

// physical returns the machine's physical memory, or 128 GiB when the OS
// does not say.
var physical = sync.OnceValue(func() int64 {
	n, err := mem.Physical()
	if err != nil || n <= 0 {
		return 128 << 30
	}
	return n
})

// replay reads src to its end, or to Options.StopAfter, event by event,
// then samples the allocator a last time and computes the measures. It
// returns the first error of the source, the engine, or (with
// Options.Strict) the trace.
func (l *ledger) replay(src trace.Source) (Result, error) {
	err := l.read(src)
	if st, serr := l.eng.sample(); serr == nil {
		l.sampled(st)
		if l.perEvent {
			l.series.lift(st.Footprint, st.Resident)
		}
	} else if err == nil {
		err = serr
	}
	l.finish()
	return l.res, err
}

// cycleSource is a source that says where its Go program's collections'
// marks ended (trace.MoveFrees's): those reached so far, shared.
type cycleSource interface {
	MarkEnds() []trace.GoCycle
}

// A Collector is an allocator whose collections are the trace's own: at
// the end of each collection's mark in the trace, after the frees the
// trace moved there (trace.MoveFrees), the replay calls Collect, and the
// allocator collects there (NewProgramGoHeap).
type Collector interface {
	Collect(c trace.GoCycle)
}

// cycles books the collections whose mark ended after the events replayed
// so far: the live memory there is the marked heap, as the trace's
// objects count it; a Collector collects.
func (l *ledger) cycles() {
	for len(l.res.Cycles) < len(l.goCycles) && l.goCycles[len(l.res.Cycles)].End <= l.res.Events {
		c := l.goCycles[len(l.res.Cycles)]
		l.res.Cycles = append(l.res.Cycles, Cycle{Event: l.res.Events, Live: l.live, Marked: c.Marked, Goal: c.Goal})
		l.res.PeakMarked = max(l.res.PeakMarked, l.live)
		if l.collector != nil {
			// Sampled first: a collector's heap peaks where it collects.
			if st, err := l.eng.sample(); err == nil {
				l.sampled(st)
			}
			l.collector.Collect(c)
		}
	}
}

func (l *ledger) read(src trace.Source) error {
	buf := make([]trace.Event, 4096)
	l.pos, _ = src.(trace.Positioned)
	cs, _ := src.(cycleSource)
	for {
		n, err := src.Read(buf)
		if cs != nil {
			l.goCycles = cs.MarkEnds()
			l.cycles()
		}
		for i, e := range buf[:n] {
			if l.goCycles != nil {
				l.cycles()
			}
			l.bi = i
			l.n++
			l.res.Events++
			l.ev = e
			if err := l.event(e); err != nil {
				return err
			}
			if err := l.endEvent(); err != nil {
				return err
			}
			if l.n == l.opt.StopAfter {
				return nil
			}
		}
		if l.opt.Progress != nil {
			l.opt.Progress.Add(int64(n))
		}
		if err == io.EOF {
			l.cycles()
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w after event %d: %w", ErrSource, l.n, err)
		}
	}
}

// event holds e to the trace's rules and, if it keeps them, has the
// engine perform it and books it.
func (l *ledger) event(e trace.Event) error {
	if e.Op != trace.Free && e.Size > math.MaxInt {
		return l.traceError(fmt.Sprintf("size %d is too large", e.Size))
	}
	st := l.objects.get(e.ID)
	over := e.Op != trace.Free && int64(e.Size) > l.opt.MaxRequest
	if e.Op == trace.Realloc && st == stRefused && !over {
		// The object the trace allocated above the budget comes back
		// within it: it is born now.
		st, e.Op = stNone, trace.Alloc
	}
	switch e.Op {
	case trace.Alloc, trace.Calloc, trace.Memalign:
		if st >= stLive {
			return l.traceError(fmt.Sprintf("object %d is already live", e.ID))
		}
		if over {
			l.objects.set(e.ID, stRefused)
			return l.overBudget(e)
		}
		if err := l.room(int64(e.Size)); err != nil {
			return err
		}
		slot := l.takeSlot()
		if err := l.eng.do(e, slot, 0); err != nil {
			l.free.push(slot)
			return err
		}
		l.objects.set(e.ID, slot+stLive)
		*l.sizes.at(slot) = int64(e.Size)
		l.grow(int64(e.Size))
	case trace.Free:
		switch st {
		case stNone:
			return l.traceError(fmt.Sprintf("free of object %d, never allocated", e.ID))
		case stDead:
			return l.traceError(fmt.Sprintf("double free of object %d", e.ID))
		case stRefused:
			l.objects.set(e.ID, stDead) // its allocation was counted
			return nil
		}
		slot := st - stLive
		if err := l.lowering(); err != nil {
			return err
		}
		if err := l.eng.do(e, slot, *l.sizes.at(slot)); err != nil {
			return err
		}
		l.objects.set(e.ID, stDead)
		l.live -= *l.sizes.at(slot)
		*l.sizes.at(slot) = 0
		l.free.push(slot)
	case trace.Realloc:
		if st == stRefused {
			return l.overBudget(e)
		}
		if st < stLive {
			return l.traceError(fmt.Sprintf("realloc of object %d, not live", e.ID))
		}
		if over {
			return l.overBudget(e)
		}
		slot := st - stLive
		old := *l.sizes.at(slot)
		if err := l.room(int64(e.Size) - old); err != nil {
			return err
		}
		if int64(e.Size) < old {
			if err := l.lowering(); err != nil {
				return err
			}
		}
		if err := l.eng.do(e, slot, old); err != nil {
			return err
		}
		*l.sizes.at(slot) = int64(e.Size)
		l.live -= old
		l.grow(int64(e.Size))
	default:
		return l.traceError(fmt.Sprintf("invalid op %v", e.Op))
	}
	return nil
}

// overBudget counts a request above Options.MaxRequest as a trace error:
// no allocator sees it.
func (l *ledger) overBudget(e trace.Event) error {
	return l.traceError(fmt.Sprintf("a request of %s, above the replay's budget of %s a request (--max-request)", size.Format(int64(e.Size)), size.Format(l.opt.MaxRequest)))
}

// room returns an error wrapping ErrBudget if live memory growing by d
// would pass Options.MaxLive.
func (l *ledger) room(d int64) error {
	if d > 0 && l.live > l.opt.MaxLive-d {
		return fmt.Errorf("%w: at event %d (%v) live memory would reach %s, more than the %s this machine can hold (Options.MaxLive)",
			ErrBudget, l.n, l.ev, size.Format(l.live+d), size.Format(l.opt.MaxLive))
	}
	return nil
}

// ownBytes returns the bytes of Go memory the ledger holds: its table of
// object IDs (a map entry counted at 48 bytes), the sizes of the live
// objects and the free slots.
func (l *ledger) ownBytes() int64 {
	n := int64(cap(l.objects.dense))*24 + int64(len(l.objects.sparse))*48 + l.sizes.bytes() + l.free.bytes()
	for _, p := range l.objects.dense {
		n += int64(cap(p)) * 4
	}
	return n
}

// takeSlot returns a slot for an object being born.
func (l *ledger) takeSlot() uint32 {
	if s, ok := l.free.pop(); ok {
		return s
	}
	return l.sizes.push(0)
}

// grow records that live memory grew by d.
func (l *ledger) grow(d int64) {
	l.live += d
	if l.live > l.res.PeakLive {
		l.res.PeakLive, l.peakAt = l.live, l.n
	}
}

// lowering is called before an event lowers live memory: if live memory
// stands at a peak well above the last one sampled, the allocator is
// sampled first, so that the footprint at the peak of live memory comes
// from its full figures (and, for RunBatch, which reads no footprint
// between samples, is read at a peak within 1/128 of the highest). "Well
// above" is 1/128 more, which bounds these samples to a few thousand.
func (l *ledger) lowering() error {
	if l.live == l.res.PeakLive && l.live > l.peakSampled+l.peakSampled>>7 {
		return l.sample()
	}
	return nil
}

// endEvent closes the current event: the sums, the footprint read after
// it (for an engine that reads one every event, unless a sample reads it),
// a sample when one is due (every Options.SampleEvery events, and at each
// of Options.Marks), and the series.
func (l *ledger) endEvent() error {
	l.sumLiv += float64(l.live)
	l.pointLive = max(l.pointLive, l.live)
	l.pointEvents++
	l.unread++
	atMark := len(l.marks) > 0 && l.n == l.marks[0]
	l.sinceSample++
	due := l.sinceSample >= l.opt.SampleEvery || atMark
	if l.perEvent && !due {
		// A sample reads the footprint too, with the side metadata a
		// heap tells only there: an event sampled is read once, by Stats.
		fp := l.eng.footprint()
		l.footprint(fp)
		if err := l.held(fp); err != nil {
			return err
		}
	}
	if due {
		if err := l.sample(); err != nil {
			return err
		}
	}
	if atMark {
		l.res.Marks = append(l.res.Marks, Mark{Event: l.n, Live: l.live, Stats: l.res.End})
		l.marks = l.marks[1:]
	}
	if l.perEvent {
		l.point()
	}
	return nil
}

// footprint books a reading fp of the footprint after the current event.
// Each event since the last reading counts at fp in Johnstone and
// Wilson's #1.
func (l *ledger) footprint(fp int64) {
	if fp > l.res.PeakFootprint {
		l.res.PeakFootprint, l.res.LiveAtPeakFootprint, l.res.PeakFootprintAt = fp, l.live, l.n
		if l.routes != nil {
			l.routes.atPeak()
		}
	}
	if l.peakAt == l.n {
		l.res.FootprintAtPeakLive = fp
	}
	l.sumFP += float64(fp) * float64(l.unread)
	l.unread = 0
	l.pointFP = max(l.pointFP, fp)
}

// sample reads the allocator's full figures and books them.
func (l *ledger) sample() error {
	st, err := l.eng.sample()
	if err != nil {
		return err
	}
	l.sampled(st)
	return l.held(max(st.Footprint, st.Resident))
}

// held returns an error wrapping ErrBudget if the allocator holds n
// bytes, more than Options.MaxMemory.
func (l *ledger) held(n int64) error {
	if m := l.opt.MaxMemory; m > 0 && n > m {
		return fmt.Errorf("%w: after event %d (%v) the allocator holds %s, more than the %s it may hold (Options.MaxMemory)",
			ErrBudget, l.n, l.ev, size.Format(n), size.Format(m))
	}
	return nil
}

func (l *ledger) sampled(st carve.Stats) {
	l.res.Samples++
	l.sinceSample = 0
	l.footprint(st.Footprint)
	if l.live == l.res.PeakLive {
		l.res.FootprintAtPeakLive = st.Footprint
		l.peakSampled = l.live
	}
	l.resident = st.Resident
	l.res.PeakResident = max(l.res.PeakResident, st.Resident)
	l.res.PeakUsed = max(l.res.PeakUsed, st.Used)
	l.res.End = st
	if !l.perEvent {
		l.point()
	}
}

// point adds a point to the series, if an event ended since the last
// one: the most live memory and the largest footprint since then, and the
// resident bytes last read.
func (l *ledger) point() {
	if l.series.n > 0 && l.pointEvents > 0 {
		l.series.add(l.n, l.pointLive, l.pointFP, l.resident)
	}
	l.pointLive, l.pointEvents, l.pointFP = 0, 0, 0
}

// traceError counts an event that does not fit the trace's live objects
// (keeping the first) and returns it when Options.Strict makes it fatal.
func (l *ledger) traceError(reason string) error {
	l.res.TraceErrors++
	e := &TraceError{Event: l.n, Ev: l.ev, Reason: reason}
	if l.pos != nil {
		e.File, e.Line = l.pos.Position(l.bi)
	}
	if l.res.FirstTraceError == nil {
		l.res.FirstTraceError = e
	}
	if l.opt.Strict {
		return e
	}
	return nil
}

// finish computes the measures from the peaks and sums kept.
func (l *ledger) finish() {
	res := &l.res
	res.Series = l.series.done()
	res.Slots, res.LedgerBytes = int64(l.sizes.n), l.ownBytes()
	res.Live = l.live
	res.Nanos = max(res.Nanos, 0) // the clock's cost, taken off, may exceed very fast calls' time
	if res.Ops > 0 {
		res.NsPerOp = float64(res.Nanos) / float64(res.Ops)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	res.AvgRatio = ratio(l.sumFP, l.sumLiv)
	res.RatioAtPeakLive = ratio(float64(res.FootprintAtPeakLive), float64(res.PeakLive))
	res.RatioAtPeakFootprint = ratio(float64(res.PeakFootprint), float64(res.LiveAtPeakFootprint))
	res.PeakRatio = ratio(float64(res.PeakFootprint), float64(res.PeakLive))
	res.Fragmentation = math.NaN()
	if l.live > 0 && l.live >= res.PeakLive/10 && l.live >= MinLiveForFragmentation {
		res.Fragmentation = 100 * (float64(res.End.Footprint)/float64(l.live) - 1)
	}
	res.Internal = res.End.Used - res.End.Live
	res.External = res.End.Footprint - res.End.Used
}
