package trace

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestWriter checks the native lines of each op, the thread lines, and
// the header of an empty trace.
func TestWriter(t *testing.T) {
	tests := []struct {
		name string
		evs  []Event
		want string
	}{
		{"empty", nil, "# carve trace v1\n"},
		{"ops", []Event{
			{Op: Alloc, ID: 1, Size: 16},
			{Op: Alloc, ID: 2, Size: 100, Align: 64},
			{Op: Calloc, ID: 3, N: 4, Size: 100},
			{Op: Memalign, ID: 4, Align: 4096, Size: 8192},
			{Op: Realloc, ID: 1, Size: 32},
			{Op: Free, ID: 2},
		}, "# carve trace v1\na 1 16\na 2 100 64\nc 3 4 25\nm 4 4096 8192\nr 1 32\nf 2\n"},
		{"threads", []Event{
			{Op: Alloc, ID: 1, Size: 8, Thread: 5},
			{Op: Free, ID: 1, Thread: 5},
			{Op: Alloc, ID: 2, Size: 8},
		}, "# carve trace v1\nt 5\na 1 8\nf 1\nt 0\na 2 8\n"},
		{"calloc without count", []Event{{Op: Calloc, ID: 1, Size: 24}}, "# carve trace v1\nc 1 1 24\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b)
			for _, e := range tt.evs {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("wrote %q, want %q", b.String(), tt.want)
			}
		})
	}
}

// TestWriterRefuses checks that events breaking Event's contract are
// refused and nothing is written for them.
func TestWriterRefuses(t *testing.T) {
	for _, e := range []Event{
		{},
		{Op: 9, ID: 1},
		{Op: Alloc, ID: 1, Size: 8, Align: 3},
		{Op: Memalign, ID: 1, Size: 8, Align: 48},
		{Op: Calloc, ID: 1, N: 3, Size: 10},
	} {
		var b bytes.Buffer
		w := NewWriter(&b)
		if err := w.Write(e); err == nil {
			t.Errorf("Write(%+v) succeeded", e)
		}
		w.Flush()
		if b.String() != "# carve trace v1\n" {
			t.Errorf("after Write(%+v) refused, wrote %q", e, b.String())
		}
	}
}

type failWriter struct{ n int }

var errFull = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errFull
}

// TestWriterError checks that the first error of the underlying writer
// sticks.
func TestWriterError(t *testing.T) {
	fw := &failWriter{}
	w := NewWriter(fw)
	var err error
	for i := 0; err == nil && i < 1e6; i++ {
		err = w.Write(Event{Op: Alloc, ID: uint64(i), Size: 8})
	}
	if !errors.Is(err, errFull) || !errors.Is(w.Write(Event{Op: Free, ID: 1}), errFull) || !errors.Is(w.Flush(), errFull) || fw.n != 1 {
		t.Errorf("err %v after %d writes to the failing writer, want disk full, sticky", err, fw.n)
	}
}

// TestRoundTrip writes random valid events and reads them back.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	evs := make([]Event, 20000)
	for i := range evs {
		e := Event{Op: Op(1 + rng.IntN(NumOps-1)), ID: rng.Uint64(), Thread: uint32(rng.IntN(3)) * rng.Uint32()}
		switch e.Op {
		case Alloc, Realloc:
			e.Size = rng.Uint64() >> rng.IntN(64)
			if e.Op == Alloc && rng.IntN(4) == 0 {
				e.Align = 1 << rng.IntN(32)
			}
		case Memalign:
			e.Size, e.Align = rng.Uint64()>>rng.IntN(64), 1<<rng.IntN(32)
		case Calloc:
			e.N = rng.Uint32() >> rng.IntN(32)
			if e.N != 0 {
				e.Size = uint64(e.N) * (rng.Uint64() >> (32 + rng.IntN(32)))
			}
		}
		evs[i] = e
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	got, _, err := readString("rt", text, Auto)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, evs) {
		t.Fatal("events read back differ from the events written")
	}
	// And the text written again is the same text.
	var b2 bytes.Buffer
	w2 := NewWriter(&b2)
	for _, e := range got {
		w2.Write(e)
	}
	w2.Flush()
	if b2.String() != text {
		t.Error("native -> events -> native changed the text")
	}
}

// TestComment checks comment lines, which readers skip.
func TestComment(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Comment("two\nlines")
	w.Write(Event{Op: Free, ID: 1})
	w.Flush()
	if want := "# carve trace v1\n# two\n# lines\nf 1\n"; b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	if evs, _, err := readString("c", b.String(), Native); err != nil || len(evs) != 1 {
		t.Errorf("read back %v, %v", evs, err)
	}
}

// TestEventString checks String on each op.
func TestEventString(t *testing.T) {
	got := []string{
		Event{Op: Alloc, ID: 7, Size: 100}.String(),
		Event{Op: Memalign, ID: 3, Align: 64, Size: 4096}.String(),
		Op(0).String(), Op(200).String(), Calloc.String(),
	}
	want := []string{"a 7 100", "m 3 64 4096", "Op(0)", "Op(200)", "calloc"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}
