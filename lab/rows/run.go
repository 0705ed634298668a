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
//
// Of the rows in this process, one replays at a time, beside the rows in
// child processes: two in one address space share its locks (the page
// tables', the mappings') and each one's madvise and munmap interrupt
// the other's CPU to flush its TLB, which moved a heap's time per call
// threefold from one run to the next. A worker takes the next row in
// this process when none is replaying, else the next row in a child.
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
	q := newQueue[job]()
	for _, j := range all {
		q.add(j, !o.Isolate && !specs[j.s].InChild())
	}
	var wg sync.WaitGroup
	for range min(max(jobs, 1), len(all)) {
		wg.Go(func() {
			for {
				j, here, ok := q.take()
				if !ok {
					return
				}
				tables[j.t].Rows[j.s] = replayRow(tables[j.t].Trace, specs[j.s], o, prog, measures[j.t])
				q.done(here)
			}
		})
	}
	wg.Wait()
	for _, t := range tables {
		t.vsProgram()
	}
	return tables
}

// A queue hands out the rows of a run to its workers: those in this
// process one at a time, those in child processes to any worker (see
// Run).
type queue[J any] struct {
	mu          sync.Mutex
	cond        *sync.Cond
	here, apart []J  // the rows left, in this process and in children
	busy        bool // a row in this process is replaying
}

func newQueue[J any]() *queue[J] {
	q := &queue[J]{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues a row, in this process if here.
func (q *queue[J]) add(j J, here bool) {
	if here {
		q.here = append(q.here, j)
	} else {
		q.apart = append(q.apart, j)
	}
}

// take returns the next row a worker may replay, and whether it is in
// this process: such a row when none is replaying, else a row in a
// child; it waits while only rows in this process are left and one is
// replaying. ok is false when no row is left.
func (q *queue[J]) take() (j J, here, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case len(q.here) > 0 && !q.busy:
			j, q.here, q.busy = q.here[0], q.here[1:], true
			return j, true, true
		case len(q.apart) > 0:
			j, q.apart = q.apart[0], q.apart[1:]
			return j, false, true
		case len(q.here) == 0:
			return j, false, false
		}
		q.cond.Wait()
	}
}

// done says that a row take returned has replayed.
func (q *queue[J]) done(here bool) {
	if !here {
		return
	}
	q.mu.Lock()
	q.busy = false
	q.cond.Broadcast()
	q.mu.Unlock()
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
