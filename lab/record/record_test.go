package record_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/internal/testneed"
	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
)

// TestMain points the library cache at a temporary directory, so the
// tests build carve's libraries once, there, and leave the user's cache
// alone. Go's build cache stays where it was (by default it follows
// XDG_CACHE_HOME too).
func TestMain(m *testing.M) {
	cache, err := os.MkdirTemp("", "carve-record-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if user, err := os.UserCacheDir(); err == nil && os.Getenv("GOCACHE") == "" {
		os.Setenv("GOCACHE", filepath.Join(user, "go-build"))
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	binDir = filepath.Join(cache, "bin")
	code := m.Run()
	os.RemoveAll(cache)
	os.Exit(code)
}

// binDir is where the tests build Go programs, once for all of them;
// TestMain removes it.
var binDir string

// goBuild builds the Go program of package pkg (a directory of testdata)
// into binDir, with the environment entries env and the build flags, and
// returns its path.
func goBuild(name, pkg string, env []string, flags ...string) (string, error) {
	bin := filepath.Join(binDir, name)
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// need skips the test when a tool it needs is missing (err), or fails it
// under CI=true (testneed.Tool).
var need = testneed.Tool

// needRecorder skips (or fails, in CI) unless the recorder can run.
func needRecorder(t testing.TB, name string) {
	t.Helper()
	need(t, "recorder "+name, record.Available(name))
}

// buildC compiles testdata/<name>.c into a temporary directory and
// returns the program's path. -O0: the compiler may remove a malloc and
// free pair whose block is not used otherwise.
func buildC(t testing.TB, name string, flags ...string) string {
	t.Helper()
	_, err := exec.LookPath("cc")
	need(t, "cc", err)
	bin := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O0", "-pthread", "-o", bin, filepath.Join("testdata", name+".c")}, flags...)
	out, err := exec.Command("cc", args...).CombinedOutput()
	if err != nil {
		need(t, "cc "+strings.Join(args, " "), fmt.Errorf("%v\n%s", err, out))
	}
	return bin
}

// python returns the path of python3's own executable, past any wrapper
// (pyenv's python3 is a bash script).
func python(t testing.TB) string {
	t.Helper()
	_, err := exec.LookPath("python3")
	need(t, "python3", err)
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// recordTo records cmd with the recorder and returns the result, the
// trace written and Record's error. The program's output goes to the
// test log when it fails.
func recordTo(t testing.TB, recorder string, cmd []string, env ...string) (record.Result, []byte, error) {
	t.Helper()
	var out, programOut bytes.Buffer
	opt := record.Options{Recorder: recorder, Stdout: &programOut, Stderr: &programOut, Env: env}
	start := time.Now()
	res, err := record.Record(context.Background(), cmd, &out, opt)
	t.Logf("%s: %d events, %d threads, process %d %s (%d lines; %d others) in %v; import %+v",
		recorder, res.Events, res.Threads, res.Process.Pid, res.Process.Program, res.Process.Lines,
		len(res.Others), time.Since(start).Round(time.Millisecond), res.Import)
	if err != nil && programOut.Len() > 0 {
		t.Logf("program output:\n%s", programOut.Bytes())
	}
	return res, out.Bytes(), err
}

// key is a kind of event for a census.
type key struct {
	op    trace.Op
	size  uint64
	align uint32
}

// census counts the events of a native trace by key, for the sizes in
// sizes only, and the frees of the objects those events created.
func census(t testing.TB, data []byte, sizes []uint64) (counts map[key]int, freed int) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "recorded", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	counts = map[key]int{}
	ours := map[uint64]bool{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Op == trace.Free {
			if ours[e.ID] {
				freed++
				delete(ours, e.ID)
			}
			continue
		}
		if slices.Contains(sizes, e.Size) {
			counts[key{e.Op, e.Size, e.Align}]++
			ours[e.ID] = true
		}
	}
	return counts, freed
}

// The calls of testdata/allocs.c.
const (
	size       = 12345
	threads    = 4
	perThread  = 100
	allocsCall = 1 + threads*perThread // malloc(size)
)

var allocSizes = []uint64{size, 5 * size, 2 * size, 3 * size, 4 * size}

// TestAllocs records testdata/allocs.c with each recorder and counts its
// calls in the trace, as each recorder sees them.
func TestAllocs(t *testing.T) {
	prog := buildC(t, "allocs")
	tests := []struct {
		recorder string
		want     map[key]int
		freed    int  // frees of the objects counted
		exact    bool // freed is exact (the recorder keeps one order)
		threads  bool
	}{
		{
			recorder: "carve",
			want: map[key]int{
				{trace.Alloc, size, 0}: allocsCall, {trace.Calloc, 5 * size, 0}: 1, {trace.Realloc, 2 * size, 0}: 1,
				{trace.Memalign, 3 * size, 64}: 1, {trace.Memalign, 4 * size, 256}: 1,
			},
			freed: allocsCall + 3, exact: true, threads: true,
		},
		{
			recorder: "valgrind",
			want: map[key]int{
				{trace.Alloc, size, 0}: allocsCall, {trace.Calloc, 5 * size, 0}: 1, {trace.Realloc, 2 * size, 0}: 1,
				{trace.Memalign, 3 * size, 64}: 1, {trace.Memalign, 4 * size, 256}: 1,
			},
			freed: allocsCall + 3, exact: true,
		},
		{
			// realloc is a free and an allocation; calloc and the aligned
			// calls are plain allocations.
			recorder: "heaptrack",
			want: map[key]int{
				{trace.Alloc, size, 0}: allocsCall, {trace.Alloc, 5 * size, 0}: 1, {trace.Alloc, 2 * size, 0}: 1,
				{trace.Alloc, 3 * size, 0}: 1, {trace.Alloc, 4 * size, 0}: 1,
			},
			freed: allocsCall + 4, exact: true,
		},
		{
			// calloc and the aligned calls are plain allocations.
			recorder: "mtrace",
			want: map[key]int{
				{trace.Alloc, size, 0}: allocsCall, {trace.Alloc, 5 * size, 0}: 1, {trace.Realloc, 2 * size, 0}: 1,
				{trace.Alloc, 3 * size, 0}: 1, {trace.Alloc, 4 * size, 0}: 1,
			},
			freed: allocsCall + 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.recorder, func(t *testing.T) {
			needRecorder(t, tt.recorder)
			res, data, err := recordTo(t, tt.recorder, []string{prog})
			if err != nil {
				t.Fatalf("Record = %v, want nil", err)
			}
			got, freed := census(t, data, allocSizes)
			want := tt.want
			if res.Import.Invisible > 0 { // valgrind 3.20 and later
				want = maps.Clone(want)
				delete(want, key{trace.Memalign, 3 * size, 64})
				delete(want, key{trace.Memalign, 4 * size, 256})
			}
			for k, n := range want {
				if got[k] != n {
					t.Errorf("%v events of %d bytes (align %d): %d, want %d", k.op, k.size, k.align, got[k], n)
				}
			}
			for k, n := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%v events of %d bytes (align %d): %d, want none", k.op, k.size, k.align, n)
				}
			}
			switch {
			case tt.exact && res.Import.Invisible == 0 && freed != tt.freed:
				t.Errorf("frees of the program's blocks: %d, want %d", freed, tt.freed)
			case !tt.exact && freed+int(res.Import.MissedFrees) < tt.freed:
				t.Errorf("frees of the program's blocks: %d (+%d missed), want %d", freed, res.Import.MissedFrees, tt.freed)
			}
			if tt.threads && res.Threads < 1+threads {
				t.Errorf("Threads = %d, want at least %d", res.Threads, 1+threads)
			}
			if !tt.threads && res.Threads != 0 {
				t.Errorf("Threads = %d, want 0 (not recorded)", res.Threads)
			}
			if res.Process.Program != prog {
				t.Errorf("Process.Program = %q, want %q", res.Process.Program, prog)
			}
			if res.Events == 0 || res.Process.Pid == 0 {
				t.Errorf("Result = %+v, want events and a pid", res)
			}
		})
	}
}

