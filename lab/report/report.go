// Package report writes carve's fragmentation report: one self-contained
// HTML file (no network, no script, no font file) that tells, for each
// trace replayed through each allocator, how far each heap grew beyond the
// memory the trace held, and why.
//
// For each trace: what it is; the comparison table, the headline first
// (peak RSS / peak live, the same measure for every row, the one rows are
// ranked by), then each allocator's own footprint and the ratios made of
// it (Johnstone and Wilson's measures, the FREENIX paper's fragmentation
// at the end), which rank nothing across allocators; the verdict
// (rows.Table.Findings); the fragmentation bars, headline first; peak RSS
// / live over time on an axis zoomed to the band where the rows lie, so
// that rows a few percent apart can be told apart; resident memory and
// footprint over time against the live line (the FREENIX paper's Figures
// 7 and 8), with a generated scenario's phases marked and, for a Go
// trace, the program's own heap from the trace's metrics; the trace's
// size and lifetime histograms (the FREENIX paper's Figure 1); for a trace
// of labelled objects (a Go trace: their types) the table of labels as
// carve stats prints it; and, when given, a map of each heap at its peak,
// with the window of it where free and used memory take turns most often
// drawn zoomed (zoom.go).
// The report closes with every trace's verdict and the sources, named.
//
// The charts are inline SVG written with the standard library. Each
// allocator's series is one path of the points the replay kept
// (replay.Options.Series bounds them however long the trace), so a report
// of a 50-million-event trace is as small as one of a thousand events.
package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// Row is one allocator's replay of a trace.
type Row struct {
	Allocator string
	// Measured says how the row was measured: "in process" or "child".
	Measured string
	// Error is why the replay failed, if it did; the other fields are
	// then unset.
	Error string

	Events   int64
	PeakLive int64
	// PeakRSS and RSSRatio (PeakRSS / PeakLive) are the headline, the
	// same measure for every row (rows.Row's): RSSRatio is NaN when it
	// was not measured. Best marks the row of the lowest RSSRatio.
	PeakRSS  int64
	RSSRatio float64
	Best     bool
	// MarkedRatio is PeakRSS over a Go program's peak marked heap (its
	// trace records its collections), NaN otherwise.
	MarkedRatio float64
	// PeakFootprint is the allocator's own figure, and AvgRatio and
	// PeakRatio (Johnstone and Wilson's #1 and #4) and Fragmentation
	// (the FREENIX paper's, at the end; NaN where it is not reported)
	// are made of it: they compare a row with itself, not with another.
	PeakFootprint       int64
	AvgRatio, PeakRatio float64
	Fragmentation       float64
	NsPerOp             float64
	TraceErrors         int64
	Series              []replay.Point
	GrowthPhase         string // a generated scenario's last phase, or ""
	Growth              int64  // the footprint's growth in it
}

// Phase is a phase of a generated trace: its name and its last event
// (counting from 1).
type Phase struct {
	Name string
	End  int64
}

// Trace is one trace of the report.
type Trace struct {
	Name string
	// About says what the trace is, and the figure its source gives to
	// compare with; "" for a file.
	About string
	// Summary describes the trace (sizes, lifetimes, peak live, its
	// labels); nil leaves out its charts.
	Summary *summary.Trace
	// GoHeap is the program's own heap over the trace, from a Go
	// execution trace's metrics (or a native trace's "g" lines); nil for
	// the other traces.
	GoHeap []trace.GoHeapSample
	// Marked is a Go program's marked heap after each of its collections
	// (rows.Row.Cycles); nil for a trace without them.
	Marked []rows.Cycle
	// ProgramRSS is the recorded program's own RSS as carve record
	// sampled it (traces.Trace.ProcessRSS), ProgramOf the process in
	// words ("the test binary"); nil for a trace without it.
	ProgramRSS []trace.ProcessRSS
	ProgramOf  string
	// Notes are the lines under the table (rows.Table.Notes).
	Notes []string
	// Phases are a generated trace's phases, in order; nil for others.
	Phases []Phase
	Rows   []Row
	// Findings is what the table shows, a clause each (the verdict).
	Findings []string
	// Maps are pictures of heaps (SVG), with a caption each.
	Maps []Map
	// Advice is, for a Go program's trace and carve report --advise, the
	// advisor's result as carve advise prints it (advise.TypeAdvice's
	// WriteText): the types moved, measured, their bounds and the code.
	Advice string
}

