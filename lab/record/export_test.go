package record

import (
	"time"

	"github.com/carvelab/carve/lab/internal/cbuild"
	"github.com/carvelab/carve/lab/trace"
)

// Internals for the tests (package record_test).

// Builds returns how many libraries this process has compiled.
func Builds() int64 { return cbuild.Builds() }

var (
	Environ         = environ
	ValgrindProgram = valgrindProgram
)

// ParseGoTest reads a go test command line as Record does, the trace
// going to traceFile unless it names its own.
func ParseGoTest(cmd []string, traceFile string) (argv []string, trace string, packages []string, isTest bool, err error) {
	t, isTest, err := parseGoTest(cmd, traceFile)
	if t == nil {
		return nil, "", nil, isTest, err
	}
	return t.argv, t.trace, t.packages, isTest, err
}

var Godebug = godebug

// SetServiceSlack sets how much longer than its trace FromService waits
// for a service, and returns the function that puts it back.
func SetServiceSlack(d time.Duration) func() {
	old := serviceSlack
	serviceSlack = d
	return func() { serviceSlack = old }
}

// CountLines reads a mapped log as Record reads carve's.
func CountLines(path string) (lines, size int64, cut int, err error) {
	_, lines, size, cut, err = countLines(path, true)
	return lines, size, cut, err
}

// FakeProc is a procReader of a test's own: a process tree, its RSS and
// a clock.
type FakeProc struct {
	Status   func(pid int) (rss, hwm uint64, ok bool)
	Children func(pid int) []int
	Cmdline  func(pid int) []byte
	Now      func() (uint64, time.Time)
}

func (p FakeProc) status(pid int) (uint64, uint64, bool) { return p.Status(pid) }
func (p FakeProc) children(pid int) []int                { return p.Children(pid) }
func (p FakeProc) cmdline(pid int) []byte                { return p.Cmdline(pid) }
func (p FakeProc) now() (uint64, time.Time)              { return p.Now() }

// Sampler is the RSS sampler over a FakeProc.
type Sampler struct{ s *rssSampler }

// NewSampler returns a sampler of root and its descendants (of the one
// whose command line holds testArg, when not ""), coarsening past max
// samples.
func NewSampler(p FakeProc, root int, testArg string, max int) *Sampler {
	return &Sampler{&rssSampler{proc: p, root: root, testArg: testArg, max: max, series: map[int]*rssSeries{}}}
}

// Tick takes the samples of one tick, as the sampler's goroutine does.
func (s *Sampler) Tick() { s.s.tick() }

// Start and Stop run the sampler's goroutine from root.
func (s *Sampler) Start() { s.s.start(s.s.root) }
func (s *Sampler) Stop()  { s.s.stop() }

// Of returns pid's samples; TestBinary the test binary's pid.
func (s *Sampler) Of(pid int) []trace.ClockedRSS { return s.s.of(pid) }
func (s *Sampler) TestBinary() int               { t, _ := s.s.testBinary(); return t }

// RSSPeak is the peak a trace without a clock holds (rssPeak).
var RSSPeak = rssPeak
