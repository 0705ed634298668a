package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// ErrUsage is wrapped by the errors of a command that Record cannot
// record as given: carve's command line exits with status 2 on them.
var ErrUsage = errors.New("record: cannot record this command")

// ErrGoProgram is wrapped by Record's error for a Go binary that is not
// run by go test (its heap is Go's, which no C recorder sees), when
// nothing of its C heap was recorded either.
var ErrGoProgram = fmt.Errorf("%w: a Go program", ErrUsage)

// ErrGoTestPackages is wrapped by Record's error for a go test command of
// several packages: go test -trace takes one.
var ErrGoTestPackages = fmt.Errorf("%w: go test of several packages", ErrUsage)

// howToRecordGo says how a Go program's heap is recorded.
const howToRecordGo = "a Go program's heap is recorded from its execution trace: run its tests under carve record, " +
	"one package at a time (carve record -o FILE -- go test -run TestX ./pkg; go test -trace takes one package); " +
	"or record it running, as a service that imports net/http/pprof and runs with GODEBUG=traceallocfree=1 " +
	"(carve record -o FILE --from http://127.0.0.1:6060 --seconds 5); or build it with package " + selftracePkg +
	", calling defer selftrace.Start()() first in main, and record it as any program (carve record -o FILE -- ./program)"

var goRecorder = &recorder{
	RecorderInfo: RecorderInfo{
		Name: "go",
		Keeps: "the Go heap of a go test run, a running service (--from, net/http/pprof) or a binary built with " +
			"package selftrace, from its execution trace (GODEBUG=traceallocfree=1): every heap object " +
			"with its type (name, size, pointer bytes), the objects alive when the trace starts, the runtime's own " +
			"heap metrics; for go test, each object's allocation site (a heap profile taken beside the trace, " +
			"-memprofilerate=1, joined by size: a size of several sites gives each object one by share); chosen by " +
			"itself for a go test command and a binary that traces itself",
		Loses: "call stacks (a site per object in go test, by share where sites share a size; for a service, sites " +
			"by share from its allocs profile before and after the trace; none for a binary that traces itself); " +
			"the moment an object dies (frees come at sweep, after the GC cycle that found it dead); " +
			"requested sizes (objects are sized by Go's size classes); the tiny objects packed into one 16-byte " +
			"block (one object); goroutine stacks (kept on request)",
		Processes: "the test binary of one package (go test -trace takes one); the service; the binary that traces itself",
		Needs:     "the Go toolchain (go on the PATH) for go test; nothing more for a service or a binary that traces itself",
	},
	format: trace.Go,
	check: func() error {
		if _, err := exec.LookPath("go"); err != nil {
			return fmt.Errorf("record: the go recorder needs the Go toolchain (go on the PATH): %w", err)
		}
		return nil
	},
}

// goTest is a go test command line, read.
type goTest struct {
	argv     []string // the command to run: the trace flag added if it had none
	dir      string   // its -C directory, or ""
	packages []string // the package arguments
	trace    string   // the trace file the run writes (absolute, or relative to dir)
	traceArg string   // the -trace value as given: the test binary gets -test.trace=traceArg
	ownTrace bool     // the user's own -trace named it
	// memprofile is the heap profile the run writes, for the objects'
	// sites (see sites.go): the user's -memprofile, or one carve adds
	// beside -memprofilerate=1 (its rate, if the user gave one).
	memprofile string
	ownRate    bool // the user's own -memprofilerate: the sites are samples
}

// goTestValueFlags are the flags of go test and go build that take a
// value as the next argument when not given with "=" (go help testflag,
// go help build); every other flag is taken as a boolean.
var goTestValueFlags = map[string]bool{
	"bench": true, "benchtime": true, "count": true, "covermode": true, "coverpkg": true, "cpu": true,
	"fuzz": true, "fuzztime": true, "fuzzminimizetime": true, "list": true, "outputdir": true, "parallel": true,
	"run": true, "shuffle": true, "skip": true, "timeout": true, "vet": true, "blockprofile": true,
	"blockprofilerate": true, "coverprofile": true, "cpuprofile": true, "memprofile": true, "memprofilerate": true,
	"mutexprofile": true, "mutexprofilefraction": true, "trace": true, "p": true, "asmflags": true,
	"buildmode": true, "compiler": true, "gccgoflags": true, "gcflags": true, "installsuffix": true,
	"ldflags": true, "mod": true, "modfile": true, "overlay": true, "pgo": true, "pkgdir": true, "tags": true,
	"toolexec": true, "o": true, "exec": true,
}