const pythonScript = "d = {i: str(i) for i in range(10000)}; del d"

// TestPython records python3 building a dict of 10000 strings, with
// PYTHONMALLOC=malloc so that its objects come from malloc. carve's
// recorder runs python3 as the PATH has it (a pyenv shim is a bash
// script that runs many programs: the busiest, python, is kept); the
// others run python's own executable (valgrind would follow every
// process of the shim, slowly; heaptrack records the first program
// only).
func TestPython(t *testing.T) {
	exe := python(t)
	for _, rec := range []string{"carve", "valgrind", "heaptrack", "mtrace"} {
		t.Run(rec, func(t *testing.T) {
			needRecorder(t, rec)
			prog := exe
			if rec == "carve" {
				prog = "python3"
			}
			res, data, err := recordTo(t, rec, []string{prog, "-c", pythonScript}, "PYTHONMALLOC=malloc")
			if err != nil {
				t.Fatalf("Record = %v, want nil", err)
			}
			if res.Events < 20000 {
				t.Errorf("Events = %d, want at least 20000 (10000 strings and their frees)", res.Events)
			}
			if !strings.Contains(filepath.Base(res.Process.Program), "python") {
				t.Errorf("Process.Program = %q, want python's", res.Process.Program)
			}
			if n := int64(bytes.Count(data, []byte{'\n'})); n < res.Events {
				t.Errorf("the trace has %d lines for %d events", n, res.Events)
			}
		})
	}
}

