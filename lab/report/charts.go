package report

import (
	"fmt"
	lk "github.com/carvelab/carve/lab/internal/look"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
)

// chart is one figure: its SVG and a sentence on how to read it.
type chart struct {
	SVG     template.HTML
	Caption string
	name    string // for a file of its own: fragmentation, rss-ratio, ...
}

// The looks of the reference lines: live memory, and a Go program's own
// heap from its trace's metrics.
var (
	liveLook   = look{Color: "#000", Dash: "6 4"}
	heapLook   = look{Color: "#000", Dash: "1 3"}
	goalLook   = look{Color: "#777", Dash: "9 3 2 3"}
	markedLook = look{Color: "#000", Dash: ""}
	rssLook    = look{Color: "#777", Dash: ""}
	headColour = lk.Indigo // the headline's bars
)

// charts makes the figures of one trace, in the order the report tells
// its story: the fragmentation bars (the headline first), the headline's
// ratio over time on a zoomed axis, resident memory and footprint over
// time, and the trace's histograms.
func charts(t Trace) []chart {
	var ok []Row
	for _, r := range t.Rows {
		if r.Error == "" {
			ok = append(ok, r)
		}
	}
	var names []string
	for _, r := range ok {
		names = append(names, r.Allocator)
	}
	lks := looks(names)
	var marks []phaseMark
	for _, p := range t.Phases {
		marks = append(marks, phaseMark{p.Name, float64(p.End)})
	}
	phaseNote := ""
	if len(marks) > 0 {
		phaseNote = " The dotted vertical lines end the scenario's phases, each named over its span."
	}

	var out []chart
	if len(ok) > 0 {
		out = append(out, fragmentationChart(t.Name, ok))
	}
	if c, drawn := ratioChart(t.Name, ok, lks, marks); drawn {
		c.Caption += phaseNote
		out = append(out, c)
	}
	live := liveLine(ok)
	heap := goHeapLines(t.GoHeap)
	heapNote := ""
	if len(heap) > 0 {
		heapNote = " The dotted black line is the program's own heap as its Go runtime reported it in the trace's metrics (/memory/classes/heap/objects:bytes: the heap's objects, dead ones not yet swept included), the grey one the collector's heap goal (/gc/heap/goal:bytes), each at the event where the runtime reported it."
	}
	marked, program := markedLine(t.Marked), programLine(t.ProgramRSS)
	if len(marked.xs) > 0 {
		heapNote += " The thin solid black line is the marked heap: what each of the program's collections found reachable, at the event where its mark ended."
	}
	if len(program.xs) > 0 {
		heapNote += " The solid grey line is the program's own resident memory (VmRSS of " + t.ProgramOf + ") as carve record sampled it, placed by the trace's clock: where the rows' resident memory stands against the real process's."
	}
	if len(live.xs) > 0 {
		var fp, rss []line
		for i, r := range ok {
			f, rs := line{name: r.Allocator, look: lks[i]}, line{name: r.Allocator, look: lks[i]}
			for _, p := range r.Series {
				f.xs, f.ys = append(f.xs, float64(p.Event)), append(f.ys, float64(p.Footprint))
				rs.xs, rs.ys = append(rs.xs, float64(p.Event)), append(rs.ys, float64(p.Resident))
			}
			fp, rss = append(fp, f), append(rss, rs)
		}
		refs := append([]line{live}, heap...)
		if len(marked.xs) > 0 {
			refs = append(refs, marked)
		}
		rssRefs := refs
		if len(program.xs) > 0 {
			rssRefs = append(slices.Clip(refs), program)
		}
		out = append(out,
			chart{template.HTML(lineChart(lineSpec{title: "Resident memory over time: " + t.Name, xLabel: "events", yLabel: "bytes",
				lines: append(rss, rssRefs...), phases: marks})),
				"Each allocator's resident memory (RAM) over time, sampled: for carve's heaps in this process the pages of their regions in RAM (mincore), for a row in a child process of its own (the real mallocs, the Go heap) the child's anonymous RSS above its baseline; the highest point of each line is the table's peak RSS. The dashed line is live memory." + heapNote + phaseNote, "resident"},
			chart{template.HTML(lineChart(lineSpec{title: "Footprint over time (each allocator's own figure): " + t.Name, xLabel: "events", yLabel: "bytes",
				lines: append(fp, refs...), phases: marks})),
				"The bytes each allocator holds from the OS after each event, by its own count (the FREENIX paper's Figures 7 and 8), against live memory (dashed). A real malloc's figure is its own statistic, carve's heaps' their exact count, the Go heap's the runtime's: the lines show how each allocator sees itself, and rank nothing across allocators." + heapNote + phaseNote, "footprint"})
	}
	if s := t.Summary; s != nil {
		labels, sizes := histBuckets(s.Sizes[:])
		out = append(out, chart{template.HTML(histogram("Request sizes: "+t.Name, "bytes (power-of-two buckets, each labelled with its least size)", labels, sizes)),
			"How many requests fell in each size bucket (the FREENIX paper's Figure 1).", "sizes"})
		if labels, lifes := histBuckets(s.Lifetimes[:]); len(lifes) > 0 {
			out = append(out, chart{template.HTML(histogram("Lifetimes: "+t.Name, "events from allocation to free (power-of-two buckets, each labelled with its least)", labels, lifes)),
				"How long the freed objects lived, counted in events; objects live at the end are not counted.", "lifetimes"})
		}
	}
	return out
}

