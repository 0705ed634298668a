package trace

import (
	"container/heap"
	"fmt"
	"io"
	"sort"
)

// Frees as early as the trace allows. A free moved to the end of the
// mark that proved its object dead (MoveFrees) is the latest the object
// can have died; the earliest is the later of its allocation and the
// start of the mark before: an object the sweep of cycle N frees was not
// found by N's mark, and Go's collector marks what was reachable when a
// mark starts (and allocates black while it runs), so the object was
// reachable at the start of N-1's mark if it was born before it, and may
// have been dropped at once after that, or after its birth. A program
// that frees its own memory when it drops it frees somewhere between the
// two: near the early end for buffers and values replaced in place.
// (The object was dead by the start of N's mark, too: the mark finds what
// was reachable then, and what it allocates. The latest place stays the
// mark's end, where the trace proves it.) An
// object the trace never frees (alive at its end, or dropped after the
// last mark) may have died as early as the later of its birth and the
// start of the last mark: an early free goes there too.
//
// EarlyFrees moves the frees of the objects whose label match accepts to
// that earliest place, before the event that follows it; the other frees
// stay where main has them. PlacedFrees chooses, by label, between the
// two ends and a place spread between the early one and the start of the
// mark that proved the object dead: where a collector that runs at
// another moment than the program's would find it dead, if objects die
// evenly over the span where they may have died. A free of an object born before the first
// mark's end moves to its birth. Finding them takes a second reader of the
// same events, lead, which reads up to two cycles ahead; what it holds is
// the positions of the matched objects alive and the frees found and not
// yet returned, 16 bytes each, at most MaxMovedFrees of each.

// EarlyFrees returns the events of main, a source of frees moved to the
// marks' ends (MoveFrees, or any Source whose MarkEnds says where its
// marks ended), with the frees of the objects whose label match accepts
// moved to the earliest place the trace allows (see above). lead must be
// a second such Source of the same events from their start. The Source
// returned is Positioned and labelled when main is, and its MarkEnds give
// the cycles at their positions in the events it returns.
func EarlyFrees(main, lead Source, match func(label uint32) bool) Source {
	return PlacedFrees(main, lead, func(label uint32) FreePlace {
		if match(label) {
			return FreeEarly
		}
		return FreeLate
	})
}

// FreePlace is where PlacedFrees puts the free of an object, in the span
// the trace allows: from the later of its birth and the start of the
// mark before the one that proved it dead, to that mark's end.
type FreePlace uint8

const (
	// FreeLate keeps the free at the end of the mark that proved the
	// object dead, where main has it.
	FreeLate FreePlace = iota
	// FreeEarly moves it to the span's start.
	FreeEarly
	// FreeSpread moves it to a place chosen by the object's ID alone (a
	// hash of it, uniform) between the span's start and the start of the
	// mark that proved it dead (the mark finds what was reachable when it
	// started, and what it allocated, so the object was dead by then):
	// the frees of many objects spread evenly over the spans where they
	// died, the same in every run.
	FreeSpread
	// FreeMarkStart moves it to the start of the mark that proved the
	// object dead: the latest it can have died if it was reachable from
	// the heap (the mark finds what was reachable when it started; only
	// an object reachable from a goroutine's stack alone may have died
	// later, before that stack was scanned).
	FreeMarkStart
)

// PlacedFrees returns the events of main as EarlyFrees does, with the
// free of each object moved to where place says for its label.
func PlacedFrees(main, lead Source, place func(label uint32) FreePlace) Source {
	e := &earlyFreer{main: main, lead: lead, place: place, labels: LabelsOf(main)}
	e.mainPos, _ = main.(Positioned)
	e.leadPos, _ = lead.(Positioned)
	e.leadEnds, _ = lead.(markEnder)
	e.leadStarts, _ = lead.(markStarter)
	return e
}

// markStarter is a Source that says where its marks started, the one
// under way included (MoveFrees's).
type markStarter interface{ MarkStarts() []int64 }

// markEnder is a Source that says where its marks ended (MoveFrees's).
type markEnder interface{ MarkEnds() []GoCycle }

// bornAt is an object alive whose free moves: the position of its birth,
// and where in its span the free goes.
type bornAt struct {
	at    int64
	where FreePlace
}

