package trace

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The first line of a native trace: v1, or v2 for a trace with labels.
// nativePrefix is what detection looks for.
const (
	nativeHeader   = "# carve trace v1"
	nativeHeaderV2 = "# carve trace v2"
	nativeHeaderV3 = "# carve trace v3"
	nativePrefix   = "# carve trace "
	nativeHeaders  = `"# carve trace v1", "# carve trace v2" or "# carve trace v3"`
)

// The syntax of the native lines, for errors.
const (
	nativeAlloc    = `"a <id> <size> [<align>]"`
	nativeFree     = `"f <id>"`
	nativeRealloc  = `"r <id> <size>"`
	nativeCalloc   = `"c <id> <n> <size>"`
	nativeMemalign = `"m <id> <align> <size>"`
	nativeThread   = `"t <thread>"`
	nativeAny      = `a line "a", "f", "r", "c", "m" or "t" and its fields, or "#" and a comment`

	nativeAllocV2    = `"a <id> <size> [<align>] [@<label>]"`
	nativeCallocV2   = `"c <id> <n> <size> [@<label>]"`
	nativeMemalignV2 = `"m <id> <align> <size> [@<label>]"`
	nativeReallocV2  = `"r <id> <size> [@<label>]"`
	nativeLabel      = `"l <label> <name> [<key>=<value> ...]"`
	nativeAnyV2      = `a line "a", "f", "r", "c", "m", "t", "l" or "g" and its fields, or "#" and a comment`
	nativeAnyV3      = `a line "a", "f", "r", "c", "m", "t", "l", "g", "G" or "R" and its fields, or "#" and a comment`
)

// nativeState is what the native parser keeps between lines.
type nativeState struct {
	header bool
	v2     bool   // the header said v2 or v3: labels
	v3     bool   // the header said v3: collections
	thread uint32 // the thread of the events that follow
	// labels maps the trace's label numbers to the Reader's (0: not
	// defined); numbers go up to MaxLabels, so a slice serves.
	labels []uint32
}

func openNative(r *Reader, _ ReaderOptions) (importer, error) {
	r.lines.fillAll()
	if b := r.lines.buf[:r.lines.w]; hasAt(b, 0, nativeHeaderV2) || hasAt(b, 0, nativeHeaderV3) {
		r.labels = &Labels{}
	}
	return &nativeState{}, nil
}

// isNativeLine reports whether l is a native trace's header.
func isNativeLine(l []byte) bool { return hasAt(l, 0, nativePrefix) }

// end refuses a trace without its header; one with it is whole even if
// it holds no event.
func (s *nativeState) end(r *Reader) (bool, error) {
	if !s.header {
		return false, r.endError("header", nativeHeaders)
	}
	return true, nil
}