// fragmentationChart draws the bars of each row: the headline first, then
// the ratios of the allocator's own footprint.
func fragmentationChart(name string, rs []Row) chart {
	var cats []string
	var head, peak, end []float64
	anyEnd := false
	for _, r := range rs {
		cat := r.Allocator
		if r.Best {
			cat = "* " + cat
		}
		cats = append(cats, cat)
		head = append(head, orNaN(r.RSSRatio))
		peak = append(peak, orNaN(r.PeakRatio))
		e := math.NaN()
		if !math.IsNaN(r.Fragmentation) {
			e, anyEnd = 1+r.Fragmentation/100, true
		}
		end = append(end, e)
	}
	groups := []barGroup{{"peak RSS / live", headColour, head}, {"peak fp / live", lk.Cyan, peak}}
	if anyEnd {
		groups = append(groups, barGroup{"fp / live at end", lk.Sand, end})
	}
	return chart{template.HTML(barChart("Fragmentation by allocator: "+name, "heap / live (1: none)", cats, groups, 1)),
		"How far each heap grew beyond live memory: 1.0 is none, 2.0 twice the live bytes. The first bar of each row, peak RSS / peak live, is the headline: the same measure for every row, and the one the rows are ranked by (* marks the lowest). The others are made of each allocator's own figure of its footprint (peak footprint / peak live is Johnstone and Wilson's measure #4; footprint / live at the end the FREENIX paper's 1 + fragmentation / 100, left out where live memory at the end is too small for it to mean anything): each allocator's own view of itself, they rank nothing across allocators.", "fragmentation"}
}

