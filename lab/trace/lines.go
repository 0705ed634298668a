package trace

import (
	"bytes"
	"io"
)

// MaxLine is the longest line a reader keeps whole, in bytes. Of a longer
// line only the first 256 bytes are kept (the rest is read and dropped,
// never stored); a format whose events never come close treats a cut line
// as an error where it could be an event (an *Error whose Why is "line
// too long"), and skips it where it cannot
// (heaptrack's module lists and command lines, valgrind's other
// messages).
const MaxLine = 64 << 10

// lines splits a stream into lines in place: each line is a slice of one
// fixed buffer, valid until the next call, and nothing is allocated per
// line. This is the whole I/O path of a Reader.
type lines struct {
	rd  io.Reader
	buf []byte // MaxLine bytes
	r   int    // start of the unread bytes
	w   int    // end of the buffered bytes
	err error  // sticky error of rd (io.EOF at the end)
	n   int64  // number of the line last returned, 1-based

	head []byte // the kept head of the last line cut
}

// cutHead is how much of a line longer than MaxLine is kept: enough to
// tell what the line is, and to quote it in an error.
const cutHead = 256

func newLines(rd io.Reader) *lines {
	return &lines{rd: rd, buf: make([]byte, MaxLine)}
}

// next returns the next line without its line feed (nor a carriage return
// before it). cut reports a line longer than MaxLine, of which only the
// first cutHead bytes are returned. At the end of the stream it returns
// io.EOF, or the stream's error: a stream that failed (a compressed file
// cut short) loses its unfinished last line, which would only read as a
// malformed one.
func (l *lines) next() (line []byte, cut bool, err error) {
	for {
		if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
			line = l.buf[l.r : l.r+i]
			l.r += i + 1
			l.n++
			return trimCR(line), false, nil
		}
		if l.err != nil {
			if l.r < l.w && l.err == io.EOF { // the last line, without a line feed
				line = l.buf[l.r:l.w]
				l.r = l.w
				l.n++
				return trimCR(line), false, nil
			}
			return nil, false, l.err
		}
		if l.r > 0 {
			l.w = copy(l.buf, l.buf[l.r:l.w])
			l.r = 0
		}
		if l.w == len(l.buf) {
			return l.cut()
		}
		l.fill()
	}
}

// fill reads once into the free end of the buffer.
func (l *lines) fill() {
	n, err := l.rd.Read(l.buf[l.w:])
	l.w += n
	if err != nil {
		l.err = err
	}
}

// fillAll reads until the buffer is full or the stream ends, for format
// detection.
func (l *lines) fillAll() {
	for l.w < len(l.buf) && l.err == nil {
		l.fill()
	}
}

// cut handles a full buffer without a line feed: a line longer than
// MaxLine. It copies the line's first cutHead bytes aside, as the line to
// return, and reads the rest of the line into the buffer and drops it, so
// memory stays bounded whatever the input.
func (l *lines) cut() ([]byte, bool, error) {
	l.head = append(l.head[:0], l.buf[:cutHead]...)
	l.r, l.w = 0, 0
	for l.err == nil {
		l.fill()
		if i := bytes.IndexByte(l.buf[:l.w], '\n'); i >= 0 {
			l.r = i + 1
			break
		}
		l.w = 0
	}
	l.n++
	return l.head, true, nil
}

// trimCR drops the carriage return of a CRLF line end.
func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
