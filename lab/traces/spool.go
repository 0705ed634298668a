package traces

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/carvelab/carve/lab/trace"
)

// Decoded events, read once and replayed many times. A run that replays a
// trace through many rows decodes it once (Spooled): into an unnamed
// temporary file of events in a compact binary form (a few bytes an
// event), which every row then reads, so that what the decoder holds (the
// importers' tables of live addresses, a heaptrack file's allocation
// records, a Go trace's generation) is paid once per run, not once per
// row, and is freed before the rows run. The rows measured in child
// processes get the same form of the events over their standard input
// (WriteStream, ReadStream): no child decodes a trace.
//
// The form, one record after another:
//
//	op 1..5, flags     an event: the op in the low 3 bits, and a bit each
//	                   for the fields that follow when not 0 (thread,
//	                   align, N, label); then the ID, the size (not for
//	                   a free), those fields, and the line, as the
//	                   difference from the event before (zigzag), all
//	                   as varints
//	recName, name      the file the events that follow come from
//	recLabel, label    the next label of the table: its name, its
//	                   attributes' count, each key and value
//	recCycle, cycle    a Go program's collection whose mark ended at the
//	                   events written so far (a stream's only): its
//	                   start, end, marked bytes and goal, varints
//	recEnd, message    the end: the message of the error that ended the
//	                   trace, "" for its end
//
// A string is its length (a varint), then its bytes.

const (
	recEnd   = 0
	recName  = 0x80
	recLabel = 0x81
	recCycle = 0x82

	flagThread = 1 << 3
	flagAlign  = 1 << 4
	flagN      = 1 << 5
	flagLabel  = 1 << 6
	opMask     = 7
)

// encoder writes records.
type encoder struct {
	w      *bufio.Writer
	line   int64
	buf    [8 * binary.MaxVarintLen64]byte
	name   string // the file name written last
	labels int    // labels written
}

func (e *encoder) uvarint(x uint64) { e.w.Write(binary.AppendUvarint(e.buf[:0], x)) }

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.w.WriteString(s)
}

// event writes ev, from line of file name.
func (e *encoder) event(ev trace.Event, name string, line int64) {
	if name != e.name {
		e.w.WriteByte(recName)
		e.str(name)
		e.name = name
	}
	op := byte(ev.Op)
	if ev.Thread != 0 {
		op |= flagThread
	}
	if ev.Align != 0 {
		op |= flagAlign
	}
	if ev.N != 0 {
		op |= flagN
	}
	if ev.Label != 0 {
		op |= flagLabel
	}
	b := append(e.buf[:0], op)
	b = binary.AppendUvarint(b, ev.ID)
	if ev.Op != trace.Free {
		b = binary.AppendUvarint(b, ev.Size)
	}
	if ev.Thread != 0 {
		b = binary.AppendUvarint(b, uint64(ev.Thread))
	}
	if ev.Align != 0 {
		b = binary.AppendUvarint(b, uint64(ev.Align))
	}
	if ev.N != 0 {
		b = binary.AppendUvarint(b, uint64(ev.N))
	}
	if ev.Label != 0 {
		b = binary.AppendUvarint(b, uint64(ev.Label))
	}
	b = binary.AppendVarint(b, line-e.line)
	e.line = line
	e.w.Write(b)
}

// label writes the next label of the table.
func (e *encoder) label(l trace.Label) {
	e.w.WriteByte(recLabel)
	e.str(l.Name)
	e.uvarint(uint64(len(l.Attrs)))
	for _, a := range l.Attrs {
		e.str(a.Key)
		e.str(a.Value)
	}
	e.labels++
}

// cycle writes a collection.
func (e *encoder) cycle(c trace.GoCycle) {
	e.w.WriteByte(recCycle)
	e.uvarint(uint64(c.Start))
	e.uvarint(uint64(c.End))
	e.uvarint(c.Marked)
	e.uvarint(c.Goal)
}

// end writes the end of the records: err is what ended the trace (nil or
// io.EOF: its end).
func (e *encoder) end(err error) error {
	e.w.WriteByte(recEnd)
	msg := ""
	if err != nil && err != io.EOF {
		msg = err.Error()
	}
	e.str(msg)
	return e.w.Flush()
}

