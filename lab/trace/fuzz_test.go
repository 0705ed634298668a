package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
)

// The fuzz tests feed arbitrary bytes to each reader. Whatever the input,
// a reader must not panic; must return only events that keep Event's
// contract; must, when importing, return a consistent trace (see
// checkConsistent); and must end with io.EOF or an error that says where
// (an *Error) or why (ErrNoEvent for lines of which none is a call of the
// format's, ErrTooManyLive, ErrTooManyLabels...). Memory stays bounded by construction: one buffer of
// MaxLine bytes, lines beyond it dropped unstored, and one table entry
// per live object, which a line must create; nothing is sized by a
// number read from the input. The native format must also survive a
// round trip through the Writer.
//
// Seeds: the golden traces of the format, and the malformed lines of
// TestErrors. Long runs, one format at a time:
//
//	go test -run '^$' -fuzz FuzzAOSP -fuzztime 60s ./lab/trace

func FuzzNative(f *testing.F)    { fuzzFormat(f, Native) }
func FuzzRep(f *testing.F)       { fuzzFormat(f, Rep) }
func FuzzValgrind(f *testing.F)  { fuzzFormat(f, Valgrind) }
func FuzzHeaptrack(f *testing.F) { fuzzFormat(f, Heaptrack) }
func FuzzMtrace(f *testing.F)    { fuzzFormat(f, Mtrace) }
func FuzzAOSP(f *testing.F)      { fuzzFormat(f, AOSP) }
func FuzzGo(f *testing.F)        { fuzzFormat(f, Go) }

// FuzzAuto fuzzes detection and decompression: seeded with every golden
// trace, plain, gzipped and zstd-compressed.
func FuzzAuto(f *testing.F) {
	for _, p := range goldenInputs(f) {
		in, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
		for _, c := range compressors {
			f.Add(c.compress(f, in))
		}
	}
	for _, s := range notATrace {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), "fuzz", Auto)
		if err != nil {
			return // not a trace, or a broken gzip or zstd header
		}
		defer r.Close()
		checkReader(t, r, r.Format(), in)
	})
}

func fuzzFormat(f *testing.F, format Format) {
	for _, p := range goldenInputs(f) {
		if formatOf(f, p) != format {
			continue
		}
		in, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
	}
	for _, e := range errorSeeds(format) {
		f.Add([]byte(e))
	}
	for _, s := range notATrace {
		f.Add([]byte(s))
	}
	if format == Native {
		// Version 3, with a collection: the Go golden trace converted.
		in, err := os.ReadFile("testdata/labelled/go.trace.golden")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
	}
	if format == Go {
		// The golden trace cut short, and with a byte changed here and
		// there: the reader must stop with an error, not a panic.
		in, err := os.ReadFile("testdata/labelled/go.trace")
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range []int{16, 100, len(in) / 2, len(in) - 1} {
			f.Add(in[:n])
		}
		for _, at := range []int{20, len(in) / 3, len(in) / 2, 2 * len(in) / 3} {
			b := bytes.Clone(in)
			b[at] ^= 0x5a
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), "fuzz", format)
		if err != nil {
			return // a broken gzip or zstd header
		}
		defer r.Close()
		checkReader(t, r, format, in)
	})
}

// notATrace seeds every target with inputs that hold no call of any
// format: an empty file, a blank line, one word, a header of numbers, a
// line that detection takes for heaptrack. Their readers end with
// ErrNoEvent (or a header's *Error), which the fuzzers must accept, or
// they stop on their first inputs and fuzz nothing.
var notATrace = []string{"", "\n", "x\n", "x", "0 0\n", "A \n"}

