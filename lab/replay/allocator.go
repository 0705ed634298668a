package replay

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"unsafe"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/fit"
	cheap "github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/lab/internal/look"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/sizeclass"
)

// Allocator is what the replayer needs of a heap. The lab defines it; each
// of carve's heaps satisfies it through a thin adapter (see New), and a
// test or a user can bring their own.
//
// Alloc returns size bytes (len == size) aligned to align, a power of
// two, or to the heap's default alignment when align is 0. Free takes a
// block Alloc or Realloc returned, whole. Realloc resizes a live block,
// keeping its first min(old, new) bytes, and may move it.
//
// Footprint must be cheap: the replayer calls it after every event to
// keep the peak footprint. Stats returns the full figures and is called at
// samples only.
type Allocator interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
	Realloc(b []byte, size int) ([]byte, error)
	Footprint() int64
	Stats() carve.Stats
	Close() error
}

// Container is implemented by allocators that can tell whether a slice
// lies inside their memory (carve's heaps, through New). The replayer
// then checks every block it is handed against it.
type Container interface {
	Contains(b []byte) bool
}

// A Row is one allocator New builds by name: a row of the lab's tables.
// The table of them (rowTable) is the one list of carve's heaps and the
// Go heap as rows: Names, New, the charts' looks (through package rows),
// carve help replay and the golden tables read it.
type Row struct {
	Name string
	Doc  string    // what it is, one line, for carve help replay
	Look look.Look // how the charts draw it
	// Varies is set where the row's figures vary with the machine and
	// the run (the Go heap's collector), so no golden table holds it.
	Varies bool
	new    func() (Allocator, error)
}

// rowTable is every row New builds, in the order of the tables.
var rowTable = []Row{
	{Name: fit.FirstFit.String(), Doc: "fit's first fit: the lowest free block that fits", Look: look.Look{Color: look.Indigo}, new: fitRow(fit.FirstFit)},
	{Name: fit.NextFit.String(), Doc: "fit's next fit: the first that fits from where the last search ended", Look: look.Look{Color: look.Teal}, new: fitRow(fit.NextFit)},
	{Name: fit.BestFit.String(), Doc: "fit's best fit: the smallest free block that fits", Look: look.Look{Color: look.Green}, new: fitRow(fit.BestFit)},
	{Name: fit.AddressOrderedFirstFit.String(), Doc: "fit's address-ordered first fit, its free blocks kept in address order", Look: look.Look{Color: look.Olive}, new: fitRow(fit.AddressOrderedFirstFit)},
	{Name: buddy.Plain.String(), Doc: "binary buddy, each block's order in side tables", Look: look.Look{Color: look.Wine}, new: buddyRow(buddy.Plain)},
	{Name: buddy.Header.String(), Doc: "the FREENIX paper's modified buddy: a 16-byte header in each block", Look: look.Look{Color: look.Wine, Dash: look.Dashed}, new: buddyRow(buddy.Header)},
	{Name: "sizeclass", Doc: "a pool per size class up to 32 KiB, large requests mapped whole", Look: look.Look{Color: look.Sand}, new: sizeclassRow},
	{Name: "heap", Doc: "carve's heap: size-class slabs, a best-fit zone, free pages given back", Look: look.Look{Color: look.Green, Dash: look.Dashed}, new: heapRow},
	{Name: "heap-mesh", Doc: "carve's heap meshing its small-object slabs (heap.Mesh): a page's slots onto another's memory", Look: look.Look{Color: look.Olive, Dash: look.Dashed}, new: heapMeshRow},
	{Name: "go", Doc: "the Go runtime's heap: make([]byte), collected at the program's GOGC", Look: look.Look{Color: look.Purple}, Varies: true, new: func() (Allocator, error) { return newGoHeap(), nil }},
}

// Rows returns the rows New builds, in the order of the tables.
func Rows() []Row { return slices.Clone(rowTable) }

// Names returns the names of Rows, in their order.
func Names() []string {
	names := make([]string, len(rowTable))
	for i, r := range rowTable {
		names[i] = r.Name
	}
	return names
}

// ErrUnknown is wrapped by New for a name it does not know.
var ErrUnknown = errors.New("replay: unknown allocator")

