package rows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/mem"
)

// Rows measured in child processes that are this program started again:
// the Go heap, its runtime statistics being process-wide, and carve's
// heaps with Options.Isolate. The child reads its Job (one JSON value)
// and then the trace's events, decoded by this process (the row's
// source, in the form of traces.WriteStream), on its standard input,
// replays them, and writes its row as JSON on its standard output: no
// child decodes a trace. The real mallocs are replayed by a plain C
// process instead (c.go), but their stride is measured in such a child,
// with the library preloaded.

// ChildCommand is the hidden first argument that makes the program a
// row's child: its caller must then call ServeChild.
const ChildCommand = "replay-child"

// Job is what a child is asked to do, sent as one JSON value on its
// standard input.
type Job struct {
	// Trace is the TRACE argument (a file, a shipped trace, gen:...): the
	// row's name for it. Its events follow the Job on the child's
	// standard input, and Phases are the ends of its phases.
	Trace   string      `json:"trace,omitempty"`
	Phases  []gen.Phase `json:"phases,omitempty"`
	Spec    Spec        `json:"spec"`
	Options Options     `json:"options"`
	// Stride asks for the stride measurement instead of a replay: how far
	// apart two malloc(16)s land (see Stride).
	Stride bool `json:"stride,omitempty"`
	// Cycles says that the trace records a Go program's collections and
	// its frees were moved to them (trace.MoveFrees): the go row collects
	// by them (Spec.NewAllocator).
	Cycles bool `json:"cycles,omitempty"`
	// Heap is, for a paced go row, what the program's heap held over
	// each of its collections, and the bytes of the objects routed off
	// the row that each mark found (traces.Trace.CycleHeap).
	Heap trace.CycleHeap `json:"cycle_heap,omitempty"`
}

// child returns the command of a child process for spec: this program
// again with ChildCommand, the spec's library preloaded if it is a real
// malloc other than glibc.
func child(s Spec) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, ChildCommand)
	cmd.Env = os.Environ()
	if m, _ := realMallocOf(s.Alloc); m.libs != nil {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+findLib(m))
	}
	return cmd, nil
}

// ask runs job in a child, sends it the events of src after the job (if
// src is not nil), and decodes its answer into out. The child's resident
// memory is watched every 100 ms: above limit the child is killed and
// the error says so (why).
func ask(job Job, src trace.Source, limit int64, out any) error {
	cmd, err := child(job.Spec)
	if err != nil {
		return fmt.Errorf("cannot start a child: %w", err)
	}
	in, err := json.Marshal(job)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("cannot start a child: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start a child: %w", err)
	}
	// The job and the events, written while the child reads them; a
	// child that stops early makes the writes fail, and its answer says
	// why.
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer stdin.Close()
		// No newline after the job: the events start right after its
		// closing brace.
		if _, err := stdin.Write(in); err != nil || src == nil {
			return
		}
		traces.WriteStream(stdin, src)
	}()
	killed := make(chan int64, 1)
	done := make(chan struct{})
	go watch(cmd.Process, limit, killed, done)
	runErr := cmd.Wait()
	close(done)
	<-fed
	select {
	case rss := <-killed:
		return fmt.Errorf("the child was stopped: %s", job.Options.overLimit(rss, limit))
	default:
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("child: %s", childFailure(stderr.String(), runErr))
	}
	return nil
}

// watch kills p when its resident memory passes limit, sending what it
// read on killed, until done is closed.
func watch(p *os.Process, limit int64, killed chan<- int64, done <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if rss, err := mem.ProcessRSS(p.Pid); err == nil && rss > limit {
				killed <- rss
				p.Kill()
				return
			}
		}
	}
}

// childFailure says in a line why a child gave no answer: the first line
// of what it wrote (a Go panic's message, a runtime's fatal error), and
// how it exited.
func childFailure(stderr string, runErr error) string {
	msg := strings.TrimSpace(stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i]) + " (and more on its standard error)"
	}
	switch {
	case msg != "" && runErr != nil:
		return msg + "; " + runErr.Error()
	case msg != "":
		return msg
	case runErr != nil:
		return runErr.Error()
	}
	return "no answer"
}

