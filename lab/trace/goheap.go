package trace

import (
	"fmt"
	"io"
	"slices"
	"strconv"
)

// MaxGoHeapSamples is the most samples of the Go heap's metrics a Reader
// keeps; past it, neighbouring samples are merged two into one (see
// Reader.GoHeap).
const MaxGoHeapSamples = 1 << 16

// A GoHeapSample is the Go runtime's own account of its heap at one point
// of a Go execution trace, from the trace's metric events: the heap's
// objects (/memory/classes/heap/objects:bytes, which counts the slots of
// the spans the allocator hands objects from, dead objects not yet swept
// included) and the heap goal of the GC cycle (/gc/heap/goal:bytes).
// 0 is a metric not reported yet. A native trace of version 2 carries
// them as "g" lines.
type GoHeapSample struct {
	// Events is the number of events of the trace before the sample: the
	// sample describes the heap after event Events-1 (0-based) and before
	// event Events.
	Events  int64
	Objects uint64
	Goal    uint64
}

// goHeapSeries is the samples of a trace, at most MaxGoHeapSamples of
// them, and, for Copy, those not yet taken.
type goHeapSeries struct {
	samples []GoHeapSample
	fresh   []GoHeapSample // the samples since the last take, when taking
	taking  bool
}

// add appends s, or replaces the last sample when it is at the same
// place.
func (h *goHeapSeries) add(s GoHeapSample) {
	if h.taking {
		if n := len(h.fresh); n > 0 && h.fresh[n-1].Events == s.Events {
			h.fresh[n-1] = s
		} else {
			h.fresh = append(h.fresh, s)
		}
	}
	if n := len(h.samples); n > 0 && h.samples[n-1].Events == s.Events {
		h.samples[n-1] = s
		return
	}
	if len(h.samples) == MaxGoHeapSamples {
		// Two into one, the one of more heap bytes kept: the peak stays,
		// the series coarsens.
		for i := range len(h.samples) / 2 {
			a, b := h.samples[2*i], h.samples[2*i+1]
			if b.Objects > a.Objects {
				a = b
			}
			h.samples[i] = a
		}
		h.samples = h.samples[:len(h.samples)/2]
	}
	h.samples = append(h.samples, s)
}

// take returns the samples added since the last take; the first call
// starts the taking, and returns none.
func (h *goHeapSeries) take() []GoHeapSample {
	h.taking = true
	f := h.fresh
	h.fresh = h.fresh[len(h.fresh):]
	if cap(h.fresh) > 1024 && len(f) == 0 {
		h.fresh = nil
	}
	return f
}

// GoHeap returns the samples of the Go heap's own metrics read so far, in
// order: from a Go execution trace's metric events, or a native trace's
// "g" lines; nil for the other formats. Past MaxGoHeapSamples,
// neighbouring samples are merged two into one, the one of more
// heap-object bytes kept, so the peak of Objects stays exact.
func (r *Reader) GoHeap() []GoHeapSample {
	return slices.Clone(r.goHeap.samples)
}

// goHeapTaker is a Source whose samples of the Go heap Copy takes as
// it reads: a *Reader, or a type that embeds one.
type goHeapTaker interface {
	takeGoHeap() []GoHeapSample
}

func (r *Reader) takeGoHeap() []GoHeapSample { return r.goHeap.take() }

// goCycleTaker is a Source whose collections Copy takes as it reads: a
// *Reader, or a type that embeds one.
type goCycleTaker interface {
	takeGoCycles() []GoCycle
}

// nativeGoHeap is the syntax of the native format's samples.
const nativeGoHeap = `"g <heap objects bytes> <heap goal bytes>"`

// parseGoHeap reads a "g <objects> <goal>" line of a native v2 trace.
func (r *Reader) parseGoHeap(line []byte) (bool, error) {
	objects, i, ok := decField(line, 1)
	var goal uint64
	if ok {
		goal, i, ok = decField(line, i)
	}
	if !ok || !blank(line, i) {
		return false, r.syntaxError("go heap", nativeGoHeap, line)
	}
	r.goHeap.add(GoHeapSample{Events: r.stats.Events, Objects: objects, Goal: goal})
	return r.skip()
}

