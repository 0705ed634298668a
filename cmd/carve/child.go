package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/traces"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/mem"
)

// Rows measured in child processes. A real malloc is measured the way the
// paper measured its nine: as a black box, in a process of its own (carve
// started again with LD_PRELOAD naming the library), where the RSS is the
// allocator's and nothing else's. The child confirms which malloc is
// really serving it (the loader ignores a missing LD_PRELOAD library
// without a word), replays the trace through the C allocator a batch of
// events per cgo call, and reports its row as JSON on its standard output.
// The Go heap runs in a child too, its runtime statistics being
// process-wide; --isolate sends carve's own heaps to children as well, so
// that every row is measured by the same RSS method.

// childCommand is the hidden command a child runs: carve replay-child.
const childCommand = "replay-child"

// errUnavailable is an allocator this machine or this build lacks.
var errUnavailable = errors.New("unavailable")

// realMalloc is a C allocator the lab can preload.
type realMalloc struct {
	libs    []string // file names to look for, the first found wins
	install string   // how to get it on Debian
}

// realMallocs are the C allocators by row name. glibc is the process's
// own and needs no preload.
var realMallocs = map[string]realMalloc{
	"glibc":    {},
	"jemalloc": {[]string{"libjemalloc.so.2", "libjemalloc.so"}, "apt-get install libjemalloc2"},
	"tcmalloc": {[]string{"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so"}, "apt-get install libtcmalloc-minimal4"},
	"mimalloc": {[]string{"libmimalloc.so.2", "libmimalloc.so"}, "apt-get install libmimalloc2.0"},
}

// realMallocNames are the real mallocs in the order rows list them.
var realMallocNames = []string{"glibc", "jemalloc", "tcmalloc", "mimalloc"}

// libDirs are where the dynamic loader finds libraries on common
// distributions, after LD_LIBRARY_PATH.
var libDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
	"/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib64", "/lib",
}

// findLib returns the path of the library of real malloc m, or "".
func findLib(m realMalloc) string {
	dirs := append(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")), libDirs...)
	for _, name := range m.libs {
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	return ""
}

// inChild reports whether the row always runs in a child.
func (s allocSpec) inChild() bool {
	_, real := realMallocs[s.name]
	return real || s.name == "go"
}

// available reports whether the row can run here, and if not why.
func (s allocSpec) available() error {
	m, real := realMallocs[s.name]
	switch {
	case !real:
		return nil
	case runtime.GOOS != "linux":
		return fmt.Errorf("%w: real mallocs are measured on Linux only", errUnavailable)
	case !libc.Available():
		return fmt.Errorf("%w: this carve was built without cgo (CGO_ENABLED=0)", errUnavailable)
	case m.libs != nil && findLib(m) == "":
		return fmt.Errorf("%w: %s is not installed (%s)", errUnavailable, m.libs[0], m.install)
	}
	return nil
}

// child returns the command of a child process for the row: carve's own
// executable running the hidden child command with args, the row's
// library preloaded if it is a real malloc other than glibc.
func (s allocSpec) child(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{childCommand}, args...)...)
	cmd.Env = os.Environ()
	if m := realMallocs[s.name]; m.libs != nil {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+findLib(m))
	}
	return cmd, nil
}

// replayInChild runs one row in a child process and reads its row back.
func (c replayConfig) replayInChild(s traces.Trace, spec allocSpec, prog *progress) row {
	rw := row{Trace: s.Label, Allocator: spec.label(), Measured: "child"}
	if err := spec.available(); err != nil {
		rw.Error, rw.ErrorKind = err.Error(), kindUnavailable
		return rw
	}
	args := []string{"--alloc", spec.name}
	for _, p := range spec.pools {
		args = append(args, "--pool", strconv.Itoa(p))
	}
	if c.strict {
		args = append(args, "--strict")
	}
	if c.noCheck {
		args = append(args, "--nocheck")
	}
	if c.untouched {
		args = append(args, "--notouch")
	}
	if c.series > 0 {
		args = append(args, "--series", strconv.Itoa(c.series))
	}
	args = append(args, "--", s.Label)
	cmd, err := spec.child(args...)
	if err != nil {
		rw.Error, rw.ErrorKind = fmt.Sprintf("cannot start a child: %v", err), kindAllocator
		return rw
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var got row
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && runErr != nil {
			msg = runErr.Error()
		}
		rw.Error, rw.ErrorKind = "child: "+msg, kindAllocator
		return rw
	}
	if prog != nil {
		prog.events.Add(got.Events)
	}
	got.Trace, got.Allocator, got.Measured = s.Label, spec.label(), "child"
	return got
}