// replayInChild runs one row in a child process, this program started
// again, and reads its row back. The child may hold limit.
func replayInChild(t traces.Trace, s Spec, o Options, prog *Progress, limit int64) Row {
	rw := Row{Trace: t.Label, Allocator: s.Label(), Measured: "child"}
	src, closer, err := source(t, s)
	if err != nil {
		return rw.fill(t, replay.Result{}, err)
	}
	defer closer.Close()
	if prog != nil {
		src = &counted{Source: src, n: &prog.Events}
	}
	job := Job{Trace: t.Label, Phases: t.Phases, Spec: s, Options: o, Cycles: t.FreesMoved()}
	if job.Cycles && s.paced() {
		if job.Heap, err = t.CycleHeap(s.routed()); err != nil {
			return rw.fill(t, replay.Result{}, fmt.Errorf("%w: %w", replay.ErrSource, err))
		}
	}
	var got Row
	if err := ask(job, src, limit, &got); err != nil {
		rw.Error, rw.ErrorKind = err.Error(), KindAllocator
		return rw
	}
	got.Trace, got.Allocator, got.Measured = t.Label, s.Label(), "child"
	return got
}

// counted counts the events read from a Source into n.
type counted struct {
	trace.Source
	n *atomic.Int64
}

func (c *counted) Read(dst []trace.Event) (int, error) {
	k, err := c.Source.Read(dst)
	c.n.Add(int64(k))
	return k, err
}

// Position and Labels pass the source's through (trace.Positioned,
// trace.LabeledSource).
func (c *counted) Position(i int) (string, int64) {
	if p, ok := c.Source.(trace.Positioned); ok {
		return p.Position(i)
	}
	return "", 0
}

func (c *counted) Labels() *trace.Labels { return trace.LabelsOf(c.Source) }

// MarkEnds passes the ends of the marks of a source of moved frees
// through (trace.MoveFrees).
func (c *counted) MarkEnds() []trace.GoCycle {
	if m, ok := c.Source.(interface{ MarkEnds() []trace.GoCycle }); ok {
		return m.MarkEnds()
	}
	return nil
}

// ServeChild is the child's side: it reads a Job from stdin, and the
// events that follow it, does it, and writes the answer as JSON to
// stdout. It returns an error only when it could write no answer; the
// answer says how the job went.
func ServeChild(stdin io.Reader, stdout io.Writer) error {
	dec := json.NewDecoder(stdin)
	var job Job
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("%s: reading the job: %w", ChildCommand, err)
	}
	if job.Stride {
		return json.NewEncoder(stdout).Encode(strideHere(job.Spec.Alloc))
	}
	rw := Row{Trace: job.Trace, Allocator: job.Spec.Label(), Measured: "child"}
	t := traces.Trace{Label: job.Trace, Phases: job.Phases}
	src, closer, err := traces.ReadStreamAll(io.MultiReader(dec.Buffered(), stdin))
	if err != nil {
		rw = rw.fill(t, replay.Result{}, fmt.Errorf("%w: %w", replay.ErrSource, err))
		return json.NewEncoder(stdout).Encode(rw)
	}
	defer closer.Close()
	res, peakRSS, collected, routed, err := childReplay(t, src, job)
	rw = rw.fill(t, res, err)
	rw.Collected = collected
	if err == nil {
		rw.Routed = routed
	}
	// The kernel's mark of a Go child counts the Go runtime and the
	// replayer besides the allocator: it is reported, and the headline is
	// the samples', which leave them out.
	rw.PeakRSSHWM = peakRSS
	if job.Spec.Alloc == "go" {
		rw.GOGC = job.Spec.gogc()
	}
	return json.NewEncoder(stdout).Encode(rw)
}

// childReplay replays src, the events of t, in this, the child, process,
// and returns the result, the peak RSS above the baseline taken just
// before the replay, how the Go heap collected (replay.CollectedBy) and
// what the routes held (nil: none).
func childReplay(t traces.Trace, src trace.Source, job Job) (replay.Result, int64, string, *replay.Routed, error) {
	s, o := job.Spec, job.Options
	if err := s.Available(); err != nil {
		return replay.Result{}, 0, "", nil, err
	}
	opt := o.replayOptions(t, nil)

	if s.Alloc == "go" {
		// No memory limit: what the environment says is not the row's
		// condition (its GOGC is the row's: see NewAllocator).
		debug.SetMemoryLimit(math.MaxInt64)
	}
	// The meter first: it collects the garbage, so that the Go heap's
	// baseline (taken by New) holds as little free space as it can.
	rss, err := newRSSMeter(s.Alloc == "go")
	if err != nil {
		return replay.Result{}, 0, "", nil, err
	}
	a, err := s.NewAllocator(job.Cycles, job.Heap) // a real malloc's is an error: it replays in C
	if err != nil {
		return replay.Result{}, 0, "", nil, err
	}
	defer a.Close()
	rss.pss = replay.MapsPagesTwice(a)
	ra := &rssStats{Allocator: a, rss: rss}
	res, err := replay.Run(src, ra, opt)
	if m, ok := replay.MeshOf(a); ok && err == nil {
		res.Mesh = &m // Run sees the meter, not the heap behind it
	}
	if err == nil {
		err = unrouted(a)
	}
	var routed *replay.Routed
	if r, ok := replay.RoutedOf(a); ok {
		routed = &r
	}
	// The kernel's mark counts the replayer's own bookkeeping on the Go
	// heap too: what it held at the end is left out.
	return res, max(rss.peak()-ra.own, 0), replay.CollectedBy(a), routed, err
}

