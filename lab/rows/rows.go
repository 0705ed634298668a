// Package rows runs the rows of the lab's tables: one allocator replaying
// one trace, in this process or in a child process of its own, with its
// result in the one shape every output format prints (Row). It is the
// part of the lab the carve command and the report share: the list of
// allocator names, the one place a row's allocator is built, the child
// processes rows are measured in, and the pool of replays that run side
// by side. See package lab for the measures.
//
// # Where a row runs
//
// carve's heaps run in this process (replay.Run). The real mallocs
// (glibc, jemalloc, tcmalloc, mimalloc) run each in a plain C process,
// libc's Replayer, with LD_PRELOAD naming the library: this process reads
// the trace and sends it the events a batch at a time (see c.go). The Go
// heap runs in a child: the program that imports this package started
// again with the hidden command ChildCommand as its first argument and
// the row's Job, one JSON value, then the trace's events, decoded by this
// process, on its standard input; the child answers with the Row, one
// JSON value, on its standard output. A program that
// runs rows must hand that command to ServeChild (the carve command does;
// a test binary does from TestMain). With Options.Isolate carve's heaps
// run in such children too, so that every row's RSS is measured in a
// process of its own.
//
// # The memory budget
//
// The rows of a run share one budget (budget.go): each reserves what it
// may hold before it starts, waits while others hold the budget, and is
// held to its reservation; one whose need alone passes the budget fails
// at once with replay.ErrBudget.
package rows

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/internal/look"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
)

// A realMalloc is a C allocator a row preloads, an entry of the table
// of real mallocs: the one list of them, read by Names, Allocators (the
// charts' looks, carve help replay) and the child that preloads one.
type realMalloc struct {
	name    string
	doc     string
	look    look.Look
	libs    []string // file names to look for, the first found wins; none: the process's own
	install string   // how to get it on Debian
}

// realMallocs are the real mallocs, in the order rows list them. glibc is
// the process's own and needs no preload.
var realMallocs = []realMalloc{
	{name: "glibc", doc: "the GNU C library's malloc (ptmalloc2), the process's own", look: look.Look{Color: look.Rose}},
	{name: "jemalloc", doc: "jemalloc, preloaded", look: look.Look{Color: look.Cyan},
		libs: []string{"libjemalloc.so.2", "libjemalloc.so"}, install: "apt-get install libjemalloc2"},
	{name: "tcmalloc", doc: "gperftools' tcmalloc (minimal), preloaded", look: look.Look{Color: look.Indigo, Dash: look.Dashed},
		libs: []string{"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so"}, install: "apt-get install libtcmalloc-minimal4"},
	{name: "mimalloc", doc: "Microsoft's mimalloc, preloaded", look: look.Look{Color: look.Teal, Dash: look.Dashed},
		libs: []string{"libmimalloc.so.2", "libmimalloc.so"}, install: "apt-get install libmimalloc2.0"},
}

// realMallocOf returns the real malloc called name.
func realMallocOf(name string) (realMalloc, bool) {
	for _, m := range realMallocs {
		if m.name == name {
			return m, true
		}
	}
	return realMalloc{}, false
}

// RealMallocs are the real mallocs' names, in the order rows list them.
var RealMallocs = func() []string {
	names := make([]string, len(realMallocs))
	for i, m := range realMallocs {
		names[i] = m.name
	}
	return names
}()

// An Allocator is a row's allocator as the tables list it.
type Allocator struct {
	Name string
	Doc  string    // one line
	Look look.Look // how the charts draw it
	Real bool      // a real malloc, run in a C process of its own
}

// Allocators returns every allocator a row can replay, in the fixed
// order of the tables: carve's heaps and the Go heap (replay.Rows), then
// the real mallocs.
func Allocators() []Allocator {
	var as []Allocator
	for _, r := range replay.Rows() {
		as = append(as, Allocator{Name: r.Name, Doc: r.Doc, Look: r.Look})
	}
	for _, m := range realMallocs {
		as = append(as, Allocator{Name: m.name, Doc: m.doc, Look: m.look, Real: true})
	}
	return as
}

// Names returns the names of Allocators, in their order.
func Names() []string { return append(replay.Names(), RealMallocs...) }

// LookOf returns how the charts draw the allocator called name.
func LookOf(name string) (look.Look, bool) {
	for _, a := range Allocators() {
		if a.Name == name {
			return a.Look, true
		}
	}
	return look.Look{}, false
}

// IsReal reports whether name is one of the real mallocs.
func IsReal(name string) bool {
	_, ok := realMallocOf(name)
	return ok
}

