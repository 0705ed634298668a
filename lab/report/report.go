// Package report writes carve's fragmentation report: one self-contained
// HTML file (no network, no script, no font file) that shows, for each
// trace replayed through each allocator, what the FREENIX paper's Figures 7 and 8
// show (footprint over time against the live-memory line), resident
// memory over time, the fragmentation of each allocator by the headline
// measures (peak footprint / peak live, which is Johnstone and Wilson's
// measure #4, and peak RSS / peak live) and by the FREENIX paper's formula, the
// size histogram and lifetime distribution of the trace (the FREENIX paper's
// Figure 1), the comparison table, and, when given, a map of a heap at
// its peak.
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
	"time"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
)

// Row is one allocator's replay of a trace.
type Row struct {
	Allocator string
	// Measured says how the row was measured: "in process" or "child".
	Measured string
	// Error is why the replay failed, if it did; the other fields are
	// then unset.
	Error string

	Events                              int64
	PeakLive, PeakFootprint             int64
	PeakResident                        int64
	AvgRatio, PeakRatio                 float64 // Johnstone and Wilson's #1 and #4
	Fragmentation                       float64 // the FREENIX paper's, at the end; NaN when live is 0 there
	NsPerOp                             float64
	TraceErrors                         int64
	Series                              []replay.Point
	GrowthPhase                         string // a generated scenario's last phase, or ""
	Growth                              int64  // the footprint's growth in it
	FootprintAtPeakLive, LiveAtPeakFoot int64
}

// RSSRatio returns peak resident / peak live, or NaN.
func (r Row) RSSRatio() float64 {
	if r.PeakLive == 0 || r.PeakResident == 0 {
		return math.NaN()
	}
	return float64(r.PeakResident) / float64(r.PeakLive)
}

// Trace is one trace of the report.
type Trace struct {
	Name string
	// Summary describes the trace (sizes, lifetimes, peak live); nil
	// leaves out its charts.
	Summary *trace.Summary
	Rows    []Row
	// Maps are pictures of heaps (SVG), with a caption each.
	Maps []Map
}

// Map is a heap map to show: an SVG (written by MapSVG, or anything that
// escapes its text) and what it pictures.
type Map struct {
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

// Write writes the report as HTML.
func Write(w io.Writer, r Report) error {
	type view struct {
		Trace
		Table       []tableRow
		Growth      string
		Charts      []chart
		MapCharts   []chart
		SummaryLine string
	}
	var views []view
	for _, t := range r.Traces {
		v := view{Trace: t}
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
			v.SummaryLine = fmt.Sprintf("%d events; requests from %d B to %d B; peak live %s in %d objects; Robson's worst cases for this peak live: first fit ~%s, best fit ~%s",
				s.Events, s.Smallest, s.Largest, byteSize(int64(s.PeakLive)), s.PeakObjects, byteSize(int64(ff)), byteSize(int64(bf)))
		}
		views = append(views, v)
	}
	return page.Execute(w, struct {
		Report
		Views []view
		When  string
	}{r, views, r.Generated.UTC().Format("2006-01-02 15:04 UTC")})
}

// chart is one figure: its SVG and a sentence on how to read it.
type chart struct {
	SVG     template.HTML
	Caption string
	name    string // for a file of its own: footprint, resident, ...
}

