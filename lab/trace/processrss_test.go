package trace

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// TestNativeRSSErrors: the "R" lines of version 3, malformed, and in a
// trace of version 2.
func TestNativeRSSErrors(t *testing.T) {
	const v3 = "# carve trace v3\n"
	tests := []syntaxCase{
		{"in v2", "# carve trace v2\na 1 2\nR 1 10 20 test\n", 3, "line", `"l" or "g"`},
		{"a field missing", v3 + "a 1 2\nR 1 10 20\n", 3, "program's RSS", "R <events before>|- <VmRSS bytes>"},
		{"a word for a number", v3 + "a 1 2\nR 1 ten 20 test\n", 3, "program's RSS", "R <events before>"},
		{"no place", v3 + "R  10 20 test\n", 2, "program's RSS", "R <events before>"},
		{"a field too many", v3 + "a 1 2\nR 1 10 20 test 5\n", 3, "program's RSS", "R <events before>"},
		{"an unknown process", v3 + "a 1 2\nR 1 10 20 compiler\n", 3, "program's RSS", `"test", "program" or "valgrind"`},
		{"two processes", v3 + "a 1 2\nR 1 10 20 test\nR 1 10 20 program\n", 4, "program's RSS", `of the samples before ("test")`},
		{"RSS above the peak", v3 + "a 1 2\nR 1 30 20 test\n", 3, "program's RSS", "at most the VmHWM"},
		{"past the events", v3 + "a 1 2\nR 2 10 20 test\n", 3, "program's RSS", "by the 1 events read so far"},
		{"out of order", v3 + "a 1 2\na 2 2\nR 2 10 20 test\nR 1 10 20 test\n", 5, "program's RSS", "at or after the last one (after 2 events)"},
		{"a huge place", v3 + "a 1 2\nR 99999999999999999999 10 20 test\n", 3, "program's RSS", "R <events before>"},
	}
	checkSyntaxErrors(t, tests)
}

// TestNativeRSSBound: a trace of more samples than MaxProcessRSS stops
// with an error wrapping ErrTooManyLive, at the line past the bound.
func TestNativeRSSBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("# carve trace v3\na 1 2\n")
	for range MaxProcessRSS + 1 {
		b.WriteString("R - 1 2 program\n")
	}
	_, _, err := readString("big.trace", b.String(), Native)
	if !errors.Is(err, ErrTooManyLive) || !strings.Contains(err.Error(), "big.trace:") {
		t.Fatalf("err = %v, want ErrTooManyLive with the file's name", err)
	}
}

