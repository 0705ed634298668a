package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// nativeHeader is the first line of a native trace.
const nativeHeader = "# carve trace v1"

// The syntax of the native lines, for errors.
const (
	nativeAlloc    = `"a <id> <size> [<align>]"`
	nativeFree     = `"f <id>"`
	nativeRealloc  = `"r <id> <size>"`
	nativeCalloc   = `"c <id> <n> <size>"`
	nativeMemalign = `"m <id> <align> <size>"`
	nativeThread   = `"t <thread>"`
	nativeAny      = `a line "a", "f", "r", "c", "m" or "t" and its fields, or "#" and a comment`
)

// parseNative reads one line of the native format.
func (r *Reader) parseNative(line []byte, cut bool, ev *Event) (bool, error) {
	if !r.native.header {
		if cut || !hasAt(line, 0, nativeHeader) || !blank(line, len(nativeHeader)) {
			return false, r.syntaxError("header", quote(nativeHeader), line)
		}
		r.native.header = true
		return r.skip()
	}
	if len(line) > 0 && line[0] == '#' || blank(line, 0) {
		return r.skip()
	}
	if cut || len(line) < 2 || line[1] != ' ' && line[1] != '\t' {
		return false, r.syntaxError("line", nativeAny, line)
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
		*ev = Event{Op: Alloc, ID: id, Size: a, Thread: r.native.thread}
		if blank(line, i) {
			return true, nil
		}
		if b, i, ok = decField(line, i); !ok || !blank(line, i) {
			return false, r.syntaxError("alloc", nativeAlloc, line)
		}
		if b > 1<<31 || b&(b-1) != 0 {
			return false, r.syntaxError("alloc", "an alignment that is a power of two up to 2^31", line)
		}
		ev.Align = uint32(b)
		return true, nil
	case 'f':
		if id, i, ok = decField(line, 1); !ok || !blank(line, i) {
			return false, r.syntaxError("free", nativeFree, line)
		}
		*ev = Event{Op: Free, ID: id, Thread: r.native.thread}
		return true, nil
	case 'r':
		if id, i, ok = decField(line, 1); ok {
			a, i, ok = decField(line, i)
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("realloc", nativeRealloc, line)
		}
		*ev = Event{Op: Realloc, ID: id, Size: a, Thread: r.native.thread}
		return true, nil
	case 'c':
		if id, i, ok = decField(line, 1); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("calloc", nativeCalloc, line)
		}
		e, ok := callocEvent(id, a, b)
		if !ok {
			return false, r.syntaxError("calloc", "<n> × <size> below 2^64", line)
		}
		e.Thread = r.native.thread
		*ev = e
		return true, nil
	case 'm':
		if id, i, ok = decField(line, 1); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("memalign", nativeMemalign, line)
		}
		if a > 1<<31 || a&(a-1) != 0 {
			return false, r.syntaxError("memalign", "an alignment that is a power of two up to 2^31", line)
		}
		*ev = Event{Op: Memalign, ID: id, Align: uint32(a), Size: b, Thread: r.native.thread}
		return true, nil
	case 't':
		if a, i, ok = decField(line, 1); !ok || !blank(line, i) || a > 1<<32-1 {
			return false, r.syntaxError("thread", nativeThread+" with a thread below 2^32", line)
		}
		r.native.thread = uint32(a)
		return r.skip()
	}
	return false, r.syntaxError("line", nativeAny, line)
}

// Writer writes events in the native text format, buffered: call Flush
// at the end. The header is written before the first event (or by Flush,
// for an empty trace), and a "t" line before each event whose Thread
// differs from the one before (the first event's thread is 0 unless a
// "t" line says otherwise).
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w      io.Writer
	buf    []byte
	thread uint32
	header bool
	err    error // sticky: the first error of w
}

// writerBuf is how much a Writer buffers before it writes.
const writerBuf = 64 << 10

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, writerBuf)}
}

// Write writes one event. An event that breaks Event's contract (an
// invalid op, an alignment that is not a power of two, a calloc size that
// is not a multiple of its count) is an error, and nothing is written.
// After an error of the underlying writer every call returns it.
func (w *Writer) Write(e Event) error {
	if w.err != nil {
		return w.err
	}
	if msg := e.check(); msg != "" {
		return fmt.Errorf("trace: Write(%v): %s", e, msg)
	}
	if !w.header {
		w.buf = append(w.buf, nativeHeader+"\n"...)
		w.header = true
	}
	if e.Thread != w.thread {
		w.buf = append(w.buf, "t "...)
		w.buf = strconv.AppendUint(w.buf, uint64(e.Thread), 10)
		w.buf = append(w.buf, '\n')
		w.thread = e.Thread
	}
	w.buf = appendEvent(w.buf, e)
	w.buf = append(w.buf, '\n')
	return w.flushIfFull()
}

// Comment writes text as comment lines: "# " and a line of the text
// each. Readers skip them.
func (w *Writer) Comment(text string) error {
	if w.err != nil {
		return w.err
	}
	if !w.header {
		w.buf = append(w.buf, nativeHeader+"\n"...)
		w.header = true
	}
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
	if !w.header {
		w.buf = append(w.buf, nativeHeader+"\n"...)
		w.header = true
	}
	return w.flush()
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
// without its thread.
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
	return b
}