// spread returns a number in [0, 1) made of id alone, uniform over ids
// (splitmix64's finalizer): where in its span an object's free spreads.
func spread(id uint64) float64 {
	z := id + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// earlyFree is a free found by the reader ahead: the object, the
// position before which it is returned, and the line it came from.
type earlyFree struct {
	at   int64
	id   uint64
	line int64
}

// earlyFrees is a heap of frees, the earliest first.
type earlyFrees []earlyFree

func (h earlyFrees) Len() int { return len(h) }
func (h earlyFrees) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].id < h[j].id
}
func (h earlyFrees) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *earlyFrees) Push(x any)   { *h = append(*h, x.(earlyFree)) }
func (h *earlyFrees) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// earlyFreer is the Source EarlyFrees returns.
type earlyFreer struct {
	main, lead       Source
	mainPos, leadPos Positioned
	leadEnds         markEnder
	leadStarts       markStarter
	place            func(uint32) FreePlace
	labels           *Labels
	err              error // sticky

	// The reader ahead: its batch, its position, its end, the objects
	// alive whose frees move (their birth's position, and where in its
	// span), the frees found.
	lbuf    []Event
	li      int
	lpos    int64
	lerr    error
	born    IDs[bornAt]
	ended   bool // the reader ahead has read every event, and born was given its frees
	pending earlyFrees

	// The events returned: main's batch, its position, the objects whose
	// free was returned early (their own is dropped), the position in the
	// events returned, the cycles mapped to it.
	mbuf  []Event
	mi    int
	mpos  int64
	merr  error
	early IDs[struct{}]
	opos  int64
	out   []GoCycle
	start []int64 // the mapped starts of the cycles, in order

	name  string
	lines []int64
	names []string
}

func (e *earlyFreer) Labels() *Labels { return e.labels }

func (e *earlyFreer) Position(i int) (string, int64) {
	if i < 0 || i >= len(e.lines) {
		return e.name, 0
	}
	return e.names[i], e.lines[i]
}

// MarkEnds returns the cycles whose mark end the events returned have
// reached, at their positions in those events (shared).
func (e *earlyFreer) MarkEnds() []GoCycle { return e.out[:len(e.out):len(e.out)] }

// Format returns main's format, for a main that tells it.
func (e *earlyFreer) Format() Format {
	if f, ok := e.main.(interface{ Format() Format }); ok {
		return f.Format()
	}
	return Auto
}

// ready reports whether the reader ahead has found every free that moves
// before position q of main: it has passed the end of a mark that
// started after q (a free it has not read moves no earlier than that
// start), or the events' end.
func (e *earlyFreer) ready(q int64) bool {
	if e.lerr != nil && e.li == len(e.lbuf) {
		e.leadEnded()
		return true
	}
	if e.leadEnds == nil {
		return false
	}
	ends := e.leadEnds.MarkEnds()
	// The last mark it has passed the end of.
	for i := len(ends) - 1; i >= 0; i-- {
		if ends[i].End <= e.lpos {
			return ends[i].Start > q
		}
	}
	return false
}

// leadEnded gives, once the reader ahead has read every event, a free
// to each object alive then whose free moves early: the trace proves no
// object alive at its end dead, and it may have died as early as the
// later of its birth and the start of the last mark (which found it
// reachable, if it was born before it), the rule for any other object
// with the last mark as the one before. Its free goes there if that is
// before the events' end. Objects whose frees stay late or spread keep
// no free, as in main.
func (e *earlyFreer) leadEnded() {
	if e.ended {
		return
	}
	var last int64
	if e.leadEnds != nil {
		if ends := e.leadEnds.MarkEnds(); len(ends) > 0 {
			last = ends[len(ends)-1].Start
		}
	}
	for id, b := range e.born.All {
		if at := max(b.at+1, last); b.where == FreeEarly && at < e.lpos {
			heap.Push(&e.pending, earlyFree{at: at, id: id})
		}
	}
	e.born, e.ended = IDs[bornAt]{}, true
}

