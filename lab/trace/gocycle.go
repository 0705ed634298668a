package trace

import (
	"fmt"
	"slices"
	"strconv"

	xtrace "golang.org/x/exp/trace"
)

// A GoCycle is one collection of a Go program's heap, as its execution
// trace records it: the range "GC concurrent mark phase" (its begin and
// end), and the heap-objects metric the runtime reports just before the
// end, with the world stopped, whose value is the bytes the mark found
// reachable (gcController.resetLive(work.bytesMarked); the third figure
// of a GODEBUG=gctrace=1 line, "283->292->236 MB"). An object the sweep
// frees after the cycle was unreachable when its mark ended.
type GoCycle struct {
	// Start and End are the positions of the mark's begin and end: the
	// number of events of the trace before each.
	Start, End int64
	// Marked is the bytes the mark found reachable.
	Marked uint64
	// Goal is the heap goal the runtime set after the mark, from Marked
	// (the goal metric that follows the end): the goal of the next
	// cycle. 0: the trace did not report it.
	Goal uint64
}

// MaxGoCycles is the most collections a Reader keeps (32 bytes each:
// 32 MiB); a trace of more stops with an error wrapping ErrTooManyLive.
// Cycles are never merged, unlike the samples of the Go heap.
const MaxGoCycles = 1 << 20

// goMarkRange is the name x/exp/trace gives a collection's mark.
const goMarkRange = "GC concurrent mark phase"

// goCycles is what a Reader keeps of a trace's collections: those read,
// and, for Copy, those not yet taken.
type goCycles struct {
	cycles []GoCycle
	taken  int // cycles[:taken] were taken
}

// add appends c: its end must not come before the last one's.
func (g *goCycles) add(c GoCycle) error {
	if len(g.cycles) == MaxGoCycles {
		return fmt.Errorf("%w (more than %d collections)", ErrTooManyLive, MaxGoCycles)
	}
	g.cycles = append(g.cycles, c)
	return nil
}

// take returns the cycles added since the last take.
func (g *goCycles) take() []GoCycle {
	c := g.cycles[g.taken:]
	g.taken = len(g.cycles)
	return c
}

// GoCycles returns the collections of a Go program read so far, in order:
// from a Go execution trace's mark ranges and metrics, or a native trace's
// "G" lines (version 3); nil for the other formats, and for a trace that
// recorded none. A Go execution trace's cycle is returned once its goal is
// known (the metric that follows the mark's end), or when the next mark
// begins, or at the trace's end (its Goal 0 then).
func (r *Reader) GoCycles() []GoCycle { return slices.Clone(r.cycles.cycles) }

// takeGoCycles returns the cycles read since it was last called (Copy).
func (r *Reader) takeGoCycles() []GoCycle { return r.cycles.take() }

// goMark is what the Go importer knows of the collection being read: a
// mark begun (at Start), or one ended and waiting for its goal.
type goMark struct {
	open, ended bool
	marked      bool // a heap-objects metric came since the mark began
	c           GoCycle
}

// goRange handles the begin or end of a range: a collection's mark.
// A mark that began before the trace did (its end comes first, or it is
// active at the start) starts at 0.
func (r *Reader) goRange(kind xtrace.EventKind, name string) error {
	if name != goMarkRange {
		return nil
	}
	g := r.gotr
	switch kind {
	case xtrace.EventRangeBegin, xtrace.EventRangeActive:
		if g.mark.open {
			return nil // already begun: an Active that restates it
		}
		if err := r.goCycleDone(); err != nil {
			return err
		}
		start := g.made
		if kind == xtrace.EventRangeActive {
			start = 0
		}
		g.mark = goMark{open: true, c: GoCycle{Start: start}}
	case xtrace.EventRangeEnd:
		if !g.mark.open {
			if err := r.goCycleDone(); err != nil {
				return err
			}
			g.mark = goMark{c: GoCycle{Start: 0}}
		}
		g.mark.open, g.mark.ended = false, true
		g.mark.c.End = g.made
		if !g.mark.marked {
			g.mark.c.Marked = 0
		}
	}
	return nil
}