// New returns the allocator called name, one of Names(): carve's heaps
// with their default options, or "go", the Go heap.
//
// carve's heaps report their committed bytes in O(1) (their Footprint
// methods), so the replayer reads their footprint after every event and
// its peaks are exact; their Stats, which costs mincore calls (one for
// fit, one per run of committed granules for buddy, one per class in use
// and per large object for sizeclass, one per zone for heap) and, for
// sizeclass, a walk of its pools' free lists, runs at samples only (see
// Options.SampleEvery).
//
// "go" allocates with make. Its Footprint and Stats read runtime/metrics:
// Footprint = the heap's memory mapped and not released (objects, unused
// bytes of spans in use, free spans not yet returned to the OS), Used =
// the objects' bytes, Resident = Footprint, each less its value when New
// was called and less the replayer's own bookkeeping (which lives on the
// same heap: see ReplayerMemory); Live is the adapter's own sum of
// requested sizes. Free only drops the reference: the collector decides
// when the memory is reused, at the GOGC of the process (NewGoHeap runs
// the collections itself, at a GOGC of its own).
func New(name string) (Allocator, error) {
	for _, r := range rowTable {
		if r.Name == name {
			return r.new()
		}
	}
	return nil, fmt.Errorf("%w: %q (want one of %v)", ErrUnknown, name, Names())
}

// The rows' constructors: carve's heaps with their default options,
// behind the adapter.

func fitRow(p fit.Policy) func() (Allocator, error) {
	return func() (Allocator, error) {
		h, err := fit.New(p)
		if err != nil {
			return nil, err
		}
		return &heap{h: h, stats: func() carve.Stats { return h.Stats().Stats }, fp: h.Footprint}, nil
	}
}

func buddyRow(m buddy.Mode) func() (Allocator, error) {
	return func() (Allocator, error) {
		h, err := buddy.New(m)
		if err != nil {
			return nil, err
		}
		return &heap{h: h, stats: func() carve.Stats { return h.Stats().Stats }, fp: h.Footprint}, nil
	}
}

func sizeclassRow() (Allocator, error) {
	h, err := sizeclass.New()
	if err != nil {
		return nil, err
	}
	return &heap{h: h, stats: func() carve.Stats { return h.Stats().Stats }, fp: h.Footprint}, nil
}

func heapMeshRow() (Allocator, error) {
	h, err := cheap.New(cheap.Mesh())
	if err != nil {
		return nil, err
	}
	return &heap{h: h, stats: func() carve.Stats { return h.Stats().Stats }, fp: h.Footprint}, nil
}

func heapRow() (Allocator, error) {
	h, err := cheap.New()
	if err != nil {
		return nil, err
	}
	return &heap{h: h, stats: func() carve.Stats { return h.Stats().Stats }, fp: h.Footprint}, nil
}

// ReplayerMemory is implemented by an allocator whose figures may be
// those of the process's Go heap, where the replayer's own bookkeeping
// lives too. When OnGoHeap reports true, Run tells it, before each Stats,
// how many bytes that bookkeeping holds, and the allocator leaves them
// out; and Run keeps no set of live blocks (its nodes would be Go memory
// too, and Go hands out no overlapping live slices). A wrapper passes
// both on.
type ReplayerMemory interface {
	OnGoHeap() bool
	SetReplayerBytes(n int64)
}

// OnGoHeap reports that the Go heap's figures are the process's.
func (g *goHeap) OnGoHeap() bool { return true }

// rawHeap is what carve's heaps have in common.
type rawHeap interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
	Realloc(b []byte, size int) ([]byte, error)
	Close() error
	Contains(b []byte) bool
	UsableSize(b []byte) (int, error)
	Map() heapmap.Map
}

// heap adapts one of carve's heaps. Their Footprint methods are O(1), so
// the replay reads the footprint after every event and its peaks are
// exact.
//
// A heap's side metadata (Stats.Metadata: the Go memory of its bitmaps,
// trees and tables) is counted as a C malloc's metadata is counted in its
// RSS: the adapter adds it to the heap's footprint and resident figures,
// so that Resident <= Footprint still holds. Footprint adds the metadata
// of the last Stats, as the heaps tell it only there.
type heap struct {
	h     rawHeap
	stats func() carve.Stats
	fp    func() int64
	meta  int64 // the Metadata of the last Stats
}