// TestProcessRSSRoundTrip: samples written by a Writer come back from a
// Reader, at their places, and Copy keeps them there; one not placed
// stays not placed.
func TestProcessRSSRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.SetLabels(&Labels{}); err != nil {
		t.Fatal(err)
	}
	if err := w.ProcessRSS(ProcessRSS{Event: 1, RSS: 1, HWM: 1, Of: RSSTestBinary}); err == nil {
		t.Error("a sample placed past the events written: nil error")
	}
	if err := w.ProcessRSS(ProcessRSS{Event: 0, RSS: 2, HWM: 1, Of: RSSTestBinary}); err == nil {
		t.Error("a VmRSS above the VmHWM: nil error")
	}
	if err := w.ProcessRSS(ProcessRSS{Event: 0, RSS: 1, HWM: 1, Of: "go"}); err == nil {
		t.Error("an unknown process: nil error")
	}
	want := []ProcessRSS{
		{Event: 0, RSS: 4 << 20, HWM: 4 << 20, Of: RSSTestBinary},
		{Event: 2, RSS: 70 << 20, HWM: 71 << 20, Of: RSSTestBinary},
		{Event: -1, RSS: 70 << 20, HWM: 80 << 20, Of: RSSTestBinary},
		{Event: 3, RSS: 6 << 20, HWM: 80 << 20, Of: RSSTestBinary},
	}
	evs := []Event{{Op: Alloc, ID: 1, Size: 8}, {Op: Alloc, ID: 2, Size: 8}, {Op: Free, ID: 1}}
	for i, e := range append(evs, Event{}) {
		for _, s := range want {
			if s.Event == int64(i) || s.Event == -1 && i == 2 {
				if err := w.ProcessRSS(s); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i < len(evs) {
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.Flush()
	if !strings.Contains(buf.String(), "\nR - 73400320 83886080 test\n") {
		t.Errorf("no line of the sample not placed in\n%s", buf.String())
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "rss.trace", Native)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, r)
	if got := r.ProcessRSS(); !slices.Equal(got, want) {
		t.Fatalf("read back %v, want %v", got, want)
	}
	if rss, hwm, ok := RSSPeak(r.ProcessRSS()); !ok || rss != 70<<20 || hwm != 80<<20 {
		t.Errorf("RSSPeak = %d, %d, %v", rss, hwm, ok)
	}

	r, err = NewReader(bytes.NewReader(buf.Bytes()), "rss.trace", Native)
	if err != nil {
		t.Fatal(err)
	}
	var copied bytes.Buffer
	cw := NewWriter(&copied)
	cw.SetLabels(r.Labels())
	if _, err := Copy(cw, r); err != nil {
		t.Fatal(err)
	}
	cw.Flush()
	back, err := NewReader(bytes.NewReader(copied.Bytes()), "copy.trace", Native)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, back)
	if got := back.ProcessRSS(); !slices.Equal(got, want) {
		t.Errorf("copied: %v, want %v", got, want)
	}
}

// TestGoProcessRSS: the samples given to the reader of a Go execution
// trace are placed by its clock snapshot: one taken before the trace's
// first event before every event, one after its last after them all,
// one taken in the middle among the events; a trace read without
// samples has none.
func TestGoProcessRSS(t *testing.T) {
	in, err := os.ReadFile("testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot and the times of the trace, read with x/exp/trace.
	xr, err := xtrace.NewReader(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var snap *xtrace.ClockSnapshot
	var first, last xtrace.Time
	var times []xtrace.Time // of the alloc/free events
	for {
		e, err := xr.ReadEvent()
		if err != nil {
			break
		}
		if e.Kind() == xtrace.EventSync && snap == nil {
			snap = e.Sync().ClockSnapshot
		}
		if e.Kind() == xtrace.EventExperimental {
			times = append(times, e.Time())
		}
		if first == 0 {
			first = e.Time()
		}
		last = e.Time()
	}
	if snap == nil {
		t.Skip("the golden trace has no clock snapshot (Go before 1.25)")
	}
	at := func(tt xtrace.Time) ClockedRSS {
		d := time.Duration(int64(tt) - int64(snap.Trace))
		return ClockedRSS{Mono: uint64(int64(snap.Mono) + int64(d)), Wall: snap.Wall.Add(d)}
	}
	mid := times[len(times)/2]
	samples := []ClockedRSS{at(first - 1e9), at(mid), at(last + 1e9)}
	for i := range samples {
		samples[i].RSS, samples[i].HWM = uint64(i+1)<<20, uint64(i+1)<<20
	}
	for _, clock := range []string{"mono", "wall"} {
		t.Run(clock, func(t *testing.T) {
			given := slices.Clone(samples)
			if clock == "wall" {
				for i := range given {
					given[i].Mono = 0
				}
			}
			r, err := NewReaderOptions(bytes.NewReader(in), "go.trace", ReaderOptions{Format: Go, ProcessRSS: given, ProcessRSSOf: RSSTestBinary})
			if err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, r)
			got := r.ProcessRSS()
			if len(got) != 3 {
				t.Fatalf("%d samples placed, want 3: %v", len(got), got)
			}
			if got[0].Event != 0 || got[2].Event != int64(len(evs)) || !(0 < got[1].Event && got[1].Event < int64(len(evs))) {
				t.Errorf("placed at %d, %d, %d, want 0, inside (0, %d), %d", got[0].Event, got[1].Event, got[2].Event, len(evs), len(evs))
			}
			if got[1].Of != RSSTestBinary || got[1].RSS != 2<<20 {
				t.Errorf("middle sample %+v", got[1])
			}
		})
	}
	r, err := NewReaderOptions(bytes.NewReader(in), "go.trace", ReaderOptions{Format: Go})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, r)
	if got := r.ProcessRSS(); got != nil {
		t.Errorf("without samples: %v", got)
	}
}