// Map is a heap map to show: an SVG (written by MapSVG, or anything that
// escapes its text) and what it pictures.
type Map struct {
	// Name is a short name for a file of its own: the heap's, with
	// "-zoom" for a window of it drawn zoomed ("first-fit-zoom").
	Name    string
	Caption string
	SVG     string
}

// Report is the whole file.
type Report struct {
	Title     string
	Generated time.Time
	// Command is the command line that made the report, shown in it.
	Command string
	Traces  []Trace
}

// maxLabels is how many labels the table of a trace's labels shows, as
// carve stats prints it; the rest share a line.
const maxLabels = 20

// Write writes the report as HTML.
func Write(w io.Writer, r Report) error {
	type view struct {
		Trace
		ID          string
		Table       []tableRow
		Growth      string
		Charts      []chart
		MapCharts   []chart
		SummaryLine string
		Labels      []labelRow
		Sites       []labelRow
	}
	var views []view
	bump := false
	for i, t := range r.Traces {
		v := view{Trace: t, ID: fmt.Sprintf("t%d", i+1)}
		for _, row := range t.Rows {
			if row.GrowthPhase != "" {
				v.Growth = row.GrowthPhase
			}
		}
		for _, row := range t.Rows {
			v.Table = append(v.Table, newTableRow(row, v.Growth != ""))
		}
		v.Charts = charts(t)
		for _, m := range t.Maps {
			// The maps' SVG is the caller's: MapSVG writes it escaped.
			v.MapCharts = append(v.MapCharts, chart{template.HTML(m.SVG), m.Caption, "map"})
		}
		if s := t.Summary; s != nil {
			ff, bf := s.Robson()
			zero := ""
			if s.Zero > 0 {
				zero = " and " + text.Count(s.Zero, "request") + " of 0 B"
			}
			v.SummaryLine = fmt.Sprintf("%s; requests from %s to %s%s; peak live %s in %s; Robson's worst cases for this peak live: first fit ~%s, best fit ~%s.",
				text.Count(s.Events, "event"), size.Format(int64(s.Smallest)), size.Format(int64(s.Largest)), zero, byteSize(int64(s.PeakLive)),
				text.Count(s.PeakObjects, "object"), byteSize(int64(ff)), byteSize(int64(bf)))
			v.Labels = labelRows(s.LabelCells(max(maxLabels, 1)))
			if len(s.Sites) > 0 {
				v.Sites = labelRows(s.SiteCells(max(maxLabels, 1)))
			}
		}
		if name, _, _ := strings.Cut(strings.TrimPrefix(t.Name, traces.GenPrefix), ":"); strings.HasPrefix(t.Name, traces.GenPrefix) && name == "bump" {
			bump = true
		}
		views = append(views, v)
	}
	return page.Execute(w, struct {
		Report
		Views []view
		When  string
		Bump  bool
	}{r, views, r.Generated.UTC().Format("2006-01-02 15:04 UTC"), bump})
}

// tableRow is a row of the comparison table, formatted.
type tableRow struct {
	Allocator, Measured, Error                  string
	Best                                        bool
	PeakLive, PeakRSS, RSSRatio, MarkedRatio    string
	PeakFootprint, PeakRatio, AvgRatio          string
	Fragmentation, Growth, NsPerOp, TraceErrors string
}

func newTableRow(r Row, growth bool) tableRow {
	t := tableRow{Allocator: r.Allocator, Measured: r.Measured, Error: r.Error, Best: r.Best}
	if r.Error != "" {
		return t
	}
	t.PeakLive, t.PeakFootprint = size.Format(r.PeakLive), size.Format(r.PeakFootprint)
	t.PeakRSS, t.RSSRatio = "-", ratio(r.RSSRatio)
	if t.RSSRatio != "-" {
		t.PeakRSS = size.Format(r.PeakRSS)
	}
	t.PeakRatio, t.AvgRatio, t.MarkedRatio = ratio(r.PeakRatio), ratio(r.AvgRatio), ratio(r.MarkedRatio)
	t.Fragmentation = "-"
	if !math.IsNaN(r.Fragmentation) {
		t.Fragmentation = strconv.FormatFloat(r.Fragmentation, 'f', 1, 64) + "%"
	}
	t.NsPerOp = sig3(r.NsPerOp)
	if growth {
		t.Growth = size.Format(r.Growth)
	}
	t.TraceErrors = text.Thousands(r.TraceErrors)
	return t
}