// parseGoTest reports whether cmd is a go test command ("go", maybe -C
// DIR, then "test") and reads it; traceFile is where the trace goes when
// the command names none.
func parseGoTest(cmd []string, traceFile string) (*goTest, bool, error) {
	if len(cmd) < 2 || filepath.Base(cmd[0]) != "go" {
		return nil, false, nil
	}
	t := &goTest{}
	i := 1
	switch {
	case cmd[i] == "-C" || cmd[i] == "--C":
		if len(cmd) < 4 {
			return nil, false, nil
		}
		t.dir, i = cmd[2], 3
	case strings.HasPrefix(cmd[i], "-C=") || strings.HasPrefix(cmd[i], "--C="):
		t.dir, i = cmd[i][strings.IndexByte(cmd[i], '=')+1:], 2
	}
	if i >= len(cmd) || cmd[i] != "test" {
		return nil, false, nil
	}
	test := i
	outputdir := ""
	for i = test + 1; i < len(cmd); i++ {
		a := cmd[i]
		if a == "-args" || a == "--args" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			t.packages = append(t.packages, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.TrimPrefix(name, "test.")
		if goTestValueFlags[name] && !hasValue {
			if i+1 == len(cmd) {
				return nil, true, fmt.Errorf("%w: go test flag %s wants a value", ErrUsage, a)
			}
			i++
			value = cmd[i]
		}
		switch name {
		case "c":
			return nil, true, fmt.Errorf("%w: go test -c builds the test binary without running it: nothing to record", ErrUsage)
		case "trace":
			t.trace, t.traceArg, t.ownTrace = value, value, true
		case "outputdir":
			outputdir = value
		case "memprofile":
			t.memprofile = value
		case "memprofilerate":
			t.ownRate = true
		}
	}
	// The heap profile, for the sites: the user's, or carve's beside
	// the trace, every allocation profiled.
	var added []string
	switch {
	case t.memprofile != "":
		if !filepath.IsAbs(t.memprofile) && outputdir != "" {
			t.memprofile = filepath.Join(outputdir, t.memprofile)
		}
	default:
		t.memprofile = filepath.Join(filepath.Dir(traceFile), "mem.pprof")
		added = append(added, "-memprofile="+t.memprofile)
	}
	if !t.ownRate {
		added = append(added, "-memprofilerate=1")
	}
	if t.ownTrace {
		if !filepath.IsAbs(t.trace) && outputdir != "" {
			t.trace = filepath.Join(outputdir, t.trace)
		}
	} else {
		t.trace, t.traceArg = traceFile, traceFile
		added = append([]string{"-trace=" + traceFile}, added...)
	}
	t.argv = append(append(append([]string{}, cmd[:test+1]...), added...), cmd[test+1:]...)
	return t, true, nil
}

// packageList lists the packages a go test command names, with go list
// (in its -C directory): go test -trace takes one. An error of go list
// (a pattern that matches nothing, say) is left to go test to report.
func (t *goTest) packageList(ctx context.Context, env []string, workdir string) []string {
	args := []string{"list", "-e", "-f", "{{.ImportPath}}", "--"}
	args = append(args, t.packages...)
	c := exec.CommandContext(ctx, "go", args...)
	c.Env, c.Dir = env, t.runDir(workdir)
	out, err := c.Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// tracePath is the path of the trace file the run writes, for a go
// command run in workdir ("": the current directory).
func (t *goTest) tracePath(workdir string) string {
	if filepath.IsAbs(t.trace) {
		return t.trace
	}
	return filepath.Join(t.runDir(workdir), t.trace)
}

// runDir is the directory the go command runs in.
func (t *goTest) runDir(workdir string) string {
	if t.dir == "" {
		return workdir
	}
	if filepath.IsAbs(t.dir) {
		return t.dir
	}
	return filepath.Join(workdir, t.dir)
}

// godebug returns env with traceallocfree=1 added to its GODEBUG (the
// last setting of a name wins in GODEBUG, so an earlier
// traceallocfree=0 is overridden).
func godebug(env []string) []string {
	v := lookup(env, "GODEBUG")
	if v != "" {
		v += ","
	}
	return append(env[:len(env):len(env)], "GODEBUG="+v+"traceallocfree=1")
}

// recordGoTest runs a go test command with the alloc/free experiment and
// an execution trace, and converts the trace.
func recordGoTest(ctx context.Context, cmd []string, out io.Writer, opt Options, res *Result) error {
	if err := goRecorder.check(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "carve-record-")
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(dir)
	t, _, err := parseGoTest(cmd, filepath.Join(dir, "go.trace"))
	if err != nil {
		return err
	}
	workdir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	env := godebug(environ(os.Environ(), opt.Env, nil))
	if pkgs := t.packageList(ctx, env, workdir); len(pkgs) > 1 {
		return fmt.Errorf("%w: go test -trace takes one package, and %s names %d (%s): record one at a time",
			ErrGoTestPackages, strings.Join(t.packages, " "), len(pkgs), strings.Join(pkgs, ", "))
	}
	path := t.tracePath(workdir)
	// A trace left from an earlier run must not pass for this one's, and
	// the file is the user's: it is left alone, and known by its state
	// before the run.
	var before os.FileInfo
	if t.ownTrace {
		fi, err := os.Stat(path)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return fmt.Errorf("%w: go test -trace %s: %s is not a regular file, which carve reads the trace from: name a new file, or leave -trace out", ErrUsage, t.trace, path)
		case err == nil:
			before = fi
		}
	}
	// go test's own complaint about several packages, should go list
	// have missed it, is caught in its standard error.
	var stderr tail
	errOut := io.Writer(&stderr)
	if opt.Stderr != nil {
		errOut = io.MultiWriter(opt.Stderr, &stderr)
	}
	o := opt
	if sameWriter(opt.Stdout, opt.Stderr) {
		o.Stdout = errOut // one writer, which exec.Cmd writes from one goroutine
	}
	o.Stderr = errOut
	// The test binary is known by the trace flag go test passes it.
	rss := newRSSSampler("-test.trace=" + t.traceArg)
	pid, runErr := run(ctx, t.argv, env, o, rss)
	if pid == 0 {
		return runErr
	}
	res.Process = Process{Pid: pid, Program: strings.Join(t.argv, " ")}
	_, samples := rss.testBinary()
	clocked := clockedRSS{samples: samples, of: trace.RSSTestBinary, none: noRSSTestBinary}
	if rss == nil {
		clocked.none = noRSSOS
	}
	if bytes.Contains(stderr.b, []byte("cannot use -trace flag with multiple packages")) {
		return fmt.Errorf("%w: go test -trace takes one package (go test said: cannot use -trace flag with multiple packages)", ErrGoTestPackages)
	}
	if fi, err := os.Stat(path); err != nil || before != nil && os.SameFile(fi, before) && fi.ModTime().Equal(before.ModTime()) && fi.Size() == before.Size() {
		why := "did the package's tests run?"
		var exit *ExitError
		if errors.As(runErr, &exit) {
			why = fmt.Sprintf("go test ended with %s: a build failure, or tests that did not run; its output says", exit.State)
		}
		at := "" // carve's own file: no name to give
		switch {
		case before != nil:
			at = " at " + path + ", which is as it was before the run"
		case t.ownTrace:
			at = " at " + path
		}
		return errors.Join(runErr, fmt.Errorf("%w: go test wrote no execution trace%s (%s)", ErrNoEvents, at, why))
	}
	// The sites, from the heap profile beside the trace (a relative
	// -memprofile is the test's directory's, as -trace is).
	mem := t.memprofile
	if !filepath.IsAbs(mem) {
		mem = filepath.Join(t.runDir(workdir), mem)
	}
	sites, serr := readSites(mem, stdPackages(ctx, env))
	if serr == nil {
		var traced map[uint64]int64
		if traced, serr = tracedSizes(path, opt); serr == nil {
			sites.cover(traced)
		}
	}
	if serr == nil {
		res.Sites = sites
		res.SitesSampled = t.ownRate
		opt.sites = sites
	} else {
		res.SitesErr = serr
	}
	err = convertGo(res, path, path, opt, clocked, out, fmt.Sprintf("recorded by carve record -- %s\nfrom the execution trace of process %d (GODEBUG=traceallocfree=1)", commandLine(cmd), pid))
	return errors.Join(runErr, err)
}

// sameWriter reports whether a and b are the same writer (not nil), as
// exec.Cmd tells its Stdout and Stderr: a writer of a type that cannot
// be compared is no other's.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}

// tail keeps the last 64 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 64<<10 {
		t.b = t.b[len(t.b)-64<<10:]
	}
	return len(p), nil
}