// ahead reads one event of the reader ahead.
func (e *earlyFreer) ahead() error {
	if e.li == len(e.lbuf) {
		if e.lbuf == nil {
			e.lbuf = make([]Event, 4096)
		}
		n, err := e.lead.Read(e.lbuf[:cap(e.lbuf)])
		e.lbuf, e.li, e.lerr = e.lbuf[:n], 0, err
		if n == 0 && err == nil {
			e.lerr = io.ErrNoProgress
		}
		if n == 0 {
			return nil
		}
	}
	ev := e.lbuf[e.li]
	var line int64
	if e.leadPos != nil {
		_, line = e.leadPos.Position(e.li)
	}
	e.li++
	p := e.lpos
	e.lpos++
	switch {
	case born(ev):
		where := e.place(ev.Label)
		if where == FreeLate {
			return nil
		}
		if e.born.Len() == MaxMovedFrees {
			return fmt.Errorf("%w (more than %d objects alive whose frees move early)", ErrTooManyLive, MaxMovedFrees)
		}
		e.born.Set(ev.ID, bornAt{p, where})
	case ev.Op == Free:
		b, ok := e.born.Get(ev.ID)
		if !ok {
			return nil
		}
		e.born.Delete(ev.ID)
		at, end := b.at+1, p
		if e.leadEnds != nil {
			ends := e.leadEnds.MarkEnds()
			// The mark before the one whose end this free is at: the
			// last that ended at or before it.
			i := sort.Search(len(ends), func(i int) bool { return ends[i].End > p })
			if i > 0 {
				at = max(at, ends[i-1].Start)
			}
			// The mark whose end it is at did not find the object: it
			// was dead when that mark started (an early free needs not
			// know).
			if e.leadStarts != nil && b.where != FreeEarly {
				if starts := e.leadStarts.MarkStarts(); i < len(starts) {
					end = min(end, starts[i])
				}
			}
		}
		switch {
		case b.where == FreeSpread && at < end:
			at += int64(spread(ev.ID) * float64(end-at))
		case b.where == FreeMarkStart:
			at = max(at, end)
		}
		if at >= p {
			return nil
		}
		if len(e.pending) == MaxMovedFrees {
			return fmt.Errorf("%w (more than %d frees moved early and not yet reached)", ErrTooManyLive, MaxMovedFrees)
		}
		heap.Push(&e.pending, earlyFree{at: at, id: ev.ID, line: line})
	}
	return nil
}

// mapCycles maps the cycles whose start or end is at or before main's
// position to the position in the events returned. The reader ahead
// knows them: it has passed the end of a mark that started after main's
// position (ready).
func (e *earlyFreer) mapCycles() {
	if e.leadEnds == nil {
		return
	}
	ends := e.leadEnds.MarkEnds()
	for len(e.start) < len(ends) && ends[len(e.start)].Start <= e.mpos {
		e.start = append(e.start, e.opos)
	}
	for len(e.out) < len(ends) && ends[len(e.out)].End <= e.mpos {
		c := ends[len(e.out)]
		c.Start, c.End = e.start[len(e.out)], e.opos
		e.out = append(e.out, c)
	}
}

func (e *earlyFreer) Read(dst []Event) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	e.lines, e.names = e.lines[:0], e.names[:0]
	n := 0
	for n < len(dst) {
		for !e.ready(e.mpos) {
			if err := e.ahead(); err != nil {
				e.err = fmt.Errorf("%s: %w", e.name, err)
				return n, nil
			}
		}
		if len(e.pending) > 0 && e.pending[0].at <= e.mpos {
			f := heap.Pop(&e.pending).(earlyFree)
			e.early.Set(f.id, struct{}{})
			dst[n] = Event{Op: Free, ID: f.id}
			e.lines, e.names = append(e.lines, f.line), append(e.names, e.name)
			n++
			e.opos++
			continue
		}
		if e.mi == len(e.mbuf) {
			if e.merr != nil {
				break
			}
			if e.mbuf == nil {
				e.mbuf = make([]Event, 4096)
			}
			k, err := e.main.Read(e.mbuf[:cap(e.mbuf)])
			e.mbuf, e.mi, e.merr = e.mbuf[:k], 0, err
			if k == 0 {
				if err == nil {
					e.merr = io.ErrNoProgress
				}
				e.mapCycles()
				break
			}
		}
		e.mapCycles()
		ev := e.mbuf[e.mi]
		name, line := e.name, int64(0)
		if e.mainPos != nil {
			name, line = e.mainPos.Position(e.mi)
			e.name = name
		}
		e.mi++
		e.mpos++
		if _, early := e.early.Get(ev.ID); ev.Op == Free && early {
			e.early.Delete(ev.ID)
			continue
		}
		dst[n] = ev
		e.lines, e.names = append(e.lines, line), append(e.names, name)
		n++
		e.opos++
	}
	if n > 0 {
		return n, nil
	}
	if e.err != nil {
		return 0, e.err
	}
	return 0, e.merr
}

var (
	_ Positioned    = (*earlyFreer)(nil)
	_ LabeledSource = (*earlyFreer)(nil)
)
