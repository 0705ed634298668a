package trace

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// Frees where the trace proves the object dead. A Go execution trace
// frees an object when the sweeper reaches it, after the collection that
// found it unreachable: the object was dead when that collection's mark
// ended, a whole cycle earlier. MoveFrees moves each such free back to
// the end of that mark. The rule, for a free at position p (the number of
// events before it):
//
//   - the mark that proves the object dead is the last one that ended at
//     or before p (the sweep of cycle N runs between N's mark end and
//     N+1's mark start, and an object allocated after N's mark ended is
//     not swept before N+1's ends);
//   - the free moves to that mark's end when the object was allocated
//     before it; the frees of a mark's end come there in the order the
//     sweep made them, before the event that followed the end;
//   - a free before the trace's first mark end, the free of an object
//     allocated after the mark, and the free of a goroutine stack (which
//     is not swept: its goroutine ended) stay where they are.
//
// Objects must be numbered in order of their birth, as the importers
// number them (1, 2, 3...): an object was allocated before a mark's end
// when its ID is below that of the first object allocated after it.
// Finding where a free moves to takes a second reader of the same events,
// lead, which reads each cycle's sweep ahead of the events returned; what
// the mover holds is the frees of one cycle's sweep, 16 bytes each, at
// most MaxMovedFrees of them.

// MaxMovedFrees is the most frees MoveFrees moves to one mark's end (16
// bytes each: 256 MiB): a cycle whose sweep freed more stops the trace
// with an error wrapping ErrTooManyLive.
const MaxMovedFrees = 1 << 24

// ErrBirthOrder is wrapped by the error of MoveFrees on a trace whose
// objects are not numbered in order of their birth.
var ErrBirthOrder = errors.New("trace: the objects are not numbered in order of their birth, so their frees cannot be moved to the marks that proved them dead")

// MoveFrees returns the events of main with the frees of collections'
// sweeps moved back to the ends of the marks that proved the objects dead
// (see the rule above). lead must be a second Source of the same events
// from their start, which MoveFrees reads ahead; cycles are the trace's
// collections, all of them, in order (a trace's GoCycles once read
// through). The Source returned is Positioned and labelled when main is
// (a moved free is positioned at its own line), and its MarkEnds and
// GoHeap give the cycles' and samples' positions in the events it
// returns: a cycle's End is after the frees moved to it, where the heap
// holds what the mark found reachable. A trace without cycles is returned
// with no free moved.
func MoveFrees(main, lead Source, cycles []GoCycle) Source {
	m := &freeMover{main: main, lead: lead, cycles: slices.Clone(cycles), labels: LabelsOf(main)}
	m.mainPos, _ = main.(Positioned)
	m.leadPos, _ = lead.(Positioned)
	if g, ok := main.(interface{ GoHeap() []GoHeapSample }); ok {
		m.samples = slices.Clone(g.GoHeap())
	}
	return m
}

// movedFree is a free moved to a mark's end, and the line it came from.
type movedFree struct {
	id   uint64
	line int64
}

// freeMover is the Source MoveFrees returns.
type freeMover struct {
	main, lead       Source
	mainPos, leadPos Positioned
	labels           *Labels
	cycles           []GoCycle      // their positions in main's events
	out              []GoCycle      // those reached, at their positions in the events returned
	samples          []GoHeapSample // main's; samples[:moved] at their positions in the events returned
	moved            int
	err              error // sticky: the mover's own error

	// The reader ahead: its events read and not yet seen, its position
	// (the events it has seen), the largest ID allocated so far, the
	// goroutine stacks alive.
	lbuf   []Event
	li     int
	lpos   int64
	lerr   error
	lmax   uint64
	lborn  bool // an object was born
	lstack map[uint64]bool

	// The events returned: main's batch, main's position, the goroutine
	// stacks alive, the position in the events returned.
	mbuf   []Event
	mi     int
	mpos   int64
	merr   error
	mstack map[uint64]bool
	opos   int64

	next     int         // the next cycle whose end main has not passed
	starts   []int64     // the positions of the cycles' starts main has passed, in the events returned
	bound    uint64      // the objects of IDs below it were born before the last mark end passed; 0: none passed
	due      []movedFree // the frees of the last mark end; due[di:] not returned yet
	di       int
	sweeping bool // at a mark end: its due frees are being returned

	stackLabel []int8 // by label: 1 a goroutine stack, -1 not, 0 not known yet
	name       string // main's file, for the moved frees' positions
	lines      []int64
	names      []string
}