// TestReplay replays recorded traces through first fit: they must be
// consistent enough to replay without error, and the trace errors (frees
// of blocks allocated before recording began, and the like) few.
func TestReplay(t *testing.T) {
	exe := python(t)
	prog := buildC(t, "allocs")
	for _, tt := range []struct {
		name string
		cmd  []string
	}{
		{"allocs", []string{prog}},
		{"python", []string{exe, "-c", pythonScript}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			needRecorder(t, "carve")
			res, data, err := recordTo(t, "carve", tt.cmd, "PYTHONMALLOC=malloc")
			if err != nil {
				t.Fatalf("Record = %v", err)
			}
			r, err := trace.NewReader(bytes.NewReader(data), "recorded", trace.Native)
			if err != nil {
				t.Fatal(err)
			}
			a, err := replay.New("first-fit")
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			got, err := replay.Run(r, a, replay.Options{})
			if err != nil {
				t.Fatalf("replay.Run = %v", err)
			}
			t.Logf("replayed %d events: %d trace errors (first: %v), peak live %d, peak footprint %d",
				got.Events, got.TraceErrors, got.FirstTraceError, got.PeakLive, got.PeakFootprint)
			if got.Events != res.Events {
				t.Errorf("replayed %d events, recorded %d", got.Events, res.Events)
			}
			if got.TraceErrors*1000 > got.Events {
				t.Errorf("TraceErrors = %d of %d events, want under 0.1%%", got.TraceErrors, got.Events)
			}
		})
	}
}

// goStatic builds testdata/static, a Go program without cgo: statically
// linked, it never calls the C library's malloc.
var goStatic = sync.OnceValues(func() (string, error) {
	return goBuild("static", "./testdata/static", []string{"CGO_ENABLED=0"})
})

