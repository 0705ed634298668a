package record_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
)

// needGo skips the test when the go command is missing, or fails it
// under CI=true.
func needGo(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("go")
	need(t, "go", err)
}

// goconnCmd runs the connection workload's test, testdata/goconn.
var goconnCmd = []string{"go", "test", "-count=1", "-run", "^TestConnections$", "./testdata/goconn"}

// readBack reads a recorded native trace whole: its events, labels,
// Go heap samples and summary.
func readBack(t testing.TB, data []byte) ([]trace.Event, *trace.Labels, []trace.GoHeapSample, summary.Trace) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "recorded", trace.Auto)
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != trace.Native || r.Labels() == nil {
		t.Fatalf("the trace is %v with labels %v, want native v2", r.Format(), r.Labels())
	}
	var evs []trace.Event
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		evs = append(evs, e)
	}
	s, err := summary.OfSource(trace.LabeledEvents(evs, r.Labels()))
	if err != nil {
		t.Fatal(err)
	}
	return evs, r.Labels(), r.GoHeap(), s
}

// labelNamed returns the label called name.
func labelNamed(labels *trace.Labels, name string) (trace.Label, bool) {
	for id := uint32(1); int(id) <= labels.Len(); id++ {
		if l, _ := labels.Label(id); l.Name == name {
			return l, true
		}
	}
	return trace.Label{}, false
}

// TestGoTest records the connection workload (testdata/goconn) through
// go test and checks what its trace must show: its types with their sizes
// and pointer bytes (a session is pointer-free, a conn holds pointers),
// a peak live within 10% of the peak of the runtime's own heap-objects
// metric, every label and sample kept by a round trip through the native
// format, and a replay without trace errors.
func TestGoTest(t *testing.T) {
	needGo(t)
	res, data, err := recordTo(t, "", goconnCmd)
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	if res.Recorder != "go" || res.Process.Pid == 0 || res.Events == 0 || len(res.GoHeap) == 0 {
		t.Errorf("Result = %+v, want the go recorder, a pid, events and samples of the Go heap", res)
	}
	if !bytes.Contains(data, []byte("# recorded by carve record -- go test ")) {
		t.Errorf("the trace does not start with the command's comment:\n%.300s", data)
	}
	evs, labels, heap, s := readBack(t, data)
	var table strings.Builder
	s.WriteLabels(&table, 8)
	t.Logf("%d events, peak live %d B after event %d; %d labels\n%s", s.Events, s.PeakLive, s.PeakAt, labels.Len(), table.String())

	for _, tt := range []struct {
		name           string
		size, ptrBytes uint64
		objects        int64 // at least, live at the peak
	}{
		{"goconn.session", 64, 0, 5000}, // the runtime names types by package name
		{"goconn.conn", 88, 72, 5000},
		{"uint8", 1, 0, 5000}, // the buffers: a []byte's objects are of type uint8
	} {
		l, ok := labelNamed(labels, tt.name)
		if !ok {
			t.Errorf("no label %q among %d", tt.name, labels.Len())
			continue
		}
		size, _ := l.Uint(trace.AttrSize)
		ptr, _ := l.Uint(trace.AttrPtrBytes)
		if size != tt.size || ptr != tt.ptrBytes {
			t.Errorf("label %v: size %d, pointer bytes %d; want %d and %d", l, size, ptr, tt.size, tt.ptrBytes)
		}
		i := slices.IndexFunc(s.Labels, func(st summary.LabelStat) bool { return st.Name == l.Name })
		if i < 0 {
			t.Errorf("label %q: not in the summary", l.Name)
		} else if s.Labels[i].Objects < tt.objects {
			t.Errorf("label %q: %d objects at the peak, want at least %d", l.Name, s.Labels[i].Objects, tt.objects)
		}
	}

	// The runtime's own account of its heap: its peak, against the
	// trace's peak live bytes.
	if !slices.Equal(heap, res.GoHeap) {
		t.Errorf("the trace holds %d samples of the Go heap, the Result %d", len(heap), len(res.GoHeap))
	}
	var metricPeak uint64
	for _, h := range heap {
		metricPeak = max(metricPeak, h.Objects)
	}
	ratio := float64(s.PeakLive) / float64(metricPeak)
	t.Logf("peak live %d B, peak of %s %d B: ratio %.4f", s.PeakLive, "/memory/classes/heap/objects:bytes", metricPeak, ratio)
	if ratio < 0.9 || ratio > 1.1 {
		t.Errorf("peak live %d B is not within 10%% of the heap metric's peak %d B (ratio %.3f)", s.PeakLive, metricPeak, ratio)
	}

	// A round trip through the native format keeps every label and
	// every sample, in place.
	var again bytes.Buffer
	r, err := trace.NewReader(bytes.NewReader(data), "recorded", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewWriter(&again)
	if err := w.SetLabels(r.Labels()); err != nil {
		t.Fatal(err)
	}
	if _, err := trace.Copy(w, r); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	evs2, labels2, heap2, _ := readBack(t, again.Bytes())
	if len(evs2) != len(evs) || !slices.Equal(heap2, heap) || labels2.Len() != labels.Len() {
		t.Fatalf("round trip: %d events, %d samples, %d labels; want %d, %d, %d",
			len(evs2), len(heap2), labels2.Len(), len(evs), len(heap), labels.Len())
	}
	for i := range evs {
		a, _ := labels.Label(evs[i].Label)
		b, _ := labels2.Label(evs2[i].Label)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip: event %d %v has label %v, want %v", i, evs2[i], b, a)
		}
	}

	// The trace replays, without trace errors.
	a, err := replay.New("first-fit")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := replay.Run(trace.LabeledEvents(evs, labels), a, replay.Options{})
	if err != nil {
		t.Fatalf("replay.Run = %v", err)
	}
	if got.TraceErrors != 0 || uint64(got.PeakLive) != s.PeakLive {
		t.Errorf("replayed: %d trace errors (first %v), peak live %d; want none and %d", got.TraceErrors, got.FirstTraceError, got.PeakLive, s.PeakLive)
	}
}