// errForm is wrapped by the error of records that are not in the form.
var errForm = errors.New("traces: decoded events: not in carve's form")

// decoder reads records: the reader of a spool or of a stream.
type decoder struct {
	r      *bufio.Reader
	line   int64
	name   string
	labels *trace.Labels // the table a stream's label records build; nil: skip them
	own    bool          // labels is built from the records
	lines  []int64       // the line of each event of the last Read
	err    error         // sticky
	// end, if not nil, is the error that ended the trace, returned
	// instead of the one recorded (the spool keeps the decoder's own
	// value, so that errors.Is still matches it).
	end    error
	goHeap []trace.GoHeapSample
	rss    []trace.ProcessRSS // a spool's trace's samples of the program's RSS
	cycles []trace.GoCycle    // a stream's, read so far
	events int64              // the events read
	format trace.Format       // a spool's trace's
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.err = fmt.Errorf("%w: %v", errForm, err)
	}
	return x
}

// maxString bounds a string of the form: a label's name or value, a file
// name, an error message.
const maxString = 1 << 20

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxString {
		d.err = fmt.Errorf("%w: a string of %d bytes", errForm, n)
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = fmt.Errorf("%w: %v", errForm, err)
	}
	return string(b)
}

// Read decodes up to len(dst) events.
func (d *decoder) Read(dst []trace.Event) (int, error) {
	d.lines = d.lines[:0]
	n := 0
	for n < len(dst) && d.err == nil {
		// An event whose record is in the buffer decodes from it; any
		// other record, one cut by the buffer's end, or one in error
		// takes the way below.
		if b, _ := d.r.Peek(maxEventRecord); len(b) > 0 {
			if e, delta, k := decodeEvent(b); k > 0 {
				d.r.Discard(k)
				d.line += delta
				d.events++
				dst[n] = e
				d.lines = append(d.lines, d.line)
				n++
				continue
			}
		}
		c, err := d.r.ReadByte()
		if err != nil {
			d.err = fmt.Errorf("%w: %v", errForm, err)
			break
		}
		switch {
		case c == recEnd:
			msg := d.str()
			switch {
			case d.err != nil:
			case d.end != nil:
				d.err = d.end
			case msg == "":
				d.err = io.EOF
			default:
				d.err = errors.New(msg)
			}
		case c == recName:
			d.name = d.str()
		case c == recCycle:
			g := trace.GoCycle{Start: int64(min(d.uvarint(), 1<<62)), End: int64(min(d.uvarint(), 1<<62)), Marked: d.uvarint(), Goal: d.uvarint()}
			if d.err == nil && (g.Start > g.End || g.End > d.events || len(d.cycles) > 0 && g.End < d.cycles[len(d.cycles)-1].End || len(d.cycles) == trace.MaxGoCycles) {
				d.err = fmt.Errorf("%w: a collection from %d to %d after %d events", errForm, g.Start, g.End, d.events)
			}
			if d.err == nil {
				d.cycles = append(d.cycles, g)
			}
		case c == recLabel:
			l := trace.Label{Name: d.str()}
			for k := d.uvarint(); k > 0 && d.err == nil; k-- {
				l.Attrs = append(l.Attrs, trace.Attr{Key: d.str(), Value: d.str()})
			}
			if d.own && d.err == nil {
				if _, err := d.labels.Intern(l); err != nil {
					d.err = err
				}
			}
		case trace.Op(c&opMask).Valid() && c&^(opMask|flagThread|flagAlign|flagN|flagLabel) == 0:
			e := trace.Event{Op: trace.Op(c & opMask), ID: d.uvarint()}
			if e.Op != trace.Free {
				e.Size = d.uvarint()
			}
			if c&flagThread != 0 {
				e.Thread = uint32(d.uvarint())
			}
			if c&flagAlign != 0 {
				e.Align = uint32(d.uvarint())
			}
			if c&flagN != 0 {
				e.N = uint32(d.uvarint())
			}
			if c&flagLabel != 0 {
				e.Label = uint32(d.uvarint())
			}
			delta, err := binary.ReadVarint(d.r)
			if err != nil && d.err == nil {
				d.err = fmt.Errorf("%w: %v", errForm, err)
			}
			if d.err != nil {
				break
			}
			d.line += delta
			d.events++
			dst[n] = e
			d.lines = append(d.lines, d.line)
			n++
		default:
			d.err = fmt.Errorf("%w: record %#x", errForm, c)
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, d.err
}

// maxEventRecord is the most bytes an event's record takes: its first
// byte and seven varints.
const maxEventRecord = 1 + 7*binary.MaxVarintLen64

// decodeEvent decodes the event record at the start of b: the event,
// its line's delta and the record's length, or a length of 0 when b
// starts no event or holds only part of it, or the record is not in the
// form (the decoder's way byte by byte says why).
func decodeEvent(b []byte) (trace.Event, int64, int) {
	c := b[0]
	if !trace.Op(c&opMask).Valid() || c&^(opMask|flagThread|flagAlign|flagN|flagLabel) != 0 { // the other records' bytes are none
		return trace.Event{}, 0, 0
	}
	k := 1
	bad := false
	next := func() uint64 {
		x, m := binary.Uvarint(b[k:])
		if m <= 0 {
			bad = true
			return 0
		}
		k += m
		return x
	}
	e := trace.Event{Op: trace.Op(c & opMask), ID: next()}
	if e.Op != trace.Free {
		e.Size = next()
	}
	if c&flagThread != 0 {
		e.Thread = uint32(next())
	}
	if c&flagAlign != 0 {
		e.Align = uint32(next())
	}
	if c&flagN != 0 {
		e.N = uint32(next())
	}
	if c&flagLabel != 0 {
		e.Label = uint32(next())
	}
	if bad {
		return trace.Event{}, 0, 0
	}
	delta, m := binary.Varint(b[k:])
	if m <= 0 {
		return trace.Event{}, 0, 0
	}
	return e, delta, k + m
}

// Position returns the file and the line of the i-th event of the last
// Read (trace.Positioned).
func (d *decoder) Position(i int) (string, int64) {
	if i < 0 || i >= len(d.lines) {
		return d.name, 0
	}
	return d.name, d.lines[i]
}

// Labels returns the table the events' labels number (trace.LabeledSource).
func (d *decoder) Labels() *trace.Labels { return d.labels }

// GoHeap returns the samples of the Go heap's own metrics the trace
// carried, as trace.Reader.GoHeap does.
func (d *decoder) GoHeap() []trace.GoHeapSample { return d.goHeap }

// ProcessRSS returns the samples of the recorded program's RSS the
// trace carried, as trace.Reader.ProcessRSS does, for a spool.
func (d *decoder) ProcessRSS() []trace.ProcessRSS { return d.rss }

// MarkEnds returns the collections a stream carried, read so far, at
// their places in its events: a stream of moved frees (trace.MoveFrees)
// carries them (shared: the caller must not change them).
func (d *decoder) MarkEnds() []trace.GoCycle { return d.cycles[:len(d.cycles):len(d.cycles)] }

// Format returns the format the trace was read in, for a spool.
func (d *decoder) Format() trace.Format { return d.format }

// WriteStream writes src's events to w in the form ReadStream reads, with
// the labels each event names before it, the positions of the events when
// src tells them, and the collections of a source of moved frees at their
// places (trace.MoveFrees), to its end or to its first error, which the
// stream carries too. It returns an error only when w fails.
func WriteStream(w io.Writer, src trace.Source) error {
	e := &encoder{w: bufio.NewWriterSize(w, 64<<10)}
	pos, _ := src.(trace.Positioned)
	labels := trace.LabelsOf(src)
	cs, _ := src.(interface{ MarkEnds() []trace.GoCycle })
	var cycles []trace.GoCycle
	sent, written := 0, int64(0)
	// cycle writes the collections whose mark ended by the events written.
	cycle := func() {
		for ; sent < len(cycles) && cycles[sent].End <= written; sent++ {
			e.cycle(cycles[sent])
		}
	}
	buf := make([]trace.Event, 4096)
	for {
		n, err := src.Read(buf)
		if cs != nil {
			cycles = cs.MarkEnds()
		}
		for i, ev := range buf[:n] {
			cycle()
			written++
			for ev.Label != 0 && e.labels < int(ev.Label) && e.labels < labels.Len() {
				l, _ := labels.Label(uint32(e.labels + 1))
				e.label(l)
			}
			name, line := "", int64(0)
			if pos != nil {
				name, line = pos.Position(i)
			}
			e.event(ev, name, line)
		}
		cycle()
		if err != nil {
			return e.end(err)
		}
		if n == 0 {
			return e.end(io.ErrNoProgress)
		}
	}
}

// ReadStream returns the events WriteStream wrote to r: a trace.Source
// that is also a trace.Positioned and a trace.LabeledSource (its table
// grows as the stream is read). An error that ended the trace it wrote is
// returned after its events, with its message.
func ReadStream(r io.Reader) trace.Source {
	return &decoder{r: bufio.NewReaderSize(r, 64<<10), labels: &trace.Labels{}, own: true}
}

// ReadStreamAll reads the whole stream in r into an unnamed temporary
// file first, then returns its events as ReadStream does: a reader that
// never waits for the writer, so that a replay reading it blocks on no
// pipe (a replay in a process of its own measures that process). Where
// no temporary file can be written, it returns ReadStream(r).
func ReadStreamAll(r io.Reader) (trace.Source, io.Closer, error) {
	f, err := os.CreateTemp("", "carve-stream-*")
	if err != nil {
		return ReadStream(r), io.NopCloser(nil), nil
	}
	os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("traces: reading the events: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	d := ReadStream(f).(*decoder)
	d.r.Peek(d.r.Size()) // its buffer filled now, not in the replay
	d.lines = make([]int64, 0, 4096)
	return d, f, nil
}

// spool holds the decoded events of one trace: see the top of this file.
type spool struct {
	once   sync.Once
	decode func() (trace.Source, io.Closer, error) // the trace's own Open
	held   *os.File                                // the records; nil if none could be written
	size   int64
	labels *trace.Labels
	goHeap []trace.GoHeapSample
	rss    []trace.ProcessRSS // the recorded program's RSS
	cycles []trace.GoCycle    // a Go program's collections
	// cycleHeap keeps CycleHeap's answers, by the names joined.
	cyclesMu  sync.Mutex
	cycleHeap map[string]trace.CycleHeap
	// placed keeps OpenPlaced's streams, by what they place (placedKey),
	// each written once to a file of its own (at most maxPlaced).
	placedMu sync.Mutex
	placed   map[string]*placedSpool
	format   trace.Format
	// goProgram says the trace is a Go program's: a Go execution trace,
	// or one with samples of the Go heap.
	goProgram bool
	err       error // what ended the trace: nil for its end
	open      error // the trace's Open failed: every Open fails so
}

// Spooled returns t decoding its events once: the first Open reads the
// whole trace into a spool (an unnamed temporary file, removed when the
// program ends however it ends), frees what the decoder held, and every
// Open, that one included, then reads the spool. Its source is a
// trace.Positioned and a trace.LabeledSource, with the Go heap's samples
// (GoHeap) of a trace that has them; a trace that stopped at an error
// gives its events up to there, then the same error. Opens from many
// goroutines wait for the first. A generated trace is returned as it is
// (a generator holds nothing a row would pay for twice), and so is one
// already spooled. Where no temporary file can be written, each Open
// decodes the trace again, as t's own does.
//
// A Go program's trace that records its collections (trace.GoCycle)
// comes from a spool with its frees moved to the ends of the marks that
// proved the objects dead (trace.MoveFrees), so that the live memory it
// counts is what the program's collector would find, and the sources
// say where the marks ended (MarkEnds); FreesAtSweep keeps them where
// the trace has them.
func (t Trace) Spooled() Trace {
	if t.Generated || t.spool != nil || t.open == nil {
		return t
	}
	s := &spool{decode: t.open}
	t.spool = s
	sweep := t.sweep
	t.open = func() (trace.Source, io.Closer, error) { return s.Open(sweep) }
	return t
}

// FreesAtSweep returns t with a Go program's frees where its trace has
// them, when the sweeper reached each object, once spooled: the live
// memory then counts the garbage of a cycle (see Spooled).
func (t Trace) FreesAtSweep() Trace {
	t.sweep = true
	if s := t.spool; s != nil {
		t.open = func() (trace.Source, io.Closer, error) { return s.Open(true) }
	}
	return t
}

// FreesMoved reports whether t's spooled sources move a Go program's
// frees to the ends of its marks: its trace records collections and
// FreesAtSweep was not asked for. It is known once t has been opened.
func (t Trace) FreesMoved() bool {
	return t.Frees() == FreesMoved
}

// ProcessRSS returns the samples of the recorded program's own RSS that
// t's trace holds (carve record takes them: see trace.ProcessRSS), in
// order; nil for a trace without them. It is known once t, spooled, has
// been opened.
func (t Trace) ProcessRSS() []trace.ProcessRSS {
	if t.spool == nil {
		return nil
	}
	return t.spool.rss
}

// GoHeap returns the samples of the Go heap's own metrics that t's trace
// holds (trace.GoHeapSample); nil for a trace without them. It is known
// once t, spooled, has been opened.
func (t Trace) GoHeap() []trace.GoHeapSample {
	if t.spool == nil {
		return nil
	}
	return t.spool.goHeap
}

// Frees says where the frees of a trace's objects are.
type Frees int

const (
	// FreesAsRecorded: not a Go program's trace (or not yet opened).
	FreesAsRecorded Frees = iota
	// FreesMoved: at the ends of the marks that proved the objects dead.
	FreesMoved
	// FreesAtSweepAsked: at the sweep, as FreesAtSweep asked.
	FreesAtSweepAsked
	// FreesAtSweepNoCycles: at the sweep, the trace recording no
	// collections.
	FreesAtSweepNoCycles
)

// Frees says where t's spooled sources have the frees of its objects.
// It is known once t has been opened.
func (t Trace) Frees() Frees {
	switch s := t.spool; {
	case s == nil || !s.goProgram:
		return FreesAsRecorded
	case t.sweep:
		return FreesAtSweepAsked
	case len(s.cycles) == 0:
		return FreesAtSweepNoCycles
	}
	return FreesMoved
}

// The names of where the frees are, as carve's --frees and the replay
// JSON's "frees" give them.
const (
	FreesAtMarkName  = "mark"
	FreesAtSweepName = "sweep"
)

// Name returns FreesAtMarkName or FreesAtSweepName ("" for
// FreesAsRecorded).
func (f Frees) Name() string {
	switch f {
	case FreesMoved:
		return FreesAtMarkName
	case FreesAtSweepAsked, FreesAtSweepNoCycles:
		return FreesAtSweepName
	}
	return ""
}

// String says where the frees are and what that means for live memory,
// for the reader of a table ("" for FreesAsRecorded).
func (f Frees) String() string {
	// No collection proves an object that died after the last mark dead.
	const last = "; an object dropped after the last collection's mark has no free, and the figures at the end count it live"
	switch f {
	case FreesMoved:
		return "each at the end of the collection's mark that proved its object dead: live memory is what the collector would find" + last
	case FreesAtSweepAsked:
		return "where the sweeper made them, a cycle after the mark that proved each object dead (--frees=sweep): live memory counts a cycle of garbage" + last
	case FreesAtSweepNoCycles:
		return "where the sweeper made them, a cycle after the mark that proved each object dead: live memory counts a cycle of garbage (the trace records no collections: record it again, or convert its Go execution trace, with this carve)" + last
	}
	return ""
}

// fill decodes the trace into the spool.
func (s *spool) fill() {
	src, closer, err := s.decode()
	if err != nil {
		s.open = err
		return
	}
	defer closer.Close()
	f, err := os.CreateTemp("", "carve-spool-*")
	if err != nil {
		return
	}
	// Unnamed from now on: the file goes when the program does.
	os.Remove(f.Name())
	e := &encoder{w: bufio.NewWriterSize(f, 256<<10)}
	pos, _ := src.(trace.Positioned)
	buf := make([]trace.Event, 4096)
	for {
		n, err := src.Read(buf)
		for i, ev := range buf[:n] {
			name, line := "", int64(0)
			if pos != nil {
				name, line = pos.Position(i)
			}
			e.event(ev, name, line)
		}
		if err == nil && n == 0 {
			err = io.ErrNoProgress
		}
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			break
		}
	}
	if werr := e.end(s.err); werr != nil {
		f.Close()
		s.err = nil
		return
	}
	size, werr := f.Seek(0, io.SeekCurrent)
	if werr != nil {
		f.Close()
		s.err = nil
		return
	}
	s.held, s.size = f, size
	s.labels = trace.LabelsOf(src)
	if g, ok := src.(interface{ GoHeap() []trace.GoHeapSample }); ok {
		s.goHeap = g.GoHeap()
	}
	if c, ok := src.(interface{ GoCycles() []trace.GoCycle }); ok {
		s.cycles = slices.Clone(c.GoCycles())
	}
	if r, ok := src.(interface{ ProcessRSS() []trace.ProcessRSS }); ok {
		s.rss = r.ProcessRSS()
	}
	if f, ok := src.(interface{ Format() trace.Format }); ok {
		s.format = f.Format()
	}
	s.goProgram = s.format == trace.Go || len(s.goHeap) > 0 || len(s.cycles) > 0
}

// Open returns a reader of the spool, decoding the trace first if this is
// the first Open; with its frees moved to the ends of the marks unless
// sweep (see Spooled).
func (s *spool) Open(sweep bool) (trace.Source, io.Closer, error) {
	s.once.Do(s.fill)
	switch {
	case s.open != nil:
		return nil, nil, s.open
	case s.held == nil:
		return s.decode()
	}
	if sweep || len(s.cycles) == 0 {
		return s.decoder(), io.NopCloser(nil), nil
	}
	return trace.MoveFrees(s.decoder(), s.decoder(), s.cycles), io.NopCloser(nil), nil
}

// OpenEarly opens t, spooled, with a Go program's frees moved to the
// marks' ends and those of the objects of the labels named moved earlier
// still, to the earliest the trace allows (trace.EarlyFrees): the early
// bound of moving those objects to memory the program frees itself. A
// trace whose frees are not moved (Frees) opens as Open does.
func (t Trace) OpenEarly(names []string) (trace.Source, io.Closer, error) {
	return t.OpenPlaced(names, true, false, false)
}

// OpenPlaced opens t, spooled, with a Go program's frees moved to the
// marks' ends; the objects of the labels named moved are freed with
// early as early as the trace allows (trace.FreeEarly), and otherwise,
// with spread, at the start of the mark that proved them dead, the
// latest they can have died (trace.FreeMarkStart; without spread they
// stay at its end). With spread and no label named (a baseline), the
// frees are spread over the spans where the objects died (between the
// earliest the trace allows and the start of the mark that proved them
// dead: trace.FreeSpread): what a collector that runs at other moments
// than the program's would find dead, if objects die evenly over their
// spans. With spread and labels named (a what-if, whose collections may
// come far more often than the program's once a large type is gone),
// every object is freed where the moved ones are, as early or as late as
// the trace allows: the what-if's peak is then its least or its most
// over every moment the objects may have died at, and a saving against
// the baseline is bounded on both sides; with spread and alike, a
// baseline's objects are placed so too (its own peak at that bound, for
// a saving taken between the two placed alike). A trace whose frees are
// not moved opens as Open does.
func (t Trace) OpenPlaced(moved []string, early, spread, alike bool) (trace.Source, io.Closer, error) {
	t = t.Spooled()
	src, closer, err := t.Open()
	if err != nil || !t.FreesMoved() || !spread && (!early || len(moved) == 0) {
		return src, closer, err
	}
	s := t.spool
	labels := s.labels
	mine, other := placements(len(moved) > 0 || alike, early, spread)
	place := func(l uint32) trace.FreePlace {
		if lab, ok := labels.Label(l); ok && trace.MovedBy(lab, moved) {
			return mine
		}
		return other
	}
	build := func(src trace.Source) trace.Source {
		return trace.PlacedFrees(src, trace.MoveFrees(s.decoder(), s.decoder(), s.cycles), place)
	}
	if s.held != nil {
		key := fmt.Sprintf("%q %v %v %v", slices.Sorted(slices.Values(moved)), early, spread, len(moved) > 0 || alike)
		if p := s.placedSpool(key); p != nil {
			if p.write(func() trace.Source { return build(src) }) {
				return ReadStream(io.NewSectionReader(p.f, 0, p.size)), closer, nil
			}
			// The first of these read src, and wrote nothing.
			closer.Close()
			if src, closer, err = t.Open(); err != nil {
				return nil, nil, err
			}
		}
	}
	return build(src), closer, nil
}

// placements returns where OpenPlaced frees the moved objects (mine)
// and the others; alike, a what-if's or a baseline's at a bound, frees
// the others as the moved ones.
func placements(alike, early, spread bool) (mine, other trace.FreePlace) {
	mine, other = trace.FreeLate, trace.FreeLate
	if spread {
		mine, other = trace.FreeMarkStart, trace.FreeSpread
	}
	if early {
		mine = trace.FreeEarly
	}
	if spread && alike {
		other = mine
	}
	return mine, other
}

// maxPlaced bounds the placed streams a spool keeps: a repeat of a
// replay (another GOGC, another target for the same moved objects)
// reads the placed frees back, in the form WriteStream writes, instead
// of placing them again, which takes four readers of the spool and a
// heap of the frees on the way.
const maxPlaced = 16

// placedSpool is one placed stream, written once to a file of its own.
type placedSpool struct {
	once sync.Once
	f    *os.File // nil until written, and if it could not be
	size int64
}

// placedSpool returns the placed stream of key, made now if there is
// room for it, or nil.
func (s *spool) placedSpool(key string) *placedSpool {
	s.placedMu.Lock()
	defer s.placedMu.Unlock()
	if p, ok := s.placed[key]; ok {
		return p
	}
	if len(s.placed) == maxPlaced {
		return nil
	}
	if s.placed == nil {
		s.placed = map[string]*placedSpool{}
	}
	p := &placedSpool{}
	s.placed[key] = p
	return p
}

// write writes the stream src returns to p's file if this is the first
// call (others wait for it), and reports whether p holds it. A stream
// that could not be written leaves p empty: its caller places the frees
// itself.
func (p *placedSpool) write(src func() trace.Source) bool {
	p.once.Do(func() {
		f, err := os.CreateTemp("", "carve-placed-*")
		if err != nil {
			return
		}
		os.Remove(f.Name()) // unnamed: it goes when the program does
		err = WriteStream(f, src())
		if err == nil {
			p.size, err = f.Seek(0, io.SeekCurrent)
		}
		if err != nil {
			f.Close()
			return
		}
		p.f = f
	})
	return p.f != nil
}

// CycleHeap reads t once for a set of label names (nil: none) and
// returns, for each of its collections, the peak of its heap, the bytes
// of the named objects its mark found, the other bytes it allocated
// black and the named objects' share of what it visited
// (trace.CycleHeap); the answer is
// kept for the next call with the same names. It is zero for a trace
// whose frees are not moved to the marks' ends.
func (t Trace) CycleHeap(names []string) (trace.CycleHeap, error) {
	t = t.Spooled()
	src, closer, err := t.Open()
	if err != nil {
		return trace.CycleHeap{}, err
	}
	defer closer.Close()
	if !t.FreesMoved() {
		return trace.CycleHeap{}, nil
	}
	s := t.spool
	key := strings.Join(slices.Sorted(slices.Values(names)), "\x00")
	s.cyclesMu.Lock()
	defer s.cyclesMu.Unlock()
	if c, ok := s.cycleHeap[key]; ok {
		return c, nil
	}
	ends, _ := src.(interface{ MarkEnds() []trace.GoCycle })
	starts, _ := src.(interface{ MarkStarts() []int64 })
	labels := trace.LabelsOf(src)
	named := map[uint32]bool{}
	// alive is every object alive: its size, whether it is of the named
	// labels, and the mark under way at its birth (-1: none); born in
	// the mark under way now, it is black.
	type object struct {
		size  uint64
		moved bool
		mark  int
	}
	var alive trace.IDs[object]
	var live, movedLive, peak uint64
	var objects, movedObjects, blackObjects, blackMoved int64
	var blackBytes uint64 // of the others
	var pos int64         // the events read
	var c trace.CycleHeap
	// ended records the cycles whose mark ended before event pos (a
	// Read may return cycles that end further in its events); the
	// objects born in it are black no more.
	ended := func(last bool) {
		for cs := ends.MarkEnds(); len(c.Peak) < len(cs) && (last || cs[len(c.Peak)].End <= pos); {
			c.Peak, c.Moved, c.Black = append(c.Peak, peak), append(c.Moved, movedLive), append(c.Black, blackBytes)
			share := 0.0
			if visited := objects - blackObjects; visited > 0 {
				share = float64(movedObjects-blackMoved) / float64(visited)
			}
			c.Share = append(c.Share, share)
			peak = live
			blackObjects, blackMoved, blackBytes = 0, 0, 0
		}
	}
	// marking reports whether the mark under way started at or before
	// the event at position at.
	marking := func(at int64) bool {
		if starts == nil || ends == nil {
			return false
		}
		st := starts.MarkStarts()
		return len(c.Peak) < len(st) && st[len(c.Peak)] <= at
	}
	// count adds the object o to the counts, or with out takes it out.
	count := func(o object, out bool) {
		add := func(n *uint64) {
			if out {
				*n -= o.size
			} else {
				*n += o.size
			}
		}
		one := int64(1)
		if out {
			one = -1
		}
		black := o.mark == len(c.Peak)
		add(&live)
		objects += one
		if o.moved {
			add(&movedLive)
			movedObjects += one
		}
		switch {
		case black && o.moved:
			blackObjects += one
			blackMoved += one
		case black:
			blackObjects += one
			add(&blackBytes)
		}
	}
	drop := func(id uint64) {
		if o, ok := alive.Get(id); ok {
			count(o, true)
			alive.Delete(id)
		}
	}
	buf := make([]trace.Event, 4096)
	for {
		n, rerr := src.Read(buf)
		for _, e := range buf[:n] {
			if ends != nil {
				ended(false)
			}
			at := pos
			pos++
			switch e.Op {
			case trace.Alloc, trace.Calloc, trace.Memalign:
				drop(e.ID)
				is, seen := named[e.Label]
				if !seen {
					lab, ok := labels.Label(e.Label)
					is = ok && trace.MovedBy(lab, names)
					named[e.Label] = is
				}
				o := object{size: e.Size, moved: is, mark: -1}
				if marking(at) {
					o.mark = len(c.Peak)
				}
				alive.Set(e.ID, o)
				count(o, false)
			case trace.Realloc:
				if o, ok := alive.Get(e.ID); ok {
					count(o, true)
					o.size = e.Size
					alive.Set(e.ID, o)
					count(o, false)
				}
			case trace.Free:
				drop(e.ID)
			}
			peak = max(peak, live)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return trace.CycleHeap{}, rerr
		}
	}
	if ends != nil {
		ended(true)
	}
	if s.cycleHeap == nil {
		s.cycleHeap = map[string]trace.CycleHeap{}
	}
	s.cycleHeap[key] = c
	return c, nil
}

// decoder returns a decoder of the spool's events from their start.
func (s *spool) decoder() *decoder {
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(s.held, 0, s.size), 64<<10), labels: s.labels, goHeap: s.goHeap, rss: s.rss, end: s.err, format: s.format}
	if d.end == nil {
		d.end = io.EOF
	}
	return d
}
