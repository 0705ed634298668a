package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/carvelab/carve/internal/size"

	"github.com/carvelab/carve/lab/traces"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/report"
	"github.com/carvelab/carve/lab/trace"
)

// reportSeries is how many points each replay keeps for the charts (up
// to twice as many): enough for a line that looks continuous at the
// charts' width, few enough that a report stays small.
const reportSeries = 400

// cmdReport replays traces and writes the HTML report:
// carve report [-o report.html] [replay flags] TRACE...
func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f replayFlags
	f.register(fs)
	out := fs.String("o", "report.html", "write the report to `FILE`")
	pngDir := fs.String("png", "", "also write every chart as a PNG file into `DIR` (for pasting into chat)")
	maps := fs.Bool("maps", true, "draw a map of each of carve's heaps at its peak footprint (another replay each, up to that event)")
	mapAt := fs.Int64("map-at", 0, "draw the heap maps after event `N` instead of at each heap's peak footprint")
	c, err := f.parse(fs, "report", args)
	if err != nil {
		return err
	}
	if *mapAt < 0 {
		return badUsage("carve report: --map-at %d: want an event number from 1", *mapAt)
	}
	f.png, f.maps, f.mapAt = *pngDir, *maps, *mapAt
	return writeReport(c, &f, *out, "carve report "+strings.Join(args, " "), stdout, stderr)
}

// writeReport replays c's sources, writes the report to path, and prints
// the tables as carve replay does (unless the format is json: the report
// is then the only output).
func writeReport(c replayConfig, f *replayFlags, path, command string, stdout, stderr io.Writer) error {
	c.series = reportSeries
	var prog *progress
	if f.progress {
		prog = startProgress(stderr, c.replays())
	}
	var sums []*trace.Summary
	var wg sync.WaitGroup
	wg.Go(func() { sums = summarize(c.sources) })
	tables := c.run(prog)
	wg.Wait()
	prog.stop()

	rep := report.Report{Title: "carve: fragmentation report", Generated: time.Now(), Command: command}
	for i, t := range tables {
		rep.Traces = append(rep.Traces, reportTrace(t, sums[i]))
	}
	if f.maps {
		drawMaps(c, tables, rep.Traces, f.mapAt)
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.Write(file, rep); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	fi, _ := os.Stat(path)
	fmt.Fprintf(stderr, "carve: report written to %s (%d KB)\n", path, fi.Size()>>10)
	if f.png != "" {
		if err := writePNGs(f.png, rep); err != nil {
			return err
		}
	}
	return emit(tables, f, stdout)
}

// summarize describes each traces.Trace (sizes, lifetimes, peak live), or nil
// for one that cannot be read (its replays say why).
func summarize(srcs []traces.Trace) []*trace.Summary {
	out := make([]*trace.Summary, len(srcs))
	for i, s := range srcs {
		src, closer, err := s.Open()
		if err != nil {
			continue
		}
		if sum, err := trace.SummarizeFrom(src); err == nil {
			out[i] = &sum
		}
		closer.Close()
	}
	return out
}

// reportTrace turns a table into the report's trace.
func reportTrace(t table, sum *trace.Summary) report.Trace {
	rt := report.Trace{Name: t.src.Label, Summary: sum}
	for _, r := range t.rows {
		rr := report.Row{
			Allocator: r.Allocator, Measured: r.Measured, Error: r.Error,
			Events: r.Events, PeakLive: r.PeakLive, PeakFootprint: r.PeakFootprint, PeakResident: r.PeakResident,
			AvgRatio: r.AvgRatio, PeakRatio: r.PeakRatio, Fragmentation: math.NaN(), NsPerOp: r.NsPerOp,
			TraceErrors: r.TraceErrors, Series: r.Series,
		}
		if rr.Measured == "" && rr.Error == "" {
			rr.Measured = "in process"
		}
		if r.Fragmentation != nil {
			rr.Fragmentation = *r.Fragmentation
		}
		if name, grew, ok := r.growth(); ok {
			rr.GrowthPhase, rr.Growth = name, grew
		}
		rt.Rows = append(rt.Rows, rr)
	}
	return rt
}

// writePNGs writes every chart of the report as DIR/<trace>-<chart>.png,
// at twice the charts' size.
func writePNGs(dir string, rep report.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, t := range rep.Traces {
		names, svgs := report.Charts(t)
		for j, svg := range svgs {
			path := filepath.Join(dir, fmt.Sprintf("%d-%s-%s.png", i+1, slug(t.Name), names[j]))
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			err = report.WritePNG(f, svg, 2)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("carve report: %s: %w", path, err)
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

// mapWidth and mapHeight are the size of a heap map in the report.
const mapWidth, mapHeight = 900, 220

// drawMaps adds to each trace a map of each of carve's heaps that
// replayed it in this process, at its peak footprint: the heap is
// replayed again up to that event and mapped there. The replays run
// c.jobs at a time.
func drawMaps(c replayConfig, tables []table, traces []report.Trace, at int64) {
	type job struct{ t, r int }
	var jobs []job
	for t, tb := range tables {
		for r, row := range tb.rows {
			if row.Error == "" && row.Measured != "child" && row.PeakFootprintAt > 0 {
				jobs = append(jobs, job{t, r})
			}
		}
	}
	maps := make([]*report.Map, len(jobs))
	ch := make(chan int)
	var wg sync.WaitGroup
	for range min(max(c.jobs, 1), len(jobs)) {
		wg.Go(func() {
			for i := range ch {
				j := jobs[i]
				maps[i] = mapAt(tables[j.t].src, c.allocs[j.r], tables[j.t].rows[j.r], at)
			}
		})
	}
	for i := range jobs {
		ch <- i
	}
	close(ch)
	wg.Wait()
	for i, j := range jobs {
		if maps[i] != nil {
			traces[j.t].Maps = append(traces[j.t].Maps, *maps[i])
		}
	}
}

// mapAt replays s through the heap of spec up to event at (0: the event
// of the row's peak footprint) and returns the heap's map there, or nil
// if the heap draws none.
func mapAt(s traces.Trace, spec allocSpec, rw row, at int64) *report.Map {
	moment := "at its peak footprint"
	if at == 0 {
		at = rw.PeakFootprintAt
	} else {
		at = min(at, rw.Events)
		moment = "at the chosen moment"
	}
	heap, err := replay.New(spec.name)
	if err != nil {
		return nil
	}
	defer heap.Close()
	m, ok := heap.(replay.Mapper)
	if !ok {
		return nil
	}
	a := heap
	for _, p := range spec.pools {
		if a, err = replay.WithPool(p, a); err != nil {
			return nil
		}
	}
	src, closer, err := s.Open()
	if err != nil {
		return nil
	}
	defer closer.Close()
	if _, err := replay.Run(src, a, replay.Options{NoCheck: true, StopAfter: at}); err != nil {
		return nil
	}
	hm := m.Map()
	hm.Name = fmt.Sprintf("%s %s (event %d)", spec.label(), moment, at)
	st := hm.Stats()
	caption := fmt.Sprintf("%s: the heap's address space %s, after event %d of %d, coloured by what each byte holds: %d holes, the largest %s; %s free, %s in headers.",
		spec.label(), moment, at, rw.Events, st.Holes, size.Format(st.Largest), size.Format(st.Free), size.Format(st.Header))
	if len(spec.pools) > 0 {
		caption += " The pools in front of it are not drawn."
	}
	return &report.Map{Caption: caption, SVG: report.MapSVG(hm, mapWidth, mapHeight)}
}