// TestNoEvents records programs whose malloc calls no recorder sees, or
// that make none: nothing may be written, and the error must wrap
// ErrNoEvents and say why. A Go binary without cgo is not run: the error
// wraps ErrGoProgram too and says how a Go program is recorded.
func TestNoEvents(t *testing.T) {
	goStatic, err := goStatic()
	if err != nil {
		t.Fatal(err)
	}
	cStatic := buildC(t, "allocs", "-static") // calls malloc, but its own copy
	nomalloc := buildC(t, "nomalloc")
	for _, tt := range []struct {
		recorder, prog string
		cmd            string
		why            string // in the error
		goProgram      bool   // the error wraps ErrGoProgram too
	}{
		{"carve", "go-static", goStatic, "go test -run TestX ./pkg", true},
		{"carve", "c-static", cStatic, "never loaded", false},
		{"carve", "nomalloc", nomalloc, "no malloc calls", false},
		{"valgrind", "go-static", goStatic, "go test -run TestX ./pkg", true},
		{"valgrind", "c-static", cStatic, "no malloc calls", false},
		{"heaptrack", "go-static", goStatic, "go test -run TestX ./pkg", true},
		{"heaptrack", "c-static", cStatic, "never loaded", false},
		{"mtrace", "go-static", goStatic, "go test -run TestX ./pkg", true},
		{"mtrace", "nomalloc", nomalloc, "no malloc calls", false},
	} {
		t.Run(tt.recorder+"/"+tt.prog, func(t *testing.T) {
			needRecorder(t, tt.recorder)
			res, data, err := recordTo(t, tt.recorder, []string{tt.cmd})
			if !errors.Is(err, record.ErrNoEvents) {
				t.Fatalf("Record = %v, want ErrNoEvents", err)
			}
			if got := errors.Is(err, record.ErrGoProgram); got != tt.goProgram || got != errors.Is(err, record.ErrUsage) {
				t.Errorf("Record = %v: ErrGoProgram %v, ErrUsage %v; want both %v", err, got, errors.Is(err, record.ErrUsage), tt.goProgram)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("Record = %q, want it to say %q", err, tt.why)
			}
			if len(data) != 0 || res.Events != 0 {
				t.Errorf("Record wrote %d bytes, %d events; want nothing", len(data), res.Events)
			}
		})
	}
}

// TestExitStatus records a program that exits with status 3: the trace
// is written and the error says the status.
func TestExitStatus(t *testing.T) {
	prog := buildC(t, "allocs")
	for _, rec := range []string{"carve", "valgrind", "heaptrack", "mtrace"} {
		t.Run(rec, func(t *testing.T) {
			needRecorder(t, rec)
			res, data, err := recordTo(t, rec, []string{prog, "3"})
			var exit *record.ExitError
			if !errors.As(err, &exit) || exit.Code != 3 {
				t.Fatalf("Record = %v, want an *ExitError with Code 3", err)
			}
			if errors.Is(err, record.ErrNoEvents) {
				t.Errorf("Record = %v, want events", err)
			}
			got, _ := census(t, data, allocSizes)
			if res.Events == 0 || got[key{trace.Alloc, size, 0}] != allocsCall {
				t.Errorf("the trace has %d events, %d mallocs of %d bytes; want %d", res.Events, got[key{trace.Alloc, size, 0}], size, allocsCall)
			}
		})
	}
}

// TestCancel stops a recording by its context: the program gets an
// interrupt (python exits on it, writing its log), and what it logged is
// written.
func TestCancel(t *testing.T) {
	needRecorder(t, "carve")
	exe := python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out bytes.Buffer
	script := "import time\nd = [str(i) for i in range(10000)]\ntime.sleep(60)"
	start := time.Now()
	res, err := record.Record(ctx, []string{exe, "-c", script}, &out, record.Options{Env: []string{"PYTHONMALLOC=malloc"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Record = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Record took %v after a 2s timeout", took)
	}
	if res.Events < 10000 || out.Len() == 0 {
		t.Errorf("Record wrote %d bytes, %d events; want the program's allocations", out.Len(), res.Events)
	}
}

// TestCache records twice: the library is built once, into the cache,
// and reused.
func TestCache(t *testing.T) {
	needRecorder(t, "carve")
	prog := buildC(t, "nomalloc")
	record.Record(context.Background(), []string{prog}, io.Discard, record.Options{})
	libs, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "carve", "record-carve-*.so"))
	if len(libs) != 1 {
		t.Fatalf("cache holds %q, want one record-carve-*.so", libs)
	}
	before, err := os.Stat(libs[0])
	if err != nil {
		t.Fatal(err)
	}
	builds := record.Builds()
	if _, err := record.Record(context.Background(), []string{prog}, io.Discard, record.Options{}); !errors.Is(err, record.ErrNoEvents) {
		t.Fatalf("Record = %v, want ErrNoEvents", err)
	}
	if got := record.Builds(); got != builds {
		t.Errorf("the second Record built the library again (%d builds, then %d)", builds, got)
	}
	after, err := os.Stat(libs[0])
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the cached library changed: %v", err)
	}
	if builds < 1 && record.Builds() < 1 {
		t.Errorf("no library was built, yet the cache holds %s", libs[0])
	}
}

