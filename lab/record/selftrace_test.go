package record_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
)

// goSelftraced builds testdata/selftraced, a program that traces itself
// with package selftrace, stripped of its symbol table (-s -w): Record
// finds selftrace in its function table all the same.
var goSelftraced = sync.OnceValues(func() (string, error) {
	return goBuild("selftraced", "./testdata/selftraced", []string{"CGO_ENABLED=0"}, "-ldflags=-s -w")
})

// selftraced returns the path of testdata/selftraced, built.
func selftraced(t *testing.T) string {
	t.Helper()
	needGo(t)
	bin, err := goSelftraced()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// replays reads a recorded Go trace whole and replays it through
// first-fit: it must hold events, labels and a label called typ, and
// replay without trace errors.
func replays(t *testing.T, data []byte, typ string) summary.Trace {
	t.Helper()
	evs, labels, heap, s := readBack(t, data)
	var table strings.Builder
	s.WriteLabels(&table, 6)
	t.Logf("%d events, peak live %d B; %d labels, %d samples of the Go heap\n%s", len(evs), s.PeakLive, labels.Len(), len(heap), table.String())
	if len(evs) == 0 || labels.Len() == 0 {
		t.Fatalf("the trace holds %d events and %d labels, want some of both", len(evs), labels.Len())
	}
	if _, ok := labelNamed(labels, typ); !ok {
		t.Errorf("no label %q among %d", typ, labels.Len())
	}
	a, err := replay.New("first-fit")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := replay.Run(trace.LabeledEvents(evs, labels), a, replay.Options{})
	if err != nil {
		t.Fatalf("replay.Run = %v", err)
	}
	if got.Events != int64(len(evs)) || got.TraceErrors != 0 || uint64(got.PeakLive) != s.PeakLive {
		t.Errorf("replayed %d events with %d trace errors (first %v), peak live %d; want %d, none and %d",
			got.Events, got.TraceErrors, got.FirstTraceError, got.PeakLive, len(evs), s.PeakLive)
	}
	return s
}

// TestSelftrace records a binary built with package selftrace as any
// program: Record finds selftrace in it, runs it with the variable set
// and converts its trace, which holds its records by type.
func TestSelftrace(t *testing.T) {
	bin := selftraced(t)
	res, data, err := recordTo(t, "", []string{bin})
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	t.Logf("the trace started in a pause of %v", res.StartPause)
	if res.Recorder != "go" || res.Process.Pid == 0 || res.Events == 0 || len(res.GoHeap) == 0 || res.StartPause <= 0 {
		t.Errorf("Result = %+v, want the go recorder, a pid, events, samples of the Go heap and the pause", res)
	}
	if !bytes.Contains(data, []byte("package selftrace")) {
		t.Errorf("the trace's comment does not say where it comes from:\n%.300s", data)
	}
	s := replays(t, data, "main.record")
	i := slices.IndexFunc(s.Labels, func(st summary.LabelStat) bool { return st.Name == "main.record" })
	if i < 0 || s.Labels[i].Objects < 4500 {
		t.Errorf("main.record: %+v at the peak, want at least 4500 objects", s.Labels)
	}
	if err := record.AvailableFor(record.Default, []string{bin}); err != nil {
		t.Errorf("AvailableFor(%s) = %v, want nil: a binary that traces itself needs no tool", bin, err)
	}
}

// TestSelftraceMisuse: a binary that holds selftrace.Start but does not
// call it, and one that ends by os.Exit without stopping its trace (at
// once, or after the runtime wrote its first generations), get an error
// that says what went wrong, and nothing written but the events before
// the cut.
func TestSelftraceMisuse(t *testing.T) {
	bin := selftraced(t)
	for _, tt := range []struct {
		mode    string
		want    []string // in the error, one of
		written bool     // out may hold the events before the cut, as Record says
	}{
		{"nostart", []string{"did not call selftrace.Start"}, false},
		{"exit", []string{"did not stop its trace, which ends before its first generation", "its trace is empty"}, false},
		{"late", []string{"did not stop its trace, which ends cut short"}, true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			_, data, err := recordTo(t, "", []string{bin, tt.mode})
			if !errors.Is(err, record.ErrSelftrace) || !errors.Is(err, record.ErrUsage) {
				t.Fatalf("Record = %v, want ErrSelftrace and ErrUsage", err)
			}
			if !slices.ContainsFunc(tt.want, func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Errorf("Record = %q, want it to say one of %q", err, tt.want)
			}
			if len(data) != 0 && !tt.written {
				t.Errorf("Record wrote %d bytes, want nothing", len(data))
			}
		})
	}
}

// readyWriter calls ready once when the text "ready" has been written
// to it.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	ready func()
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if w.ready != nil && bytes.Contains(w.buf, []byte("ready")) {
		w.ready()
		w.ready = nil
	}
	return len(p), nil
}

// TestSelftraceInterrupt records a binary that traces itself and runs
// until it is interrupted: Record interrupts it when its context is done
// (SIGINT), selftrace stops and flushes the trace, and the trace is
// written.
func TestSelftraceInterrupt(t *testing.T) {
	bin := selftraced(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	stdout := &readyWriter{ready: cancel}
	res, err := record.Record(ctx, []string{bin, "wait"}, &out, record.Options{Stdout: stdout, Stderr: stdout})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Record = %v, want context.Canceled; program output:\n%s", err, stdout.buf)
	}
	if errors.Is(err, record.ErrSelftrace) || res.Events == 0 {
		t.Fatalf("Record = %v with %d events, want the trace written", err, res.Events)
	}
	replays(t, out.Bytes(), "main.record")
}

// TestGoBinaryWithCarve: a Go binary built with carve's module but none
// of package selftrace is not run, and the error says selftrace is not
// in it.
func TestGoBinaryWithCarve(t *testing.T) {
	needGo(t)
	bin, err := goStatic() // testdata/static is built in carve's module
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = recordTo(t, "", []string{bin})
	if !errors.Is(err, record.ErrGoProgram) || !strings.Contains(err.Error(), "no function of package selftrace") {
		t.Errorf("Record = %v, want ErrGoProgram saying selftrace is not in the binary", err)
	}
}
