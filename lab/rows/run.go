package rows

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// Options are how every row of a run replays its trace.
type Options struct {
	// Strict stops a replay at its first trace error (a failed check).
	Strict bool `json:"strict,omitempty"`
	// NoCheck skips the correctness checks of in-process replays.
	NoCheck bool `json:"nocheck,omitempty"`
	// Touch writes every byte of every block, as a program would, so that
	// resident memory counts it; without it only the checks' pattern (or,
	// for the real mallocs, one byte) is written.
	Touch bool `json:"touch,omitempty"`
	// Series is how many points of the replay over time each row keeps
	// (replay.Options.Series); 0: none.
	Series int `json:"series,omitempty"`
	// Isolate runs carve's heaps in child processes too.
	Isolate bool `json:"isolate,omitempty"`
	// MaxRequest is the budget of one request (replay.Options.MaxRequest;
	// 0: replay.DefaultMaxRequest).
	MaxRequest int64 `json:"max_request,omitempty"`
	// MaxRSS is the most memory a row may hold: it lowers the row's share
	// of the run's budget (see the top of budget.go), which a child
	// process's resident memory may not pass (the parent, watching it
	// every 100 ms, kills it above and the row fails with the reason) nor
	// a heap's in this process (replay.Options.MaxMemory). 0: the row's
	// need.
	MaxRSS int64 `json:"max_rss,omitempty"`
}

// replayOptions are the replay's options for trace t.
func (o Options) replayOptions(t traces.Trace, prog *Progress) replay.Options {
	opt := replay.Options{Strict: o.Strict, NoCheck: o.NoCheck, Touch: o.Touch, Series: o.Series, MaxRequest: o.MaxRequest}
	if prog != nil {
		opt.Progress = &prog.Events
	}
	for _, p := range t.Phases {
		opt.Marks = append(opt.Marks, p.End)
	}
	return opt
}

// Progress counts what a run has done, for a display in another
// goroutine. A nil *Progress counts nothing.
type Progress struct {
	// Events counts the events replayed.
	Events atomic.Int64
	// Finished counts the replays done.
	Finished atomic.Int64
	// Total is the number of replays of the run.
	Total int

	mu      sync.Mutex
	running []string // the rows being replayed: "trace: allocator"
}

// Running returns the replays under way, in the order they started.
func (p *Progress) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.running)
}

func (p *Progress) start(name string) {
	if p != nil {
		p.mu.Lock()
		p.running = append(p.running, name)
		p.mu.Unlock()
	}
}

func (p *Progress) done(name string) {
	if p != nil {
		p.mu.Lock()
		if i := slices.Index(p.running, name); i >= 0 {
			p.running = slices.Delete(p.running, i, i+1)
		}
		p.mu.Unlock()
		p.Finished.Add(1)
	}
}