// ratio writes a ratio to three decimals; "-" for none (NaN, or 0: not
// measured).
func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// sig3 writes v to three significant digits, as carve's tables write
// ns/op: 56.6, 126, 2080000.
func sig3(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	d := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if d <= 0 {
		p := math.Pow(10, float64(-d))
		return strconv.FormatFloat(math.Round(v/p)*p, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// byteSize writes a byte count in the unit that suits it.
func byteSize(n int64) string { return bytesLabel(float64(n)) }

// labelRow is a row of the table of a trace's labels, as carve stats
// prints it (summary.Trace.WriteLabels).
type labelRow struct {
	Bytes, Share, Objects, PeakBytes, Allocs, MeanLife, PtrBytes, Size, Name string
}

// labelRows turns the cells of a table of types or sites, as carve stats
// prints them (summary.Trace.LabelCells, SiteCells), into rows.
func labelRows(cells [][]string) []labelRow {
	var out []labelRow
	for _, c := range cells {
		out = append(out, labelRow{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]})
	}
	return out
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 2em auto; max-width: 960px; color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2.5em; border-bottom: 1px solid #ccc; } h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { padding: 0.25em 0.5em; text-align: right; border-bottom: 1px solid #eee; white-space: nowrap; }
th { white-space: normal; background: #f4f4f4; vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
th.head, td.head { background: #eef0fa; }
tr.best td { font-weight: bold; }
td.err { text-align: left; color: #a00; white-space: normal; }
table.labels td:last-child, table.labels th:last-child { text-align: left; white-space: normal; }
figure { margin: 1.5em 0; } figcaption { font-size: 0.85em; color: #555; }
svg.chart { max-width: 100%; height: auto; border: 1px solid #eee; }
.meta, .note { color: #666; font-size: 0.85em; }
.about { font-style: italic; }
.verdict { background: #f6f6f0; border-left: 4px solid #999933; padding: 0.4em 0.8em; }
.verdict ul, .summary ul { margin: 0.2em 0; padding-left: 1.4em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">Made by carve on {{.When}}{{if .Command}} with <code>{{.Command}}</code>{{end}}.</p>
<p>Each trace below was replayed through each allocator. <b>Live</b> memory is the bytes the trace asked for and
has not freed. The <b>headline</b> is <b>peak RSS / peak live</b>: the most resident memory (RAM) the allocator took,
over the most memory the trace held at once; 1.0 is no waste. It is the same measure for every row, and the
one the rows are ranked by. An allocator's <b>footprint</b> is its own figure of the bytes it holds from the OS
(a real malloc's own statistic, carve's heaps' exact count): the ratios made of it
(Johnstone and Wilson's measures; the FREENIX paper's fragmentation, 100 &times; (footprint / live &minus; 1) at the
end) show how each allocator sees itself, and rank nothing across allocators.</p>
{{range .Views}}
<h2 id="{{.ID}}">{{.Name}}</h2>
{{if .About}}<p class="about">{{.About}}</p>{{end}}
{{if .SummaryLine}}<p>{{.SummaryLine}}</p>{{end}}
{{$m := .Marked}}<table class="rows">
<tr><th>allocator</th><th>peak live</th><th class="head">peak RSS</th><th class="head">peak RSS / live (headline)</th>{{if .Marked}}<th>peak RSS / marked heap</th>{{end}}<th>peak footprint (own figure)</th><th>peak fp / live</th><th>avg fp / live</th><th>frag. at end</th>{{if .Growth}}<th>footprint grew in {{.Growth}}</th>{{end}}<th>ns/op</th><th>trace errors</th><th>measured</th></tr>
{{range .Table}}{{if .Error}}<tr><td>{{.Allocator}}</td><td class="err" colspan="11">{{.Error}}</td></tr>{{else}}<tr{{if .Best}} class="best" title="the lowest peak RSS / peak live"{{end}}><td>{{if .Best}}* {{end}}{{.Allocator}}</td><td>{{.PeakLive}}</td><td class="head">{{.PeakRSS}}</td><td class="head">{{.RSSRatio}}</td>{{if $m}}<td>{{.MarkedRatio}}</td>{{end}}<td>{{.PeakFootprint}}</td><td>{{.PeakRatio}}</td><td>{{.AvgRatio}}</td><td>{{.Fragmentation}}</td>{{if .Growth}}<td>{{.Growth}}</td>{{end}}<td>{{.NsPerOp}}</td><td>{{.TraceErrors}}</td><td>{{.Measured}}</td></tr>{{end}}
{{end}}</table>
<p class="note">* marks the lowest headline. frag. at end is left out (-) where live memory at the end is under a tenth of its peak or 1 MiB. ns/op is the time inside the allocator's calls, every call timed, its system calls and page faults included, not the replayer's writes into the blocks.</p>
{{if .Notes}}<ul class="note">{{range .Notes}}<li>{{.}}.</li>{{end}}</ul>{{end}}
{{if .Findings}}<div class="verdict"><b>Verdict</b><ul>{{range .Findings}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
{{range .Charts}}<figure>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}
{{if .Labels}}<h3>Types (labels) by bytes live at the peak</h3>
<table class="labels">
<tr><th>bytes at peak</th><th>share</th><th>objects</th><th>own peak</th><th>allocs</th><th>mean life (events)</th><th>ptr bytes</th><th>size</th><th>label</th></tr>
{{range .Labels}}<tr><td>{{.Bytes}}</td><td>{{.Share}}</td><td>{{.Objects}}</td><td>{{.PeakBytes}}</td><td>{{.Allocs}}</td><td>{{.MeanLife}}</td><td>{{.PtrBytes}}</td><td>{{.Size}}</td><td>{{.Name}}</td></tr>
{{end}}</table>
<p class="note">As carve stats prints it: each label's bytes and objects live at the trace's peak, their share of it, the label's own peak, its allocations, the mean lifetime of its freed objects in events, and, for a Go type, its bytes that may hold pointers and its size.</p>
{{end}}
{{if .Sites}}<h3>Allocation sites by bytes live at the peak</h3>
<table class="labels">
<tr><th>bytes at peak</th><th>share</th><th>objects</th><th>own peak</th><th>allocs</th><th>mean life (events)</th><th>ptr bytes</th><th>size</th><th>site: types</th></tr>
{{range .Sites}}<tr><td>{{.Bytes}}</td><td>{{.Share}}</td><td>{{.Objects}}</td><td>{{.PeakBytes}}</td><td>{{.Allocs}}</td><td>{{.MeanLife}}</td><td>{{.PtrBytes}}</td><td>{{.Size}}</td><td>{{.Name}}</td></tr>
{{end}}</table>
<p class="note">As carve stats --by site prints it: the objects of each call site (carve record of a go test joins its heap profile to the trace by size), with the types allocated there; an object of a size several sites share was given one of them by share, and one of a size the profile does not count none.</p>
{{end}}
{{range .MapCharts}}<figure>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}
{{if .Advice}}<h3>Types to move off the Go heap (carve advise)</h3>
<pre class="advice">{{.Advice}}</pre>
{{end}}
{{end}}
<h2 id="summary">Summary</h2>
<div class="summary">
{{range .Views}}<p><a href="#{{.ID}}"><b>{{.Name}}</b></a>{{if .Findings}}:</p><ul>{{range .Findings}}<li>{{.}}</li>{{end}}</ul>{{else}}: no row measured its headline.</p>{{end}}
{{end}}</div>
<h3>Sources</h3>
<ul class="sources">
<li>The FREENIX paper: Bohra and Gabber, "Are Mallocs Free of Fragmentation?", USENIX Annual Technical Conference, FREENIX track, 2001. Its method is the lab's: one trace through many mallocs, each a black box measured by its heap against live memory; its fragmentation, 100 &times; (heap / live &minus; 1), is the table's frag. at end; its Figures 7 and 8 are the footprint chart, its Figure 1 the size histogram.</li>
<li>Johnstone and Wilson, "The Memory Fragmentation Problem: Solved?", ISMM 1998: the four measures of fragmentation (#1, footprint / live averaged over the trace; #4, peak footprint / peak live), and the finding that best fit and address-ordered first fit stay within about 1% of live memory on real programs.</li>
<li>The block-allocator article, "Block Allocators and Memory Fragmentation": the connection and carving scenarios (holes left by freed buffers between live objects, and what a later request can make of them), the pool that keeps a size apart, and the holes the heap maps show.</li>
{{if .Bump}}<li>The post "Bump Allocator" (30 Sep 2026): the bump scenario, its 5,000,000 objects allocated one after the other and freed in order.</li>
{{end}}<li>Robson, "Worst case fragmentation of first fit and best fit storage allocation strategies", The Computer Journal, 1977: the worst cases quoted for each trace's peak live.</li>
</ul>
</body>
</html>
`))
