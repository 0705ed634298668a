package replay

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
)

func alloc(id, size uint64) trace.Event { return trace.Event{Op: trace.Alloc, ID: id, Size: size} }
func free(id uint64) trace.Event        { return trace.Event{Op: trace.Free, ID: id} }
func realloc(id, size uint64) trace.Event {
	return trace.Event{Op: trace.Realloc, ID: id, Size: size}
}
func memalign(id, size uint64, align uint32) trace.Event {
	return trace.Event{Op: trace.Memalign, ID: id, Size: size, Align: align}
}
func calloc(id uint64, n uint32, size uint64) trace.Event {
	return trace.Event{Op: trace.Calloc, ID: id, N: n, Size: size}
}

func newAlloc(t *testing.T, name string) Allocator {
	t.Helper()
	a, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return a
}

func TestEveryAllocator(t *testing.T) {
	evs := []trace.Event{
		alloc(1, 100), alloc(2, 0), memalign(3, 200, 256), calloc(4, 10, 80),
		realloc(1, 5000), realloc(4, 8), alloc(5, 64), free(2), realloc(5, 64),
		free(3), alloc(1<<40, 24), free(1 << 40), alloc(6, 100000), free(6),
		memalign(7, 3, 8), memalign(8, 5, 4), free(7), free(8), // small blocks aligned beyond their size's
	}
	// Live after each event; the peak is after alloc(6).
	const peak = 5000 + 8 + 64 + 100000
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			a := newAlloc(t, name)
			res, err := Run(trace.Events(evs), a, Options{SampleEvery: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Events != int64(len(evs)) || res.TraceErrors != 0 {
				t.Errorf("events %d, trace errors %d", res.Events, res.TraceErrors)
			}
			if res.PeakLive != peak || res.Live != 5000+8+64 {
				t.Errorf("peak live %d, live %d; want %d, %d", res.PeakLive, res.Live, peak, 5000+8+64)
			}
			if res.Ops != int64(len(evs)) || res.NsPerOp <= 0 {
				t.Errorf("ops %d, ns/op %v", res.Ops, res.NsPerOp)
			}
			if name != "go" {
				if res.End.Live != res.Live {
					t.Errorf("allocator's live %d, replay's %d", res.End.Live, res.Live)
				}
				if res.PeakFootprint < res.PeakLive || res.PeakRatio < 1 || res.Fragmentation < 0 {
					t.Errorf("peak footprint %d, ratio %v, fragmentation %v", res.PeakFootprint, res.PeakRatio, res.Fragmentation)
				}
			}
		})
	}
}

func TestUnknownName(t *testing.T) {
	if _, err := New("malloc"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("New(malloc): %v", err)
	}
}

func TestTraceErrors(t *testing.T) {
	evs := []trace.Event{
		alloc(1, 10), free(7), alloc(1, 20), free(1), free(1), realloc(1, 30), realloc(9, 4), alloc(2, 8),
	}
	a := newAlloc(t, "best-fit")
	res, err := Run(trace.Events(evs), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.TraceErrors != 5 || res.FirstTraceError == nil || res.FirstTraceError.Event != 2 {
		t.Fatalf("trace errors %d, first %v", res.TraceErrors, res.FirstTraceError)
	}
	if res.Live != 8 || res.PeakLive != 10 {
		t.Errorf("live %d, peak %d", res.Live, res.PeakLive)
	}

	b := newAlloc(t, "best-fit")
	_, err = Run(trace.Events(evs), b, Options{Strict: true})
	var te *TraceError
	if !errors.As(err, &te) || te.Event != 2 {
		t.Fatalf("strict: %v", err)
	}
}

// broken is a heap over one Go buffer that misbehaves as told.
type broken struct {
	buf      []byte
	next     int
	overlap  bool // every block starts at the same place
	misalign bool // blocks are 8 bytes past an aligned address
	scribble bool // Free's caller finds its bytes changed: Alloc clobbers the last block
	shortLen bool // blocks one byte short
	outside  bool // Contains says no for blocks past the first 64 bytes
	last     []byte
}

func (h *broken) Contains(b []byte) bool {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(h.buf)))
	return !h.outside || off < 64
}

func (h *broken) Alloc(size, align int) ([]byte, error) {
	if h.scribble && h.last != nil && len(h.last) > 0 {
		h.last[0]++
	}
	off := h.next
	if align < 16 {
		align = 16
	}
	off = (off + align - 1) &^ (align - 1)
	if h.misalign {
		off += 8
	}
	if !h.overlap {
		h.next = off + size + 16
	}
	n := size
	if h.shortLen && n > 0 {
		n--
	}
	b := h.buf[off : off+n : off+n]
	h.last = b
	return b, nil
}
func (h *broken) Free([]byte) error { return nil }
func (h *broken) Realloc(b []byte, size int) ([]byte, error) {
	n, _ := h.Alloc(size, 0)
	copy(n, b)
	return n, nil
}
func (h *broken) Footprint() int64   { return int64(h.next) }
func (h *broken) Stats() carve.Stats { return carve.Stats{Footprint: int64(h.next)} }
func (h *broken) Close() error       { return nil }

