package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

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
	SampleEvery int
	// TimeEvery times the first 1024 allocator calls, then one call in
	// TimeEvery, drawn at random (0: 16; 1: every call). Reading the
	// clock twice costs about as much as a fast allocator's call: timing
	// a sample keeps the replay near the allocator's own speed, and each
	// sampled call's time, counted TimeEvery times, estimates the time of
	// all of them.
	TimeEvery int
	// Marks are event numbers (counting from 1, increasing) after which
	// the replay takes a sample and keeps it in Result.Marks: the ends of
	// a trace's phases (trace.Generator.Phases), to tell how much the heap
	// grew in each.
	Marks []int64
	// Touch writes every byte of every block the allocator hands out (and
	// of the part a realloc adds), untimed, as a program would: the pages
	// become resident, and resident memory measures them. Without it only
	// the checks' pattern is written (the first and last bytes).
	Touch bool
	// StopAfter, when positive, ends the replay after that event (counting
	// from 1), the allocator left as the trace made it there: to look at
	// the heap at a moment (a map of it at its peak, say).
	StopAfter int64
	// Series keeps, in Result.Series, between Series and 2 × Series points
	// over the trace, for charts of live memory, footprint and resident
	// memory over time (0: none). Each point holds the maxima of the
	// events it stands for.
	Series int
	// Progress, when not nil, has the events replayed added to it after
	// each batch (4096 events), for a progress display in another
	// goroutine.
	Progress *atomic.Int64
}

// Result is what a replay measured. Live memory is the sum of the sizes
// the trace asked for and has not freed, kept exactly after every event;
// footprint is what the allocator's Footprint returns after every event
// (for carve's heaps, its value at the last sample; see New). "Time" is
// counted in events.
type Result struct {
	// Events is the number of events read; Ops the allocator calls made
	// (Alloc, Free, Realloc); TimedOps those of them timed (see
	// Options.TimeEvery); Nanos the time spent inside all calls, estimated
	// from the timed ones, and NsPerOp = Nanos / Ops.
	Events, Ops, TimedOps, Nanos int64
	NsPerOp                      float64
	// TraceErrors counts the events skipped because they named a dead or
	// unknown object, reused a live one's ID, or asked for an impossible
	// size; FirstTraceError is the first of them.
	TraceErrors     int64
	FirstTraceError *TraceError
	// Samples counts the calls of the allocator's Stats.
	Samples int64

	// PeakLive is the largest live memory; FootprintAtPeakLive the
	// footprint when live memory first reached it (refreshed by a sample
	// taken while live memory still stood at the peak).
	PeakLive, FootprintAtPeakLive int64
	// PeakFootprint is the largest footprint seen; LiveAtPeakFootprint the
	// live memory when it was first seen, and PeakFootprintAt the event.
	PeakFootprint, LiveAtPeakFootprint int64
	PeakFootprintAt                    int64
	// PeakResident is the largest Resident of the samples.
	PeakResident int64

	// Johnstone and Wilson's four measures (ISMM 1998), as ratios of heap
	// to live memory (1 is no fragmentation); 0 when the denominator is.
	//   AvgRatio             #1: sum over events of footprint / sum of live
	//   RatioAtPeakLive      #2: FootprintAtPeakLive / PeakLive
	//   RatioAtPeakFootprint #3: PeakFootprint / LiveAtPeakFootprint
	//   PeakRatio            #4: PeakFootprint / PeakLive
	AvgRatio, RatioAtPeakLive, RatioAtPeakFootprint, PeakRatio float64

	// Marks are the allocator's Stats after each of Options.Marks that the
	// trace reached, with the live memory there.
	Marks []Mark
	// Series is the replay over time (Options.Series).
	Series []Point

	// Live is the live memory at the end of the trace, End the allocator's
	// Stats there.
	Live int64
	End  carve.Stats
	// Fragmentation is the paper's 100 × (End.Footprint / Live - 1) at the
	// end, NaN when Live is 0 (a balanced trace).
	Fragmentation float64
	// Internal = End.Used - End.Live and External = End.Footprint -
	// End.Used: the end's fragmentation split.
	Internal, External int64
}

// ErrSource is wrapped, with the source's own error, by Run's error for a
// trace that could not be read: malformed, truncated, unreadable.
var ErrSource = errors.New("replay: reading the trace")

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
}

func (e *TraceError) Error() string {
	return fmt.Sprintf("replay: trace error at event %d (%v): %s", e.Event, e.Ev, e.Reason)
}

// Violation is an allocator found wrong by the checks: a block of the
// wrong length or alignment, overlapping another live block, or whose
// bytes changed while the replayer held it.
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

const (
	stNone uint8 = iota
	stLive
	stDead
	denseIDs  = 1 << 24 // IDs below this are kept in pages, others in a map
	pageShift = 12      // objects per page: 4096
	timeAll   = 1024    // allocator calls timed before sampling starts
)

