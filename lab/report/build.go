package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// Series is how many points each replay keeps for the charts (up to twice
// as many): enough for a line that looks continuous at the charts' width,
// few enough that a report stays small. Replays for a report set
// rows.Options.Series to it.
const Series = 400

// Summary is what Summarize learns of a trace: its summary, and, for a
// trace that carries them (a Go execution trace, a native trace of
// version 2), the samples of the Go heap's own metrics.
type Summary struct {
	summary.Trace
	GoHeap []trace.GoHeapSample
}

// Summarize describes each trace (sizes, lifetimes, peak live, labels, the
// Go heap's metrics), or nil for one that cannot be read (its replays say
// why).
func Summarize(ts []traces.Trace) []*Summary {
	out := make([]*Summary, len(ts))
	for i, t := range ts {
		src, closer, err := t.Open()
		if err != nil {
			continue
		}
		if sum, err := summary.OfSource(src); err == nil {
			out[i] = &Summary{Trace: sum}
			// A *trace.Reader, or a trace's decoded events (traces.Trace.Spooled).
			if r, ok := src.(interface{ GoHeap() []trace.GoHeapSample }); ok {
				out[i].GoHeap = r.GoHeap()
			}
		}
		closer.Close()
	}
	return out
}

// MapOptions say which heap maps Build draws.
type MapOptions struct {
	// Draw draws a map of each of carve's heaps that replayed a trace in
	// this process.
	Draw bool
	// At is the event after which the maps are drawn; 0: at each heap's
	// peak footprint.
	At int64
	// Jobs is how many replays for the maps run at once.
	Jobs int
	// Progress counts the maps' replays as they run (nil: none); its
	// Total is set before the first.
	Progress *rows.Progress
}

// Build makes the report's traces from the tables of a run (sums[i]
// describes tables[i]'s trace, or is nil) and, with maps.Draw, the maps of
// carve's heaps: each such heap is replayed again, up to the chosen event,
// and mapped there.
func Build(tables []rows.Table, sums []*Summary, specs []rows.Spec, maps MapOptions) []Trace {
	var out []Trace
	for i, t := range tables {
		out = append(out, fromTable(t, sums[i]))
	}
	if maps.Draw {
		drawMaps(tables, specs, out, maps)
	}
	return out
}

// fromTable turns a table into the report's trace.
func fromTable(t rows.Table, sum *Summary) Trace {
	rt := Trace{Name: t.Trace.Label, About: t.Trace.About, Findings: t.Findings(), Notes: t.Notes(), ProgramRSS: t.Trace.ProcessRSS()}
	if p := t.Program(); p != nil {
		rt.ProgramOf = p.OfText
	}
	if sum != nil {
		rt.Summary, rt.GoHeap = &sum.Trace, sum.GoHeap
	}
	rs := slices.Clone(t.Rows)
	rows.MarkBest(rs)
	for _, r := range rs {
		rr := Row{
			Allocator: r.Allocator, Measured: r.Measured, Error: r.Error,
			Events: r.Events, PeakLive: r.PeakLive, PeakRSS: r.PeakRSS, RSSRatio: orNaN(r.RSSRatio), MarkedRatio: orNaN(r.MarkedRatio), Best: r.Best,
			PeakFootprint: r.PeakFootprint, AvgRatio: r.AvgRatio, PeakRatio: r.PeakRatio, Fragmentation: math.NaN(),
			NsPerOp: r.NsPerOp, TraceErrors: r.TraceErrors, Series: r.Series,
		}
		if r.Fragmentation != nil {
			rr.Fragmentation = *r.Fragmentation
		}
		if name, grew, ok := r.Growth(); ok {
			rr.GrowthPhase, rr.Growth = name, grew
		}
		if rt.Marked == nil && r.Error == "" {
			rt.Marked = r.Cycles
		}
		if rt.Phases == nil && r.Error == "" {
			for _, p := range r.Phases {
				rt.Phases = append(rt.Phases, Phase{Name: p.Name, End: p.EndEvent})
			}
		}
		rt.Rows = append(rt.Rows, rr)
	}
	return rt
}

