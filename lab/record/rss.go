package record

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/carvelab/carve/lab/trace"
)

// The RSS sampler. While a recorded command runs, carve reads the
// resident set of its processes (VmRSS and VmHWM of /proc/PID/status)
// every RSSEvery: the process started and its descendants, found
// through /proc/PID/task/*/children from the started one (not by a scan
// of /proc), each with a series of its own. One sample is taken as soon
// as the command has started, one more when it ends (of the processes
// still alive then: one that has exited has no VmHWM), and the started
// process's own peak is read once more as it is waited for (wait4's
// ru_maxrss), so that a program that ends between two samples, or
// before the first, still has its peak. The recording
// then writes the series of the process whose heap its trace holds
// (Result.ProcessRSS): placed among the events by a Go execution
// trace's clock snapshots, or, for a trace without a clock (the C
// recorders), its peak only.
//
// Memory is bounded: a series that reaches rssSeriesMax samples is
// coarsened, every other sample dropped (the one kept takes the larger
// VmHWM of the two, so the peak is never lost), and sampled half as
// often from then on; at most rssMaxProcesses processes have a series.

// RSSEvery is how often carve record samples the RSS of the recorded
// processes.
const RSSEvery = 100 * time.Millisecond

// rssSeriesMax is the most samples a series holds before it is
// coarsened: half what a trace's Reader keeps.
const rssSeriesMax = trace.MaxProcessRSS / 2

// rssMaxProcesses is the most processes of a run that the sampler keeps
// a series for; those found after are not sampled.
const rssMaxProcesses = 1024

// procReader is what the sampler reads of the machine: /proc and the
// clocks (see procfs), or a test's own.
type procReader interface {
	// status returns pid's VmRSS and VmHWM in bytes; ok is false for a
	// process without them (gone, a zombie, a kernel thread).
	status(pid int) (rss, hwm uint64, ok bool)
	// children returns the children of pid's threads.
	children(pid int) []int
	// cmdline returns pid's arguments, each ended by a NUL byte.
	cmdline(pid int) []byte
	// now returns CLOCK_MONOTONIC in nanoseconds and the wall clock.
	now() (mono uint64, wall time.Time)
}

// newProcReader returns the machine's procReader, or nil where the
// sampler cannot run (not Linux). A variable for the tests.
var newProcReader = procfs

// rssSeries is the samples of one process.
type rssSeries struct {
	samples []trace.ClockedRSS
	every   int64 // sampled every `every` ticks (1, then doubled at each coarsening)
	next    int64 // the tick of its next sample
}

// rssSampler samples the RSS of the processes of a run. Its methods are
// safe on a nil *rssSampler, which samples nothing.
type rssSampler struct {
	proc procReader
	root int
	// testArg, when not "", is the argument by which the one process
	// to sample is known ("-test.trace=PATH": the test binary of a go
	// test run), and test is that process once seen (0: not yet);
	// otherwise every process of the run is sampled.
	testArg string
	test    int
	max     int // rssSeriesMax, or a test's own
	ticks   int64
	series  map[int]*rssSeries
	// exitHWM is the started process's largest RSS, read as it was
	// waited for (exitMaxRSS); 0 until it is.
	exitHWM uint64

	stopc chan struct{}
	done  chan struct{}
}

// newRSSSampler returns a sampler of every process of a run, or, when
// testArg is not "", of the one whose command line holds testArg. It is
// nil when the sampler cannot run here (see noRSSOS).
func newRSSSampler(testArg string) *rssSampler {
	proc := newProcReader()
	if proc == nil {
		return nil
	}
	return &rssSampler{proc: proc, testArg: testArg, max: rssSeriesMax, series: map[int]*rssSeries{}}
}

// start starts sampling root, the process started, and its
// descendants, every RSSEvery until stop: the first sample now.
func (s *rssSampler) start(root int) {
	if s == nil {
		return
	}
	s.root = root
	s.stopc, s.done = make(chan struct{}), make(chan struct{})
	s.tick()
	go s.loop()
}

// loop samples every RSSEvery until stop, and once more then.
func (s *rssSampler) loop() {
	defer close(s.done)
	t := time.NewTicker(RSSEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.tick()
		case <-s.stopc:
			s.last()
			return
		}
	}
}

// stop ends the sampling, once the command has ended, and waits for its
// goroutine to end. The series are the caller's after it.
func (s *rssSampler) stop() {
	if s == nil || s.stopc == nil {
		return
	}
	close(s.stopc)
	<-s.done
	s.stopc = nil
}

// exited records the started process's peak RSS from its exit status.
func (s *rssSampler) exited(ps *os.ProcessState) {
	if s == nil || ps == nil {
		return
	}
	s.exitHWM = exitMaxRSS(ps)
}