// charts makes the figures of one trace.
func charts(t Trace) []chart {
	var out []chart
	var fp, rss []line
	var live line
	var cats []string
	var peak, peakRSS, frag []float64
	anyFrag := false
	for i, r := range t.Rows {
		if r.Error != "" {
			continue
		}
		col := seriesColor(i)
		f := line{name: r.Allocator, color: col}
		rs := line{name: r.Allocator, color: col}
		for _, p := range r.Series {
			f.xs, f.ys = append(f.xs, float64(p.Event)), append(f.ys, float64(p.Footprint))
			rs.xs, rs.ys = append(rs.xs, float64(p.Event)), append(rs.ys, float64(p.Resident))
		}
		if len(live.xs) == 0 && len(r.Series) > 0 {
			live = line{name: "live", color: "#000", dashed: true}
			for _, p := range r.Series {
				live.xs, live.ys = append(live.xs, float64(p.Event)), append(live.ys, float64(p.Live))
			}
		}
		fp, rss = append(fp, f), append(rss, rs)
		cats = append(cats, r.Allocator)
		peak = append(peak, r.PeakRatio)
		peakRSS = append(peakRSS, r.RSSRatio())
		fr := math.NaN()
		if !math.IsNaN(r.Fragmentation) {
			fr, anyFrag = 1+r.Fragmentation/100, true
		}
		frag = append(frag, fr)
	}
	if len(live.xs) > 0 {
		out = append(out,
			chart{template.HTML(lineChart("Footprint over time: "+t.Name, "events", append(fp, live))),
				"Bytes each allocator holds from the OS after each event (the FREENIX paper's Figures 7 and 8), against the bytes the trace has live (dashed). The gap is fragmentation.", "footprint"},
			chart{template.HTML(lineChart("Resident memory over time: "+t.Name, "events", append(rss, live))),
				"Bytes of each allocator's memory in RAM, sampled: its own pages (mincore) in this process, or the anonymous RSS above the baseline for a child process (real mallocs, the Go heap).", "resident"})
	}
	if len(cats) > 0 {
		groups := []barGroup{{"peak fp / peak live", peak}, {"peak RSS / peak live", peakRSS}}
		if anyFrag {
			groups = append(groups, barGroup{"fp / live at the end", frag})
		}
		out = append(out, chart{template.HTML(barChart("Fragmentation by allocator: "+t.Name, "heap / live (1: none)", cats, groups, 1)),
			"How far each heap grew beyond live memory: 1.0 is none, 2.0 twice the live bytes. Peak footprint / peak live is Johnstone and Wilson's measure #4; footprint / live at the end is the FREENIX paper's 1 + fragmentation / 100.", "fragmentation"})
	}
	if s := t.Summary; s != nil {
		labels, sizes, lifes := histBuckets(s)
		out = append(out,
			chart{template.HTML(histogram("Request sizes: "+t.Name, "bytes (power-of-two buckets)", labels, sizes)),
				"How many requests fell in each size bucket (the FREENIX paper's Figure 1).", "sizes"},
			chart{template.HTML(histogram("Lifetimes: "+t.Name, "events from allocation to free (power-of-two buckets)", labels, lifes)),
				"How long the freed objects lived, counted in events; objects live at the end are not counted.", "lifetimes"})
	}
	return out
}

// histBuckets returns the used range of the summary's power-of-two
// histograms, with labels.
func histBuckets(s *trace.Summary) ([]string, []int64, []int64) {
	lo, hi := -1, 0
	for k := range s.Sizes {
		if s.Sizes[k] > 0 || s.Lifetimes[k] > 0 {
			if lo < 0 {
				lo = k
			}
			hi = k
		}
	}
	if lo < 0 {
		return nil, nil, nil
	}
	var labels []string
	for k := lo; k <= hi; k++ {
		switch {
		case k == 0:
			labels = append(labels, "0")
		case k <= 10:
			labels = append(labels, strconv.FormatUint(1<<(k-1), 10))
		default:
			labels = append(labels, countLabelBytes(k))
		}
	}
	return labels, s.Sizes[lo : hi+1], s.Lifetimes[lo : hi+1]
}

// countLabelBytes labels bucket k, which starts at 2^(k-1), compactly.
func countLabelBytes(k int) string {
	v := uint64(1) << (k - 1)
	switch {
	case v >= 1<<30:
		return strconv.FormatUint(v>>30, 10) + "G"
	case v >= 1<<20:
		return strconv.FormatUint(v>>20, 10) + "M"
	}
	return strconv.FormatUint(v>>10, 10) + "k"
}