// errorSeeds returns TestErrors' malformed traces of a format.
func errorSeeds(format Format) []string {
	seeds := map[Format][]string{
		Native: {"# carve trace v1\nc 1 4294967296 4294967296\nt 7\nm 1 48 2\n",
			"# carve trace v2\nl 1 x\nl 1 y\na 1 2 @2\nl 0 z\nl 2 \"q k=v\ng 1\n",
			// Samples of the program's RSS: good, then past the events,
			// out of order, of another process, above the peak.
			"# carve trace v3\nR - 5 9 test\na 1 2\nR 0 5 9 test\nR 1 5 9 test\nR 2 5 9 test\nR 0 5 9 test\nR 1 5 9 program\nR 1 9 5 test\n"},
		Go:        {"go 1.26 trace\x00\x00\x00", "go 1.23 trace\x00\x00\x00\x01", "go 1.26 trace\x00\x00\x00\x01\x00\x01\x01\x01\x05xxxxx"},
		Rep:       {"20000 6 13 1\nr 3 100\nf 5\na 4 16\na 4 16\n"},
		Valgrind:  {"--1-- realloc(0x0,32)malloc(32) = 0x10\n--1-- realloc(0x10,0)free(0x10)\n--1--  = 0\n"},
		Heaptrack: {"v 1 3\na 10 1\n+ 0\n- 0\n- 0\n+ 1\n"},
		Mtrace:    {"= Start\n@ [0x1] < 0x10\n@ [0x1] > 0x20 0x8\n- (nil)\n"},
		AOSP:      {"1: malloc 0x10 8\n1: malloc 0x10 16\n1: realloc 0x20 0x10 0 1 2\n1: thread_done 0x0 5\n"},
	}
	return seeds[format]
}

// checkReader reads r to its end and checks what the fuzz tests promise.
func checkReader(t *testing.T, r *Reader, format Format, in []byte) {
	var evs []Event
	var err error
	for {
		var e Event
		if e, err = r.Next(); err != nil {
			break
		}
		if msg := e.check(); msg != "" {
			t.Fatalf("event %d %v: %s", len(evs), e, msg)
		}
		evs = append(evs, e)
	}
	if err != io.EOF {
		var e *Error
		switch {
		case errors.As(err, &e):
			if len(e.Got) > maxGot+3 || e.Line > r.Stats().Lines {
				t.Fatalf("error %+v: Got too long or Line past the lines read (%d)", e, r.Stats().Lines)
			}
		case errors.Is(err, ErrTooManyLive), errors.Is(err, ErrTooManyLabels):
		case errors.Is(err, ErrNoEvent):
			// Lines, and none a call of the format's: a file that is not
			// a trace of it, which says so.
			if len(evs) > 0 {
				t.Fatalf("reader ended with %v after %d events", err, len(evs))
			}
		case r.Format() == Go && (errors.Is(err, ErrGoTrace) || errors.Is(err, ErrNoGoHeap)):
		case format == Auto || len(r.closers) > 0: // a broken compressed stream
		default:
			t.Fatalf("reader ended with %v, want io.EOF or an *Error", err)
		}
	}
	if r.addrs.len() > len(evs) {
		t.Fatalf("%d live addresses after %d events", r.addrs.len(), len(evs))
	}
	if g := r.gotr; g != nil && g.objects.len()+g.stackID.len() > len(evs) {
		t.Fatalf("%d live Go objects after %d events", g.objects.len()+g.stackID.len(), len(evs))
	}
	for i, e := range evs {
		if _, ok := r.Labels().Label(e.Label); e.Label != 0 && !ok {
			t.Fatalf("event %d %v: a label not in the table (%d labels)", i, e, r.Labels().Len())
		}
	}
	if s := r.Stats(); s.Events != int64(len(evs)) {
		t.Fatalf("Stats().Events = %d, want %d", s.Events, len(evs))
	}
	checkConsistent(t, format, evs)
	if format != Native || err != io.EOF {
		return
	}
	buf := writeLabelled(t, r.Labels(), evs)
	back, err := NewReader(buf, "back", Native)
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	for {
		e, err := back.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading written events back: %v", err)
		}
		got = append(got, e)
	}
	// The events come back with the same labels. Their numbers may
	// differ: the Reader numbers labels in the order the trace defines
	// them, the Writer defines them in the order of their first use (and
	// not at all a label no event uses).
	if len(got) != len(evs) {
		t.Fatalf("round trip: %d events, want %d", len(got), len(evs))
	}
	for i, e := range got {
		g, _ := back.Labels().Label(e.Label)
		w, _ := r.Labels().Label(evs[i].Label)
		e.Label, evs[i].Label = 0, 0
		if e != evs[i] || !reflect.DeepEqual(g, w) {
			t.Fatalf("round trip: event %d %v (label %v), want %v (label %v)", i, e, g, evs[i], w)
		}
	}
}

// writeLabelled writes evs, with the table labels, in the native format.
func writeLabelled(t testing.TB, labels *Labels, evs []Event) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.SetLabels(labels); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return &buf
}