// TestGoTestOwnTrace records go test with the user's own -trace file and
// GODEBUG setting: the trace goes where the user said, and GODEBUG keeps
// the user's setting beside traceallocfree=1.
func TestGoTestOwnTrace(t *testing.T) {
	needGo(t)
	own := filepath.Join(t.TempDir(), "own.trace")
	cmd := []string{"go", "test", "-count=1", "-trace", own, "-run", "^TestConnections$", "./testdata/goconn"}
	res, data, err := recordTo(t, "", cmd, "GODEBUG=madvdontneed=1")
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("the user's -trace file: %v", err)
	}
	if res.Events == 0 || len(data) == 0 {
		t.Errorf("Record wrote %d bytes, %d events", len(data), res.Events)
	}
	if strings.Contains(res.Process.Program, "-trace=") {
		t.Errorf("Record added a -trace flag to a command that had one: %s", res.Process.Program)
	}
}

// TestGoTestOwnTraceKept records go test commands whose -trace names a
// path that exists already: a user's file, of a test that does not build
// (testdata/nobuild); an empty directory; a device. None may be removed
// or changed. The file's run is an error wrapping ErrNoEvents that says
// go test wrote no trace and why, and neither a directory nor a device is
// run at all (ErrUsage: carve reads the trace back from the file).
func TestGoTestOwnTraceKept(t *testing.T) {
	needGo(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.trace")
	if err := os.WriteFile(file, []byte("the user's own data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		usage      bool // refused before go test runs
	}{
		{"file", file, false},
		{"directory", empty, true},
		{"device", os.DevNull, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			_, data, err := recordTo(t, "", []string{"go", "test", "-count=1", "-trace=" + tt.path, "./testdata/nobuild"})
			switch {
			case tt.usage && !errors.Is(err, record.ErrUsage):
				t.Errorf("Record = %v, want ErrUsage", err)
			case !tt.usage && (!errors.Is(err, record.ErrNoEvents) || !strings.Contains(err.Error(), "wrote no execution trace") ||
				!strings.Contains(err.Error(), "exit status 1")):
				t.Errorf("Record = %v, want ErrNoEvents, saying go test wrote no trace and its exit status", err)
			}
			if len(data) > 0 {
				t.Errorf("Record wrote %d bytes, want none", len(data))
			}
			after, err := os.Stat(tt.path)
			if err != nil {
				t.Fatalf("the -trace path after the run: %v", err)
			}
			if after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("the -trace path was %v, is %v", before.Mode(), after.Mode())
			}
		})
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "the user's own data\n" {
		t.Errorf("the user's file holds %q (%v), want its own data", b, err)
	}
}

// TestGoTestPackages: go test -trace takes one package, so a command of
// two is refused before it runs, with an error that says so.
func TestGoTestPackages(t *testing.T) {
	needGo(t)
	_, data, err := recordTo(t, "", []string{"go", "test", "./testdata/goconn", "./testdata/static"})
	if !errors.Is(err, record.ErrGoTestPackages) || !errors.Is(err, record.ErrUsage) {
		t.Fatalf("Record = %v, want ErrGoTestPackages and ErrUsage", err)
	}
	if !strings.Contains(err.Error(), "takes one package") || len(data) != 0 {
		t.Errorf("Record = %q, %d bytes written; want it to name -trace's one-package limit, and nothing written", err, len(data))
	}
}

// TestGoRecorderMisuse: a go test command with a C recorder, and the go
// recorder with another command, are usage errors.
func TestGoRecorderMisuse(t *testing.T) {
	for _, tt := range []struct {
		recorder string
		cmd      []string
		want     string
	}{
		{"valgrind", goconnCmd, "execution trace"},
		{"go", []string{"/bin/true"}, "go test -run TestX ./pkg"},
		{"", []string{"go", "test", "-c", "./testdata/goconn"}, "-c"},
	} {
		_, err := record.Record(context.Background(), tt.cmd, &bytes.Buffer{}, record.Options{Recorder: tt.recorder})
		if !errors.Is(err, record.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Record(%q, %q) = %v, want ErrUsage saying %q", tt.recorder, tt.cmd, err, tt.want)
		}
	}
}

// goCgo builds testdata/cgomalloc, a Go program that calls C's malloc.
var goCgo = sync.OnceValues(func() (string, error) {
	return goBuild("cgomalloc", "./testdata/cgomalloc", []string{"CGO_ENABLED=1"})
})

// TestCgoProgram records a Go program built with cgo with carve's
// recorder: its C allocations are written, and the trace and Result say
// it holds only the C heap.
func TestCgoProgram(t *testing.T) {
	needGo(t)
	needRecorder(t, "carve")
	_, err := exec.LookPath("cc")
	need(t, "cc", err)
	bin, err := goCgo()
	if err != nil {
		t.Fatalf("go build ./testdata/cgomalloc: %v", err)
	}
	res, data, err := recordTo(t, "carve", []string{bin})
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	if !res.CHeapOnly || !bytes.Contains(data, []byte("only the C heap of a Go program")) {
		t.Errorf("CHeapOnly = %v, and the trace's comment %.300q; want both to say it holds the C heap only", res.CHeapOnly, data)
	}
	got, _ := census(t, data, []uint64{12345})
	if n := got[key{trace.Alloc, 12345, 0}]; n != 100 {
		t.Errorf("%d mallocs of 12345 B, want 100", n)
	}
}

func TestAvailableFor(t *testing.T) {
	needGo(t)
	t.Setenv("CC", "/nonexistent/cc") // carve's library cannot be built
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if err := record.AvailableFor(record.Default, goconnCmd); err != nil {
		t.Errorf("AvailableFor(go test) = %v, want nil: it needs go, not a C compiler", err)
	}
	if err := record.AvailableFor(record.Default, []string{"/bin/true"}); err == nil {
		t.Errorf("AvailableFor(/bin/true) without a C compiler = nil, want an error")
	}
}

func TestParseGoTest(t *testing.T) {
	const tf = "/tmp/t.trace"
	tests := []struct {
		cmd      string
		isTest   bool
		argv     string // "": the command unchanged
		trace    string
		packages string
		err      string
	}{
		{cmd: "go build ./x"},
		{cmd: "ls test"},
		{cmd: "go test", isTest: true, argv: "go test -trace=/tmp/t.trace -memprofile=/tmp/mem.pprof -memprofilerate=1", trace: tf},
		{cmd: "go test -run TestX -v ./pool", isTest: true, argv: "go test -trace=/tmp/t.trace -memprofile=/tmp/mem.pprof -memprofilerate=1 -run TestX -v ./pool", trace: tf, packages: "./pool"},
		{cmd: "/usr/local/go/bin/go test -count=1 ./a ./b", isTest: true, argv: "/usr/local/go/bin/go test -trace=/tmp/t.trace -memprofile=/tmp/mem.pprof -memprofilerate=1 -count=1 ./a ./b", trace: tf, packages: "./a ./b"},
		{cmd: "go -C sub test -run X .", isTest: true, argv: "go -C sub test -trace=/tmp/t.trace -memprofile=/tmp/mem.pprof -memprofilerate=1 -run X .", trace: tf, packages: "."},
		{cmd: "go test -trace out.trace ./p", isTest: true, trace: "out.trace", packages: "./p"},
		{cmd: "go test --trace=out.trace -outputdir /o ./p", isTest: true, trace: "/o/out.trace", packages: "./p"},
		{cmd: "go test -test.trace=/abs.trace ./p -args -x y", isTest: true, trace: "/abs.trace", packages: "./p"},
		{cmd: "go test -tags carvecheck -timeout 5m ./p -v", isTest: true, argv: "go test -trace=/tmp/t.trace -memprofile=/tmp/mem.pprof -memprofilerate=1 -tags carvecheck -timeout 5m ./p -v", trace: tf, packages: "./p"},
		{cmd: "go test -memprofile m.pprof -memprofilerate 512 ./p", isTest: true, argv: "go test -trace=/tmp/t.trace -memprofile m.pprof -memprofilerate 512 ./p", trace: tf, packages: "./p"},
		{cmd: "go test -c ./p", isTest: true, err: "-c"},
		{cmd: "go test -run", isTest: true, err: "wants a value"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			cmd := strings.Fields(tt.cmd)
			argv, tr, pkgs, isTest, err := record.ParseGoTest(cmd, tf)
			if isTest != tt.isTest {
				t.Fatalf("isTest = %v, want %v", isTest, tt.isTest)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, record.ErrUsage) {
					t.Errorf("err = %v, want ErrUsage saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !isTest {
				return
			}
			want := tt.argv
			if want == "" { // the user's own trace: the profile's flags after "test"
				want = strings.Replace(tt.cmd, "test ", "test -memprofile=/tmp/mem.pprof -memprofilerate=1 ", 1)
			}
			if got := strings.Join(argv, " "); got != want || tr != tt.trace || strings.Join(pkgs, " ") != tt.packages {
				t.Errorf("got %q, trace %q, packages %q; want %q, %q, %q", got, tr, pkgs, want, tt.trace, tt.packages)
			}
		})
	}
}

func TestGodebug(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"HOME=/h"}, "traceallocfree=1"},
		{[]string{"GODEBUG=madvdontneed=1"}, "madvdontneed=1,traceallocfree=1"},
		{[]string{"GODEBUG=a=1", "GODEBUG=traceallocfree=0"}, "traceallocfree=0,traceallocfree=1"},
	}
	for _, tt := range tests {
		if got := last(record.Godebug(tt.env), "GODEBUG"); got != tt.want {
			t.Errorf("Godebug(%q): GODEBUG=%q, want %q", tt.env, got, tt.want)
		}
	}
}
