package replay

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
)

// replayer is the in-process engine: it calls the allocator for each
// event, checks the blocks, and times every call.
type replayer struct {
	l      *ledger
	a      Allocator
	inside Container     // a, if it can tell whether a block is inside its memory
	blocks paged[[]byte] // by slot: the live object's block
	set    blockSet
	// self is a, if its figures are the process's Go heap: the replayer's
	// own bookkeeping is left out of them, and it keeps no set of blocks
	// (Go hands out no overlapping live slices).
	self ReplayerMemory
	// labeled is a, if it serves objects by their label (WithRoutes).
	labeled LabeledAllocator
	clock   *callClock
}

// Run replays src through a, event by event in order, on one locked OS
// thread (a multi-threaded recording is replayed in its recorded order),
// and returns what it measured. It stops at the first error of the
// source, of the allocator (an error wrapping it), of the checks (a
// *Violation) or, with opt.Strict, of the trace (a *TraceError); the
// Result then holds what was measured so far. Run does not close a.
//
// The footprint is read after every event (Allocator.Footprint), so its
// peak is exact for an allocator whose Footprint is; the full Stats every
// Options.SampleEvery events, at each mark, before live memory falls from
// a peak more than 1/128 above the last peak sampled, and at the end.
//
// Timing: every allocator call is timed on its own, and what timing it
// costs and the time the thread spent off the CPU in it are taken off
// (see callClock): Nanos is the time spent inside the calls, the system
// calls and page faults the allocator makes in them included; Calloc's
// zeroing counts as part of its call. The checks, the writes of
// Options.Touch and the bookkeeping are not timed.
//
// The checks cost, per allocation, a lookup and an insertion in a treap
// of live blocks by address (O(log n)), the allocator's Contains (when it
// is a Container) and writing up to 64 bytes; per free, the same reads and
// a deletion.
func Run(src trace.Source, a Allocator, opt Options) (Result, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &replayer{a: a, clock: newCallClock()}
	r.inside, _ = a.(Container)
	if m, ok := a.(ReplayerMemory); ok && m.OnGoHeap() {
		r.self = m
	}
	if la, ok := a.(LabeledAllocator); ok {
		la.UseLabels(trace.LabelsOf(src))
		r.labeled = la
	}
	l, err := newLedger(opt, r, true)
	if err != nil {
		return Result{}, err
	}
	l.collector, _ = a.(Collector)
	l.routes = RouterOf(a)
	r.l = l
	res, err := l.replay(src)
	if m, ok := MeshOf(a); ok && err == nil {
		res.Mesh = &m
	}
	return res, err
}

func (r *replayer) footprint() int64 { return r.a.Footprint() }

func (r *replayer) sample() (carve.Stats, error) {
	if r.self != nil {
		r.self.SetReplayerBytes(r.l.ownBytes() + r.blocks.bytes())
	}
	return r.a.Stats(), nil
}

func (r *replayer) allocError(err error) error {
	return fmt.Errorf("replay: event %d (%v): %w", r.l.n, r.l.ev, err)
}

// do calls the allocator for e, checking the block it returns or takes.
func (r *replayer) do(e trace.Event, slot uint32, old int64) error {
	for int(slot) >= r.blocks.n {
		r.blocks.push(nil)
	}
	opt := &r.l.opt
	size := int(e.Size)
	switch e.Op {
	case trace.Alloc, trace.Calloc, trace.Memalign:
		align := int(e.Align)
		if e.Op == trace.Calloc {
			align = 0
		}
		t := r.start()
		var b []byte
		var err error
		if r.labeled != nil && e.Label != 0 {
			b, err = r.labeled.AllocLabeled(size, align, e.Label)
		} else {
			b, err = r.a.Alloc(size, align)
		}
		if err == nil && e.Op == trace.Calloc {
			clear(b)
		}
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		if opt.Touch {
			clear(b)
		}
		if err := r.admit(e.ID, b, size, align); err != nil {
			return err
		}
		*r.blocks.at(slot) = b
	case trace.Free:
		b := *r.blocks.at(slot)
		if err := r.release(e.ID, b); err != nil {
			return err
		}
		t := r.start()
		err := r.a.Free(b)
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		*r.blocks.at(slot) = nil
	case trace.Realloc:
		b := *r.blocks.at(slot)
		if err := r.release(e.ID, b); err != nil {
			return err
		}
		t := r.start()
		n, err := r.a.Realloc(b, size)
		r.timed(t)
		if err != nil {
			return r.allocError(err)
		}
		if !opt.NoCheck {
			if i := checkPattern(n, e.ID, int(old)); i >= 0 {
				return r.violation(e.ID, n, fmt.Sprintf("byte %d not kept by realloc from %d to %d bytes", i, old, size))
			}
		}
		if opt.Touch && int64(size) > old {
			clear(n[old:])
		}
		if err := r.admit(e.ID, n, size, 0); err != nil {
			return err
		}
		*r.blocks.at(slot) = n
	}
	return nil
}

// start counts an allocator call about to be made and returns the
// clock's reading before it.
func (r *replayer) start() time.Duration {
	r.l.res.Ops++
	return r.clock.begin()
}

// timed adds the call begun at t, read by start, to the allocator's time.
func (r *replayer) timed(t time.Duration) {
	d, off := r.clock.end(t)
	res := &r.l.res
	res.TimedOps++
	res.Nanos += int64(d)
	res.OffCPU += int64(off)
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (r *replayer) violation(id uint64, b []byte, reason string) *Violation {
	return &Violation{Event: r.l.n, Ev: r.l.ev, ID: id, Addr: addr(b), Reason: reason}
}

// admit checks a block the allocator just returned for object id and
// writes the object's pattern into it.
func (r *replayer) admit(id uint64, b []byte, size, align int) error {
	if r.l.opt.NoCheck {
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
	if r.self != nil {
		writePattern(b, id)
		return nil
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
	if r.l.opt.NoCheck || cap(b) == 0 {
		return nil
	}
	if i := checkPattern(b, id, len(b)); i >= 0 {
		return r.violation(id, b, fmt.Sprintf("byte %d changed while the block was live", i))
	}
	if r.self == nil {
		r.set.remove(addr(b))
	}
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