// WritePNGs writes every chart and heap map of the report as
// DIR/<n>-<trace>-<chart>.png (a map's chart is map-<heap>, or
// map-<heap>-zoom), at twice the charts' size.
func WritePNGs(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, t := range rep.Traces {
		names, svgs := Charts(t)
		for _, m := range t.Maps {
			names, svgs = append(names, "map-"+m.Name), append(svgs, m.SVG)
		}
		for j, svg := range svgs {
			path := filepath.Join(dir, fmt.Sprintf("%d-%s-%s.png", i+1, slug(t.Name), names[j]))
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			err = WritePNG(f, svg, 2)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}

// slug makes a trace's name safe as part of a file name.
func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}

// drawMaps adds to each trace a map of each of carve's heaps that
// replayed it in this process. The replays run opt.Jobs at a time.
func drawMaps(tables []rows.Table, specs []rows.Spec, traces []Trace, opt MapOptions) {
	type job struct{ t, r int }
	var jobs []job
	for t, tb := range tables {
		for r, row := range tb.Rows {
			if row.Error == "" && row.Measured != "child" && row.PeakFootprintAt > 0 {
				jobs = append(jobs, job{t, r})
			}
		}
	}
	maps := make([][]Map, len(jobs))
	var events *atomic.Int64
	if p := opt.Progress; p != nil {
		p.Total, events = len(jobs), &p.Events
	}
	ch := make(chan int)
	var wg sync.WaitGroup
	for range min(max(opt.Jobs, 1), len(jobs)) {
		wg.Go(func() {
			for i := range ch {
				j := jobs[i]
				maps[i] = mapAt(tables[j.t].Trace, specs[j.r], tables[j.t].Rows[j.r], opt.At, events)
				if opt.Progress != nil {
					opt.Progress.Finished.Add(1)
				}
			}
		})
	}
	for i := range jobs {
		ch <- i
	}
	close(ch)
	wg.Wait()
	for i, j := range jobs {
		traces[j.t].Maps = append(traces[j.t].Maps, maps[i]...)
	}
}

// HeapMap replays t through the heap of spec up to event at and returns
// the heap's map there in the lab's vocabulary: each live block's bytes
// split into those the trace asked for (Live) and the rounding up to the
// block's usable size (Rounding), so that the map's live bytes are the
// replay's. The pools in front of the heap are not in the map. It returns
// an error for a heap that draws no map, or a replay that failed.
func HeapMap(t traces.Trace, spec rows.Spec, at int64) (heapmap.Map, replay.Result, error) {
	return heapMap(t, spec, at, nil)
}

// heapMap is HeapMap, counting the events it replays into events (if
// not nil).
func heapMap(t traces.Trace, spec rows.Spec, at int64, events *atomic.Int64) (heapmap.Map, replay.Result, error) {
	a, err := spec.NewAllocator(false, trace.CycleHeap{}) // a heap that maps: not the Go heap
	if err != nil {
		return heapmap.Map{}, replay.Result{}, err
	}
	defer a.Close()
	m, ok := replay.MapperOf(a)
	if !ok {
		return heapmap.Map{}, replay.Result{}, fmt.Errorf("%s draws no map", spec.Label())
	}
	src, closer, err := t.Open()
	if err != nil {
		return heapmap.Map{}, replay.Result{}, err
	}
	defer closer.Close()
	tr := &tracked{Allocator: a, live: map[uintptr][]byte{}}
	res, err := replay.Run(src, tr, replay.Options{NoCheck: true, StopAfter: at, Progress: events})
	if err != nil {
		return heapmap.Map{}, res, err
	}
	hm := m.Map()
	usable, _ := m.(interface{ UsableSize([]byte) (int, error) })
	var blocks []heapmap.Block
	for p, b := range tr.live {
		off, ok := hm.Offset(p)
		if !ok {
			continue // a pool's chunk, or a heap that cannot place it
		}
		u := cap(b)
		if usable != nil {
			if n, err := usable.UsableSize(b); err == nil {
				u = n
			}
		}
		blocks = append(blocks, heapmap.Block{Off: off, Asked: int64(len(b)), Usable: int64(u)})
	}
	return hm.SplitAsked(blocks), res, nil
}

// tracked keeps the blocks an allocator has handed out and not taken back,
// by address.
type tracked struct {
	replay.Allocator
	live map[uintptr][]byte
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (t *tracked) Alloc(size, align int) ([]byte, error) {
	b, err := t.Allocator.Alloc(size, align)
	if err == nil {
		t.live[addrOf(b)] = b
	}
	return b, err
}

func (t *tracked) Free(b []byte) error {
	delete(t.live, addrOf(b))
	return t.Allocator.Free(b)
}

func (t *tracked) Realloc(b []byte, size int) ([]byte, error) {
	n, err := t.Allocator.Realloc(b, size)
	if err == nil {
		delete(t.live, addrOf(b))
		t.live[addrOf(n)] = n
	}
	return n, err
}

// mapAt replays t through the heap of spec up to event at (0: the event
// of the row's peak footprint) and returns the heap's maps there: the
// whole heap's and, where free and used memory interleave finer than it
// shows, a window of it zoomed (pickWindow); nil if the heap draws none.
func mapAt(t traces.Trace, spec rows.Spec, rw rows.Row, at int64, events *atomic.Int64) []Map {
	moment := "at its peak footprint"
	if at == 0 {
		at = rw.PeakFootprintAt
	} else {
		at = min(at, rw.Events)
		moment = "at the chosen moment"
	}
	hm, _, err := heapMap(t, spec, at, events)
	if err != nil {
		return nil
	}
	hm.Name = fmt.Sprintf("%s %s (event %d)", spec.Label(), moment, at)
	st := hm.Stats()
	caption := fmt.Sprintf("%s: the heap's address space %s, after event %d of %d, coloured by what each byte holds: %s live (as asked for), %s of rounding up to the blocks' sizes, %s in headers; %s free in %d holes, the largest %s.",
		spec.Label(), moment, at, rw.Events, size.Format(st.Live), size.Format(st.Rounding), size.Format(st.Header), size.Format(st.Free), st.Holes, size.Format(st.Largest))
	if len(spec.Routes) > 0 {
		caption += " The pools, arenas and heaps in front of it are not drawn."
	}
	overview := Map{Name: slug(spec.Label()), Caption: caption}
	w, ok := pickWindow(hm)
	if !ok {
		if w.changes > 0 {
			overview.Caption += fmt.Sprintf(" No window of it is drawn zoomed: the most changes between free and used memory that this map cannot show, in any window at any scale, are %d (of the heap's %s), and a zoom is drawn from %d.",
				w.changes, text.Thousands(int64(w.total)), minZoomChanges)
		}
		overview.SVG = drawMap(hm, overviewStyle(window{}))
		return []Map{overview}
	}
	overview.Caption += " The black frame marks the window drawn zoomed below."
	overview.SVG = drawMap(hm, overviewStyle(w))
	zm := cut(hm, w)
	zm.Name = fmt.Sprintf("%s (event %d) zoomed to offsets %#x-%#x", spec.Label(), at, w.off, w.off+w.n)
	return []Map{overview, {Name: overview.Name + "-zoom", Caption: zoomCaption(spec.Label(), hm, w),
		SVG: drawMap(zm, zoomStyle(w))}}
}

// zoomCaption says where the window w of the map hm of the heap named
// label lies, at which scale it is drawn, and why it was picked.
func zoomCaption(label string, hm heapmap.Map, w window) string {
	where := fmt.Sprintf("offsets %#x to %#x of the heap's %s", w.off, w.off+w.n, size.Format(hm.Size))
	if hm.Base != 0 && hm.Spans == nil {
		where += fmt.Sprintf(" (addresses %#x to %#x)", hm.Base+uintptr(w.off), hm.Base+uintptr(w.off+w.n))
	}
	st := cut(hm, w).Stats()
	return fmt.Sprintf("%s, zoomed: the %s at %s, one cell = %s (the whole heap's map: %s). "+
		"Picked as the window where free and used memory (live, rounding, headers, padding) take turns most often at a scale where each turn shows: %s changes between them that the whole heap's map cannot show, of the heap's %s changes; %s free in %d holes beside %s live. "+
		"The rule, the same for every heap: a picture shows a change where both its runs of free and used memory span %d of its cells or more; of every cell size (a power of two up to a page, %s, and smaller than the whole map's) and every window of as many cells as the picture holds (%s), the one that shows the most changes the whole map's picture does not (of equal ones, the larger cell, then the lowest window).",
		label, size.Format(w.n), where, size.Format(w.cellBytes), size.Format(overviewCell(hm)),
		text.Thousands(int64(w.changes)), text.Thousands(int64(w.total)), size.Format(st.Free), st.Holes, size.Format(st.Live),
		zoomRun, size.Format(maxZoomCell), text.Thousands(zoomCells(len(hm.Regions) > 0)))
}