// cmdChild is the child's side: carve replay-child [--alloc NAME]
// [--pool SIZE]... [--strict] [--nocheck] -- SOURCE. It prints one row as
// JSON and exits 0 whenever it printed one, the row saying how the
// replay went.
func cmdChild(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet(childCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("alloc", "", "the allocator")
	var pools poolSizes
	fs.Var(&pools, "pool", "")
	strict := fs.Bool("strict", false, "")
	noCheck := fs.Bool("nocheck", false, "")
	noTouch := fs.Bool("notouch", false, "")
	series := fs.Int("series", 0, "")
	stride := fs.Bool("stride", false, "")
	err := fs.Parse(args)
	switch {
	case err == nil && *stride:
		return strideChild(*name, stdout)
	case err != nil || fs.NArg() != 1:
		return badUsage("carve %s: want --alloc NAME [--pool SIZE]... [--strict] [--nocheck] -- SOURCE, or --stride --alloc NAME", childCommand)
	}
	s, err := traces.Resolve(fs.Arg(0))
	if err != nil {
		return inputError{err}
	}
	spec := allocSpec{*name, pools}
	c := replayConfig{strict: *strict, noCheck: *noCheck, touch: !*noTouch, series: *series}
	rw := row{Trace: s.Label, Allocator: spec.label(), Measured: "child"}
	res, peakRSS, err := c.childReplay(s, spec)
	rw = rw.fill(s, res, err)
	rw.PeakRSS = peakRSS
	return json.NewEncoder(stdout).Encode(rw)
}

// childReplay replays in this, the child, process, and returns the result
// and the peak RSS above the baseline taken just before the replay.
func (c replayConfig) childReplay(s traces.Trace, spec allocSpec) (replay.Result, int64, error) {
	if err := spec.available(); err != nil {
		return replay.Result{}, 0, err
	}
	src, closer, err := s.Open()
	if err != nil {
		return replay.Result{}, 0, fmt.Errorf("%w: %w", replay.ErrSource, err)
	}
	defer closer.Close()
	opt := c.options(s, nil)

	var run func() (replay.Result, error)
	var rss *rssMeter
	if _, real := realMallocs[spec.name]; real {
		if got := libc.Active(); got.Name != spec.name {
			return replay.Result{}, 0, fmt.Errorf("asked for %s but %s %s serves this process (is LD_PRELOAD honoured?): no row", spec.name, got.Name, got.Version)
		}
		ca, err := newCAllocator(spec.pools, c.touch)
		if err != nil {
			return replay.Result{}, 0, err
		}
		defer ca.Close()
		if rss, err = newRSSMeter(false); err != nil {
			return replay.Result{}, 0, err
		}
		ca.rss = rss
		run = func() (replay.Result, error) { return replay.RunBatch(src, ca, opt) }
	} else {
		// The meter first: it collects the garbage, so that the Go heap's
		// baseline (taken by New) holds as little free space as it can.
		if rss, err = newRSSMeter(spec.name == "go"); err != nil {
			return replay.Result{}, 0, err
		}
		a, err := replay.New(spec.name)
		if err != nil {
			return replay.Result{}, 0, err
		}
		for _, p := range spec.pools {
			if a, err = replay.WithPool(p, a); err != nil {
				a.Close()
				return replay.Result{}, 0, fmt.Errorf("--pool %d: %w", p, err)
			}
		}
		defer a.Close()
		run = func() (replay.Result, error) { return replay.Run(src, &rssStats{Allocator: a, rss: rss}, opt) }
	}
	res, err := run()
	return res, rss.peak(), err
}

// rssMeter reads the process's anonymous RSS (file-backed pages, such as
// the program text a replay touches for the first time, are not the
// allocator's) above a baseline. Unless it measures
// the Go heap itself, it leaves out what the Go runtime mapped since the
// baseline (the replayer's own bookkeeping, the trace's buffers), as
// runtime/metrics reports it, so that the figure is the allocator's.
type rssMeter struct {
	base, goBase int64
	withGo       bool  // the Go heap is the allocator: count its growth
	sampledPeak  int64 // the largest value now has returned
}

// goMapped returns the bytes the Go runtime has mapped and not released.
func goMapped() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}

// newRSSMeter collects the garbage, returns freed pages to the OS, takes
// the baseline and resets the kernel's peak RSS to it.
func newRSSMeter(withGo bool) (*rssMeter, error) {
	runtime.GC()
	debug.FreeOSMemory()
	base, err := mem.AnonRSS()
	if err != nil {
		return nil, fmt.Errorf("%w: RSS: %v", errUnavailable, err)
	}
	if err := mem.ResetPeakRSS(); err != nil {
		return nil, fmt.Errorf("%w: resetting the peak RSS: %v", errUnavailable, err)
	}
	return &rssMeter{base: base, goBase: goMapped(), withGo: withGo}, nil
}

// now returns the RSS above the baseline, less the Go runtime's growth
// unless the Go heap is what is measured.
func (m *rssMeter) now() int64 {
	r, err := mem.AnonRSS()
	if err != nil {
		return 0
	}
	r -= m.base
	if !m.withGo {
		r -= max(goMapped()-m.goBase, 0)
	}
	r = max(r, 0)
	m.sampledPeak = max(m.sampledPeak, r)
	return r
}

// peak returns the kernel's peak RSS (VmHWM) above the baseline since the
// meter was made: file-backed pages and the Go runtime's growth included,
// as the kernel does not tell them apart. The rows' peak resident figure
// is the largest of the samples of now instead.
func (m *rssMeter) peak() int64 {
	if m == nil {
		return 0
	}
	p, err := mem.PeakRSS()
	if err != nil {
		return 0
	}
	return max(p-m.base, 0)
}

// rssStats reports a carve heap's resident memory as the RSS above the
// baseline, as the real mallocs' rows do.
type rssStats struct {
	replay.Allocator
	rss *rssMeter
}

func (a *rssStats) Stats() carve.Stats {
	st := a.Allocator.Stats()
	st.Resident = a.rss.now()
	return st
}

// Contains passes the heap's own check through.
func (a *rssStats) Contains(b []byte) bool {
	c, ok := a.Allocator.(replay.Container)
	return !ok || c.Contains(b)
}