// convertGo converts the Go execution trace at path, called name in
// errors, to the native format of version 3 (labels: the types), with
// the heap's own metrics, its collections and the samples of the
// program's RSS, rss, placed by the trace's clock. A trace recorded without the alloc/free
// experiment is refused with an error wrapping trace.ErrNoGoHeap before
// anything is written.
//
// Once it is converted, the trace's first generation is read again for
// the pause in which the trace started (res.StartPause): after the
// converter, which bounds what a generation may cost, has read it whole.
func convertGo(res *Result, path, name string, opt Options, rss clockedRSS, out io.Writer, comment string) error {
	if err := convertGoEvents(res, path, name, opt, rss, out, comment); err != nil {
		return err
	}
	if head, err := readGoHead(path, opt.MaxGoGeneration); err == nil {
		res.StartPause = head.startPause
	}
	return nil
}

// convertGoEvents is convertGo's conversion.
func convertGoEvents(res *Result, path, name string, opt Options, rss clockedRSS, out io.Writer, comment string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	r, err := trace.NewReaderOptions(f, name, trace.ReaderOptions{Format: trace.Go, GoStacks: opt.GoStacks, MaxGoGeneration: opt.MaxGoGeneration,
		ProcessRSS: rss.samples, ProcessRSSOf: rss.of, Sites: opt.sites.Of})
	if err != nil {
		return err
	}
	defer r.Close()
	defer func() { res.Import = r.Stats() }()
	w := trace.NewWriter(out)
	if err := w.SetLabels(r.Labels()); err != nil {
		return err
	}
	if err := w.Comment(comment); err != nil {
		return err
	}
	n, err := trace.Copy(w, r)
	res.Events = n
	if err != nil {
		return fmt.Errorf("record: reading the Go execution trace: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the execution trace holds no heap event", ErrNoEvents)
	}
	res.GoHeap = r.GoHeap()
	if err := w.Flush(); err != nil {
		return err
	}
	res.ProcessRSS, res.RSSSampled = r.ProcessRSS(), len(rss.samples)
	if len(res.ProcessRSS) == 0 {
		res.NoRSS = rss.none
	}
	return nil
}