// tick takes the samples due: of the test binary, found among the
// descendants until it is, or of every process of the run.
func (s *rssSampler) tick() {
	switch {
	case s.testArg != "" && s.test != 0:
		s.sample(s.test)
	case s.testArg != "":
		s.walk(func(pid int) bool {
			if !hasArg(s.proc.cmdline(pid), s.testArg) {
				return true
			}
			s.test = pid
			s.sample(pid)
			return false
		})
	default:
		s.walk(func(pid int) bool {
			s.sample(pid)
			return true
		})
	}
	s.ticks++
}

// last takes one sample more of every process with a series, due or
// not: the latest the sampler can take.
func (s *rssSampler) last() {
	for pid, se := range s.series {
		se.next = s.ticks
		s.sample(pid)
	}
}

// walk calls visit with the started process and each of its
// descendants, parents first, until visit returns false.
func (s *rssSampler) walk(visit func(pid int) bool) {
	queue := []int{s.root}
	seen := map[int]bool{s.root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if !visit(pid) {
			return
		}
		for _, c := range s.proc.children(pid) {
			if !seen[c] && len(seen) < 4*rssMaxProcesses { // a loop of pids reused, or a fork bomb
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
}

// sample adds a sample of pid to its series if one is due.
func (s *rssSampler) sample(pid int) {
	se := s.series[pid]
	if se == nil {
		if len(s.series) == rssMaxProcesses {
			return
		}
		se = &rssSeries{every: 1, next: s.ticks}
	}
	if s.ticks < se.next {
		return
	}
	rss, hwm, ok := s.proc.status(pid)
	if !ok {
		return
	}
	mono, wall := s.proc.now()
	s.series[pid] = se
	se.next = s.ticks + se.every
	// The kernel's VmRSS of a process is a sum of per-CPU counters, read
	// without a lock: it may pass the VmHWM a later read gives by a few
	// hundred kilobytes. The series' VmHWM is the most seen so far, so
	// that it never falls.
	hwm = max(rss, hwm)
	if n := len(se.samples); n > 0 {
		hwm = max(hwm, se.samples[n-1].HWM)
	}
	se.samples = append(se.samples, trace.ClockedRSS{Mono: mono, Wall: wall, RSS: rss, HWM: hwm})
	if len(se.samples) >= s.max {
		se.samples = coarsen(se.samples)
		se.every *= 2
	}
}

// coarsen keeps every other sample of ss, the later of each pair, with
// the larger VmHWM of the two.
func coarsen(ss []trace.ClockedRSS) []trace.ClockedRSS {
	out := ss[:0]
	for i := 0; i < len(ss); i += 2 {
		k := ss[min(i+1, len(ss)-1)]
		k.HWM = max(k.HWM, ss[i].HWM)
		out = append(out, k)
	}
	clear(ss[len(out):])
	return slices.Clip(out)
}

// of returns the samples of pid, in the order taken.
func (s *rssSampler) of(pid int) []trace.ClockedRSS {
	if s == nil || s.series[pid] == nil {
		return nil
	}
	return s.series[pid].samples
}

// testBinary returns the test binary's pid and samples; pid is 0 when
// it was not seen.
func (s *rssSampler) testBinary() (int, []trace.ClockedRSS) {
	if s == nil {
		return 0, nil
	}
	return s.test, s.of(s.test)
}

// clockedRSS is the samples of a process's RSS for the reader of a Go
// execution trace to place by its clock: of says which process
// (trace.RSSTestBinary, say), none why there are none when there are
// none (Result.NoRSS).
type clockedRSS struct {
	samples []trace.ClockedRSS
	of      string
	none    string
}

// hasArg reports whether cmdline (NUL-ended arguments) holds arg.
func hasArg(cmdline []byte, arg string) bool {
	for len(cmdline) > 0 {
		a, rest, _ := bytes.Cut(cmdline, []byte{0})
		if string(a) == arg {
			return true
		}
		cmdline = rest
	}
	return false
}

// rssPeak returns the one sample of a trace without a clock: the
// largest VmRSS and VmHWM of ss, not placed. exitHWM, when not 0, is the
// process's peak read at its exit (rssSampler.exitHWM), which raises the
// VmHWM sampled, and stands for both figures when nothing was sampled
// (a resident set's largest value is its high-water mark).
func rssPeak(ss []trace.ClockedRSS, exitHWM uint64, of string) (trace.ProcessRSS, bool) {
	peak := trace.ClockedPeak(ss)
	if len(ss) == 0 {
		peak.RSS = exitHWM
	}
	peak.HWM = max(peak.HWM, exitHWM)
	return trace.ProcessRSS{Event: -1, RSS: peak.RSS, HWM: peak.HWM, Of: of}, peak.HWM > 0
}

// Why a recording has no samples of the RSS (Result.NoRSS).
var (
	noRSSService    = "a service's trace: its process may be on another host"
	noRSSOS         = "not on Linux, where /proc tells a process's RSS"
	noRSSTestBinary = fmt.Sprintf("the test binary was not seen (it ran under %d ms, between two samples)", RSSEvery.Milliseconds())
	noRSSProcess    = "the process was not seen (it ended before its first sample)"
	noRSSExit       = "the process was not seen (it ended before its first sample), and its peak at exit takes in other processes' (it started some)"
)