// Labels returns main's table of labels (LabeledSource).
func (m *freeMover) Labels() *Labels { return m.labels }

// Position returns where the i-th event of the last Read came from.
func (m *freeMover) Position(i int) (string, int64) {
	if i < 0 || i >= len(m.lines) {
		return m.name, 0
	}
	return m.names[i], m.lines[i]
}

// MarkEnds returns the cycles whose mark end the events returned have
// reached, at their positions in those events: after a Read, a cycle's
// End is at most the count of events returned, and at least the count
// before that Read.
// The slice is shared: the caller must not change it.
func (m *freeMover) MarkEnds() []GoCycle { return m.out[:len(m.out):len(m.out)] }

// MarkStarts returns the positions, in the events returned, of the
// starts of the marks they have passed, the one under way included:
// MarkEnds's Start for those that have ended. The slice is shared: the
// caller must not change it.
func (m *freeMover) MarkStarts() []int64 { return m.starts[:len(m.starts):len(m.starts)] }

// Format returns main's format, for a main that tells it (Auto
// otherwise).
func (m *freeMover) Format() Format {
	if f, ok := m.main.(interface{ Format() Format }); ok {
		return f.Format()
	}
	return Auto
}

// GoHeap returns main's samples of the Go heap, those the events returned
// have passed at their positions in them.
func (m *freeMover) GoHeap() []GoHeapSample { return slices.Clone(m.samples) }

// isStack reports whether label l names goroutine stacks.
func (m *freeMover) isStack(l uint32) bool {
	if l == 0 || m.labels == nil {
		return false
	}
	if int(l) >= len(m.stackLabel) {
		m.stackLabel = slices.Grow(m.stackLabel, int(l)+1-len(m.stackLabel))[:int(l)+1]
	}
	if m.stackLabel[l] == 0 {
		m.stackLabel[l] = -1
		if m.labels.Name(l) == goStackLabel {
			m.stackLabel[l] = 1
		}
	}
	return m.stackLabel[l] == 1
}

// born reports whether e starts an object.
func born(e Event) bool { return e.Op == Alloc || e.Op == Calloc || e.Op == Memalign }

// track keeps the goroutine stacks alive in stacks as e passes.
func (m *freeMover) track(stacks map[uint64]bool, e Event) {
	switch {
	case born(e) && m.isStack(e.Label):
		stacks[e.ID] = true
	case e.Op == Free && stacks[e.ID]:
		delete(stacks, e.ID)
	}
}

// leadNext returns the reader ahead's next event and its line; ok is
// false at its end or error (main meets the same there).
func (m *freeMover) leadNext() (e Event, line int64, ok bool) {
	if m.li == len(m.lbuf) {
		if m.lerr != nil {
			return Event{}, 0, false
		}
		if m.lbuf == nil {
			m.lbuf = make([]Event, 4096)
		}
		n, err := m.lead.Read(m.lbuf[:cap(m.lbuf)])
		m.lbuf, m.li, m.lerr = m.lbuf[:n], 0, err
		if n == 0 {
			if m.lerr == nil {
				m.lerr = io.ErrNoProgress
			}
			return Event{}, 0, false
		}
	}
	e = m.lbuf[m.li]
	if m.leadPos != nil {
		_, line = m.leadPos.Position(m.li)
	}
	m.li++
	return e, line, true
}

// leadTo moves the reader ahead to position end (or its end), keeping the
// largest ID born and the stacks alive; with sweep, it collects the frees
// of objects born before the mark end it starts at: the frees that move
// there.
func (m *freeMover) leadTo(end int64, sweep bool) error {
	if m.lstack == nil {
		m.lstack = map[uint64]bool{}
	}
	bound := m.bornBelow()
	for m.lpos < end {
		e, line, ok := m.leadNext()
		if !ok {
			return nil
		}
		m.lpos++
		switch {
		case born(e):
			if e.ID <= m.lmax && m.lborn {
				return fmt.Errorf("%w (object %d is born after object %d)", ErrBirthOrder, e.ID, m.lmax)
			}
			m.lmax, m.lborn = e.ID, true
		case sweep && e.Op == Free && e.ID < bound && !m.lstack[e.ID]:
			if len(m.due) == MaxMovedFrees {
				return fmt.Errorf("%w (more than %d frees of one cycle's sweep, moved to its mark's end)", ErrTooManyLive, MaxMovedFrees)
			}
			m.due = append(m.due, movedFree{e.ID, line})
		}
		m.track(m.lstack, e)
	}
	return nil
}