func (a *heap) Alloc(size, align int) ([]byte, error) {
	if align == 0 {
		align = 1 // the heap's own granule is its default alignment
	}
	return a.h.Alloc(size, align)
}
func (a *heap) Free(b []byte) error                        { return a.h.Free(b) }
func (a *heap) Realloc(b []byte, size int) ([]byte, error) { return a.h.Realloc(b, size) }
func (a *heap) Footprint() int64                           { return a.fp() + a.meta }
func (a *heap) Close() error                               { return a.h.Close() }
func (a *heap) Stats() carve.Stats {
	st := a.stats()
	a.meta = st.Metadata
	st.Footprint += st.Metadata
	st.Resident += st.Metadata
	return st
}
func (a *heap) Contains(b []byte) bool { return a.h.Contains(b) }

// MapsPagesTwice reports whether the heap maps one page of memory at two
// addresses (a heap that meshes: heap.Mesh), so that RSS counts it twice.
func (a *heap) MapsPagesTwice() bool {
	m, ok := a.h.(interface{ Meshing() bool })
	return ok && m.Meshing()
}

// MeshOf returns what meshing did in a, or in the heap behind its routes,
// if that heap meshes.
func MeshOf(a Allocator) (Mesh, bool) {
	h, ok := behindAll[*heap](a)
	if !ok || !h.MapsPagesTwice() {
		return Mesh{}, false
	}
	m, ok := h.h.(interface{ Stats() cheap.Stats })
	if !ok {
		return Mesh{}, false
	}
	st := m.Stats()
	return Mesh{Meshes: st.Meshes, Meshed: st.Meshed, Unmeshed: st.Unmeshed, Refused: st.MeshRefused}, true
}

// MapsPagesTwice reports whether a, or the heap behind its routes, maps
// one page of memory at two addresses: its process's RSS then counts the
// page twice, and its resident memory is measured by PSS instead.
func MapsPagesTwice(a Allocator) bool {
	m, ok := behindAll[interface{ MapsPagesTwice() bool }](a)
	return ok && m.MapsPagesTwice()
}

// behindAll returns a as a T, or the first allocator behind a's wrappers
// (routes, pools) that is one.
func behindAll[T any](a Allocator) (T, bool) {
	for {
		if t, ok := a.(T); ok {
			return t, true
		}
		w, ok := a.(interface{ wrapped() Allocator })
		if !ok {
			var zero T
			return zero, false
		}
		a = w.wrapped()
	}
}

// Map returns a map of the heap's address space (see package heapmap).
func (a *heap) Map() heapmap.Map { return a.h.Map() }

// Mapper is implemented by allocators that can draw a map of their
// memory: carve's heaps, through New.
type Mapper interface {
	Map() heapmap.Map
}

// MapperOf returns the Mapper a is, or the one behind the routes
// WithRoutes (or WithPool) put in front of it: the heap whose map shows
// where the trace's other requests went.
func MapperOf(a Allocator) (Mapper, bool) { return behindAll[Mapper](a) }

// UsableSize returns the bytes the block b starts can hold.
func (a *heap) UsableSize(b []byte) (int, error) { return a.h.UsableSize(b) }

// goHeap allocates on the Go heap.
type goHeap struct {
	baseFP, baseUsed int64 // goHeapBytes when the heap was made
	live             int64
	fp               int64
	own              int64     // the replayer's bytes (SetReplayerBytes)
	gogc             int       // NewGoHeap's; 0: the runtime's own collector
	goal             int64     // the heap's bytes of objects that start the next collection
	prevGOGC         int       // the process's GOGC before NewGoHeap, set back by Close
	byProgram        bool      // NewProgramGoHeap's: it collects where the program did
	paced            bool      // NewPacedGoHeap's: its goals at the program's ratio
	ratio            float64   // the program's last goal over marked heap; 0: none yet
	peaks, moved     []uint64  // NewPacedGoHeap's: the program's heap over each cycle, the moved bytes each mark found
	black            []uint64  // the other bytes each mark allocated black
	share            []float64 // the moved objects' share of the objects each mark visited
	cycle            int       // the program's collections seen (Collect)
	headroom         int64     // a paced heap's goal less its marked heap, from the program's last collection
	samples          []metrics.Sample
	// The runtime's figures at the last reading (bytes), and the most
	// the heap's objects can have grown by since: Footprint reads them
	// again once that passes readSlack or could reach the goal.
	readFP, readUsed int64
	since            int64
}