// TestMissingTools hides the tools and checks that the errors say how to
// install them.
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // nothing built yet
	t.Setenv("CC", "")
	for _, tt := range []struct{ recorder, want string }{
		{"carve", "apt-get install gcc"},
		{"valgrind", "apt-get install valgrind"},
		{"heaptrack", "apt-get install heaptrack"},
		{"mtrace", "apt-get install gcc"},
	} {
		err := record.Available(tt.recorder)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Available(%q) = %v, want an error saying %q", tt.recorder, err, tt.want)
		}
		_, err = record.Record(context.Background(), []string{"/bin/true"}, io.Discard, record.Options{Recorder: tt.recorder})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Record with %q = %v, want an error saying %q", tt.recorder, err, tt.want)
		}
	}
	if err := record.Available("electric-fence"); err == nil {
		t.Errorf("Available(%q) = nil, want an error", "electric-fence")
	}
	if _, err := record.Record(context.Background(), nil, io.Discard, record.Options{}); err == nil {
		t.Errorf("Record of no command = nil error")
	}
}

func TestEnviron(t *testing.T) {
	tests := []struct {
		name             string
		base, extra, rec []string
		want             string // the last LD_PRELOAD
		wantDir          string // the last CARVE_RECORD_DIR
	}{
		{"alone", []string{"HOME=/h"}, nil, []string{"CARVE_RECORD_DIR=/d", "LD_PRELOAD=/c.so"}, "/c.so", "/d"},
		{"user's preload after ours", []string{"LD_PRELOAD=/j.so"}, nil, []string{"LD_PRELOAD=/c.so"}, "/c.so:/j.so", ""},
		{"Options.Env wins over the base", []string{"LD_PRELOAD=/j.so"}, []string{"LD_PRELOAD=/t.so"}, []string{"LD_PRELOAD=/c.so"}, "/c.so:/t.so", ""},
		{"no preload", []string{"A=1"}, []string{"B=2"}, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := record.Environ(tt.base, tt.extra, tt.rec)
			if got := last(env, "LD_PRELOAD"); got != tt.want {
				t.Errorf("LD_PRELOAD = %q, want %q (env %q)", got, tt.want, env)
			}
			if got := last(env, "CARVE_RECORD_DIR"); got != tt.wantDir {
				t.Errorf("CARVE_RECORD_DIR = %q, want %q", got, tt.wantDir)
			}
		})
	}
}

func last(env []string, name string) string {
	v := ""
	for _, e := range env {
		if s, ok := strings.CutPrefix(e, name+"="); ok {
			v = s
		}
	}
	return v
}

func TestValgrindProgram(t *testing.T) {
	head := "==42== Massif, a heap profiler\n==42== Command: /opt/my\\ tools/prog -c x\\ y\n==42== Parent PID: 1\n"
	if got, want := record.ValgrindProgram([]byte(head)), "/opt/my tools/prog"; got != want {
		t.Errorf("ValgrindProgram = %q, want %q", got, want)
	}
	if got := record.ValgrindProgram([]byte("--42-- malloc(1) = 0x10\n")); got != "" {
		t.Errorf("ValgrindProgram without a Command line = %q, want \"\"", got)
	}
}

