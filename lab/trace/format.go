package trace

import (
	"bytes"
	"fmt"
	"strings"
)

// Format is a trace format: an index of the table formats.
type Format uint8

// The formats. Auto asks NewReader to detect the format from the first
// bytes; what each of the others is, Format.Doc says (the table formats
// holds it), and the package documentation gives its lines.
const (
	Auto Format = iota
	Native
	Rep
	Valgrind
	Heaptrack
	Mtrace
	AOSP
	Go
)

// A format is an entry of the table of formats: its name, what help says
// of it, how detection knows it and how a Reader imports it.
type format struct {
	name string
	doc  string // one line, as carve help lists it
	// head reports whether the first bytes of a trace are of the
	// format, before any line is looked at (a binary format's header).
	head func(b []byte) bool
	// line reports whether a line is of the format: detection takes the
	// format of the first line one format claims (see detect). No line
	// is claimed by two formats (TestDetectLineClaims).
	line func(l []byte) bool
	// open readies r for the format, the trace's first bytes buffered
	// in r.lines, and returns the format's importer.
	open func(r *Reader, opt ReaderOptions) (importer, error)
}

// formats is the table of the formats, by Format; every list of them
// (ParseFormat's, the help's, detection) is read from it.
var formats = []format{
	Auto:      {name: "auto", doc: "detect the format from the first lines"},
	Native:    {name: "native", doc: "carve's own text (carve convert writes it)", line: isNativeLine, open: openNative},
	Rep:       {name: "rep", doc: "CS:APP malloc lab trace (.rep)", line: isRepLine, open: openRep},
	Valgrind:  {name: "valgrind", doc: "valgrind --trace-malloc=yes log", line: isValgrindLine, open: openValgrind},
	Heaptrack: {name: "heaptrack", doc: "heaptrack data, raw (heaptrack -r) or interpreted", line: isHeaptrackLine, open: openHeaptrack},
	Mtrace:    {name: "mtrace", doc: "glibc mtrace() log", line: isMtraceLine, open: openMtrace},
	AOSP:      {name: "aosp", doc: "Android memory_replay / malloc_debug record_allocs", line: isAOSPLine, open: openAOSP},
	Go:        {name: "go", doc: "Go execution trace with GODEBUG=traceallocfree=1", head: isGoHeader, open: openGo},
}

// numFormats is the number of formats, Auto included.
func numFormats() Format { return Format(len(formats)) }

// String returns the format's name, as ParseFormat takes it.
func (f Format) String() string {
	if f >= numFormats() {
		return fmt.Sprintf("Format(%d)", uint8(f))
	}
	return formats[f].name
}

// Doc returns the format's one-line description, as help lists it.
func (f Format) Doc() string {
	if f >= numFormats() {
		return ""
	}
	return formats[f].doc
}

// Formats returns every format but Auto, in a stable order.
func Formats() []Format {
	fs := make([]Format, 0, numFormats()-1)
	for f := Native; f < numFormats(); f++ {
		fs = append(fs, f)
	}
	return fs
}

// formatList returns the names of the formats from the first on, for
// errors: "native, rep, ... or go".
func formatList(first Format) string {
	var b strings.Builder
	for f := first; f < numFormats(); f++ {
		switch {
		case f == numFormats()-1 && f > first:
			b.WriteString(" or ")
		case f > first:
			b.WriteString(", ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// ParseFormat returns the format named name: one of Formats' names, or
// "auto".
func ParseFormat(name string) (Format, error) {
	for f := range numFormats() {
		if f.String() == name {
			return f, nil
		}
	}
	return 0, fmt.Errorf("trace: unknown format %q (want one of %s)", name, formatList(Auto))
}

// detectLines is how many lines detection reads at most: valgrind's log
// may follow the program's own output.
const detectLines = 64

// detect names the format of a trace from its first bytes: a format by
// its header (a Go execution trace's), else the first line that looks like one
// format decides. It returns Auto when no line does.
//
// Heaptrack's records "a", "c", "m" and "t" look like the lines of a
// native trace's events: when one comes first, a later line that only a
// native trace has (a label, a free, a realloc, an event's "@<label>")
// makes it a native trace without its header, which its reader then
// refuses, rather than heaptrack data of no allocation.
func detect(b []byte) Format {
	for f, ft := range formats {
		if ft.head != nil && ft.head(b) {
			return Format(f)
		}
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
	for f, ft := range formats {
		if ft.line != nil && ft.line(l) {
			return Format(f)
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