// line reads one line of the native format.
func (s *nativeState) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	if !s.header {
		switch {
		case cut:
			return false, r.longError("header", line)
		case !blank(line, len(nativeHeader)):
			return false, r.headerError(line)
		case hasAt(line, 0, nativeHeader):
		case hasAt(line, 0, nativeHeaderV2), hasAt(line, 0, nativeHeaderV3):
			s.v2 = true
			s.v3 = hasAt(line, 0, nativeHeaderV3)
			if r.labels == nil {
				r.labels = &Labels{}
			}
		default:
			return false, r.headerError(line)
		}
		s.header = true
		return r.skip()
	}
	if len(line) > 0 && line[0] == '#' || blank(line, 0) {
		return r.skip()
	}
	if cut {
		return false, r.longError("line", line)
	}
	if len(line) < 2 || line[1] != ' ' && line[1] != '\t' {
		return false, r.syntaxError("line", s.syntax(nativeAny, nativeAnyV2), line)
	}
	var (
		id, a, b uint64
		ok       bool
		i        int
	)
	switch line[0] {
	case 'a':
		if id, i, ok = decField(line, 1); ok {
			a, i, ok = decField(line, i)
		}
		if !ok {
			return false, r.syntaxError("alloc", nativeAlloc, line)
		}
		*ev = Event{Op: Alloc, ID: id, Size: a, Thread: s.thread}
		if blank(line, i) {
			return true, nil
		}
		if j, _ := space(line, i); j > i && line[j] == '@' {
			return s.labelRef(r, line, i, "alloc", nativeAlloc, nativeAllocV2, ev)
		}
		if b, i, ok = decField(line, i); !ok {
			return false, r.syntaxError("alloc", s.syntax(nativeAlloc, nativeAllocV2), line)
		}
		if b > 1<<31 || b&(b-1) != 0 {
			return false, r.syntaxError("alloc", "an alignment that is a power of two up to 2^31", line)
		}
		ev.Align = uint32(b)
		if blank(line, i) {
			return true, nil
		}
		return s.labelRef(r, line, i, "alloc", nativeAlloc, nativeAllocV2, ev)
	case 'f':
		if id, i, ok = decField(line, 1); !ok || !blank(line, i) {
			return false, r.syntaxError("free", nativeFree, line)
		}
		*ev = Event{Op: Free, ID: id, Thread: s.thread}
		return true, nil
	case 'r':
		if id, i, ok = decField(line, 1); ok {
			a, i, ok = decField(line, i)
		}
		if !ok {
			return false, r.syntaxError("realloc", s.syntax(nativeRealloc, nativeReallocV2), line)
		}
		*ev = Event{Op: Realloc, ID: id, Size: a, Thread: s.thread}
		if blank(line, i) {
			return true, nil
		}
		return s.labelRef(r, line, i, "realloc", nativeRealloc, nativeReallocV2, ev)
	case 'c':
		if id, i, ok = decField(line, 1); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok {
			return false, r.syntaxError("calloc", s.syntax(nativeCalloc, nativeCallocV2), line)
		}
		e, ok := callocEvent(id, a, b)
		if !ok {
			return false, r.syntaxError("calloc", "<n> × <size> below 2^64", line)
		}
		e.Thread = s.thread
		*ev = e
		if blank(line, i) {
			return true, nil
		}
		return s.labelRef(r, line, i, "calloc", nativeCalloc, nativeCallocV2, ev)
	case 'm':
		if id, i, ok = decField(line, 1); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok {
			return false, r.syntaxError("memalign", s.syntax(nativeMemalign, nativeMemalignV2), line)
		}
		if a > 1<<31 || a&(a-1) != 0 {
			return false, r.syntaxError("memalign", "an alignment that is a power of two up to 2^31", line)
		}
		*ev = Event{Op: Memalign, ID: id, Align: uint32(a), Size: b, Thread: s.thread}
		if blank(line, i) {
			return true, nil
		}
		return s.labelRef(r, line, i, "memalign", nativeMemalign, nativeMemalignV2, ev)
	case 't':
		if a, i, ok = decField(line, 1); !ok || !blank(line, i) || a > 1<<32-1 {
			return false, r.syntaxError("thread", nativeThread+" with a thread below 2^32", line)
		}
		s.thread = uint32(a)
		return r.skip()
	case 'l':
		if s.v2 {
			return s.parseLabel(r, line)
		}
	case 'g':
		if s.v2 {
			return r.parseGoHeap(line)
		}
	case 'G':
		if s.v3 {
			return r.parseGoCycle(line)
		}
	case 'R':
		if s.v3 {
			return r.parseProcessRSS(line)
		}
	}
	return false, r.syntaxError("line", s.syntax(nativeAny, nativeAnyV2), line)
}

// headerError is the error of a first line that is not a header: one of
// a native trace's events or labels says the header is missing.
func (r *Reader) headerError(line []byte) error {
	err := r.syntaxError("header", nativeHeaders, line)
	if nativeBody(line) || len(line) > 1 && nativeLetter(line[0]) && (line[1] == ' ' || line[1] == '\t') {
		err.(*Error).Why = "a carve trace's line: its header, the first line, is missing"
	}
	return err
}

// syntax returns the syntax of the trace's version: v1's or v2's.
func (s *nativeState) syntax(v1, v2 string) string {
	if s.v3 && v2 == nativeAnyV2 {
		return nativeAnyV3
	}
	if s.v2 {
		return v2
	}
	return v1
}

// labelRef reads what follows an allocation's fields, from line[i:]: in
// a v2 trace blanks and one "@<label>" naming a label defined before,
// and nothing else. It sets ev.Label.
func (s *nativeState) labelRef(r *Reader, line []byte, i int, what, v1, v2 string, ev *Event) (bool, error) {
	if !s.v2 {
		return false, r.syntaxError(what, v1, line)
	}
	j, ok := space(line, i)
	if !ok || j == len(line) || line[j] != '@' {
		return false, r.syntaxError(what, v2, line)
	}
	n, j, ok := dec(line, j+1)
	if !ok || !blank(line, j) {
		return false, r.syntaxError(what, v2, line)
	}
	if n == 0 || n >= uint64(len(s.labels)) || s.labels[n] == 0 {
		return false, r.syntaxError(what, "a label defined before by an \"l\" line", line)
	}
	ev.Label = s.labels[n]
	return true, nil
}