// readSlack is how many bytes the Go heap's objects may have grown by
// since the runtime's figures were last read before Footprint reads them
// again: the most a peak footprint can be under-stated by.
const readSlack = 16 << 10

// grown counts an allocation of n bytes on the Go heap: the most its
// objects grow by, n rounded up to its size class (at most an eighth
// above n, and 16 bytes for the smallest classes) or, above 32 KiB, to
// the runtime's 8 KiB pages.
func (g *goHeap) grown(n int) {
	if n <= 32<<10 {
		g.since += int64(n + n/8 + 16)
		return
	}
	g.since += int64(n + 8<<10)
}

// SetReplayerBytes tells the heap how much of it the replayer holds.
func (g *goHeap) SetReplayerBytes(n int64) { g.own = n }

// The runtime/metrics of the Go heap: its memory mapped and not released
// is objects + unused (in spans in use) + free (spans not in use, not yet
// returned); Used is the objects'.
var goHeapMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// bytes reads the Go heap's footprint and the bytes of its objects.
func (g *goHeap) bytes() (footprint, used int64) {
	metrics.Read(g.samples)
	var v [3]int64
	for i, s := range g.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s.Value.Uint64())
		}
	}
	g.readFP, g.readUsed, g.since = v[0]+v[1]+v[2], v[0], 0
	return g.readFP, g.readUsed
}

func newGoHeap() *goHeap {
	g := &goHeap{}
	for _, name := range goHeapMetrics {
		g.samples = append(g.samples, metrics.Sample{Name: name})
	}
	g.baseFP, g.baseUsed = g.bytes()
	return g
}

func (g *goHeap) Alloc(size, align int) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("replay: go: negative size %d", size)
	}
	if align&(align-1) != 0 || align < 0 {
		return nil, fmt.Errorf("replay: go: alignment %d is not a power of two", align)
	}
	if size > maxGoSlice-align {
		return nil, fmt.Errorf("replay: go: %d bytes: more than a Go slice holds", size)
	}
	g.live += int64(size)
	// Go aligns an object of 16 bytes or more to 8, and packs smaller
	// pointer-free ones by their size's alignment (a 3-byte slice may
	// start anywhere): those asked for a larger alignment are made so.
	if align <= 1 || align <= 8 && size >= 16 {
		g.grown(size)
		return make([]byte, size), nil
	}
	g.grown(size + align - 1)
	b := make([]byte, size+align-1)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & (align - 1)
	return b[off : off+size : off+size], nil
}

// NewGoHeap returns the Go heap as New("go") does, with its collector run
// by the replayer: the process's own collector is turned off
// (debug.SetGCPercent(-1), for the whole process until Close sets it
// back: the lab calls it in a process of its own), and a full collection runs after the event that brings the
// heap's objects to the goal GOGC sets, live × (1 + gogc/100) as of the
// last collection, at least 4 MiB × gogc/100 as the runtime's own minimum.
// The collections come where the pacer aims them, not wherever a
// concurrent collector's progress puts them, so that a replay's figures
// move by a few hundredths from run to run rather than by a tenth (the
// background scavenger, which returns free pages on a clock of its own,
// is what still moves them), at the cost of leaving out the overshoot of
// a concurrent collector, which lets a program allocate while it marks.
func NewGoHeap(gogc int) Allocator {
	g := newGoHeap()
	g.prevGOGC = debug.SetGCPercent(-1)
	g.gogc = max(gogc, 1)
	runtime.GC()
	_, used := g.bytes()
	g.setGoal(used)
	return g
}

// NewProgramGoHeap returns the Go heap with its collections where the
// program's were: the process's own collector is off, as for NewGoHeap,
// and a full collection runs at each end of a mark in the trace (Collect,
// which the replay calls there after the frees the trace moved to it:
// trace.MoveFrees), and nowhere else, so that after each the heap holds
// what the program's held. For a trace with collections only: without
// them the heap never collects.
func NewProgramGoHeap() Allocator {
	g := newGoHeap()
	g.prevGOGC = debug.SetGCPercent(-1)
	g.gogc, g.byProgram = 100, true
	runtime.GC()
	return g
}

