package traces_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// streamed writes tr's events to a stream and returns its reader.
func streamed(t *testing.T, tr traces.Trace) trace.Source {
	t.Helper()
	src, closer, err := tr.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var stream bytes.Buffer
	if err := traces.WriteStream(&stream, src); err != nil {
		t.Fatal(err)
	}
	return traces.ReadStream(&stream)
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

	back := streamed(t, sp)
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

// TestStreamAcrossBuffers: a long stream of events of every kind, with
// fields of every width, reads back as written, its records cut by the
// reader's buffer anywhere (an event decoded from the buffer, or byte
// by byte where the buffer ends inside it).
func TestStreamAcrossBuffers(t *testing.T) {
	var b strings.Builder
	b.WriteString("# carve trace v2\nl 1 main.session ptrbytes=0 size=64\n")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 60_000 {
		id := uint64(i + 1)
		if i%7 == 0 {
			id = rng.Uint64() >> rng.IntN(64)
		}
		switch i % 6 {
		case 0:
			fmt.Fprintf(&b, "a %d %d @1\n", id, rng.Uint64N(1<<uint(rng.IntN(40)+1)))
		case 1:
			fmt.Fprintf(&b, "t %d\nm %d %d %d\n", rng.IntN(1<<20), id, 1<<rng.IntN(20), rng.IntN(1<<16))
		case 2:
			fmt.Fprintf(&b, "c %d %d %d\n", id, rng.IntN(1000)+1, rng.IntN(4096)+1)
		case 3:
			fmt.Fprintf(&b, "r %d %d\n", id, rng.IntN(1<<30))
		case 4:
			fmt.Fprintf(&b, "f %d\n", id)
		default:
			fmt.Fprintf(&b, "# a comment\n\na %d 16\n", id)
		}
	}
	tr, err := traces.Resolve(writeTrace(t, b.String()))
	if err != nil {
		t.Fatal(err)
	}
	src, closer, err := tr.Open()
	if err != nil {
		t.Fatal(err)
	}
	want, wantLines, wantNames, _ := readAll(t, src)
	closer.Close()
	got, lines, names, err := readAll(t, streamed(t, tr))
	if err != nil || len(got) != len(want) {
		t.Fatalf("%d events read back, %v; want %d", len(got), err, len(want))
	}
	for i := range want {
		if got[i] != want[i] || lines[i] != wantLines[i] || names[i] != wantNames[i] {
			t.Fatalf("event %d: %+v line %d %q, want %+v line %d %q", i, got[i], lines[i], names[i], want[i], wantLines[i], wantNames[i])
		}
	}
}