// parseLabel reads an "l <label> <name> [<key>=<value> ...]" line.
func (s *nativeState) parseLabel(r *Reader, line []byte) (bool, error) {
	n, i, ok := decField(line, 1)
	if !ok {
		return false, r.syntaxError("label", nativeLabel, line)
	}
	if n == 0 || n > MaxLabels {
		return false, r.syntaxError("label", fmt.Sprintf("a label number from 1 to %d", MaxLabels), line)
	}
	var l Label
	if i, ok = space(line, i); ok {
		l.Name, i, ok = readWord(line, i)
	}
	if !ok {
		return false, r.syntaxError("label", nativeLabel, line)
	}
	for {
		var sp bool
		if i, sp = space(line, i); i == len(line) {
			break
		}
		k := i
		for i < len(line) && line[i] != '=' && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		key := string(line[k:i])
		if !sp || i == len(line) || line[i] != '=' || !validKey(key) {
			return false, r.syntaxError("label", nativeLabel+" (keys: letters, digits, '_', '.', '-')", line)
		}
		var v string
		if v, i, ok = readWord(line, i+1); !ok {
			return false, r.syntaxError("label", nativeLabel, line)
		}
		l.Attrs = append(l.Attrs, Attr{key, v})
	}
	if int(n) < len(s.labels) && s.labels[n] != 0 {
		return false, r.syntaxError("label", fmt.Sprintf("label %d defined once", n), line)
	}
	id, err := r.labels.Intern(l)
	if errors.Is(err, ErrTooManyLabels) {
		return false, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	if err != nil {
		return false, r.syntaxError("label", err.Error(), line)
	}
	if int(n) >= len(s.labels) {
		s.labels = append(s.labels, make([]uint32, int(n)+1-len(s.labels))...)
	}
	s.labels[n] = id
	return r.skip()
}

// readWord reads a name or a value of a label line at line[i:]: a
// double-quoted Go string, or else the bytes up to the next blank (at
// least one).
func readWord(line []byte, i int) (string, int, bool) {
	if i < len(line) && line[i] == '"' {
		q, err := strconv.QuotedPrefix(string(line[i:]))
		if err != nil {
			return "", i, false
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return "", i, false
		}
		return s, i + len(q), true
	}
	j := word(line, i)
	return string(line[i:j]), j, j > i
}

// appendWord appends s as readWord reads it: bare when it is a plain
// word, quoted otherwise (empty, with a blank, a quote, a backslash, a
// byte that is not printable UTF-8, or starting with '"').
func appendWord(b []byte, s string) []byte {
	plain := s != "" && utf8.ValidString(s)
	for _, c := range s {
		if c == ' ' || c == '\t' || c == '"' || c == '\\' || !strconv.IsPrint(c) {
			plain = false
			break
		}
	}
	if plain {
		return append(b, s...)
	}
	return strconv.AppendQuote(b, s)
}

// Writer writes events in the native text format, buffered: call Flush
// at the end. The header is written before the first event (or by Flush,
// for an empty trace), and a "t" line before each event whose Thread
// differs from the one before (the first event's thread is 0 unless a
// "t" line says otherwise).
//
// A Writer writes version 1 of the format, unless SetLabels gave it a
// label table: then version 2, with each label defined by an "l" line
// before the first event that carries it.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	buf     []byte
	thread  uint32
	header  bool
	labels  *Labels // nil: version 1
	defined []bool  // defined[id]: label id's "l" line is written
	events  int64   // written
	err     error   // sticky: the first error of w
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, writerBuf)}
}

// SetLabels makes w write version 2 of the format, whose events carry
// labels numbered in t (which may grow while w writes: a label is looked
// up when the first event that carries it is written). A nil t leaves
// version 1. It must be called before anything is written.
func (w *Writer) SetLabels(t *Labels) error {
	if w.header {
		return fmt.Errorf("trace: Writer.SetLabels after the header was written")
	}
	w.labels = t
	return nil
}

// writerBuf is how much a Writer buffers before it writes.
const writerBuf = 64 << 10

