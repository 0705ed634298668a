package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is a line of a trace that does not say what its format says it
// must. Readers return it (as *Error, for errors.As) and stop.
type Error struct {
	// File is the name given to NewReader (Open gives the path).
	File string
	// Line is the 1-based number of the offending line; 0 when the
	// error is about the trace as a whole (e.g. its end).
	Line int64
	// What is what the line was taken for, e.g. "malloc" or "header".
	What string
	// Want is the syntax or value expected, e.g.
	// `"<tid>: malloc <ptr> <size>"`.
	Want string
	// Got is the offending text, cut to its first 80 bytes.
	Got string
	// Why says what is wrong in Got when the syntax alone does not: a
	// number too large for its field.
	Why string
}

// maxGot caps the text an Error quotes.
const maxGot = 80

// Error formats e as "file:line: what: want WANT, got "GOT"".
func (e *Error) Error() string {
	b := make([]byte, 0, 64+len(e.File)+len(e.Want)+len(e.Got))
	b = append(b, e.File...)
	if e.Line > 0 {
		b = append(b, ':')
		b = strconv.AppendInt(b, e.Line, 10)
	}
	b = append(b, ": "...)
	if e.What != "" {
		b = append(b, e.What...)
		b = append(b, ": "...)
	}
	b = append(b, "want "...)
	b = append(b, e.Want...)
	b = append(b, ", got "...)
	b = strconv.AppendQuote(b, e.Got)
	if e.Why != "" {
		b = append(b, ": "...)
		b = append(b, e.Why...)
	}
	return string(b)
}

// ErrDetect is returned (wrapped, with the file's name) by NewReader when
// the format is Auto and the first lines match no format.
var ErrDetect = errors.New("trace: cannot detect the trace format")

// ErrNoEvent is returned (wrapped, with the file's name and the format it
// was read as) at the end of a trace that had lines but not one call of
// its format (an event, a failed call, a free of NULL): a file taken for a
// format it is not in. A carve trace with its header and no event is an
// empty trace, not an error.
var ErrNoEvent = errors.New("no event")

// ErrTooManyLive is returned (wrapped) when an importer would track more
// than MaxLive live addresses at once (for a Go execution trace: live
// objects, goroutine stacks or spans).
var ErrTooManyLive = errors.New("trace: too many live objects")

// got cuts text for Error.Got.
func got(b []byte) string {
	if len(b) > maxGot {
		return string(b[:maxGot]) + "..."
	}
	return string(b)
}

// syntaxError builds the Error of the line being read.
func (r *Reader) syntaxError(what, want string, line []byte) error {
	return &Error{File: r.name, Line: r.lines.n, What: what, Want: want, Got: got(line), Why: tooLarge(line)}
}

// tooLarge returns why a line's number cannot be read, if one of its
// words is a number that does not fit in 64 bits (decimal, or hexadecimal
// after 0x), or "".
func tooLarge(line []byte) string {
	for _, w := range strings.FieldsFunc(string(line), func(c rune) bool {
		return c == ' ' || c == '\t' || c == ':' || c == '(' || c == ')' || c == ',' || c == '='
	}) {
		digits, base := w, 10
		if h, ok := strings.CutPrefix(w, "0x"); ok {
			digits, base = h, 16
		}
		if digits == "" || strings.TrimLeft(digits, "0123456789abcdefABCDEF") != "" || base == 10 && strings.TrimLeft(digits, "0123456789") != "" {
			continue
		}
		if _, err := strconv.ParseUint(digits, base, 64); errors.Is(err, strconv.ErrRange) {
			return w + " does not fit in 64 bits"
		}
	}
	return ""
}

// longError builds the Error of a line longer than MaxLine (cut) where
// the format has an event: what it was taken for, and that it is too long.
func (r *Reader) longError(what string, line []byte) error {
	return &Error{File: r.name, Line: r.lines.n, What: what, Want: fmt.Sprintf("a line of at most %d KiB", MaxLine>>10), Got: got(line),
		Why: "line too long"}
}

// endError builds the Error of a trace that ends too early.
func (r *Reader) endError(what, want string) error {
	return &Error{File: r.name, What: what, Want: want, Got: "end of file"}
}

// liveError reports that the live set outgrew MaxLive.
func (r *Reader) liveError() error {
	return fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, ErrTooManyLive, MaxLive)
}