// bornBelow returns the ID below which every object the reader ahead
// has seen was born: 0 when none was.
func (m *freeMover) bornBelow() uint64 {
	if !m.lborn {
		return 0
	}
	return m.lmax + 1
}

// moves reports whether main's free e, in the sweep of the last mark end
// passed, is one moved to that end.
func (m *freeMover) moves(e Event) bool {
	return e.Op == Free && e.ID < m.bound && !m.mstack[e.ID]
}

// markEnd is reached when main is at the end of cycle m.next's mark: the
// reader ahead reads its sweep (to the next mark end) and the frees that
// move are due.
func (m *freeMover) markEnd() error {
	c := m.cycles[m.next]
	if m.next > 0 && c.End <= m.cycles[m.next-1].End {
		return nil // the same end again: its frees moved with the first
	}
	if m.lpos < c.End {
		if err := m.leadTo(c.End, false); err != nil {
			return err
		}
	}
	m.bound = m.bornBelow()
	sweepEnd := int64(1<<63 - 1)
	for _, d := range m.cycles[m.next+1:] {
		if d.End > c.End {
			sweepEnd = d.End
			break
		}
	}
	return m.leadTo(sweepEnd, true)
}

// passed moves the samples at or before main's position to the position
// of the events returned.
func (m *freeMover) passed() {
	for ; m.moved < len(m.samples) && m.samples[m.moved].Events <= m.mpos; m.moved++ {
		m.samples[m.moved].Events = m.opos
	}
}

// mapStarts keeps the position, in the events returned, of the mark
// starts at or before main's position.
func (m *freeMover) mapStarts() {
	for ; len(m.starts) < len(m.cycles) && m.cycles[len(m.starts)].Start <= m.mpos; m.starts = append(m.starts, m.opos) {
	}
}

// endPassed records that the frees moved to cycle m.next's mark end have
// all been returned: the cycle ends here in the events returned.
func (m *freeMover) endPassed() {
	for len(m.starts) <= m.next {
		m.starts = append(m.starts, m.opos)
	}
	c := m.cycles[m.next]
	c.Start, c.End = m.starts[m.next], m.opos
	m.out = append(m.out, c)
	m.next++
	m.sweeping = false
	m.due, m.di = m.due[:0], 0
}

// Read returns the next events of main, the moved frees at their marks'
// ends.
func (m *freeMover) Read(dst []Event) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if m.mstack == nil {
		m.mstack = map[uint64]bool{}
	}
	m.lines, m.names = m.lines[:0], m.names[:0]
	n := 0
	for n < len(dst) {
		m.mapStarts()
		switch {
		case m.sweeping && m.di < len(m.due):
			d := m.due[m.di]
			m.di++
			dst[n] = Event{Op: Free, ID: d.id}
			m.lines, m.names = append(m.lines, d.line), append(m.names, m.name)
			n++
			m.opos++
			if m.di == len(m.due) {
				m.endPassed()
			}
			continue
		case m.sweeping:
			m.endPassed()
			continue
		case m.next < len(m.cycles) && m.cycles[m.next].End <= m.mpos:
			if err := m.markEnd(); err != nil {
				m.err = fmt.Errorf("%s: %w", m.name, err)
				return n, nil
			}
			m.sweeping = true
			continue
		}
		m.passed()
		if m.mi == len(m.mbuf) {
			if m.merr != nil {
				break
			}
			if m.mbuf == nil {
				m.mbuf = make([]Event, 4096)
			}
			k, err := m.main.Read(m.mbuf[:cap(m.mbuf)])
			m.mbuf, m.mi, m.merr = m.mbuf[:k], 0, err
			if k == 0 {
				if err == nil {
					m.merr = io.ErrNoProgress
				}
				break
			}
		}
		e := m.mbuf[m.mi]
		name, line := m.name, int64(0)
		if m.mainPos != nil {
			name, line = m.mainPos.Position(m.mi)
			m.name = name
		}
		m.mi++
		m.mpos++
		if m.moves(e) {
			continue
		}
		m.track(m.mstack, e)
		dst[n] = e
		m.lines, m.names = append(m.lines, line), append(m.names, name)
		n++
		m.opos++
	}
	if n > 0 {
		return n, nil
	}
	if m.err != nil {
		return 0, m.err
	}
	return 0, m.merr
}