// NewPacedGoHeap returns the Go heap with its collections paced by the
// program's own: as NewGoHeap, a full collection when the heap's objects
// reach the goal, but the goal is set at each of the program's
// collections in the trace (Collect) from what the program's runtime
// found and did there: its marked heap, less the bytes of the objects
// moved off this heap that the mark found (moved, one per collection:
// traces.Trace.CycleHeap; nil when none are), times the program's own
// ratio for that cycle, how far its heap grew over its marked heap
// before its next mark ended (peaks: the most its objects held up to
// there; without it, its goal over its marked heap, trace.GoCycle), or
// 1 + gogc/100 before the trace's first. The program's marked heap
// counts what its concurrent mark allocated black, and its heap grew to
// less than its goal where its mark ended early; a collection of the
// replay's, made at once, does neither: taking both from the program,
// not from the replay's own live bytes, keeps them. A collection of the
// replay's own (the heap reached the goal between two of the program's)
// sets the next goal at its live bytes plus the program's headroom (goal
// less marked heap), if that is above the goal. A gogc other than 100
// scales the ratio's excess over 1 by gogc/100, as the program at that
// GOGC would pace it: a gogc a little apart from 100 moves each
// collection by a fraction of a cycle. On the program's own objects
// (none moved) the heap's goals are the program's peaks; with objects
// moved to carve memory, they are what the program's runtime would have
// let its heap grow to without them, and the collections fall where
// those goals put them.
//
// A heap with fewer objects may mark faster, and so allocate less black
// while it marks. Given c.Black and c.Share, the marked heap is also
// less the black bytes of the program's mark (the objects not moved
// that it allocated while it ran) times the moved objects' share of the
// objects it visited: a mark whose cost is all per object visited, the
// most a move can shorten it (the lab does so for the early bound).
// Without them the marks last as long as the program's: a mark whose
// cost is all in the pointer bytes it scans, which the move leaves (the
// late bound). On the workload the lab measured, moving 89% of the
// objects a mark visited halved its length. c holds all four
// (traces.Trace.CycleHeap computes them).
func NewPacedGoHeap(gogc int, c trace.CycleHeap) Allocator {
	g := NewGoHeap(gogc).(*goHeap)
	g.paced, g.peaks, g.moved, g.black, g.share = true, c.Peak, c.Moved, c.Black, c.Share
	return g
}

// Collect is called at the end of the program's collection c
// (Collector): a heap of NewProgramGoHeap collects there; one of
// NewPacedGoHeap sets its goal from c (see NewPacedGoHeap).
func (g *goHeap) Collect(c trace.GoCycle) {
	i := g.cycle
	g.cycle++
	switch {
	case g.byProgram:
		runtime.GC()
		g.bytes()
	case g.paced && c.Marked > 0 && c.Goal >= c.Marked:
		grew := float64(c.Goal) / float64(c.Marked)
		if i+1 < len(g.peaks) && g.peaks[i+1] >= c.Marked {
			grew = float64(g.peaks[i+1]) / float64(c.Marked)
		}
		g.ratio = 1 + (grew-1)*float64(g.gogc)/100
		marked := c.Marked
		if i < len(g.moved) {
			marked -= min(g.moved[i], marked)
		}
		if i < len(g.black) && i < len(g.share) {
			marked -= min(uint64(float64(g.black[i])*g.share[i]), marked)
		}
		g.goal = max(int64(float64(marked)*g.ratio), int64(float64(4<<20)*(g.ratio-1)))
		g.headroom = g.goal - int64(marked)
	}
}

// The ways the Go heap's collections are run (CollectedBy).
const (
	ByProgram = "program" // NewProgramGoHeap: where the program collected
	ByPacing  = "paced"   // NewPacedGoHeap: at the program's ratio
	ByGOGC    = "gogc"    // NewGoHeap: at GOGC alone
)

// CollectedBy returns how the Go heap of a, or the one behind its pools
// and routes, is collected: ByProgram, ByPacing or ByGOGC; "" when a
// does not allocate on the Go heap.
func CollectedBy(a Allocator) string {
	switch h := a.(type) {
	case *goHeap:
		switch {
		case h.byProgram:
			return ByProgram
		case h.paced:
			return ByPacing
		}
		return ByGOGC
	case interface{ wrapped() Allocator }:
		return CollectedBy(h.wrapped())
	}
	return ""
}

// wrapped returns the allocator behind a wrapper.
func (w behind) wrapped() Allocator { return w.a }

