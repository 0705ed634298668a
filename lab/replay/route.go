package replay

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/arena"
	cheap "github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/pool"
)

// Routes: some of a trace's requests sent to allocators of carve's in
// front of a row (its pools, an arena, a heap), the rest to the row's own
// allocator (the row, below). One Router does it for every row: Run's
// allocators through WithRoutes, the C rows through their batch
// allocator (package rows), so that the same routes in front of two rows
// hold the same blocks and cost the same bytes.
//
// The rule, event by event:
//
//   - An allocation is routed when it asks for more than 0 bytes, an
//     alignment of at most MaxRoutedAlign (what a pool's chunks and an
//     arena's bump give), and either it has the label of a route by label
//     or exactly the size of a route by size; a route by label is asked
//     first. Every other request goes to the row.
//   - A free goes to whoever holds the block.
//   - A realloc of a routed block stays with its target when the target
//     can hold the new size, which must be more than 0 bytes: a heap
//     always, a route by size's pool when the new size is its size, a
//     route by label's pools any size (its pool of that size) and its one
//     pool of Chunk bytes when the new size is Chunk; an arena never (it
//     frees nothing until it is reset). Otherwise, and for a realloc of
//     the row's block, the new size is routed as an allocation without a
//     label: into the route by size that takes it (its pool, arena or
//     heap), else to the row. A block that
//     changes hands is copied and freed where it was (for the C rows: a
//     pool free and a malloc op on the slot, or a free op and a pool
//     chunk).
//   - The figures: each target's footprint after every routed event,
//     and at samples its Stats, with its side metadata counted in its
//     footprint and resident bytes as a heap's is (see heap), added to
//     the row's.

// MaxRoutedAlign is the largest alignment a routed request may ask for:
// a pool's chunks and an arena's blocks are 8-byte aligned.
const MaxRoutedAlign = 8

// Routable reports whether a request of size bytes aligned to align may
// be routed at all (see the rule at the top of this file): more than 0
// bytes (an empty slice tells no address back) and an alignment of at
// most MaxRoutedAlign.
func Routable(size, align int) bool { return size > 0 && align <= MaxRoutedAlign }

// A Route sends some of a trace's requests to an allocator of carve's in
// front of a row: the objects of one label (a Go type, in a Go execution
// trace), or the requests of exactly one size. WithRoutes and NewRouter
// build them; the rule is at the top of route.go.
type Route struct {
	// Label is the label's name, as the trace names it ("main.session",
	// "uint8" for a []byte's backing arrays); "" for a route by size.
	Label string `json:"label,omitempty"`
	// Name is how users read the label (summary.LabelStat.GoName:
	// "[]byte"), in the route's and the row's names; "" reads Label.
	Name string `json:"name,omitempty"`
	// Size is a route by size's: it takes the requests of exactly Size
	// bytes. 0 for a route by label.
	Size int `json:"size,omitempty"`
	// Into is the carve allocator the requests go to.
	Into Target `json:"into"`
	// Chunk, when more than 0, makes a route by label into pools one pool
	// of Chunk-byte chunks for every object of the label: pool.NewOf[T]
	// for a type T of Chunk bytes, where a Go trace sizes each object by
	// its span's class (a 40-byte struct is traced as 48). The objects'
	// requests must then be of at most Chunk bytes: AtTypeSize opens the
	// events so, so that the replay counts the type's size.
	Chunk int `json:"chunk,omitempty"`
	// Site, when not "", narrows a route by label to the objects
	// allocated at a site (trace.AttrSite) that it is part of: a function
	// ("Cache.Set") or a file and line ("cache.go:88"). With no Label, it
	// routes every type allocated there.
	Site string `json:"site,omitempty"`
}

// A Target is the carve allocator a route sends its objects to.
type Target int