func TestViolations(t *testing.T) {
	evs := []trace.Event{alloc(1, 100), memalign(2, 50, 64), alloc(3, 30), free(1), free(2), free(3)}
	for _, tc := range []struct {
		name  string
		h     *broken
		event int64
		id    uint64
		other uint64
	}{
		{"overlap", &broken{overlap: true}, 2, 2, 1},
		{"misalign", &broken{misalign: true}, 2, 2, 0},
		{"scribble", &broken{scribble: true}, 4, 1, 0},
		{"short", &broken{shortLen: true}, 1, 1, 0},
		{"outside", &broken{outside: true}, 2, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.buf = make([]byte, 1<<16)
			_, err := Run(trace.Events(evs), tc.h, Options{})
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("got %v, want a violation", err)
			}
			if v.Event != tc.event || v.ID != tc.id || v.Other != tc.other {
				t.Errorf("got %v; want event %d, object %d, other %d", v, tc.event, tc.id, tc.other)
			}
			t.Log(v)
			// Without the checks the replay runs through.
			tc.h.next, tc.h.last = 0, nil
			if _, err := Run(trace.Events(evs), tc.h, Options{NoCheck: true}); err != nil {
				t.Errorf("NoCheck: %v", err)
			}
		})
	}
}

func TestBalancedFragmentation(t *testing.T) {
	a := newAlloc(t, "first-fit")
	res, err := Run(trace.Events([]trace.Event{alloc(1, 10), free(1)}), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(res.Fragmentation) {
		t.Errorf("fragmentation of a balanced trace: %v, want NaN", res.Fragmentation)
	}
}

func TestBlockSet(t *testing.T) {
	var s blockSet
	for i := range uintptr(1000) {
		a := (i * 7919 % 1000) * 100
		if n := s.overlap(a, a+50); n != nil {
			t.Fatalf("overlap at %d: %+v", a, n)
		}
		s.insert(a, a+50, uint64(i))
	}
	for _, c := range []struct{ lo, hi uintptr }{{49, 51}, {99, 101}, {150, 260}, {99940, 100000}} {
		if s.overlap(c.lo, c.hi) == nil {
			t.Errorf("[%d,%d) overlaps nothing", c.lo, c.hi)
		}
	}
	if s.overlap(50, 100) != nil || s.overlap(100050, 100060) != nil {
		t.Error("gap overlaps")
	}
	for i := range uintptr(1000) {
		s.remove(i * 100)
	}
	if s.root != nil {
		t.Error("set not empty")
	}
}

// TestMarks checks the samples taken at marks: live memory and the
// allocator's footprint after exactly those events, and bad marks refused.
func TestMarks(t *testing.T) {
	evs := []trace.Event{alloc(1, 100), alloc(2, 200), free(1), alloc(3, 50)}
	a := newAlloc(t, "first-fit")
	res, err := Run(trace.Events(evs), a, Options{Marks: []int64{2, 3, 9}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Marks) != 2 || res.Marks[0].Event != 2 || res.Marks[0].Live != 300 || res.Marks[1].Live != 200 {
		t.Fatalf("Marks = %+v, want events 2 and 3 with live 300 and 200", res.Marks)
	}
	if st := res.Marks[0].Stats; st.Live != 300 || st.Footprint < 300 {
		t.Errorf("stats at mark 2 = %+v", st)
	}
	for _, bad := range [][]int64{{0}, {3, 3}, {4, 2}} {
		if _, err := Run(trace.Events(evs), newAlloc(t, "first-fit"), Options{Marks: bad}); err == nil {
			t.Errorf("Marks %v accepted", bad)
		}
	}
}

// TestBudget: a request above Options.MaxRequest is a trace error no
// allocator sees, in both engines; its object's free is absorbed, and a
// realloc of it back within the budget is its birth. Live memory that
// would pass Options.MaxLive stops the replay.
func TestBudget(t *testing.T) {
	const tib = 1 << 40
	evs := []trace.Event{
		alloc(1, tib), alloc(2, 16), free(2), free(1), // the huge one refused; its free absorbed
		alloc(3, 100), realloc(3, tib), free(3), // a realloc above: skipped, the object stays live
		alloc(4, 2*tib), realloc(4, 64), free(4), // refused, then born by the realloc
		calloc(5, 1<<20, 1<<31), free(5), // a calloc's product, 2 GiB
	}
	for _, engine := range []string{"Run", "RunBatch"} {
		t.Run(engine, func(t *testing.T) {
			a := newAlloc(t, "best-fit")
			opt := Options{MaxRequest: 1 << 30}
			var res Result
			var err error
			if engine == "Run" {
				res, err = Run(trace.Events(evs), a, opt)
			} else {
				res, err = RunBatch(trace.Events(evs), &batched{a: a}, opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.TraceErrors != 4 || res.Ops != 6 || res.PeakLive != 100 || res.Live != 0 {
				t.Errorf("trace errors %d, ops %d, peak live %d, live %d; want 4, 6, 100, 0", res.TraceErrors, res.Ops, res.PeakLive, res.Live)
			}
			if e := res.FirstTraceError; e == nil || e.Event != 1 || !strings.Contains(e.Reason, "above the replay's budget of 1.00 GiB") {
				t.Errorf("first trace error %v", e)
			}
			if _, err := Run(trace.Events(evs[:1]), newAlloc(t, "best-fit"), Options{MaxRequest: 1 << 30, Strict: true}); !errors.As(err, new(*TraceError)) {
				t.Errorf("strict: %v, want a *TraceError", err)
			}
		})
	}
	// The default budget refuses a terabyte.
	if res, err := Run(trace.Events(evs[:4]), newAlloc(t, "best-fit"), Options{}); err != nil || res.TraceErrors != 1 {
		t.Errorf("default budget: %d trace errors, %v; want the terabyte refused", res.TraceErrors, err)
	}
	// Live memory past MaxLive stops the replay.
	many := []trace.Event{alloc(1, 600), alloc(2, 600)}
	if _, err := Run(trace.Events(many), newAlloc(t, "best-fit"), Options{MaxLive: 1000}); !errors.Is(err, ErrBudget) {
		t.Errorf("past MaxLive: %v, want ErrBudget", err)
	}
}

// slowEvery is an allocator one call in every of which takes long: it
// spins until its thread has run for long (a rare long call, as a system
// call or a pass of meshing is), after sleeping for long with sleep (its
// thread off the CPU, as when it is preempted).
type slowEvery struct {
	Allocator
	every, calls int
	long         time.Duration
	sleep        bool
}

func (s *slowEvery) Alloc(n, align int) ([]byte, error) {
	if s.calls++; s.calls%s.every == 0 {
		if s.sleep {
			time.Sleep(s.long)
		}
		t, _ := threadCPU()
		for c := t; c-t < s.long; c, _ = threadCPU() {
		}
	}
	return s.Allocator.Alloc(n, align)
}

// TestLongCallsTimed checks that the time per call counts every long call
// once, and not the time its thread spent off the CPU. A replay that
// timed a sample of the calls, each standing for several, would count a
// rare one many times or not at all.
func TestLongCallsTimed(t *testing.T) {
	const n, every, long = 5000, 249, 3 * time.Millisecond
	if _, ok := threadCPU(); !ok {
		t.Skip("no thread CPU clock here")
	}
	evs := make([]trace.Event, 0, 2*n)
	for i := range uint64(n) {
		evs = append(evs, alloc(i+1, 64), free(i+1))
	}
	run := func(long time.Duration, sleep bool) Result {
		a := &slowEvery{Allocator: newAlloc(t, "best-fit"), every: every, long: long, sleep: sleep}
		res, err := Run(trace.Events(evs), a, Options{NoCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOps != res.Ops || res.Ops != 2*n {
			t.Fatalf("timed %d of %d calls, want all %d", res.TimedOps, res.Ops, 2*n)
		}
		return res
	}
	spun := time.Duration(n/every) * long
	for _, sleep := range []bool{false, true} {
		// The same calls with none long, just before: what the fast
		// calls take in this run, which the race detector or a loaded
		// machine makes several times what they take alone.
		base := time.Duration(run(0, false).Nanos)
		res := run(long, sleep)
		// The long calls' spinning and the fast calls' time, the latter
		// up to twice what it was just before, and under a quarter of
		// the spinning more: counting a sample of the calls, one in 16
		// each standing for 16, would give 0 or 16 long calls' time
		// for one sampled.
		got := time.Duration(res.Nanos)
		if lo, hi := spun-time.Duration(res.Ops)*100*time.Nanosecond, spun+2*base+spun/4; got < lo || got > hi {
			t.Errorf("sleeping %v: time in the calls %v, want the %v they spun and %v or so for the others (%v to %v)",
				sleep, got, spun, base, lo, hi)
		}
		if off := time.Duration(res.OffCPU); sleep && off < spun*9/10 {
			t.Errorf("sleeping: %v taken off the calls' time, want about the %v they slept", off, spun)
		}
	}
}