type object struct {
	b     []byte
	state uint8
}

// table holds a T per object ID: IDs below denseIDs in pages, made when an
// ID in them is first used and never copied as the IDs grow, others in a
// map.
type table[T any] struct {
	dense  [][]T // page i holds IDs i<<pageShift to (i+1)<<pageShift - 1; nil until used
	sparse map[uint64]*T
}

func (t *table[T]) get(id uint64) *T {
	if id < denseIDs {
		p := int(id >> pageShift)
		if p >= len(t.dense) {
			t.dense = append(t.dense, make([][]T, p+1-len(t.dense))...)
		}
		if t.dense[p] == nil {
			t.dense[p] = make([]T, 1<<pageShift)
		}
		return &t.dense[p][id&(1<<pageShift-1)]
	}
	if t.sparse == nil {
		t.sparse = map[uint64]*T{}
	}
	o := t.sparse[id]
	if o == nil {
		o = new(T)
		t.sparse[id] = o
	}
	return o
}

type replayer struct {
	a       Allocator
	opt     Options
	objects table[object]
	set     blockSet
	res     Result
	live    int64
	n       int64 // current event number
	ev      trace.Event
	clock   time.Duration // measured cost of one time.Now/time.Since pair
	rng     uint64        // xorshift state: which calls are timed
	weight  int64         // calls the call being timed stands for
	marks   []int64       // Options.Marks not reached yet
	inside  Container     // a, if it can tell whether a block is inside its memory
	series  series

	sinceSample   int
	peakSampled   int64
	sumFP, sumLiv float64
}

// Run replays src through a, event by event in order, on one locked OS
// thread (a multi-threaded recording is replayed in its recorded order),
// and returns what it measured. It stops at the first error of the
// source, of the allocator (an error wrapping it), of the checks (a
// *Violation) or, with opt.Strict, of the trace (a *TraceError); the
// Result then holds what was measured so far. Run does not close a.
//
// Timing: one allocator call in Options.TimeEvery (drawn at random) is
// timed on its own with the monotonic clock, and the clock's own cost,
// measured when Run starts, is taken off; Calloc's zeroing counts as part
// of its call. The checks and the
// bookkeeping are not timed.
//
// The checks cost, per allocation, a lookup and an insertion in a treap
// of live blocks by address (O(log n)), the allocator's Contains (when it
// is a Container) and writing up to 64 bytes; per free, the same reads and
// a deletion.
func Run(src trace.Source, a Allocator, opt Options) (Result, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if opt.SampleEvery <= 0 {
		opt.SampleEvery = 4096
	}
	if opt.TimeEvery <= 0 {
		opt.TimeEvery = 16
	}
	for i, m := range opt.Marks {
		if m < 1 || i > 0 && m <= opt.Marks[i-1] {
			return Result{}, fmt.Errorf("replay: Marks %v: want increasing event numbers from 1", opt.Marks)
		}
	}
	r := &replayer{a: a, opt: opt, clock: clockCost(), rng: 0x9E3779B97F4A7C15, marks: opt.Marks}
	r.inside, _ = a.(Container)
	r.series = newSeries(opt.Series)
	err := r.run(src)
	r.sample()
	r.finish()
	return r.res, err
}