// The targets, in the order Targets lists them.
const (
	// IntoPools: pools, one per size the trace gives the label's objects
	// (a Go trace sizes each object by its span's class), or one of
	// Route.Chunk bytes; a route by size's one pool.
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

// SizePools returns a route by size into a pool for each of sizes: the
// lab's --pool SIZE.
func SizePools(sizes ...int) []Route {
	var rs []Route
	for _, n := range sizes {
		rs = append(rs, Route{Size: n})
	}
	return rs
}

// ByLabel reports a route by label.
func (r Route) ByLabel() bool { return r.Label != "" || r.Site != "" }

// Arg is the route as the lab's flags take it after --pool, --arena or
// --heap: "type=main.session" (its Name, if it has one), or the size,
// "1024".
func (r Route) Arg() string {
	if !r.ByLabel() {
		return strconv.Itoa(r.Size)
	}
	var parts []string
	if name := cmp.Or(r.Name, r.Label); name != "" {
		parts = append(parts, "type="+name)
	}
	if r.Site != "" {
		parts = append(parts, "site="+r.Site)
	}
	return strings.Join(parts, ",")
}

// Moved is how a route by label names the objects it moves to the
// readers that place their frees and pace the Go heap by them
// (traces.Trace.OpenPlaced, CycleHeap; trace.MovedBy reads it): the
// label's name, or, for a route that narrows to a site,
// trace.MovedAt's name of the type and the site.
func (r Route) Moved() string {
	if r.Site == "" {
		return r.Label
	}
	return trace.MovedAt(r.Label, r.Site)
}

// takesLabel reports whether a route by label takes the objects of label
// l: its name, if the route names a type, and its site, if it names one.
func (r Route) takesLabel(l trace.Label) bool {
	if r.Label != "" && l.Name != r.Label {
		return false
	}
	if r.Site != "" {
		site, _ := l.Attr(trace.AttrSite)
		return trace.AtSite(site, r.Site)
	}
	return true
}

// String is the route as the lab names it: "type=main.session",
// "arena:type=main.session", "heap:type=[]byte", "1024" or "heap:1024".
func (r Route) String() string {
	if r.Into == IntoPools {
		return r.Arg()
	}
	return r.Into.String() + ":" + r.Arg()
}

// Takes reports whether r takes an allocation of size bytes aligned to
// align whose label is named label ("" for none): the routing predicate
// of the rule at the top of route.go, for one route. (A Router asks its
// routes by label first, with the whole label: a route by site needs the
// label's site, and takes nothing here.)
func (r Route) Takes(size, align int, label string) bool {
	if !Routable(size, align) {
		return false
	}
	if r.ByLabel() {
		return r.Site == "" && label == r.Label
	}
	return size == r.Size
}

// check returns what is wrong with r, or nil.
func (r Route) check() error {
	switch {
	case r.ByLabel() && r.Size != 0:
		return fmt.Errorf("replay: route %s: a label and a size (%d): it takes one or the other", r, r.Size)
	case !r.ByLabel() && r.Size <= 0:
		return fmt.Errorf("replay: route of no label and %d bytes: want a label or a size above 0", r.Size)
	case r.Chunk < 0 || r.Chunk > 0 && (!r.ByLabel() || r.Into != IntoPools):
		return fmt.Errorf("replay: route %s: a chunk of %d bytes is for a route by label into a pool", r, r.Chunk)
	}
	return nil
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

// Routed is what a row's routes held over a replay: Allocs, PeakLive
// and PeakFootprint the same figures for the same routes and trace in
// front of any row, IdleAtPeakFootprint the row's own.
type Routed struct {
	// Allocs counts the allocations routed, reallocs moved into a route
	// included.
	Allocs int64 `json:"allocs"`
	// PeakLive is the most bytes of routed requests held at once.
	PeakLive int64 `json:"peak_live"`
	// PeakFootprint is the most bytes the routes' allocators held
	// committed at once, read after every routed event (their side
	// metadata, told at samples, is counted in the row's figures only).
	PeakFootprint int64 `json:"peak_footprint"`
	// IdleAtPeakFootprint is the bytes the routes' allocators held
	// committed beyond the routed requests when the row's footprint
	// (the routes' and its allocator's) first reached its peak: a pool's
	// free chunks, mostly, which only the requests of its route can use.
	// A replay sets it through Routing.
	IdleAtPeakFootprint int64 `json:"idle_at_peak_footprint"`
}

// Routing is implemented by an allocator with routes in front of it
// (WithRoutes's, the C rows'): Router returns them, or nil. A replay tells
// the router when the allocator's footprint peaks, for
// Routed.IdleAtPeakFootprint.
type Routing interface {
	Router() *Router
}

// Router routes a trace's requests by its routes, by the rule at the top
// of route.go. It holds the routed blocks; the caller keeps the others,
// on the row. It is not safe for concurrent use.
type Router struct {
	routes  []Route
	lanes   []*lane
	bySize  map[int]*lane    // a route by size's lane, by its size
	labels  *trace.Labels    // the trace's (UseLabels)
	byLabel map[uint32]*lane // label number -> its lane (nil: none), as found
	fp      int64            // the targets' footprints, kept after each event
	meta    int64            // their side metadata, at the last Stats
	live    int64            // the bytes of the routed blocks
	stats   Routed
}

// lane is where one route's requests go: its pools, arena or heap.
type lane struct {
	route   Route
	pools   map[int]*pool.Pool // by chunk size asked (a request's size, or Chunk)
	order   []int              // the pools' sizes, in order of creation
	arena   *arena.Arena
	heap    *cheap.Heap
	inArena int  // the arena's objects not freed: it resets when none is left
	used    bool // an object took the route
	// inUse counts each pool's chunks handed out and not freed, so that
	// a sample reads its figures without a walk of its free list
	// (pool.Pool.Held).
	inUse map[*pool.Pool]int64
}

// NewRouter returns a router of routes. A route by size's pool is made at
// once (pool.New refuses a size below pool.LinkSize); the other targets
// when their first request comes. A route by size may go into a pool, an
// arena or a heap. A label or a size routed twice is an
// error: its requests go to one place.
func NewRouter(routes []Route) (*Router, error) {
	r := &Router{routes: routes, bySize: map[int]*lane{}}
	labels := map[string]bool{}
	for _, rt := range routes {
		if err := rt.check(); err != nil {
			r.Close()
			return nil, err
		}
		l := &lane{route: rt, pools: map[int]*pool.Pool{}, inUse: map[*pool.Pool]int64{}}
		if rt.ByLabel() {
			if labels[rt.Arg()] {
				r.Close()
				return nil, fmt.Errorf("replay: %s routed twice: its objects go to one place", rt.Label)
			}
			labels[rt.Arg()] = true
		} else {
			if r.bySize[rt.Size] != nil {
				r.Close()
				return nil, fmt.Errorf("replay: requests of %d bytes routed twice: they go to one place", rt.Size)
			}
			if rt.Into == IntoPools {
				p, err := pool.New(rt.Size)
				if err != nil {
					r.Close()
					return nil, fmt.Errorf("replay: pool of %d bytes: %w", rt.Size, err)
				}
				l.pools[rt.Size], l.order = p, []int{rt.Size}
			}
			r.bySize[rt.Size] = l
		}
		r.lanes = append(r.lanes, l)
	}
	return r, nil
}

// Routes returns the router's routes.
func (r *Router) Routes() []Route { return r.routes }

// UseLabels gives the router the trace's label table (see
// LabeledAllocator): without it no request has a label it knows.
func (r *Router) UseLabels(labels *trace.Labels) {
	r.labels, r.byLabel = labels, map[uint32]*lane{}
}

// lane returns the lane that takes an allocation of size bytes aligned to
// align with label (0: none), or nil for the row: the predicate.
func (r *Router) lane(size, align int, label uint32) *lane {
	if !Routable(size, align) {
		return nil
	}
	if label != 0 && r.labels != nil {
		l, seen := r.byLabel[label]
		if !seen {
			lab, _ := r.labels.Label(label)
			for _, c := range r.lanes {
				if c.route.ByLabel() && c.route.takesLabel(lab) {
					l = c
				}
			}
			r.byLabel[label] = l
		}
		if l != nil {
			return l
		}
	}
	return r.bySize[size]
}

// Alloc serves an allocation of size bytes aligned to align, with label
// (0: none), if a route takes it: ok is false for a request the row must
// serve.
func (r *Router) Alloc(size, align int, label uint32) (b []byte, ok bool, err error) {
	l := r.lane(size, align, label)
	if l == nil {
		return nil, false, nil
	}
	b, err = r.alloc(l, size)
	return b, true, err
}

// alloc allocates size bytes in l's target.
func (r *Router) alloc(l *lane, size int) ([]byte, error) {
	t, err := l.target(size)
	if err != nil {
		return nil, err
	}
	fp := t.Footprint()
	var b []byte
	switch t := t.(type) {
	case *cheap.Heap:
		b, err = t.Alloc(size, MaxRoutedAlign)
	case *arena.Arena:
		if b, err = t.Alloc(size, MaxRoutedAlign); err == nil {
			l.inArena++
		}
	case *pool.Pool:
		if b, err = t.Alloc(); err == nil {
			l.inUse[t]++
		}
	}
	if err != nil {
		return nil, err
	}
	l.used = true
	r.stats.Allocs++
	r.booked(t, fp, int64(size))
	return b[:size:size], nil
}

// footprinter is a route's target: a pool, an arena or a heap.
type footprinter interface{ Footprint() int64 }

// booked books an event on target t, whose footprint was fp before it,
// that changed the routed bytes by d.
func (r *Router) booked(t footprinter, fp, d int64) {
	r.live += d
	r.stats.PeakLive = max(r.stats.PeakLive, r.live)
	r.fp += t.Footprint() - fp
	r.stats.PeakFootprint = max(r.stats.PeakFootprint, r.fp)
}

// target returns l's allocator for a request of size bytes, made if it
// is new: its heap, its arena, or its pool of chunk(size) bytes.
func (l *lane) target(size int) (footprinter, error) {
	var err error
	switch l.route.Into {
	case IntoHeap:
		if l.heap == nil {
			l.heap, err = cheap.New()
		}
		return l.heap, err
	case IntoArena:
		if l.arena == nil {
			l.arena, err = arena.New()
		}
		return l.arena, err
	}
	chunk := l.chunk(size)
	if size > chunk {
		return nil, fmt.Errorf("replay: route %s: a request of %d bytes for a pool of %d-byte chunks (open the events with AtTypeSize)", l.route, size, chunk)
	}
	if p := l.pools[chunk]; p != nil {
		return p, nil
	}
	p, err := pool.New(max(chunk, pool.LinkSize))
	if err != nil {
		return nil, err
	}
	l.pools[chunk] = p
	l.order = append(l.order, chunk)
	return p, nil
}

// chunk returns the chunk size of l's pool for a request of size bytes:
// the route's Chunk if it has one, else size (a route by size's requests
// are all of its size).
func (l *lane) chunk(size int) int {
	if l.route.Chunk > 0 {
		return l.route.Chunk
	}
	return size
}

// holds reports whether l's target can hold a block resized to size bytes
// (the realloc rule): a heap always, an arena never, a pool when size is
// its chunk size; a route by label into pools has a pool of any size.
func (l *lane) holds(size int) bool {
	if !Routable(size, 0) {
		return false
	}
	switch {
	case l.route.Into == IntoHeap:
		return true
	case l.route.Into == IntoArena:
		return false
	case !l.route.ByLabel():
		return size == l.route.Size
	case l.route.Chunk > 0:
		return size == l.route.Chunk
	}
	return true
}

// holder returns the lane whose target holds b, and its pool if it is
// one, or nil: first the pool of b's size (where a block not resized in
// its chunk is), then every pool.
func (r *Router) holder(b []byte) (*lane, *pool.Pool) {
	for _, l := range r.lanes {
		if l.arena != nil && l.arena.Owns(b) || l.heap != nil && l.heap.Contains(b) {
			return l, nil
		}
		if p := l.pools[l.chunk(len(b))]; p != nil && p.Owns(b) {
			return l, p
		}
	}
	for _, l := range r.lanes {
		for _, size := range l.order {
			if p := l.pools[size]; p.Owns(b) {
				return l, p
			}
		}
	}
	return nil, nil
}

// Holds reports whether b is a block the router holds.
func (r *Router) Holds(b []byte) bool {
	l, _ := r.holder(b)
	return l != nil
}

// Free frees b, a block the router holds.
func (r *Router) Free(b []byte) error {
	l, p := r.holder(b)
	if l == nil {
		return fmt.Errorf("replay: free of a block no route holds")
	}
	var t footprinter
	switch {
	case p != nil:
		t = p
	case l.route.Into == IntoHeap:
		t = l.heap
	default:
		t = l.arena
	}
	fp := t.Footprint()
	var err error
	switch t := t.(type) {
	case *pool.Pool:
		if err = t.Free(b); err == nil {
			l.inUse[t]--
		}
	case *cheap.Heap:
		err = t.Free(b)
	case *arena.Arena:
		l.inArena--
		if l.inArena == 0 {
			t.Reset() // the last of the burst: the arena starts over
		}
	}
	if err != nil {
		return err
	}
	r.booked(t, fp, -int64(len(b)))
	return nil
}

// Realloc resizes b, a block the router holds, to size bytes, if the
// realloc rule keeps the object in the routes (in its target, or moved
// into a route by size's pool, copied). ok false means it goes to the
// row: the caller allocates it there, copies it, and frees b here.
func (r *Router) Realloc(b []byte, size int) (n []byte, ok bool, err error) {
	l, p := r.holder(b)
	if l == nil {
		return nil, false, fmt.Errorf("replay: realloc of a block no route holds")
	}
	to := l
	if !l.holds(size) {
		if to = r.lane(size, 0, 0); to == nil {
			return nil, false, nil
		}
	}
	switch {
	case to == l && l.route.Into == IntoHeap:
		fp := l.heap.Footprint()
		if n, err = l.heap.Realloc(b, size); err != nil {
			return nil, true, err
		}
		r.booked(l.heap, fp, int64(size-len(b)))
		return n, true, nil
	case to == l && p != nil && l.pools[l.chunk(size)] == p:
		// The chunk it is in holds it: it stays.
		r.booked(p, p.Footprint(), int64(size-len(b)))
		return b[:size:size], true, nil
	}
	if n, err = r.alloc(to, size); err != nil {
		return nil, true, err
	}
	copy(n, b)
	return n, true, r.Free(b)
}

// Unrouted returns the routes by label that no object took: a type the
// trace does not have, or a name misspelt.
func (r *Router) Unrouted() []Route {
	var out []Route
	for _, l := range r.lanes {
		if l.route.ByLabel() && !l.used {
			out = append(out, l.route)
		}
	}
	return out
}

// Routed returns what the routes held so far.
func (r *Router) Routed() Routed { return r.stats }

// atPeak books that the footprint of the row the routes are in front
// of has reached a new peak: what they hold idle now.
func (r *Router) atPeak() { r.stats.IdleAtPeakFootprint = max(r.fp-r.live, 0) }

// Footprint returns the bytes the routes' allocators hold committed, and
// their side metadata as of the last Stats (counted as a heap's is).
func (r *Router) Footprint() int64 { return r.fp + r.meta }

// Stats returns the routes' allocators' figures, summed: each one's side
// metadata counted in its footprint and resident bytes, as a heap's is.
func (r *Router) Stats() carve.Stats {
	var s carve.Stats
	add := func(o carve.Stats) {
		o.Footprint += o.Metadata
		o.Resident += o.Metadata
		addStats(&s, o)
	}
	for _, l := range r.lanes {
		for _, size := range l.order {
			p := l.pools[size]
			n := l.inUse[p]
			fp, res, meta := p.Held()
			add(carve.Stats{Live: n * int64(p.ChunkSize()), Used: n * int64(p.Stride()), Footprint: fp, Resident: res, Metadata: meta})
		}
		if l.arena != nil {
			add(l.arena.Stats().Stats)
		}
		if l.heap != nil {
			add(l.heap.Stats().Stats)
		}
	}
	r.meta = s.Metadata
	return s
}

// addStats adds o's figures to s's: a row's and its routes'.
func addStats(s *carve.Stats, o carve.Stats) {
	s.Live += o.Live
	s.Used += o.Used
	s.Footprint += o.Footprint
	s.Resident += o.Resident
	s.Metadata += o.Metadata
}

// Close gives every target's memory back.
func (r *Router) Close() error {
	var errs []error
	for _, l := range r.lanes {
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

// WithRoutes returns an allocator that sends the requests routes take to
// pools, an arena or a heap of their own (a Router) and every other
// request to a, by the rule at the top of route.go. Stats and Footprint
// are the sums of all; Close closes all. Unrouted names the routes by
// label that no object of the trace took.
func WithRoutes(routes []Route, a Allocator) (Allocator, error) {
	r, err := NewRouter(routes)
	if err != nil {
		return nil, err
	}
	return &routed{behind: behind{a}, r: r}, nil
}

// WithPool returns an allocator that sends the requests of exactly size
// bytes (with an alignment of at most MaxRoutedAlign) to a dedicated
// pool.Pool of chunks of that size, and every other request to a: the
// block-allocator article's question "would a pool for these objects
// have helped?". It is WithRoutes with one route by size.
func WithPool(size int, a Allocator) (Allocator, error) {
	if size <= 0 {
		return nil, fmt.Errorf("replay: pool size %d is not positive", size)
	}
	return WithRoutes([]Route{{Size: size}}, a)
}

// routed is WithRoutes's allocator: a Router in front of the row a.
type routed struct {
	behind
	r *Router
}

func (w *routed) UseLabels(labels *trace.Labels) {
	w.r.UseLabels(labels)
	if la, ok := w.a.(LabeledAllocator); ok {
		la.UseLabels(labels)
	}
}

func (w *routed) Alloc(size, align int) ([]byte, error) { return w.AllocLabeled(size, align, 0) }

func (w *routed) AllocLabeled(size, align int, label uint32) ([]byte, error) {
	if b, ok, err := w.r.Alloc(size, align, label); ok {
		return b, err
	}
	if la, ok := w.a.(LabeledAllocator); ok && label != 0 {
		return la.AllocLabeled(size, align, label)
	}
	return w.a.Alloc(size, align)
}

func (w *routed) Free(b []byte) error {
	if w.r.Holds(b) {
		return w.r.Free(b)
	}
	return w.a.Free(b)
}

func (w *routed) Realloc(b []byte, size int) ([]byte, error) {
	if w.r.Holds(b) {
		n, ok, err := w.r.Realloc(b, size)
		if ok {
			return n, err
		}
		n, err = w.a.Alloc(size, 0)
		return moved(n, err, b, w.r.Free)
	}
	n, ok, err := w.r.Alloc(size, 0, 0)
	if !ok {
		return w.a.Realloc(b, size)
	}
	return moved(n, err, b, w.a.Free)
}

// moved finishes a Realloc that moves b to n (allocated with err): it
// copies b's bytes and frees b.
func moved(n []byte, err error, b []byte, free func([]byte) error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	copy(n, b)
	if err := free(b); err != nil {
		return nil, err
	}
	return n, nil
}

// Contains reports whether b lies in a route's memory or, if the row
// behind is a Container, inside it; blocks of a row that is not one go
// unchecked (true).
func (w *routed) Contains(b []byte) bool { return w.r.Holds(b) || w.contains(b) }

func (w *routed) Footprint() int64 { return w.r.Footprint() + w.a.Footprint() }

func (w *routed) Stats() carve.Stats {
	s := w.a.Stats()
	addStats(&s, w.r.Stats())
	return s
}

func (w *routed) Close() error { return errors.Join(w.r.Close(), w.a.Close()) }

// Router returns the routes in front of the row.
func (w *routed) Router() *Router { return w.r }

// RouterOf returns the Router of a, if a is (or wraps) an allocator with
// routes in front (Routing), the outermost first; else nil.
func RouterOf(a Allocator) *Router {
	if r, ok := behindAll[Routing](a); ok {
		return r.Router()
	}
	return nil
}

// Unrouted returns the routes by label of a that no object took, if a is
// (or wraps) an allocator WithRoutes made: a type the trace does not
// have, or a name misspelt.
func Unrouted(a Allocator) []Route {
	if r := RouterOf(a); r != nil {
		return r.Unrouted()
	}
	return nil
}

// RoutedOf returns what the routes of a held, if a is (or wraps) an
// allocator WithRoutes made.
func RoutedOf(a Allocator) (Routed, bool) {
	if r := RouterOf(a); r != nil {
		return r.Routed(), true
	}
	return Routed{}, false
}

// AtTypeSize returns src with the allocations of the labels of the
// routes with a Chunk at that size, the type's own (see Route.Chunk), so
// that a replay counts them at it: src itself when no route has one. The
// table src's labels are in may grow as src is read; the label numbers
// are looked up as they come.
func AtTypeSize(src trace.Source, routes []Route) trace.Source {
	chunks := map[string]int{}
	for _, r := range routes {
		if r.Chunk > 0 {
			chunks[r.Label] = r.Chunk
		}
	}
	if len(chunks) == 0 {
		return src
	}
	return &typeSized{Source: src, labels: trace.LabelsOf(src), chunks: chunks, byID: map[uint32]uint64{}}
}

// typeSized is AtTypeSize's source.
type typeSized struct {
	trace.Source
	labels *trace.Labels
	chunks map[string]int    // label name -> its type's size
	byID   map[uint32]uint64 // label number -> its type's size (0: not resized), as found
}

func (s *typeSized) Read(dst []trace.Event) (int, error) {
	n, err := s.Source.Read(dst)
	for i := range dst[:n] {
		e := &dst[i]
		if e.Label == 0 || e.Op == trace.Free || e.Op == trace.Realloc {
			continue
		}
		size, seen := s.byID[e.Label]
		if !seen {
			size = uint64(s.chunks[s.labels.Name(e.Label)])
			s.byID[e.Label] = size
		}
		if size > 0 && e.Size > size {
			e.Size = size
		}
	}
	return n, err
}

// Position, Labels and MarkEnds pass the source's through
// (trace.Positioned, trace.LabeledSource, the marks of MoveFrees).
func (s *typeSized) Position(i int) (string, int64) {
	if p, ok := s.Source.(trace.Positioned); ok {
		return p.Position(i)
	}
	return "", 0
}

func (s *typeSized) Labels() *trace.Labels { return s.labels }

func (s *typeSized) MarkEnds() []trace.GoCycle {
	if m, ok := s.Source.(interface{ MarkEnds() []trace.GoCycle }); ok {
		return m.MarkEnds()
	}
	return nil
}