// BenchmarkPython times python3 building a dict of 10000 strings
// (PYTHONMALLOC=malloc), run plainly and under each recorder: the cost
// of recording.
func BenchmarkPython(b *testing.B) {
	exe := python(b)
	cmd := []string{exe, "-c", pythonScript}
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			c := exec.Command(cmd[0], cmd[1:]...)
			c.Env = append(os.Environ(), "PYTHONMALLOC=malloc")
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, rec := range []string{"carve", "valgrind", "heaptrack", "mtrace"} {
		b.Run(rec, func(b *testing.B) {
			if record.Available(rec) != nil {
				b.Skip("not available")
			}
			for b.Loop() {
				opt := record.Options{Recorder: rec, Env: []string{"PYTHONMALLOC=malloc"}}
				if _, err := record.Record(context.Background(), cmd, io.Discard, opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSignalEnd records testdata/dies.c, which makes 7 mallocs (a few
// hundred bytes of records) and then dies by a signal: a segfault,
// abort, SIGKILL, or, ignoring the interrupt Record sends it when its
// context is done, the kill that follows. Every malloc must be in the
// trace (the recorder's log is a shared mapping, which outlives the
// process), and the error must be the signal's *ExitError, not
// ErrNoEvents.
func TestSignalEnd(t *testing.T) {
	needRecorder(t, "carve")
	prog := buildC(t, "dies")
	const dieSize, dieCount = 23456, 7 // testdata/dies.c
	for _, how := range []string{"segv", "abort", "kill", "int"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			if how == "int" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
			}
			var out bytes.Buffer
			res, err := record.Record(ctx, []string{prog, how}, &out, record.Options{})
			if errors.Is(err, record.ErrNoEvents) {
				t.Fatalf("Record = %v, want the trace of the 7 mallocs", err)
			}
			var exit *record.ExitError
			switch {
			case how == "int" && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("Record = %v, want an error wrapping context.DeadlineExceeded", err)
			case how != "int" && (!errors.As(err, &exit) || exit.Code != -1):
				t.Errorf("Record = %v, want an *ExitError of a signal", err)
			}
			got, _ := census(t, out.Bytes(), []uint64{dieSize})
			if n := got[key{trace.Alloc, dieSize, 0}]; n != dieCount {
				t.Errorf("the trace has %d mallocs of %d bytes, want %d (%d events, cut %d)", n, dieSize, dieCount, res.Events, res.Cut)
			}
			if res.Cut != 0 || res.Stopped != "" {
				t.Errorf("Cut %d, Stopped %q; want 0, \"\" (the program died between calls)", res.Cut, res.Stopped)
			}
		})
	}
}

// TestCutRecord reads a mapped log whose process died in the middle of
// a record: the complete records are read, the one cut short is left out
// and counted, and the zeros past it are no record.
func TestCutRecord(t *testing.T) {
	for _, tt := range []struct {
		name, log string
		lines     int64
		cut       int
	}{
		{"cut", "7: malloc 0x10 5\n7: free 0x10\n7: mall", 2, 1},
		{"cut, zeros inside", "7: malloc 0x10 5\n7: \x00\x00loc 0x20 6", 1, 1},
		{"whole", "7: malloc 0x10 5\n7: free 0x10\n", 2, 0},
		{"empty", "", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "1-0.log")
			data := append([]byte(tt.log), make([]byte, 1000)...)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			lines, size, cut, err := record.CountLines(path)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(strings.LastIndexByte(tt.log, '\n') + 1)
			if lines != tt.lines || size != want || cut != tt.cut {
				t.Errorf("CountLines = %d lines, %d bytes, %d cut; want %d, %d, %d", lines, size, cut, tt.lines, want, tt.cut)
			}
		})
	}
}

// TestLogFull records a program whose log cannot grow: its logs go to a
// tmpfs of 128 KiB (mounted by the test, which needs root). The program
// runs on, the records that fit are converted, and Result.Stopped says
// why the rest are lost.
func TestLogFull(t *testing.T) {
	needRecorder(t, "carve")
	prog := buildC(t, "dies")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs (needs root): %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	t.Setenv("TMPDIR", dir)
	res, data, err := recordTo(t, "carve", []string{prog, "many"})
	if err != nil {
		t.Fatalf("Record = %v, want the records that fit", err)
	}
	if res.Stopped == "" || !strings.Contains(res.Stopped, "no space left on device") || res.Events == 0 || len(data) == 0 {
		t.Errorf("Stopped %q, %d events; want the reason (no space left on device) and the events before it", res.Stopped, res.Events)
	}
}

// TestRecordStacks records testdata/sites.c with call stacks: the sites
// by bytes at the peak are its named functions, each at its line, with
// the bytes it holds; with NoStacks the trace has no label.
func TestRecordStacks(t *testing.T) {
	needRecorder(t, "carve")
	prog := buildC(t, "sites", "-O2", "-g")
	var out, programOut bytes.Buffer
	res, err := record.Record(context.Background(), []string{prog}, &out, record.Options{Recorder: "carve", Stdout: &programOut, Stderr: &programOut})
	if err != nil {
		t.Fatalf("Record = %v\n%s", err, programOut.Bytes())
	}
	r, err := trace.NewReader(bytes.NewReader(out.Bytes()), "recorded", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := summary.Of(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		site  string
		bytes uint64
	}{{"make_big (sites.c:12)", 40 * 65536}, {"make_mid (sites.c:13)", 400 * 1000}, {"make_small (sites.c:14)", 1000 * 48}}
	if len(sum.Sites) < len(want) {
		t.Fatalf("sites %+v, want %d at least", sum.Sites, len(want))
	}
	for i, w := range want {
		if got := sum.Sites[i]; got.Site != w.site || got.Bytes != w.bytes {
			t.Errorf("site %d: %q with %d bytes at the peak, want %q with %d", i+1, got.Site, got.Bytes, w.site, w.bytes)
		}
	}
	if cs := res.CSites; cs.Allocs < 1000+400+40+1000 || cs.Sites < 4 || len(cs.NoSymbols) > 0 && strings.Contains(strings.Join(cs.NoSymbols, ""), prog) {
		t.Errorf("CSites = %+v, want every allocation with a stack, the program's symbols read", cs)
	}

	out.Reset()
	res, err = record.Record(context.Background(), []string{prog}, &out, record.Options{Recorder: "carve", NoStacks: true, Stdout: &programOut, Stderr: &programOut})
	if err != nil {
		t.Fatalf("Record(NoStacks) = %v", err)
	}
	if bytes.Contains(out.Bytes(), []byte("site=")) || res.CSites.Allocs != 0 {
		t.Errorf("NoStacks: the trace has sites (%d allocations with a stack)", res.CSites.Allocs)
	}
}

// TestForkExec records testdata/dies.c forking a child that makes 100000
// malloc and free pairs (by fork, and by the raw system call, which runs
// no fork handlers), and replacing itself by exec with itself doing
// the same: the busiest log (the child's, the exec'd image's) is the
// trace, without the other's 7 mallocs (the exec'd image makes 7 of its
// own first), and the other process keeps its own log, whole (the image
// that exec replaced included: its records are in its log's pages).
func TestForkExec(t *testing.T) {
	needRecorder(t, "carve")
	prog := buildC(t, "dies")
	const dieSize = 23456 // testdata/dies.c
	for _, tt := range []struct {
		how  string
		own7 int // the mallocs of dieSize in the busiest log
	}{{"fork", 0}, {"rawfork", 0}, {"exec", 7}} {
		t.Run(tt.how, func(t *testing.T) {
			res, data, err := recordTo(t, "carve", []string{prog, tt.how})
			if err != nil {
				t.Fatalf("Record = %v", err)
			}
			got, _ := census(t, data, []uint64{dieSize, dieSize + 1})
			if got[key{trace.Alloc, dieSize + 1, 0}] != 100000 || got[key{trace.Alloc, dieSize, 0}] != tt.own7 {
				t.Errorf("the trace has %d mallocs of %d bytes and %d of %d; want 100000 and %d",
					got[key{trace.Alloc, dieSize + 1, 0}], dieSize+1, got[key{trace.Alloc, dieSize, 0}], dieSize, tt.own7)
			}
			if len(res.Others) != 1 || res.Others[0].Lines < 7 {
				t.Errorf("Others = %+v, want the other process with its 7 mallocs at least", res.Others)
			}
		})
	}
}