// orNaN returns v, or NaN for 0 (not measured).
func orNaN(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

// ratioChart draws the headline as the replay goes: each row's most
// resident memory so far over the most live memory so far, from where the
// latter reaches a tenth of its peak, on an axis zoomed to the band where
// the rows' headlines lie. Each line ends at its row's headline. It
// reports false when no row has a point to draw.
func ratioChart(name string, rs []Row, lks []look, marks []phaseMark) (chart, bool) {
	var peakLive int64
	for _, r := range rs {
		for _, p := range r.Series {
			peakLive = max(peakLive, p.Live)
		}
	}
	floor := max(peakLive/10, 1)
	var lines []line
	var heads []float64
	lo := 1.0
	drawn := false
	for i, r := range rs {
		// A point is drawn where a new sample of resident memory came in
		// (its figure changed), and at the end: between samples, resident
		// memory lags the live bytes, and the ratio would saw.
		l := line{name: r.Allocator, look: lks[i]}
		var live, rss, last int64
		for j, p := range r.Series {
			live, rss = max(live, p.Live), max(rss, p.Resident)
			fresh := p.Resident != last || j == len(r.Series)-1
			last = p.Resident
			if fresh && live >= floor && rss > 0 {
				y := float64(rss) / float64(live)
				lo, drawn = min(lo, y), true
				l.xs, l.ys = append(l.xs, float64(p.Event)), append(l.ys, y)
			}
		}
		lines = append(lines, l)
		if r.RSSRatio > 0 && !math.IsNaN(r.RSSRatio) {
			heads = append(heads, r.RSSRatio)
		}
	}
	if !drawn || len(heads) == 0 {
		return chart{}, false
	}
	slices.Sort(heads)
	med := heads[len(heads)/2]
	if len(heads)%2 == 0 {
		med = (heads[len(heads)/2-1] + heads[len(heads)/2]) / 2
	}
	// The band: from 1.0 (or the lowest point, but never more than a
	// quarter of the band below 1.0, unless a headline is) to one and a
	// half times the median headline's distance above 1.0, and at least
	// past the lowest headline: the better half of the rows, where they
	// are closest.
	hi := max(1+1.5*(med-1), heads[0]*1.02, 1.05)
	lo = min(max(lo, 1-(hi-1)/4), heads[0]*0.98)
	ticks := niceTicks(lo, hi, 6)
	lo, hi = ticks[0], ticks[len(ticks)-1]
	var above, below []string
	for i, l := range lines {
		top, bot := math.Inf(-1), math.Inf(1)
		for _, y := range l.ys {
			if !math.IsNaN(y) {
				top, bot = max(top, y), min(bot, y)
			}
		}
		if top > hi {
			above = append(above, l.name+" (ends at "+ratio(rs[i].RSSRatio)+")")
		}
		if bot < lo {
			below = append(below, l.name)
		}
	}
	caption := fmt.Sprintf("The headline as the replay goes: each allocator's most resident memory so far over the most live memory so far, at each sample of resident memory from where live memory reaches a tenth of its peak (%s); each line ends at its row's peak RSS / peak live. The axis is zoomed to the band where the rows lie, %s to %s, so that rows a few percent apart can be told apart; the dashed line is 1.0, no waste.",
		byteSize(floor), ratioLabel(lo), ratioLabel(hi))
	// The rows whose lines leave the band: in the caption, and in the
	// chart itself, whose legend names them with no line in sight (a
	// PNG of the chart has no caption).
	note := outsideBand(above, below)
	if note != "" {
		caption += " " + note
	}
	svg := lineChart(lineSpec{title: "Peak RSS / peak live so far, zoomed: " + name, xLabel: "events", yLabel: "peak resident / peak live",
		lines: lines, ratio: true, lo: lo, hi: hi, phases: marks, note: note})
	return chart{template.HTML(svg), caption, "rss-ratio"}, true
}

// outsideBand says which rows' lines leave the zoomed band, above (each
// with its headline) and below; "" when none do.
func outsideBand(above, below []string) string {
	var s []string
	if len(above) > 0 {
		s = append(s, "Above the band for part of the trace or all of it: "+strings.Join(above, ", ")+".")
	}
	if len(below) > 0 {
		s = append(s, "Below it at times: "+strings.Join(below, ", ")+".")
	}
	return strings.Join(s, " ")
}

// liveLine is the trace's live memory over time, from the first row's
// series (every row replays the same events).
func liveLine(rs []Row) line {
	l := line{name: "live", look: liveLook, width: 2}
	for _, r := range rs {
		if len(r.Series) == 0 {
			continue
		}
		for _, p := range r.Series {
			l.xs, l.ys = append(l.xs, float64(p.Event)), append(l.ys, float64(p.Live))
		}
		break
	}
	return l
}

// markedLine is a Go program's marked heap after each collection, at
// most 2 × Series points: the cycles of each stretch of events merged,
// their maxima kept.
func markedLine(cycles []rows.Cycle) line {
	l := line{name: "marked heap", look: markedLook, width: 1.4}
	xs, ys := make([]int64, len(cycles)), make([]uint64, len(cycles))
	for i, c := range cycles {
		xs[i], ys[i] = c.Event, uint64(max(c.Marked, 0))
	}
	l.xs, l.ys = stretches(xs, ys)
	return l
}

// programLine is the recorded program's RSS where its samples are
// placed among the events, at most 2 × Series points.
func programLine(samples []trace.ProcessRSS) line {
	l := line{name: "program's RSS", look: rssLook, width: 2}
	var xs []int64
	var ys []uint64
	for _, s := range samples {
		if s.Event >= 0 {
			xs, ys = append(xs, s.Event), append(ys, s.RSS)
		}
	}
	l.xs, l.ys = stretches(xs, ys)
	return l
}

// stretches merges the points (xs in order) of each of about Series
// stretches of events into one, the last x and the largest y of the
// stretch.
func stretches(xs []int64, ys []uint64) (px, py []float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	width := xs[len(xs)-1]/Series + 1
	for i := 0; i < len(xs); {
		stretch := xs[i] / width
		var y uint64
		x := xs[i]
		for ; i < len(xs) && xs[i]/width == stretch; i++ {
			y, x = max(y, ys[i]), xs[i]
		}
		px, py = append(px, float64(x)), append(py, float64(y))
	}
	return px, py
}

// goHeapLines are a Go program's own heap (its objects' bytes, and the
// heap goal) from its trace's metrics, at most 2 × Series points each: the
// samples of each stretch of events merged, their maxima kept.
func goHeapLines(samples []trace.GoHeapSample) []line {
	if len(samples) == 0 {
		return nil
	}
	width := samples[len(samples)-1].Events/Series + 1
	obj := line{name: "program's heap", look: heapLook, width: 2}
	goal := line{name: "its heap goal", look: goalLook, width: 1.4}
	for i := 0; i < len(samples); {
		stretch := samples[i].Events / width
		var o, g uint64
		x := samples[i].Events
		for ; i < len(samples) && samples[i].Events/width == stretch; i++ {
			o, g, x = max(o, samples[i].Objects), max(g, samples[i].Goal), samples[i].Events
		}
		obj.xs, obj.ys = append(obj.xs, float64(x)), append(obj.ys, reported(o))
		goal.xs, goal.ys = append(goal.xs, float64(x)), append(goal.ys, reported(g))
	}
	return []line{obj, goal}
}

// reported returns a metric's value, or NaN (a gap in its line) for 0:
// not reported yet.
func reported(v uint64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return float64(v)
}

// histBuckets returns the buckets of a power-of-two histogram h, as
// summary.Trace keeps them (h[0] counts zeros, h[k] the values from
// 2^(k-1) to 2^k - 1), from the first that counts anything to the last,
// each labelled with its least value: a bucket of zeros only where there
// are zeros (a request of 0 B), none before the smallest value.
func histBuckets(h []int64) ([]string, []int64) {
	lo, hi := -1, 0
	for k, n := range h {
		if n > 0 {
			if lo < 0 {
				lo = k
			}
			hi = k
		}
	}
	if lo < 0 {
		return nil, nil
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
	return labels, h[lo : hi+1]
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
