package traces_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// readAll reads src to its end, with each event's position and the
// label name it carries.
func readAll(t *testing.T, src trace.Source) (evs []trace.Event, lines []int64, names []string, err error) {
	t.Helper()
	pos, _ := src.(trace.Positioned)
	buf := make([]trace.Event, 3) // small batches: positions across reads
	for {
		n, rerr := src.Read(buf)
		for i, e := range buf[:n] {
			evs = append(evs, e)
			if pos != nil {
				_, l := pos.Position(i)
				lines = append(lines, l)
			}
			names = append(names, trace.LabelsOf(src).Name(e.Label))
		}
		if rerr == io.EOF {
			return evs, lines, names, nil
		}
		if rerr != nil {
			return evs, lines, names, rerr
		}
	}
}

// labelled is a native v2 trace with labels, every op and a thread.
const labelled = `# carve trace v2
l 1 main.session ptrbytes=0 size=64
a 1 64 @1
t 7
m 2 64 100
c 3 4 25
r 1 128
l 2 main.buf ptrbytes=0 size=1
a 4 4096 16 @2
f 2
f 3
f 1
f 4
`

func writeTrace(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.trace")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSpoolAndStream: a spooled trace's every Open, and a stream of it
// read back, give the events the trace's own reader gives, with their
// lines, their labels and the file's name; the spool is decoded once.
func TestSpoolAndStream(t *testing.T) {
	p := writeTrace(t, labelled)
	tr, err := traces.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	src, closer, err := tr.Open()
	if err != nil {
		t.Fatal(err)
	}
	want, wantLines, wantNames, err := readAll(t, src)
	closer.Close()
	if err != nil || len(want) != 9 {
		t.Fatalf("the reader: %d events, %v", len(want), err)
	}
	sp := tr.Spooled()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			src, closer, err := sp.Open()
			if err != nil {
				t.Error(err)
				return
			}
			defer closer.Close()
			got, lines, names, err := readAll(t, src)
			if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(lines, wantLines) || !reflect.DeepEqual(names, wantNames) {
				t.Errorf("spooled: %v %v %v, %v; want %v %v %v", got, lines, names, err, want, wantLines, wantNames)
			}
		})
	}
	wg.Wait()

	src, closer, err = sp.Open()
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := traces.WriteStream(&stream, src); err != nil {
		t.Fatal(err)
	}
	closer.Close()
	back := traces.ReadStream(&stream)
	got, lines, names, err := readAll(t, back)
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(lines, wantLines) || !reflect.DeepEqual(names, wantNames) {
		t.Errorf("streamed: %v %v %v, %v; want %v %v %v", got, lines, names, err, want, wantLines, wantNames)
	}
	if file, _ := back.(trace.Positioned).Position(0); file != p {
		t.Errorf("streamed: file %q, want %q", file, p)
	}
}

// TestSpoolKeepsTheError: a trace that stops at an error gives, spooled,
// its events up to there and the same error (errors.Is still matches
// it); streamed, the error's message.
func TestSpoolKeepsTheError(t *testing.T) {
	p := writeTrace(t, "# carve trace v1\na 1 10\na 2 20\nbogus line\na 3 30\n")
	tr, err := traces.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	src, closer, _ := tr.Open()
	want, _, _, wantErr := readAll(t, src)
	closer.Close()
	if wantErr == nil {
		t.Fatal("the reader read the bad line")
	}
	src, closer, err = tr.Spooled().Open()
	if err != nil {
		t.Fatal(err)
	}
	got, _, _, gotErr := readAll(t, src)
	if !reflect.DeepEqual(got, want) || gotErr == nil || gotErr.Error() != wantErr.Error() || reflect.TypeOf(gotErr) != reflect.TypeOf(wantErr) {
		t.Errorf("spooled: %v, %v; want %v, %v", got, gotErr, want, wantErr)
	}
	closer.Close()
	src, closer, _ = tr.Spooled().Open()
	var stream bytes.Buffer
	traces.WriteStream(&stream, src)
	closer.Close()
	got, _, _, gotErr = readAll(t, traces.ReadStream(&stream))
	if !reflect.DeepEqual(got, want) || gotErr == nil || gotErr.Error() != wantErr.Error() {
		t.Errorf("streamed: %v, %v; want %v, %v", got, gotErr, want, wantErr)
	}
}