// rssMeter reads the process's anonymous RSS (file-backed pages, such as
// the program text a replay touches for the first time, are not the
// allocator's) above a baseline. Unless it measures the Go heap itself,
// it leaves out what the Go runtime mapped since the baseline (the
// replayer's own bookkeeping, the trace's buffers), as runtime/metrics
// reports it, so that the figure is the allocator's.
//
// For an allocator that maps a page of memory at two addresses (a heap
// that meshes), the meter reads the proportional set size (mem.AnonPSS)
// instead, which counts such a page once, and includes shared memory,
// where such a heap's pages are.
type rssMeter struct {
	base, basePSS, goBase int64
	withGo                bool // the Go heap is the allocator: count its growth
	pss                   bool // read AnonPSS
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
		return nil, fmt.Errorf("%w: RSS: %v", ErrUnavailable, err)
	}
	if err := mem.ResetPeakRSS(); err != nil {
		return nil, fmt.Errorf("%w: resetting the peak RSS: %v", ErrUnavailable, err)
	}
	basePSS, _ := mem.AnonPSS() // 0 where the kernel does not say; only a meshing row reads it
	return &rssMeter{base: base, basePSS: basePSS, goBase: goMapped(), withGo: withGo}, nil
}

// now returns the RSS above the baseline, less the Go runtime's growth
// unless the Go heap is what is measured.
func (m *rssMeter) now() int64 {
	r, err := mem.AnonRSS()
	base := m.base
	if m.pss {
		r, err = mem.AnonPSS()
		base = m.basePSS
	}
	if err != nil {
		return 0
	}
	r -= base
	if !m.withGo {
		r -= max(goMapped()-m.goBase, 0)
	}
	return max(r, 0)
}