// ErrUnknown is wrapped by Parse's error for a name no row has.
var ErrUnknown = errors.New("unknown allocator")

// notRows say why a fixed name of carve's library is not a row.
var notRows = map[string]string{
	"pool":  "a pool serves one size, so it cannot replay a trace of many; --pool SIZE puts one in front of each row",
	"arena": "an arena frees nothing until it is reset, so it cannot replay a trace's frees; carve scenario bump measures it",
}

// Parse reads a comma-separated list of allocator names, or "all" for
// every one of Names. A name no row has is an error wrapping ErrUnknown
// that lists the names once, and the nearest to it; pool and arena, which are carve allocators
// but not rows, are refused with the reason.
func Parse(list string) ([]string, error) {
	if list == "all" {
		return Names(), nil
	}
	known := map[string]bool{}
	for _, n := range Names() {
		known[n] = true
	}
	names := strings.Split(list, ",")
	for _, n := range names {
		if why, ok := notRows[n]; ok {
			return nil, fmt.Errorf("%w: %q is not a row: %s", ErrUnknown, n, why)
		}
		if !known[n] {
			return nil, fmt.Errorf("%w %q: want all or a comma-separated list of %s%s", ErrUnknown, n, strings.Join(Names(), ", "), didYouMean(n, Names()))
		}
	}
	return names, nil
}

// Spec is one row of a table: an allocator, with carve's pools, arenas
// or heaps in front of it for the requests its Routes take.
type Spec struct {
	Alloc string `json:"alloc"`
	// GOGC is the go row's GOGC (0: DefaultGOGC), set in its child
	// whatever the environment says.
	GOGC int `json:"gogc,omitempty"`
	// Routes send requests of one size (--pool SIZE, --heap SIZE) or the
	// objects of a label (a Go type: --pool, --arena and --heap
	// type=NAME) to pools, an arena or a heap in front of the allocator,
	// by one rule for every row, in this process, in a Go child or in
	// front of a real malloc (replay.Router).
	Routes []replay.Route `json:"routes,omitempty"`
	// Paced makes the go row collect as the program's runtime would pace
	// it (replay.NewPacedGoHeap) on a trace that records the program's
	// collections, instead of where the program collected: the baseline
	// of a what-if that moves types off the Go heap, which is paced so
	// (see NewAllocator).
	Paced bool `json:"paced,omitempty"`
	// Early frees every object as early as the trace allows
	// (traces.Trace.OpenPlaced) on a trace whose frees are moved to the
	// marks' ends, and shortens the program's marks by the moved
	// objects' share of what they visited (replay.NewPacedGoHeap): the
	// early bound of the move, where the late one frees every object at
	// the start of the mark that did not find it, the latest it can have
	// died.
	Early bool `json:"early,omitempty"`
	// Late, for a paced go row without routes, frees every object at
	// the start of the mark that did not find it, the latest it can have
	// died, as a what-if's late bound does (with Early, as early as the
	// trace allows, as its early bound does), where the paced baseline
	// spreads the frees over the spans where the objects died: the
	// baseline a bound's saving is taken against, its objects placed as
	// the what-if's are.
	Late bool `json:"late,omitempty"`
}

// DefaultGOGC is the go row's GOGC unless Spec.GOGC says otherwise: the Go
// runtime's own default.
const DefaultGOGC = 100

// Label is the row's name: "first-fit", "first-fit+pool(64,1024)" (its
// routes by size into pools, together), "glibc+heap(4096)",
// "go+pool(type=main.Entry)", "go+heap(type=[]byte,early)" (its routes,
// each by the label's Go name: replay.Route.Name), and for the go row at
// another GOGC than 100, "go(gogc=50)", paced, "go(paced)", and a paced
// baseline at a bound "go(paced,late)" or "go(paced,early)".
func (s Spec) Label() string {
	name := s.Alloc
	var params []string
	if s.Alloc == "go" && s.GOGC != 0 && s.GOGC != DefaultGOGC {
		params = append(params, "gogc="+strconv.Itoa(s.GOGC))
	}
	if s.Alloc == "go" && s.Paced {
		params = append(params, "paced")
		switch {
		case len(s.Routes) > 0:
		case s.Early:
			params = append(params, "early")
		case s.Late:
			params = append(params, "late")
		}
	}
	if len(params) > 0 {
		name += "(" + strings.Join(params, ",") + ")"
	}
	var sizes []string
	for _, r := range s.Routes {
		if !r.ByLabel() && r.Into == replay.IntoPools {
			sizes = append(sizes, r.Arg())
		}
	}
	if len(sizes) > 0 {
		name += "+pool(" + strings.Join(sizes, ",") + ")"
	}
	for _, r := range s.Routes {
		switch {
		case !r.ByLabel() && r.Into == replay.IntoPools:
		case !r.ByLabel():
			name += "+" + r.Into.String() + "(" + r.Arg() + ")"
		case s.Early:
			name += "+" + r.Into.String() + "(" + r.Arg() + ",early)"
		default:
			name += "+" + r.Into.String() + "(" + r.Arg() + ")"
		}
	}
	return name
}

