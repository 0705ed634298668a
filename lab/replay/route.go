package replay

import (
	"errors"
	"fmt"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/arena"
	cheap "github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/pool"
)

// A Route sends the objects of one label (a Go type, in a Go execution
// trace) to an allocator of carve's in front of a heap: what a program
// gets by moving that type's values off the heap. WithRoutes builds it.
type Route struct {
	// Label is the label's name, as the trace names it
	// ("main.session", "[]uint8").
	Label string
	// Into is the carve allocator the objects go to.
	Into Target
}

// A Target is the carve allocator a route sends its objects to.
type Target int

// The targets, in the order Targets lists them.
const (
	// IntoPools: pools, one per size the trace gives the label's objects
	// (a Go trace sizes each object by its span's class).
	IntoPools Target = iota
	// IntoArena: an arena, reset when the last of the objects dies (a
	// type allocated and dropped in bursts).
	IntoArena
	// IntoHeap: one carve heap (package heap) for all of the label's
	// objects, whatever their sizes: the code a []byte of many sizes
	// calls for.
	IntoHeap
)

// Targets are every target, each once.
var Targets = []Target{IntoPools, IntoArena, IntoHeap}

// String is the target's name: "pool", "arena" or "heap", as the
// lab's flags (--pool, --arena, --heap) and row names spell it.
func (t Target) String() string {
	switch t {
	case IntoArena:
		return "arena"
	case IntoHeap:
		return "heap"
	}
	return "pool"
}

// MarshalText writes the target by its name, so that a row's JSON reads
// "pool", "arena" or "heap".
func (t Target) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a target's name.
func (t *Target) UnmarshalText(b []byte) error {
	for _, c := range Targets {
		if c.String() == string(b) {
			*t = c
			return nil
		}
	}
	return fmt.Errorf("replay: %q is no target: want pool, arena or heap", b)
}

// String is the route as the lab names it: "type=main.session",
// "arena:type=main.session" or "heap:type=main.session".
func (r Route) String() string {
	if r.Into == IntoPools {
		return "type=" + r.Label
	}
	return r.Into.String() + ":type=" + r.Label
}

// LabeledAllocator is implemented by an allocator that serves objects by
// their label (WithRoutes): Run calls AllocLabeled for every allocation
// whose event has a label, and UseLabels with the trace's label table
// before the first event (a table that may still grow as the trace is
// read: the native format defines each label where it is first used).
type LabeledAllocator interface {
	Allocator
	UseLabels(labels *trace.Labels)
	AllocLabeled(size, align int, label uint32) ([]byte, error)
}

// WithRoutes returns an allocator that sends the objects of each route's
// label to pools, an arena or a heap of its own and every other request
// to a. A realloc of a routed object stays in its heap, and moves from a
// pool or an arena to a (they hold one size); frees go to whoever holds
// the block. Stats and Footprint
// are the sums of all; Close closes all. Unrouted names the routes that
// no object of the trace took.
func WithRoutes(routes []Route, a Allocator) (Allocator, error) {
	seen := map[string]bool{}
	for i, r := range routes {
		if r.Label == "" {
			return nil, fmt.Errorf("replay: route %d: no label", i)
		}
		if seen[r.Label] {
			return nil, fmt.Errorf("replay: %s routed twice: its objects go to one place", r.Label)
		}
		seen[r.Label] = true
	}
	return &routed{behind: behind{a}, routes: routes}, nil
}

type routed struct {
	behind
	routes []Route
	labels *trace.Labels
	byID   map[uint32]*lane // label number -> where its objects go (nil: nowhere), as found
	lanes  []*lane
}

// lane is where one route's objects go.
type lane struct {
	route   Route
	pools   map[int]*pool.Pool // by size
	arena   *arena.Arena
	heap    *cheap.Heap
	inArena int   // the arena's objects not freed: it resets when none is left
	order   []int // the pools' sizes, in order of creation
	used    bool  // an object took the route
}

func (w *routed) UseLabels(labels *trace.Labels) {
	w.labels, w.byID = labels, map[uint32]*lane{}
	for _, r := range w.routes {
		w.lanes = append(w.lanes, &lane{route: r, pools: map[int]*pool.Pool{}})
	}
}

// lane returns where the objects of label go, or nil.
func (w *routed) lane(label uint32) *lane {
	l, seen := w.byID[label]
	if !seen {
		name := w.labels.Name(label)
		for _, c := range w.lanes {
			if c.route.Label == name {
				l = c
			}
		}
		w.byID[label] = l
	}
	return l
}

