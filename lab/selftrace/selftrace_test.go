package selftrace_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/internal/testneed"
	"github.com/carvelab/carve/lab/selftrace"
	ctrace "github.com/carvelab/carve/lab/trace"
)

// thing is 48 bytes, no pointers: the objects the tests look for.
type thing struct {
	a uint64
	_ [5]uint64
}

var sink []*thing

// need skips the test when a tool it needs is missing (err), or fails it
// under CI=true (testneed.Tool).
var need = testneed.Tool

// readTrace reads the Go execution trace at path with carve's Go
// importer and returns its number of events and, for each label, its
// number of allocations.
func readTrace(t *testing.T, path string) (int, map[string]int) {
	t.Helper()
	r, err := ctrace.OpenOptions(path, ctrace.ReaderOptions{Format: ctrace.Go})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, allocs := 0, map[string]int{}
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		n++
		if e.Op == ctrace.Alloc {
			l, _ := r.Labels().Label(e.Label)
			allocs[l.Name]++
		}
	}
	return n, allocs
}

func TestStartOff(t *testing.T) {
	t.Setenv(selftrace.Env, "")
	t.Setenv("GODEBUG", "madvdontneed=1")
	stop := selftrace.Start()
	if trace.IsEnabled() {
		t.Errorf("Start without %s started a trace", selftrace.Env)
	}
	stop()
	if v := os.Getenv("GODEBUG"); v != "madvdontneed=1" {
		t.Errorf("GODEBUG = %q after Start, want it as it was", v)
	}
}

// TestStart traces this test's own allocations. go test does not set
// GODEBUG=traceallocfree=1: the heap's events are in the trace because
// Start sets it as the trace starts (the runtime reads it then).
func TestStart(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("a trace is running already (go test -trace)")
	}
	path := filepath.Join(t.TempDir(), "self.trace")
	t.Setenv(selftrace.Env, path)
	t.Setenv("GODEBUG", "madvdontneed=1")
	stop := selftrace.Start()
	if !trace.IsEnabled() {
		t.Fatal("Start did not start the trace")
	}
	if v, ok := os.LookupEnv(selftrace.Env); ok {
		t.Errorf("%s=%q after Start, want it out of the environment", selftrace.Env, v)
	}
	if v := os.Getenv("GODEBUG"); v != "madvdontneed=1" {
		t.Errorf("GODEBUG = %q after Start, want it as it was", v)
	}
	again := selftrace.Start() // the variable is gone: nothing to do
	for i := range 1000 {
		sink = append(sink, &thing{a: uint64(i)})
	}
	sink = nil
	again()
	stop()
	stop() // a second call does nothing
	if trace.IsEnabled() {
		t.Fatal("the trace runs on after stop")
	}
	n, allocs := readTrace(t, path)
	t.Logf("%d events; %d allocations of selftrace_test.thing", n, allocs["selftrace_test.thing"])
	if n == 0 || allocs["selftrace_test.thing"] < 1000 {
		t.Errorf("%d events, %d allocations of selftrace_test.thing; want events and at least 1000", n, allocs["selftrace_test.thing"])
	}
}

// TestStartFails: a file that cannot be created is said on standard
// error, and the program runs on without a trace.
func TestStartFails(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("a trace is running already (go test -trace)")
	}
	t.Setenv(selftrace.Env, filepath.Join(t.TempDir(), "no", "such", "dir", "self.trace"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	stop := selftrace.Start()
	os.Stderr = stderr
	w.Close()
	msg, _ := io.ReadAll(r)
	stop()
	if trace.IsEnabled() || !strings.HasPrefix(string(msg), "selftrace: ") || !strings.Contains(string(msg), "no such file") {
		t.Errorf("Start with a bad path: trace running %v, standard error %q; want no trace and the error", trace.IsEnabled(), msg)
	}
}

// buildSigwait builds testdata/sigwait and returns its path.
func buildSigwait(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("go")
	need(t, "go", err)
	bin := filepath.Join(t.TempDir(), "sigwait")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/sigwait")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/sigwait: %v\n%s", err, out)
	}
	return bin
}

func ExampleStart() {
	// First thing in main: a no-op unless the environment variable
	// CARVE_SELFTRACE names a file (carve record sets it).
	defer selftrace.Start()()
	fmt.Println("the program's work")
	// Output: the program's work
}
