package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
)

// The fuzz tests feed arbitrary bytes to each reader. Whatever the input,
// a reader must not panic; must return only events that keep Event's
// contract; must, when importing, return a consistent trace (see
// checkConsistent); and must end with io.EOF or an error that says where
// (an *Error) or why. Memory stays bounded by construction: one buffer of
// MaxLine bytes, lines beyond it dropped unstored, and one table entry
// per live object, which a line must create; nothing is sized by a
// number read from the input. The native format must also survive a
// round trip through the Writer.
//
// Seeds: the golden traces of the format, and the malformed lines of
// TestErrors. Long runs, one format at a time:
//
//	go test -run '^$' -fuzz FuzzAOSP -fuzztime 60s ./trace

func FuzzNative(f *testing.F)    { fuzzFormat(f, Native) }
func FuzzRep(f *testing.F)       { fuzzFormat(f, Rep) }
func FuzzValgrind(f *testing.F)  { fuzzFormat(f, Valgrind) }
func FuzzHeaptrack(f *testing.F) { fuzzFormat(f, Heaptrack) }
func FuzzMtrace(f *testing.F)    { fuzzFormat(f, Mtrace) }
func FuzzAOSP(f *testing.F)      { fuzzFormat(f, AOSP) }

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
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), "fuzz", format)
		if err != nil {
			return // a broken gzip or zstd header
		}
		defer r.Close()
		checkReader(t, r, format, in)
	})
}

// errorSeeds returns TestErrors' malformed traces of a format.
func errorSeeds(format Format) []string {
	seeds := map[Format][]string{
		Native:    {"# carve trace v1\nc 1 4294967296 4294967296\nt 7\nm 1 48 2\n"},
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
		case errors.Is(err, ErrTooManyLive):
		case format == Auto || len(r.closers) > 0: // a broken compressed stream
		default:
			t.Fatalf("reader ended with %v, want io.EOF or an *Error", err)
		}
	}
	if r.addrs.len() > len(evs) {
		t.Fatalf("%d live addresses after %d events", r.addrs.len(), len(evs))
	}
	if s := r.Stats(); s.Events != int64(len(evs)) {
		t.Fatalf("Stats().Events = %d, want %d", s.Events, len(evs))
	}
	checkConsistent(t, format, evs)
	if format != Native || err != io.EOF {
		return
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := NewReader(&buf, "back", Native)
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
	if !slices.Equal(got, evs) {
		t.Fatalf("round trip: %v, want %v", got, evs)
	}
}