// GoHeap writes s as a "g" line, the Go heap's metrics at this point of
// the trace: s.Events must be the number of events written so far. Only
// a Writer of version 2 (SetLabels) writes them.
func (w *Writer) GoHeap(s GoHeapSample) error {
	if w.err != nil {
		return w.err
	}
	if w.labels == nil {
		return fmt.Errorf("trace: Writer.GoHeap: samples of the Go heap need version 2 of the format (Writer.SetLabels)")
	}
	if s.Events != w.events {
		return fmt.Errorf("trace: Writer.GoHeap: a sample after %d events, written after %d", s.Events, w.events)
	}
	w.writeHeader()
	w.buf = append(w.buf, "g "...)
	w.buf = strconv.AppendUint(w.buf, s.Objects, 10)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, s.Goal, 10)
	w.buf = append(w.buf, '\n')
	return w.flushIfFull()
}

// Copy writes the events of src to w, and, when src is a *Reader not
// read before, the samples of the Go heap, the program's collections and
// the samples of its RSS at their places (for a w of version 3: see
// Writer.SetLabels, which must be given src's labels first when src has
// them; a sample of the RSS not placed is written as it is read). It returns the number of events written, and the
// first error of src or w; it does not Flush w.
func Copy(w *Writer, src Source) (int64, error) {
	r, heap := src.(goHeapTaker)
	heap = heap && w.labels != nil
	cr, cycles := src.(goCycleTaker)
	cycles = cycles && w.labels != nil
	rr, rss := src.(rssTaker)
	rss = rss && w.labels != nil
	var due []GoHeapSample  // samples not written yet
	var dueCycles []GoCycle // collections not written yet
	var dueRSS []ProcessRSS // samples of the RSS not written yet
	if heap {
		r.takeGoHeap()
	}
	if cycles {
		cr.takeGoCycles()
	}
	if rss {
		rr.takeProcessRSS()
	}
	start := w.events
	// rssDue writes the samples of the RSS placed by the events written
	// (all: every one left, at the end).
	rssDue := func(all bool) error {
		for len(dueRSS) > 0 && (all || dueRSS[0].Event <= w.events-start) {
			s := dueRSS[0]
			if s.Event >= 0 {
				s.Event = w.events
			}
			if err := w.ProcessRSS(s); err != nil {
				return err
			}
			dueRSS = dueRSS[1:]
		}
		return nil
	}
	// cycle writes the collections whose mark ended by the events written.
	cycle := func(all bool) error {
		for len(dueCycles) > 0 && (all || dueCycles[0].End <= w.events-start) {
			c := dueCycles[0]
			c.Start, c.End = start+min(c.Start, w.events-start), start+min(c.End, w.events-start)
			if err := w.GoCycle(c); err != nil {
				return err
			}
			dueCycles = dueCycles[1:]
		}
		return nil
	}
	buf := make([]Event, 4096)
	for {
		n, err := src.Read(buf)
		if heap {
			for _, s := range r.takeGoHeap() {
				if n := len(due); n > 0 && due[n-1].Events == s.Events {
					due[n-1] = s // a later account of the same point
				} else {
					due = append(due, s)
				}
			}
		}
		if cycles {
			dueCycles = append(dueCycles, cr.takeGoCycles()...)
		}
		if rss {
			dueRSS = append(dueRSS, rr.takeProcessRSS()...)
		}
		for _, e := range buf[:n] {
			for len(due) > 0 && due[0].Events <= w.events-start {
				if err := w.GoHeap(GoHeapSample{Events: w.events, Objects: due[0].Objects, Goal: due[0].Goal}); err != nil {
					return w.events - start, err
				}
				due = due[1:]
			}
			if err := cycle(false); err != nil {
				return w.events - start, err
			}
			if err := rssDue(false); err != nil {
				return w.events - start, err
			}
			if err := w.Write(e); err != nil {
				return w.events - start, err
			}
		}
		if err != nil {
			for _, s := range due {
				if werr := w.GoHeap(GoHeapSample{Events: w.events, Objects: s.Objects, Goal: s.Goal}); werr != nil {
					return w.events - start, werr
				}
			}
			if cycles {
				dueCycles = append(dueCycles, cr.takeGoCycles()...)
			}
			if werr := cycle(true); werr != nil {
				return w.events - start, werr
			}
			if rss {
				dueRSS = append(dueRSS, rr.takeProcessRSS()...)
			}
			if werr := rssDue(true); werr != nil {
				return w.events - start, werr
			}
			if err == io.EOF {
				err = nil
			}
			return w.events - start, err
		}
	}
}