// gogc returns the GOGC the go row runs at.
func (s Spec) gogc() int {
	if s.GOGC != 0 {
		return s.GOGC
	}
	return DefaultGOGC
}

// InChild reports whether the row always runs in a child process: the
// real mallocs (LD_PRELOAD) and the Go heap (its statistics are the
// process's).
func (s Spec) InChild() bool { return IsReal(s.Alloc) || s.Alloc == "go" }

// ErrUnavailable is wrapped by the error of a row this machine or this
// build cannot run.
var ErrUnavailable = errors.New("unavailable")

// Available reports whether the row can run here, and if not why.
func (s Spec) Available() error {
	m, real := realMallocOf(s.Alloc)
	switch {
	case !real:
		return nil
	case runtime.GOOS != "linux":
		return fmt.Errorf("%w: real mallocs are measured on Linux only", ErrUnavailable)
	case libc.ReplayerAvailable() != nil:
		return fmt.Errorf("%w: %v", ErrUnavailable, libc.ReplayerAvailable())
	case m.libs != nil && findLib(m) == "":
		return fmt.Errorf("%w: %s is not installed (%s)", ErrUnavailable, m.libs[0], m.install)
	}
	return nil
}

// NewAllocator returns the row's allocator for a replay in this process:
// one of carve's heaps, or the Go heap, behind its routes. It is the one
// place a row's allocator is built. A real malloc is not built here: its
// row runs in a child (see ServeChild).
//
// The go row replays in a process of its own, its collector run by the
// replay, so that the row is the same from run to run; cycles says that
// the trace records the program's collections and the frees were moved
// to them (Job.Cycles). Then the go row collects where the program did
// (replay.NewProgramGoHeap), unless it is a what-if (routes in front of
// it: types or sizes moved off the Go heap) or Paced: those are paced by the
// program's marked heap and its growth in each cycle
// (replay.NewPacedGoHeap), and a
// GOGC other than the default by that GOGC alone (replay.NewGoHeap), as
// every go row on a trace without collections.
//
// heap is, for a paced row, the program's heap over each collection
// and the bytes of the routed objects each mark found
// (traces.Trace.CycleHeap): its Go heap is paced from them.
func (s Spec) NewAllocator(cycles bool, heap trace.CycleHeap) (replay.Allocator, error) {
	if IsReal(s.Alloc) {
		return nil, fmt.Errorf("%s runs in a child process of its own, not in this one", s.Alloc)
	}
	var a replay.Allocator
	var err error
	switch {
	case s.Alloc != "go":
		if a, err = replay.New(s.Alloc); err != nil {
			return nil, err
		}
	case cycles && s.paced():
		if !s.Early {
			// The late bound keeps the program's marks as long as they
			// were; the early one shortens them by what moved (see
			// replay.NewPacedGoHeap).
			heap.Black, heap.Share = nil, nil
		}
		a = replay.NewPacedGoHeap(s.gogc(), heap)
	case !cycles || s.GOGC != 0 && s.GOGC != DefaultGOGC:
		a = replay.NewGoHeap(s.gogc())
	default:
		a = replay.NewProgramGoHeap()
	}
	if len(s.Routes) > 0 {
		routed, err := replay.WithRoutes(s.Routes, a)
		if err != nil {
			a.Close()
			return nil, err
		}
		a = routed
	}
	return a, nil
}

// routed returns the labels whose objects s routes off the allocator.
func (s Spec) routed() []string {
	var names []string
	for _, r := range s.Routes {
		if r.ByLabel() {
			names = append(names, r.Moved())
		}
	}
	return names
}

// paced reports whether s is a go row paced by the program's marks on a
// trace that records its collections (see NewAllocator): Paced, or a
// what-if. Its events then have the frees of the objects it does not
// move spread over the spans where they died (traces.Trace.OpenPlaced),
// those it moves at the marks' ends or, Early, as early as the trace
// allows, since its
// collections fall between the program's marks' ends, where the trace
// proves no object dead.
func (s Spec) paced() bool {
	return s.Alloc == "go" && (s.Paced || len(s.Routes) > 0)
}

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