// setGoal sets the goal of the next collection from the heap's objects,
// used bytes, just after one: live × (1 + GOGC/100), or the program's
// ratio for a paced heap, at least the runtime's minimum heap of 4 MiB ×
// GOGC/100.
func (g *goHeap) setGoal(used int64) {
	live := max(used-g.baseUsed-g.own, 0)
	ratio := 1 + float64(g.gogc)/100
	if g.ratio > 0 {
		ratio = g.ratio
	}
	g.goal = max(int64(float64(live)*ratio), int64(float64(4<<20)*(ratio-1)))
}

// maxGoSlice is the most bytes the go row asks make([]byte, n) for: far
// less than a 64-bit runtime's address space (2^48), or half a 32-bit
// one's; more would panic.
var maxGoSlice = int(min(uint64(1)<<47, uint64(math.MaxInt/2)))

func (g *goHeap) Free(b []byte) error {
	g.live -= int64(len(b))
	return nil
}

func (g *goHeap) Realloc(b []byte, size int) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("replay: go: negative size %d", size)
	}
	if size > maxGoSlice {
		return nil, fmt.Errorf("replay: go: %d bytes: more than a Go slice holds", size)
	}
	g.grown(size)
	n := make([]byte, size)
	copy(n, b)
	g.live += int64(size) - int64(len(b))
	return n, nil
}

// Footprint reads the runtime's figures (runtime/metrics, without
// stopping the world: a fraction of a microsecond) once the heap's
// objects can have grown by readSlack since the last reading, or enough
// to reach the goal, so that the peak is the heap's at every event, not
// only at samples, within readSlack, and a collection comes at the event
// that reaches the goal. Between two of its collections the heap's
// objects only grow, and by no more than what was allocated (grown).
func (g *goHeap) Footprint() int64 {
	fp, used := g.readFP, g.readUsed
	if g.since >= readSlack || g.gogc > 0 && !g.byProgram && used-g.baseUsed-g.own+g.since >= g.goal {
		fp, used = g.bytes()
	}
	if g.gogc > 0 && !g.byProgram && used-g.baseUsed-g.own >= g.goal {
		// The heap reached its goal: the collection the pacer aims for,
		// here and now (see NewGoHeap).
		runtime.GC()
		fp, used = g.bytes()
		if g.headroom > 0 {
			// Paced by the program's collections: its goal stands
			// unless the replay's live bytes leave less headroom.
			g.goal = max(g.goal, max(used-g.baseUsed-g.own, 0)+g.headroom)
		} else {
			g.setGoal(used)
		}
	}
	g.fp = max(fp-g.baseFP-g.own, g.live)
	return g.fp
}
func (g *goHeap) Close() error {
	if g.gogc > 0 {
		debug.SetGCPercent(g.prevGOGC)
		g.gogc = 0
	}
	return nil
}

func (g *goHeap) Stats() carve.Stats {
	fp, used := g.bytes()
	// The runtime's figures lag the allocations its per-P caches serve
	// (a span per size class at most); the heap holds at least the live
	// bytes, so its figures are never taken below them.
	g.fp = max(fp-g.baseFP-g.own, g.live)
	return carve.Stats{
		Live:      g.live,
		Used:      max(used-g.baseUsed-g.own, g.live),
		Footprint: g.fp,
		Resident:  g.fp,
	}
}

// behind is the allocator a wrapper sends what it does not keep to. It
// passes the Go heap's bookkeeping through (see ReplayerMemory).
type behind struct{ a Allocator }

// OnGoHeap reports whether the allocator behind keeps its figures on the
// Go heap.
func (w behind) OnGoHeap() bool {
	m, ok := w.a.(ReplayerMemory)
	return ok && m.OnGoHeap()
}

// Collect passes the program's collection on to the allocator behind,
// when it is a Collector.
func (w behind) Collect(c trace.GoCycle) {
	if col, ok := w.a.(Collector); ok {
		col.Collect(c)
	}
}

// contains reports whether b lies inside the allocator behind, if it is a
// Container; its blocks go unchecked (true) if it is not.
func (w behind) contains(b []byte) bool {
	c, ok := w.a.(Container)
	return !ok || c.Contains(b)
}

// SetReplayerBytes passes the replayer's bytes on to the allocator behind.
func (w behind) SetReplayerBytes(n int64) {
	if m, ok := w.a.(ReplayerMemory); ok {
		m.SetReplayerBytes(n)
	}
}