// goMarkMetric notes a metric for the collection being read: the heap's
// objects during the mark (the last one before its end is the marked
// bytes), the goal after it, which completes the cycle.
func (r *Reader) goMarkMetric(name string, v uint64) error {
	g := r.gotr
	switch {
	case name == goObjectsMetric && g.mark.open:
		g.mark.c.Marked, g.mark.marked = v, true
	case name == goGoalMetric && g.mark.ended:
		g.mark.c.Goal = v
		return r.goCycleDone()
	}
	return nil
}

// goCycleDone keeps the collection that ended, if one is waiting.
func (r *Reader) goCycleDone() error {
	g := r.gotr
	if !g.mark.ended {
		return nil
	}
	g.mark.ended = false
	if err := r.cycles.add(g.mark.c); err != nil {
		return r.goError(err)
	}
	return nil
}

// nativeGoCycle is the syntax of the native format's collections.
const nativeGoCycle = `"G <mark start> <mark end> <marked bytes> <goal bytes>"`

// parseGoCycle reads a "G" line of a native v3 trace: a collection whose
// mark began after <mark start> events and ended after <mark end>.
func (r *Reader) parseGoCycle(line []byte) (bool, error) {
	var v [4]uint64
	i, ok := 1, true
	for k := range v {
		if v[k], i, ok = decField(line, i); !ok {
			break
		}
	}
	if !ok || !blank(line, i) {
		return false, r.syntaxError("collection", nativeGoCycle, line)
	}
	c := GoCycle{Start: int64(min(v[0], 1<<62)), End: int64(min(v[1], 1<<62)), Marked: v[2], Goal: v[3]}
	last := int64(0)
	if n := len(r.cycles.cycles); n > 0 {
		last = r.cycles.cycles[n-1].End
	}
	switch {
	case c.Start > c.End:
		return false, r.syntaxError("collection", "a mark that starts at or before its end", line)
	case c.End > r.stats.Events:
		return false, r.syntaxError("collection", fmt.Sprintf("a mark that ended by the %d events read so far", r.stats.Events), line)
	case c.End < last:
		return false, r.syntaxError("collection", fmt.Sprintf("a mark that ended at or after the last one's (after %d events)", last), line)
	}
	if err := r.cycles.add(c); err != nil {
		return false, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	return r.skip()
}

// GoCycle writes c as a "G" line, a collection of the Go program. Only a
// Writer of version 3 (SetLabels) writes them; c.End must not pass the
// events written so far.
func (w *Writer) GoCycle(c GoCycle) error {
	if w.err != nil {
		return w.err
	}
	if w.labels == nil {
		return fmt.Errorf("trace: Writer.GoCycle: collections need version 3 of the format (Writer.SetLabels)")
	}
	if c.Start < 0 || c.Start > c.End || c.End > w.events {
		return fmt.Errorf("trace: Writer.GoCycle: a mark from %d to %d, written after %d events", c.Start, c.End, w.events)
	}
	w.writeHeader()
	w.buf = append(w.buf, "G "...)
	w.buf = strconv.AppendInt(w.buf, c.Start, 10)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendInt(w.buf, c.End, 10)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, c.Marked, 10)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, c.Goal, 10)
	w.buf = append(w.buf, '\n')
	return w.flushIfFull()
}

// CycleHeap is what a Go program's heap held over each of its
// collections, read from a trace whose frees are moved to the marks'
// ends (traces.Trace.CycleHeap computes it, replay.NewPacedGoHeap paces
// by it), for a set of labels moved off it. For collection i: Peak[i]
// is the most bytes its objects held between the end of the mark before
// and the end of its own (the heap the program's pacer let grow),
// Moved[i] the bytes of the labels' objects its mark found (allocated
// before its end and not freed by its sweep), Black[i] the bytes of the
// other objects allocated while it ran and alive at its end (the
// runtime allocates them marked: black), and Share[i] the labels'
// objects' share of the objects it visited (alive at its end and born
// before it started). Any may be shorter than the collections, or nil.
type CycleHeap struct {
	Peak, Moved, Black []uint64
	Share              []float64
}