// Write writes one event. An event that breaks Event's contract (an
// invalid op, an alignment that is not a power of two, a calloc size that
// is not a multiple of its count, a label on a free) is an error, and so
// is a label that is not in the table SetLabels gave; nothing is written
// then. After an error of the underlying writer every call returns it.
func (w *Writer) Write(e Event) error {
	if w.err != nil {
		return w.err
	}
	if msg := e.check(); msg != "" {
		return fmt.Errorf("trace: Write(%v): %s", e, msg)
	}
	if e.Label != 0 {
		if err := w.define(e); err != nil {
			return err
		}
	}
	w.writeHeader()
	if e.Thread != w.thread {
		w.buf = append(w.buf, "t "...)
		w.buf = strconv.AppendUint(w.buf, uint64(e.Thread), 10)
		w.buf = append(w.buf, '\n')
		w.thread = e.Thread
	}
	w.buf = appendEvent(w.buf, e)
	w.buf = append(w.buf, '\n')
	w.events++
	return w.flushIfFull()
}

// Comment writes text as comment lines: "# " and a line of the text
// each. Readers skip them.
func (w *Writer) Comment(text string) error {
	if w.err != nil {
		return w.err
	}
	w.writeHeader()
	for line := range strings.SplitSeq(text, "\n") {
		w.buf = append(w.buf, "# "...)
		w.buf = append(w.buf, line...)
		w.buf = append(w.buf, '\n')
		if err := w.flushIfFull(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) flushIfFull() error {
	if len(w.buf) > writerBuf-128 {
		return w.flush()
	}
	return nil
}

// Flush writes what is buffered (the header at least).
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.writeHeader()
	return w.flush()
}

// writeHeader buffers the header if it is not written yet.
func (w *Writer) writeHeader() {
	if w.header {
		return
	}
	if w.labels != nil {
		w.buf = append(w.buf, nativeHeaderV3+"\n"...)
	} else {
		w.buf = append(w.buf, nativeHeader+"\n"...)
	}
	w.header = true
}

// define buffers the "l" line of e's label, unless it was written: the
// line "l <label> <name> [<key>=<value> ...]".
func (w *Writer) define(e Event) error {
	id := e.Label
	if int(id) < len(w.defined) && w.defined[id] {
		return nil
	}
	l, ok := w.labels.Label(id)
	if !ok {
		if w.labels == nil {
			return fmt.Errorf("trace: Write(%v): a label, and no label table (Writer.SetLabels)", e)
		}
		return fmt.Errorf("trace: Write(%v): label %d is not in the table (%d labels)", e, id, w.labels.Len())
	}
	w.writeHeader()
	w.buf = append(w.buf, "l "...)
	w.buf = strconv.AppendUint(w.buf, uint64(id), 10)
	w.buf = append(w.buf, ' ')
	w.buf = append(w.buf, l.String()...)
	w.buf = append(w.buf, '\n')
	if int(id) >= len(w.defined) {
		w.defined = append(w.defined, make([]bool, int(id)+1-len(w.defined))...)
	}
	w.defined[id] = true
	return w.flushIfFull()
}

func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
	return err
}

// appendEvent appends the native line of e, without the line feed and
// without its thread; a label is written as its number in the table.
func appendEvent(b []byte, e Event) []byte {
	switch e.Op {
	case Alloc:
		b = append(b, "a "...)
		b = strconv.AppendUint(b, e.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Size, 10)
		if e.Align != 0 {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(e.Align), 10)
		}
	case Free:
		b = append(b, "f "...)
		b = strconv.AppendUint(b, e.ID, 10)
	case Realloc:
		b = append(b, "r "...)
		b = strconv.AppendUint(b, e.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Size, 10)
	case Calloc:
		n, size := uint64(e.N), e.Size
		switch {
		case n != 0:
			size /= n
		case size != 0: // a count left out: one element
			n = 1
		}
		b = append(b, "c "...)
		b = strconv.AppendUint(b, e.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, n, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, size, 10)
	case Memalign:
		b = append(b, "m "...)
		b = strconv.AppendUint(b, e.ID, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(e.Align), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Size, 10)
	default:
		b = append(b, "? "...)
		b = strconv.AppendUint(b, uint64(e.Op), 10)
	}
	if e.Label != 0 {
		b = append(b, " @"...)
		b = strconv.AppendUint(b, uint64(e.Label), 10)
	}
	return b
}