// Unrouted returns the routes of a that no object took, if a is (or
// wraps) an allocator WithRoutes made: a type the trace does not have, or
// a name misspelt.
func Unrouted(a Allocator) []Route {
	for {
		switch w := a.(type) {
		case *routed:
			if w.lanes == nil {
				return w.routes
			}
			var out []Route
			for _, l := range w.lanes {
				if !l.used {
					out = append(out, l.route)
				}
			}
			return out
		case *pooled:
			a = w.a
		default:
			return nil
		}
	}
}

func (w *routed) Alloc(size, align int) ([]byte, error) { return w.a.Alloc(size, align) }

func (w *routed) AllocLabeled(size, align int, label uint32) ([]byte, error) {
	l := w.lane(label)
	if l == nil || align > 8 || size == 0 {
		// Not routed, aligned beyond what a pool or an arena gives here,
		// or of no byte (whose slice tells no address back).
		return w.a.Alloc(size, align)
	}
	switch l.route.Into {
	case IntoHeap:
		if l.heap == nil {
			h, err := cheap.New()
			if err != nil {
				return nil, err
			}
			l.heap = h
		}
		b, err := l.heap.Alloc(size, align)
		if err != nil {
			return nil, err
		}
		l.used = true
		return b, nil
	case IntoArena:
		if l.arena == nil {
			a, err := arena.New()
			if err != nil {
				return nil, err
			}
			l.arena = a
		}
		b, err := l.arena.Alloc(size, 8)
		if err != nil {
			return nil, err
		}
		l.inArena++
		l.used = true
		return b[:size:size], nil
	}
	p := l.pools[size]
	if p == nil {
		var err error
		if p, err = pool.New(max(size, pool.LinkSize)); err != nil {
			return nil, err
		}
		l.pools[size] = p
		l.order = append(l.order, size)
	}
	b, err := p.Alloc()
	if err != nil {
		return nil, err
	}
	l.used = true
	return b[:size:size], nil
}

// holder returns the lane whose pool, arena or heap holds b, or nil.
func (w *routed) holder(b []byte) (*lane, *pool.Pool) {
	for _, l := range w.lanes {
		if l.arena != nil && l.arena.Owns(b) || l.heap != nil && l.heap.Contains(b) {
			return l, nil
		}
		for _, p := range l.pools {
			if p.Owns(b) {
				return l, p
			}
		}
	}
	return nil, nil
}

func (w *routed) Free(b []byte) error {
	l, p := w.holder(b)
	switch {
	case l == nil:
		return w.a.Free(b)
	case p != nil:
		return p.Free(b)
	case l.heap != nil:
		return l.heap.Free(b)
	}
	l.inArena--
	if l.inArena == 0 {
		l.arena.Reset() // the last of the burst: the arena starts over
	}
	return nil
}

func (w *routed) Realloc(b []byte, size int) ([]byte, error) {
	l, _ := w.holder(b)
	switch {
	case l == nil:
		return w.a.Realloc(b, size)
	case l.heap != nil:
		return l.heap.Realloc(b, size)
	}
	n, err := w.a.Alloc(size, 0)
	return moved(n, err, b, w.Free)
}

// Contains reports whether b lies in a routed allocator's memory or, if
// the heap behind is a Container, inside it.
func (w *routed) Contains(b []byte) bool {
	if l, _ := w.holder(b); l != nil {
		return true
	}
	return w.contains(b)
}

func (w *routed) Footprint() int64 {
	fp := w.a.Footprint()
	for _, l := range w.lanes {
		for _, p := range l.pools {
			fp += p.Footprint()
		}
		if l.arena != nil {
			fp += l.arena.Footprint()
		}
		if l.heap != nil {
			fp += l.heap.Footprint()
		}
	}
	return fp
}

func (w *routed) Stats() carve.Stats {
	s := w.a.Stats()
	add := func(o carve.Stats) {
		s.Live += o.Live
		s.Used += o.Used
		s.Footprint += o.Footprint + o.Metadata
		s.Resident += o.Resident + o.Metadata
		s.Metadata += o.Metadata
	}
	for _, l := range w.lanes {
		for _, size := range l.order {
			add(l.pools[size].Stats().Stats)
		}
		if l.arena != nil {
			add(l.arena.Stats().Stats)
		}
		if l.heap != nil {
			add(l.heap.Stats().Stats)
		}
	}
	return s
}

func (w *routed) Close() error {
	errs := []error{w.a.Close()}
	for _, l := range w.lanes {
		for _, size := range l.order {
			errs = append(errs, l.pools[size].Close())
		}
		if l.arena != nil {
			errs = append(errs, l.arena.Release())
		}
		if l.heap != nil {
			errs = append(errs, l.heap.Close())
		}
	}
	return errors.Join(errs...)
}