// tableRow is a row of the comparison table, formatted.
type tableRow struct {
	Allocator, Measured, Error                     string
	PeakLive, PeakFootprint, PeakRatio, AvgRatio   string
	PeakResident, RSSRatio, Fragmentation, NsPerOp string
	Growth, TraceErrors                            string
}

func newTableRow(r Row, growth bool) tableRow {
	t := tableRow{Allocator: r.Allocator, Measured: r.Measured, Error: r.Error}
	if r.Error != "" {
		return t
	}
	t.PeakLive, t.PeakFootprint, t.PeakResident = byteSize(r.PeakLive), byteSize(r.PeakFootprint), byteSize(r.PeakResident)
	t.PeakRatio, t.AvgRatio = ratio(r.PeakRatio), ratio(r.AvgRatio)
	t.RSSRatio = ratio(r.RSSRatio())
	t.Fragmentation = "-"
	if !math.IsNaN(r.Fragmentation) {
		t.Fragmentation = strconv.FormatFloat(r.Fragmentation, 'f', 1, 64) + "%"
	}
	t.NsPerOp = strconv.FormatFloat(r.NsPerOp, 'f', 1, 64)
	if growth {
		t.Growth = byteSize(r.Growth)
	}
	t.TraceErrors = strconv.FormatInt(r.TraceErrors, 10)
	return t
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// byteSize writes a byte count in the unit that suits it.
func byteSize(n int64) string { return bytesLabel(float64(n)) }

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 2em auto; max-width: 960px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2.5em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { padding: 0.25em 0.5em; text-align: right; border-bottom: 1px solid #eee; white-space: nowrap; }
th { white-space: normal; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
td.err { text-align: left; color: #a00; }
figure { margin: 1.5em 0; } figcaption { font-size: 0.85em; color: #555; }
svg.chart { max-width: 100%; height: auto; border: 1px solid #eee; }
.meta { color: #666; font-size: 0.85em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">Made by carve on {{.When}}{{if .Command}} with <code>{{.Command}}</code>{{end}}.
Footprint: the bytes an allocator holds from the OS. Live: the bytes the trace asked for and has not freed.
The headline measures are peak footprint / peak live (Johnstone and Wilson's #4) and peak RSS / peak live; the
FREENIX paper's fragmentation is 100 &times; (footprint / live &minus; 1) at the end of the trace.</p>
{{range .Views}}
<h2 id="{{.Name}}">{{.Name}}</h2>
{{if .SummaryLine}}<p>{{.SummaryLine}}</p>{{end}}
<table>
<tr><th>allocator</th><th>peak live</th><th>peak footprint</th><th>peak fp / live</th><th>avg fp / live</th><th>frag. at end</th>{{if .Growth}}<th>grew in {{.Growth}}</th>{{end}}<th>peak RSS</th><th>peak RSS / live</th><th>ns/op</th><th>trace errors</th><th>measured</th></tr>
{{range .Table}}{{if .Error}}<tr><td>{{.Allocator}}</td><td class="err" colspan="10">{{.Error}}</td></tr>{{else}}<tr><td>{{.Allocator}}</td><td>{{.PeakLive}}</td><td>{{.PeakFootprint}}</td><td>{{.PeakRatio}}</td><td>{{.AvgRatio}}</td><td>{{.Fragmentation}}</td>{{if .Growth}}<td>{{.Growth}}</td>{{end}}<td>{{.PeakResident}}</td><td>{{.RSSRatio}}</td><td>{{.NsPerOp}}</td><td>{{.TraceErrors}}</td><td>{{.Measured}}</td></tr>{{end}}
{{end}}</table>
{{range .Charts}}<figure>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}
{{range .MapCharts}}<figure>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}
{{end}}
</body>
</html>
`))