func (r *replayer) run(src trace.Source) error {
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
			fp := r.a.Footprint()
			r.note(fp)
			r.sumFP += float64(fp)
			r.sumLiv += float64(r.live)
			if r.series.n > 0 {
				r.series.add(r.n, r.live, fp, r.res.End.Resident)
			}
			if r.sinceSample++; r.sinceSample >= r.opt.SampleEvery {
				r.sample()
			}
			if len(r.marks) > 0 && r.n == r.marks[0] {
				r.sample()
				r.res.Marks = append(r.res.Marks, Mark{Event: r.n, Live: r.live, Stats: r.res.End})
				r.marks = r.marks[1:]
			}
			if r.n == r.opt.StopAfter {
				return nil
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

// note keeps the peak of footprint fp at the current live memory.
func (r *replayer) note(fp int64) {
	if fp > r.res.PeakFootprint {
		r.res.PeakFootprint, r.res.LiveAtPeakFootprint, r.res.PeakFootprintAt = fp, r.live, r.n
	}
}

// sample calls Stats and records what only it tells.
func (r *replayer) sample() {
	st := r.a.Stats()
	r.res.Samples++
	r.sinceSample = 0
	r.note(st.Footprint)
	if r.live == r.res.PeakLive {
		r.res.FootprintAtPeakLive = st.Footprint
		r.peakSampled = r.live
	}
	r.res.PeakResident = max(r.res.PeakResident, st.Resident)
	r.res.End = st
}

// grow records that live memory grew by d.
func (r *replayer) grow(d int64) {
	r.live += d
	if r.live > r.res.PeakLive {
		r.res.PeakLive = r.live
		r.res.FootprintAtPeakLive = r.a.Footprint()
	}
}

// shrinking is called before an event lowers live memory: if live memory
// stands at a peak well above the last one sampled, sample it first, so
// that the footprint at the peak of live memory comes from Stats. "Well
// above" is 1/128 more, which bounds the samples to a few thousand.
func (r *replayer) shrinking() {
	if r.live == r.res.PeakLive && r.live > r.peakSampled+r.peakSampled>>7 {
		r.sample()
	}
}

func (r *replayer) finish() {
	r.res.finish(r.live, r.sumFP, r.sumLiv, r.series.done())
	r.res.Internal = r.res.End.Used - r.res.End.Live
	r.res.External = r.res.End.Footprint - r.res.End.Used
}

// finish computes the measures from the peaks and sums a replay kept:
// live memory at the end, the sums over events of footprint and of live
// memory (for Johnstone and Wilson's #1), and the series.
func (res *Result) finish(live int64, sumFP, sumLiv float64, series []Point) {
	res.Series = series
	res.Live = live
	if res.Ops > 0 {
		res.NsPerOp = float64(res.Nanos) / float64(res.Ops)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	res.AvgRatio = ratio(sumFP, sumLiv)
	res.RatioAtPeakLive = ratio(float64(res.FootprintAtPeakLive), float64(res.PeakLive))
	res.RatioAtPeakFootprint = ratio(float64(res.PeakFootprint), float64(res.LiveAtPeakFootprint))
	res.PeakRatio = ratio(float64(res.PeakFootprint), float64(res.PeakLive))
	res.Fragmentation = math.NaN()
	if live > 0 {
		res.Fragmentation = 100 * (float64(res.End.Footprint)/float64(live) - 1)
	}
}

// traceError counts an event that does not fit the trace's live objects
// (keeping the first) and returns it when opt makes it fatal.
func (res *Result) traceError(opt Options, n int64, ev trace.Event, reason string) error {
	res.TraceErrors++
	e := &TraceError{Event: n, Ev: ev, Reason: reason}
	if res.FirstTraceError == nil {
		res.FirstTraceError = e
	}
	if opt.Strict {
		return e
	}
	return nil
}

func (r *replayer) object(id uint64) *object { return r.objects.get(id) }

func (r *replayer) traceError(reason string) error {
	return r.res.traceError(r.opt, r.n, r.ev, reason)
}

func (r *replayer) allocError(err error) error {
	return fmt.Errorf("replay: event %d (%v): %w", r.n, r.ev, err)
}

func (r *replayer) event(e trace.Event) error {
	if e.Op != trace.Free && e.Size > math.MaxInt {
		return r.traceError(fmt.Sprintf("size %d is too large", e.Size))
	}
	size := int(e.Size)
	o := r.object(e.ID)
	switch e.Op {
	case trace.Alloc, trace.Calloc, trace.Memalign:
		if o.state == stLive {
			return r.traceError(fmt.Sprintf("object %d is already live", e.ID))
		}
		align := int(e.Align)
		if e.Op == trace.Calloc {
			align = 0
		}
		t := r.start()
		b, err := r.a.Alloc(size, align)
		if err == nil && e.Op == trace.Calloc {
			clear(b)
		}
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		if r.opt.Touch {
			clear(b)
		}
		if err := r.admit(e.ID, b, size, align); err != nil {
			return err
		}
		o = r.object(e.ID)
		o.b, o.state = b, stLive
		r.grow(int64(size))
	case trace.Free:
		switch o.state {
		case stNone:
			return r.traceError(fmt.Sprintf("free of object %d, never allocated", e.ID))
		case stDead:
			return r.traceError(fmt.Sprintf("double free of object %d", e.ID))
		}
		b := o.b
		if err := r.release(e.ID, b); err != nil {
			return err
		}
		r.shrinking()
		t := r.start()
		err := r.a.Free(b)
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		o = r.object(e.ID)
		o.b, o.state = nil, stDead
		r.live -= int64(len(b))
	case trace.Realloc:
		if o.state != stLive {
			return r.traceError(fmt.Sprintf("realloc of object %d, not live", e.ID))
		}
		old := o.b
		if err := r.release(e.ID, old); err != nil {
			return err
		}
		if size < len(old) {
			r.shrinking()
		}
		t := r.start()
		b, err := r.a.Realloc(old, size)
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		if !r.opt.NoCheck {
			if i := checkPattern(b, e.ID, len(old)); i >= 0 {
				return r.violation(e.ID, b, fmt.Sprintf("byte %d not kept by realloc from %d to %d bytes", i, len(old), size))
			}
		}
		if r.opt.Touch && size > len(old) {
			clear(b[len(old):])
		}
		if err := r.admit(e.ID, b, size, 0); err != nil {
			return err
		}
		o = r.object(e.ID)
		o.b = b
		r.live -= int64(len(old))
		r.grow(int64(size))
	default:
		return r.traceError(fmt.Sprintf("invalid op %v", e.Op))
	}
	return nil
}

// start counts an allocator call about to be made and returns the time it
// starts if it is one of those timed, or the zero Time.
func (r *replayer) start() time.Time {
	r.res.Ops++
	r.weight = 1
	if r.opt.TimeEvery > 1 && r.res.Ops > timeAll {
		r.weight = int64(r.opt.TimeEvery)
		r.rng ^= r.rng << 13
		r.rng ^= r.rng >> 7
		r.rng ^= r.rng << 17
		if r.rng%uint64(r.opt.TimeEvery) != 0 {
			return time.Time{}
		}
	}
	return time.Now()
}

// timed adds the time since t, less the clock's cost, to the allocator's,
// if start timed the call.
func (r *replayer) timed(t time.Time) {
	if t.IsZero() {
		return
	}
	r.res.TimedOps++
	r.res.Nanos += max(int64(time.Since(t)-r.clock), 0) * r.weight
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (r *replayer) violation(id uint64, b []byte, reason string) *Violation {
	return &Violation{Event: r.n, Ev: r.ev, ID: id, Addr: addr(b), Reason: reason}
}

// admit checks a block the allocator just returned for object id and
// writes the object's pattern into it.
func (r *replayer) admit(id uint64, b []byte, size, align int) error {
	if r.opt.NoCheck {
		return nil
	}
	if len(b) != size {
		return r.violation(id, b, fmt.Sprintf("length %d, asked for %d", len(b), size))
	}
	a := addr(b)
	if r.inside != nil && !r.inside.Contains(b) {
		return r.violation(id, b, fmt.Sprintf("%d bytes (capacity %d) not inside the allocator's memory", len(b), cap(b)))
	}
	if align > 0 && a&uintptr(align-1) != 0 {
		return r.violation(id, b, fmt.Sprintf("not aligned to %d", align))
	}
	// The capacity is the caller's to write, as much as the length: an
	// allocator that reports a usable size beyond the request (sizeclass's
	// class size) must not let it reach another block.
	span := cap(b)
	if span == 0 {
		return nil // takes no bytes: neither overlaps nor holds a pattern
	}
	if n := r.set.overlap(a, a+uintptr(span)); n != nil {
		v := r.violation(id, b, fmt.Sprintf("%d bytes (capacity) overlap a live block of %d bytes", span, n.end-n.addr))
		v.Other, v.OAddr = n.id, n.addr
		return v
	}
	r.set.insert(a, a+uintptr(span), id)
	writePattern(b, id)
	return nil
}

// release checks object id's block before it leaves the replayer's hands
// and forgets its address.
func (r *replayer) release(id uint64, b []byte) error {
	if r.opt.NoCheck || cap(b) == 0 {
		return nil
	}
	if i := checkPattern(b, id, len(b)); i >= 0 {
		return r.violation(id, b, fmt.Sprintf("byte %d changed while the block was live", i))
	}
	r.set.remove(addr(b))
	return nil
}

// The pattern: every byte of a block of up to patternAll bytes, else its
// first and last 8, derived from the object's ID and the byte's index.
const patternAll = 64

func patternByte(id uint64, i int) byte {
	x := (id + 1) * 0x9E3779B97F4A7C15
	return byte(x>>(uint(i&7)*8)) ^ byte(i>>3) ^ 0x5A
}

func writePattern(b []byte, id uint64) {
	n := len(b)
	if n <= patternAll {
		for i := range b {
			b[i] = patternByte(id, i)
		}
		return
	}
	for i := range 8 {
		b[i] = patternByte(id, i)
		b[n-8+i] = patternByte(id, n-8+i)
	}
}

// checkPattern verifies the pattern written into a block of n bytes, at
// the indexes below len(b); it returns the first wrong index, or -1.
func checkPattern(b []byte, id uint64, n int) int {
	if n <= patternAll {
		for i := range min(n, len(b)) {
			if b[i] != patternByte(id, i) {
				return i
			}
		}
		return -1
	}
	for _, i := range [...]int{0, 1, 2, 3, 4, 5, 6, 7, n - 8, n - 7, n - 6, n - 5, n - 4, n - 3, n - 2, n - 1} {
		if i < len(b) && b[i] != patternByte(id, i) {
			return i
		}
	}
	return -1
}

// clockCost measures what timing one call adds by itself.
func clockCost() time.Duration {
	best := time.Duration(math.MaxInt64)
	for range 64 {
		t := time.Now()
		d := time.Since(t)
		best = min(best, d)
	}
	return best
}