// Run replays every trace through every spec, jobs replays at once (each
// in a goroutine of its own, or in a child process: see Replay), within
// the program's memory budget (see budget.go), and returns one table per
// trace, its rows in the order of specs. Each trace is decoded once
// (traces.Trace.Spooled) and measured once, however many rows replay it.
func Run(ts []traces.Trace, specs []Spec, o Options, jobs int, prog *Progress) []Table {
	tables := make([]Table, len(ts))
	measures := make([]func() measure, len(ts))
	type job struct{ t, s int }
	var all []job
	for i, t := range ts {
		t = t.Spooled()
		tables[i] = Table{Trace: t, Rows: make([]Row, len(specs))}
		measures[i] = sync.OnceValue(func() measure { return measureTrace(t, o) })
		for j := range specs {
			all = append(all, job{i, j})
		}
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	for range min(max(jobs, 1), len(all)) {
		wg.Go(func() {
			for j := range ch {
				tables[j.t].Rows[j.s] = replayRow(tables[j.t].Trace, specs[j.s], o, prog, measures[j.t])
			}
		})
	}
	for _, j := range all {
		ch <- j
	}
	close(ch)
	wg.Wait()
	for _, t := range tables {
		t.vsProgram()
	}
	return tables
}

// ErrUnrouted is wrapped by the error of a row whose route by type no
// object of the trace took.
var ErrUnrouted = errors.New("no object of the trace has the type")

// unrouted returns an error if a route of a took no object: a type the
// trace does not have, or a name misspelt.
func unrouted(a replay.Allocator) error {
	var names []string
	for _, r := range replay.Unrouted(a) {
		names = append(names, strconv.Quote(r.Label))
	}
	if names == nil {
		return nil
	}
	return fmt.Errorf("%w %s (carve stats lists a trace's types)", ErrUnrouted, strings.Join(names, ", "))
}

// Replay replays t through the allocator of s: in this process, or in a
// child process of its own for the real mallocs, the Go heap, and every
// allocator with Options.Isolate, within the program's memory budget
// (see budget.go). A failure is in the row's Error.
func Replay(t traces.Trace, s Spec, o Options, prog *Progress) Row {
	t = t.Spooled()
	return replayRow(t, s, o, prog, func() measure { return measureTrace(t, o) })
}

// replayRow replays one row of a run: t's measure (what its rows cost)
// gives its reservation of the budget, which it waits for.
func replayRow(t traces.Trace, s Spec, o Options, prog *Progress, measured func() measure) Row {
	rw := replayRowIn(t, s, o, prog, measured)
	rw.Frees = t.Frees().Name()
	return rw
}

// replayRowIn is replayRow but for the row's Frees.
func replayRowIn(t traces.Trace, s Spec, o Options, prog *Progress, measured func() measure) Row {
	name := t.Label + ": " + s.Label()
	prog.start(name)
	defer prog.done(name)
	rw := Row{Trace: t.Label, Allocator: s.Label(), Measured: "in process"}
	if o.Isolate || s.InChild() {
		rw.Measured = "child"
	}
	if err := s.Available(); err != nil {
		rw.Error, rw.ErrorKind = err.Error(), KindUnavailable
		return rw
	}
	m := measured()
	if m.err != nil {
		// The row would stop where the measure did, with its error.
		return rw.fill(t, replay.Result{}, m.err)
	}
	b := runBudget()
	limit, err := m.reservation(s, o, b.total)
	if err != nil {
		return rw.fill(t, replay.Result{}, err)
	}
	b.reserve(limit)
	defer b.release(limit)
	switch {
	case IsReal(s.Alloc):
		return replayInC(t, s, o, prog, limit)
	case o.Isolate || s.InChild():
		return replayInChild(t, s, o, prog, limit)
	}
	var routed *replay.Routed
	res, err := func() (replay.Result, error) {
		a, err := s.NewAllocator(false, trace.CycleHeap{}) // not the go row: it replays in a child
		if err != nil {
			return replay.Result{}, err
		}
		defer a.Close()
		src, closer, err := source(t, s)
		if err != nil {
			return replay.Result{}, err
		}
		defer closer.Close()
		opt := o.replayOptions(t, prog)
		opt.MaxMemory = limit // a child's is watched by this process
		res, err := replay.Run(src, a, opt)
		if err == nil {
			err = unrouted(a)
		}
		if r, ok := replay.RoutedOf(a); ok {
			routed = &r
		}
		return res, err
	}()
	rw = rw.fill(t, res, err)
	if err == nil {
		rw.Routed = routed
	}
	return rw
}

// source opens the events of t that the row of s replays, in whichever
// process it runs (this one reads them and sends them to a child): the
// one place a row's events come from, where a row's own transform of
// the stream belongs. The objects of a route with a chunk come at their
// type's size (replay.AtTypeSize).
func source(t traces.Trace, s Spec) (trace.Source, io.Closer, error) {
	src, closer, err := t.OpenPlaced(s.routed(), s.Early, s.paced(), s.Early || s.Late)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", replay.ErrSource, err)
	}
	return replay.AtTypeSize(src, s.Routes), closer, nil
}
