package trace

import (
	"bytes"
	"fmt"
)

// Format is a trace format.
type Format uint8

// The formats. Auto asks NewReader to detect the format from the first
// bytes; the others are described in the package documentation.
const (
	Auto      Format = iota
	Native           // carve's own text: "# carve trace v1" (or v2, with labels), then "a 1 16"...
	Rep              // CS:APP malloc lab trace (.rep)
	Valgrind         // valgrind --trace-malloc=yes log
	Heaptrack        // heaptrack data, raw (heaptrack -r) or interpreted
	Mtrace           // glibc mtrace() log
	AOSP             // Android memory_replay / malloc_debug record_allocs
	Go               // Go execution trace with GODEBUG=traceallocfree=1

	numFormats = iota
)

var formatNames = [numFormats]string{"auto", "native", "rep", "valgrind", "heaptrack", "mtrace", "aosp", "go"}

// String returns the format's name, as ParseFormat takes it.
func (f Format) String() string {
	if f >= numFormats {
		return fmt.Sprintf("Format(%d)", uint8(f))
	}
	return formatNames[f]
}

// Formats returns every format but Auto, in a stable order.
func Formats() []Format {
	fs := make([]Format, 0, numFormats-1)
	for f := Native; f < numFormats; f++ {
		fs = append(fs, f)
	}
	return fs
}

// ParseFormat returns the format named name: "auto", "native", "rep",
// "valgrind", "heaptrack", "mtrace", "aosp" or "go".
func ParseFormat(name string) (Format, error) {
	for f, n := range formatNames {
		if n == name {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("trace: unknown format %q (want one of auto, native, rep, valgrind, heaptrack, mtrace, aosp, go)", name)
}

// detectLines is how many lines detection reads at most: valgrind's log
// may follow the program's own output.
const detectLines = 64

// detect names the format of a trace from its first bytes: a Go
// execution trace by its header, else the first line that looks like one
// format decides. It returns Auto when no line does.
//
// Heaptrack's records "a", "c", "m" and "t" look like the lines of a
// native trace's events: when one comes first, a later line that only a
// native trace has (a label, a free, a realloc, an event's "@<label>")
// makes it a native trace without its header, which its reader then
// refuses, rather than heaptrack data of no allocation.
func detect(b []byte) Format {
	if _, ok := goHeader(b); ok {
		return Go
	}
	first := Auto // a line of heaptrack that a native trace may have
	for n := 0; n < detectLines && len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = trimCR(line)
		if blank(line, 0) {
			continue
		}
		if nativeBody(line) {
			return Native
		}
		switch f := detectLine(line); {
		case f == Auto:
		case f == Heaptrack && nativeLetter(line[0]):
			first = Heaptrack
		case first != Auto:
			return first
		default:
			return f
		}
	}
	return first
}

// nativeLetter reports whether c starts the lines of both heaptrack and
// native events.
func nativeLetter(c byte) bool { return c == 'a' || c == 'c' || c == 'm' || c == 't' }

// nativeBody reports whether l is a line that only a native trace has:
// "l <label> <name>...", "f <id>", "r <id> <size>", "g <n> <n>", or an
// allocation of decimal fields and "@<label>".
func nativeBody(l []byte) bool {
	if len(l) < 3 || l[1] != ' ' && l[1] != '\t' {
		return false
	}
	fields := func(n int) (int, bool) { // n decimal fields from 1
		i, ok := 1, true
		for ; n > 0 && ok; n-- {
			_, i, ok = decField(l, i)
		}
		return i, ok
	}
	switch l[0] {
	case 'l':
		i, ok := fields(1)
		if ok {
			i, ok = space(l, i)
		}
		return ok && i < len(l)
	case 'f':
		i, ok := fields(1)
		return ok && blank(l, i)
	case 'r', 'g':
		i, ok := fields(2)
		return ok && blank(l, i)
	case 'a', 'c', 'm':
		i, ok := fields(2)
		for ok {
			j := i
			if _, i, ok = decField(l, i); !ok {
				i = j
			}
		}
		i, ok = space(l, i)
		if !ok || i == len(l) || l[i] != '@' {
			return false
		}
		_, i, ok = dec(l, i+1)
		return ok && blank(l, i)
	}
	return false
}

// detectLine names the format a line belongs to, or Auto.
func detectLine(l []byte) Format {
	switch {
	case hasAt(l, 0, nativePrefix):
		return Native
	case hasAt(l, 0, "= Start") || hasAt(l, 0, "@ "):
		return Mtrace
	case valgrindPrefix(l) > 0 || valgrindMessage(l):
		return Valgrind
	case hasAt(l, 0, "module 0x") || hasAt(l, 0, "stack "):
		return AOSP // carve's recorder's modules and stacks, before its first record
	}
	if v, i, ok := dec(l, 0); ok {
		_ = v
		if hasAt(l, i, ": ") {
			return AOSP
		}
		if _, ok := repHeaderLine(l); ok {
			return Rep
		}
		return Auto
	}
	if len(l) >= 2 && l[1] == ' ' {
		switch l[0] {
		case '+', '-':
			if hasAt(l, 2, "0x") || hasAt(l, 2, "(nil)") {
				return Mtrace // mtrace without caller: "+ 0x55... 0x10"
			}
			return Heaptrack
		case 'v', 'x', 'X', 'I', 'm', 't', 'i', 'a', 's', 'c', 'R', 'A', 'S':
			return Heaptrack
		}
	}
	return Auto
}

// repHeaderLine reports whether l holds only decimal numbers, as the
// header lines of a .rep trace do, and how many.
func repHeaderLine(l []byte) (n int, ok bool) {
	i := 0
	for {
		i, _ = space(l, i)
		if i == len(l) {
			return n, n > 0
		}
		var got bool
		if _, i, got = dec(l, i); !got {
			return n, false
		}
		n++
	}
}

// valgrindMessage reports whether l is one of valgrind's own messages,
// "==<pid>== ...".
func valgrindMessage(l []byte) bool {
	if !hasAt(l, 0, "==") {
		return false
	}
	_, i, ok := dec(l, 2)
	return ok && hasAt(l, i, "==")
}