// peak returns the kernel's peak RSS (VmHWM) above the baseline since the
// meter was made: file-backed pages and the Go runtime's growth included,
// as the kernel does not tell them apart. The rows' peak resident figure
// is the largest of the samples of now instead.
//
// A meter reading PSS has no mark (the kernel keeps none of PSS, and its
// VmHWM counts a page mapped twice twice): 0, so that the samples alone
// make the peak.
func (m *rssMeter) peak() int64 {
	if m == nil || m.pss {
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
	own int64 // the replayer's bytes on the Go heap measured
}

func (a *rssStats) Stats() carve.Stats {
	st := a.Allocator.Stats()
	st.Resident = max(a.rss.now()-a.own, 0)
	return st
}

// Router passes the heap's routes through (replay.Routing), so that the
// replay tells them of the peaks of its footprint.
func (a *rssStats) Router() *replay.Router { return replay.RouterOf(a.Allocator) }

// OnGoHeap passes the heap's answer through.
func (a *rssStats) OnGoHeap() bool {
	m, ok := a.Allocator.(replay.ReplayerMemory)
	return ok && m.OnGoHeap()
}

// SetReplayerBytes passes the replayer's bytes on to the heap, and leaves
// them out of the RSS too: they are resident in the Go heap measured.
func (a *rssStats) SetReplayerBytes(n int64) {
	if m, ok := a.Allocator.(replay.ReplayerMemory); ok {
		m.SetReplayerBytes(n)
		a.own = n
	}
}

// Collect passes the program's collection through to a heap that
// collects at them (replay.Collector).
func (a *rssStats) Collect(c trace.GoCycle) {
	if col, ok := a.Allocator.(replay.Collector); ok {
		col.Collect(c)
	}
}

// UseLabels and AllocLabeled pass the trace's labels through to a heap
// that routes objects by them (replay.WithRoutes).
func (a *rssStats) UseLabels(l *trace.Labels) {
	if la, ok := a.Allocator.(replay.LabeledAllocator); ok {
		la.UseLabels(l)
	}
}

func (a *rssStats) AllocLabeled(size, align int, label uint32) ([]byte, error) {
	if la, ok := a.Allocator.(replay.LabeledAllocator); ok {
		return la.AllocLabeled(size, align, label)
	}
	return a.Allocator.Alloc(size, align)
}

// Contains passes the heap's own check through.
func (a *rssStats) Contains(b []byte) bool {
	c, ok := a.Allocator.(replay.Container)
	return !ok || c.Contains(b)
}

// StrideResult is what a stride measurement reports: how far apart
// blocks of 16 bytes land, and how many bytes one can hold.
type StrideResult struct {
	Apart  int64  `json:"apart"`
	Usable int    `json:"usable"`
	Error  string `json:"error,omitempty"`
}

// Stride allocates 16 bytes StrideBlocks times from the allocator called
// name and reports how far apart they land (see commonGap) and how many
// bytes one can hold: the block-allocator article's per-block
// bookkeeping, which it measures as the distance between two mallocs. A
// real malloc is measured in a child with its library preloaded.
func Stride(name string) StrideResult {
	s := Spec{Alloc: name}
	if !IsReal(name) {
		return strideHere(name)
	}
	if err := s.Available(); err != nil {
		return StrideResult{Error: err.Error()}
	}
	if !libc.Available() {
		return StrideResult{Error: fmt.Sprintf("%v: the stride of a real malloc is measured through cgo, and this carve was built without it (CGO_ENABLED=0)", ErrUnavailable)}
	}
	var r StrideResult
	if err := ask(Job{Spec: s, Stride: true}, nil, rowBase, &r); err != nil {
		return StrideResult{Error: err.Error()}
	}
	return r
}

func addrOf(p unsafe.Pointer) int64 { return int64(uintptr(p)) }

// strideHere measures the allocator in this process.
func strideHere(name string) StrideResult {
	if IsReal(name) {
		return strideC(name)
	}
	a, err := replay.New(name)
	if err != nil {
		return StrideResult{Error: err.Error()}
	}
	defer a.Close()
	addrs := make([]int64, StrideBlocks)
	var x []byte
	for i := range addrs {
		b, err := a.Alloc(16, 0)
		if err != nil {
			return StrideResult{Error: err.Error()}
		}
		x, addrs[i] = b, addrOf(unsafe.Pointer(unsafe.SliceData(b)))
	}
	usable := cap(x)
	if u, ok := a.(interface{ UsableSize([]byte) (int, error) }); ok {
		if n, err := u.UsableSize(x); err == nil {
			usable = n
		}
	}
	return StrideResult{Apart: commonGap(addrs), Usable: usable}
}

// StrideBlocks is how many blocks Stride allocates.
const StrideBlocks = 256

// commonGap returns the distance most of addrs' neighbours share, in
// address order (the smaller of equal counts): the distance between two
// consecutive mallocs where an allocator hands out blocks one after the
// other, and between the neighbouring slots where it hands them out at
// random (heap-mesh does, two of its blocks then lying anywhere in their
// slab), or where blocks freed before the measure take some requests (a
// C process's heap has served the C runtime).
func commonGap(addrs []int64) int64 {
	slices.Sort(addrs)
	count := map[int64]int{}
	var best int64
	for i := 1; i < len(addrs); i++ {
		d := addrs[i] - addrs[i-1]
		count[d]++
		if k := count[d]; k > count[best] || k == count[best] && d < best {
			best = d
		}
	}
	return best
}

// strideC measures the C allocator serving this process, which must be
// name's.
func strideC(name string) StrideResult {
	if got := libc.Active(); got.Name != name {
		return StrideResult{Error: fmt.Sprintf("asked for %s but %s serves this process: no figure", name, got.Name)}
	}
	var r StrideResult
	ps := make([]unsafe.Pointer, 0, StrideBlocks)
	defer func() {
		for _, p := range ps {
			libc.Free(p)
		}
	}()
	for range cap(ps) {
		p, err := libc.Malloc(16)
		if err != nil {
			return StrideResult{Error: err.Error()}
		}
		ps = append(ps, p)
	}
	addrs := make([]int64, len(ps))
	for i, p := range ps {
		addrs[i] = addrOf(p)
	}
	r.Apart = commonGap(addrs)
	r.Usable = libc.UsableSize(ps[len(ps)-1])
	return r
}
