package trace

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/carvelab/carve/internal/text"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenInputs returns the small traces under testdata/golden, one per
// format (or kind of a format), and under testdata/labelled, the traces
// with labels (a Go execution trace, a native trace of version 2), each
// named after its format: the text before the first '-' or '.'. (The
// labelled ones are apart because the command's golden tables cover
// testdata/golden.)
func goldenInputs(t testing.TB) []string {
	t.Helper()
	var in []string
	for _, dir := range []string{"testdata/golden", "testdata/labelled"} {
		all, err := filepath.Glob(dir + "/*")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all {
			if !strings.HasSuffix(p, ".golden") {
				in = append(in, p)
			}
		}
	}
	if len(in) < 9 {
		t.Fatalf("found %d golden inputs, want one for each format, and the labelled ones: %v", len(in), in)
	}
	return in
}

// formatOf returns the format a golden input is named after.
func formatOf(t testing.TB, path string) Format {
	t.Helper()
	base := filepath.Base(path)
	name := base[:strings.IndexAny(base, "-.")]
	f, err := ParseFormat(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// convert reads a whole trace with Auto detection and returns its events
// and the native text they convert to (with their labels and the Go
// heap's samples, through Copy), with the Reader's counts as a closing
// comment.
func convert(t testing.TB, name string, in []byte) ([]Event, []byte, *Reader) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(in), name, Auto)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := w.SetLabels(r.Labels()); err != nil {
		t.Fatal(err)
	}
	tee := &teeSource{Reader: r}
	if _, err := Copy(w, tee); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment(fmt.Sprintf("converted from %s (%s): %s", name, r.Format(), statsLine(r.Stats()))); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return tee.evs, out.Bytes(), r
}

// teeSource is a Reader that keeps the events read.
type teeSource struct {
	*Reader
	evs []Event
}

func (s *teeSource) Read(dst []Event) (int, error) {
	n, err := s.Reader.Read(dst)
	s.evs = append(s.evs, dst[:n]...)
	return n, err
}

// readAll reads a trace to its end with Next.
func readAll(t testing.TB, r *Reader) []Event {
	t.Helper()
	var evs []Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
}

// statsLine formats the Reader's counts, the zero ones left out.
func statsLine(s ReaderStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d lines, %d events", s.Lines, s.Events)
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"skipped", s.Skipped}, {"null frees", s.NullFrees}, {"failed", s.Failed},
		{"unknown frees", s.UnknownFrees}, {"unknown reallocs", s.UnknownReallocs},
		{"missed frees", s.MissedFrees}, {"invisible", s.Invisible}, {"threads done", s.ThreadsDone},
		{"alive at the start", s.GoAtStart}, {"tiny packed", s.TinyPacked}, {"unknown types", s.UnknownTypes},
		{"in no span", s.GoNoSpan}, {"goroutine stacks", s.GoStacks},
	} {
		if c.n != 0 {
			fmt.Fprintf(&b, ", %d %s", c.n, c.name)
		}
	}
	return b.String()
}

// TestGolden converts each small trace of goldenInputs to native
// text and compares it with its .golden file (go test ./lab/trace -update
// rewrites them). The format must be detected from the content; the
// golden text must read back as the same events; and the trace must read
// the same compressed with gzip and zstd.
func TestGolden(t *testing.T) {
	for _, path := range goldenInputs(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(path)
			evs, out, r := convert(t, name, in)
			if want := formatOf(t, path); r.Format() != want {
				t.Errorf("detected format %v, want %v", r.Format(), want)
			}
			golden := path + ".golden"
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./lab/trace -update to write it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("converted %s differs from %s:\n%s", name, golden, text.FirstDiff(string(want), string(out)))
			}
			checkConsistent(t, r.Format(), evs)

			back, err := NewReader(bytes.NewReader(want), golden, Native)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, back); !slices.Equal(got, evs) {
				t.Errorf("reading %s back gives other events:\n got %v\nwant %v", golden, got, evs)
			}
			checkSameLabels(t, back.Labels(), r.Labels())
			if got, want := back.GoHeap(), r.GoHeap(); !slices.Equal(got, want) {
				t.Errorf("reading %s back gives other samples of the Go heap:\n got %v\nwant %v", golden, got, want)
			}

			for _, c := range compressors {
				z := c.compress(t, in)
				zr, err := NewReader(bytes.NewReader(z), name+c.ext, Auto)
				if err != nil {
					t.Fatalf("%s: %v", c.ext, err)
				}
				if got := readAll(t, zr); !slices.Equal(got, evs) {
					t.Errorf("%s compressed with %s gives other events", name, c.ext)
				}
				zr.Close()
			}
		})
	}
}

var compressors = []struct {
	ext      string
	compress func(testing.TB, []byte) []byte
}{
	{".gz", func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write(b)
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
	{".zst", func(t testing.TB, b []byte) []byte {
		z, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		return z.EncodeAll(b, nil)
	}},
}

// checkSameLabels checks that two label tables hold the same labels
// under the same numbers.
func checkSameLabels(t testing.TB, got, want *Labels) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Errorf("%d labels, want %d", got.Len(), want.Len())
	}
	for id := uint32(1); int(id) <= want.Len(); id++ {
		g, _ := got.Label(id)
		w, _ := want.Label(id)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("label %d = %v, want %v", id, g, w)
		}
	}
}

// checkConsistent checks what an importer promises: every allocation
// names a fresh ID, every Realloc a live one, and every Free a live one or
// one never seen before. The native format promises nothing of the kind.
func checkConsistent(t testing.TB, f Format, evs []Event) {
	t.Helper()
	if f == Native {
		return
	}
	live := map[uint64]bool{}
	seen := map[uint64]bool{}
	for i, e := range evs {
		switch e.Op {
		case Alloc, Calloc, Memalign:
			if seen[e.ID] {
				t.Fatalf("event %d %v: the ID was seen before", i, e)
			}
			live[e.ID] = true
		case Realloc:
			if !live[e.ID] {
				t.Fatalf("event %d %v: realloc of an ID not live", i, e)
			}
		case Free:
			if !live[e.ID] && seen[e.ID] {
				t.Fatalf("event %d %v: free of an ID seen before and not live", i, e)
			}
			delete(live, e.ID)
		}
		seen[e.ID] = true
	}
}
