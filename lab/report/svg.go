package report

import (
	"fmt"
	lk "github.com/carvelab/carve/lab/internal/look"
	"html"
	"math"
	"strconv"
	"strings"
)

// The charts are SVG written by hand: a few hundred lines of the standard
// library do what the report needs (lines, bars, axes with round ticks,
// legends, marks) with no script, no font file and no dependency, and the
// markup stays small because every series is drawn as one path. They use
// the subset of SVG that png.go rasterizes (the charts' paths M and L
// only, the heap maps' h, v and z too), with presentation attributes
// only.

// Chart geometry, in SVG user units (pixels at 100%).
const (
	chartW   = 900
	chartH   = 360 // a line chart's least height: a long legend makes it taller
	marginL  = 92
	marginR  = 215 // the legend
	marginT  = 34
	marginB  = 50
	plotW    = chartW - marginL - marginR
	fontSize = 12
	legendDY = 17 // between the legend's entries
	// A note above a line chart's plot: its lines' spacing, and the
	// widest a character of it gets (the PNG's fixed face at 12 pixels).
	noteDY, noteCharPx = 16, 7
)

// line is one series of a line chart. A NaN y is a gap in the line.
type line struct {
	name   string
	look   look
	width  float64 // 0: the default
	xs, ys []float64
}

// svgOpen starts a chart with its title, for a screen reader too.
func svgOpen(b *strings.Builder, w, h int, title string) {
	fmt.Fprintf(b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="sans-serif" font-size="%d">`,
		w, h, w, h, esc(title), fontSize)
	fmt.Fprintf(b, `<title>%s</title><rect width="%d" height="%d" fill="#fff"/>`, esc(title), w, h)
	fmt.Fprintf(b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`, marginL, esc(title))
}

func esc(s string) string { return html.EscapeString(s) }

// dashAttr is the stroke-dasharray attribute of a dash pattern, or "".
func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + dash + `"`
}

// niceTicks returns about n round tick values covering [lo, hi]: the
// first at or below lo, the last at or above hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// From the last round value at or below lo to the first at or above
	// hi, so that the axis covers every value; each tick computed from
	// its index, so that no rounding error piles up.
	first := math.Floor(lo/step+1e-9) * step
	var ts []float64
	for i := 0; ; i++ {
		v := first + float64(i)*step
		ts = append(ts, v)
		if v >= hi-step*1e-9 {
			return ts
		}
	}
}

// byteUnit returns the unit for byte counts up to v: its size and name.
func byteUnit(v float64) (float64, string) {
	switch a := math.Abs(v); {
	case a >= 1<<30:
		return 1 << 30, "GiB"
	case a >= 1<<20:
		return 1 << 20, "MiB"
	case a >= 1<<10:
		return 1 << 10, "KiB"
	}
	return 1, "B"
}

// bytesLabel writes a byte count in the unit that suits it, to two
// decimals at most.
func bytesLabel(v float64) string {
	u, name := byteUnit(v)
	return strconv.FormatFloat(math.Round(v/u*100)/100, 'f', -1, 64) + " " + name
}

// byteTicks returns round ticks for a byte axis from 0 to above hi: round
// in the unit the labels use (0, 10, 20 MiB, not 9.54, 19.07).
func byteTicks(hi float64, n int) []float64 {
	u, _ := byteUnit(hi)
	ts := niceTicks(0, hi/u, n)
	for i := range ts {
		ts[i] *= u
	}
	return ts
}

// countLabel writes a count for an axis: 1.5M, 20k, 300.
func countLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// ratioLabel writes a ratio for an axis: 1, 1.05, 1.1 (to six decimals
// at most, so that a tick's rounding error does not show).
func ratioLabel(v float64) string { return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64) }

// phaseMark is the end of a phase of a generated trace, drawn on the time
// charts: a vertical line at the event, the name over the phase's span.
type phaseMark struct {
	name string
	end  float64 // the phase's last event
}

// lineSpec is what a line chart draws.
type lineSpec struct {
	title, xLabel, yLabel string
	lines                 []line
	// ratio draws the y axis from lo to hi (ratios, a reference line at
	// 1), the lines clipped to it; else the axis is bytes from 0 to
	// above the highest point.
	ratio  bool
	lo, hi float64
	phases []phaseMark
	// note is a sentence or two written above the plot, wrapped to its
	// width: what the lines do not show ("" for none).
	note string
}

// lineChart draws series over a shared x axis (events), a legend on the
// right, the marks of the phases, their names above the plot, and the
// note, if any, above them.
func lineChart(c lineSpec) string {
	var b strings.Builder
	n := 0
	for _, l := range c.lines {
		if len(l.xs) > 0 {
			n++
		}
	}
	var xmax, ymax float64
	for _, l := range c.lines {
		for i := range l.xs {
			xmax = max(xmax, l.xs[i])
			if !math.IsNaN(l.ys[i]) {
				ymax = max(ymax, l.ys[i])
			}
		}
	}
	for _, p := range c.phases {
		xmax = max(xmax, p.end)
	}
	if xmax == 0 {
		xmax = 1
	}
	px := func(x float64) float64 { return marginL + x/xmax*plotW }
	labels, rows := phaseLabels(c.phases, px)
	notes := wrap(strings.Fields(c.note), " ", (chartW-marginL-20)/noteCharPx)
	top := marginT + noteDY*len(notes) + 13*rows
	h := max(chartH+noteDY*len(notes)+13*rows, top+8+legendDY*n+marginB-24)
	plotH := h - top - marginB
	svgOpen(&b, chartW, h, c.title)
	for i, l := range notes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#333">%s</text>`, marginL, marginT+4+noteDY*i, esc(l))
	}
	var yt []float64
	ylabel := bytesLabel
	if c.ratio {
		yt, ylabel = niceTicks(c.lo, c.hi, 6), ratioLabel
	} else {
		yt = byteTicks(ymax*1.05, 6)
	}
	ybot, ytop := yt[0], yt[len(yt)-1]
	if ytop <= ybot {
		ytop = ybot + 1
	}
	var xt []float64
	for _, x := range niceTicks(0, xmax, 8) {
		if x <= xmax*1.001 {
			xt = append(xt, x) // no tick past the plot's right edge
		}
	}
	py := func(y float64) float64 { return float64(top+plotH) - (y-ybot)/(ytop-ybot)*float64(plotH) }
	axes(&b, top, h, xt, yt, px, py, countLabel, ylabel, c.xLabel, c.yLabel)
	if c.ratio && ybot < 1 && ytop > 1 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000" stroke-width="1.2" stroke-dasharray="6 4"/>`, marginL, marginL+plotW, py(1), py(1))
	}
	if len(c.phases) > 0 {
		b.WriteString(`<g fill="#555" font-size="11">`)
		for i, p := range c.phases[:len(c.phases)-1] {
			if p.end > 0 && (i == 0 || p.end > c.phases[i-1].end) {
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#777" stroke-dasharray="2 3"/>`, px(p.end), px(p.end), top-13*rows, top+plotH)
			}
		}
		for _, l := range labels {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, l.x, top-4-13*(rows-1-l.row), esc(l.name))
		}
		b.WriteString(`</g>`)
	}
	i := 0
	for _, l := range c.lines {
		if len(l.xs) == 0 {
			continue
		}
		d := polyline(l.xs, l.ys, ybot, ytop, px, py)
		w := l.width
		if w == 0 {
			w = 1.8
		}
		if d != "" {
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="%g"%s><title>%s</title></path>`, d, l.look.Color, w, dashAttr(l.look.Dash), esc(l.name))
		}
		legendItem(&b, top, i, l.name, l.look)
		i++
	}
	b.WriteString("</svg>")
	return b.String()
}

// wrap joins items with sep into lines of at most n characters, each
// item whole (one longer than n gets a line of its own).
func wrap(items []string, sep string, n int) []string {
	var out []string
	line := ""
	for _, w := range items {
		if line != "" && len(line)+len(sep)+len(w) > n {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += sep
		}
		line += w
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// polyline returns the path of the points (xs, ys), broken at NaNs and
// clipped to lo <= y <= hi: a segment that leaves the band is drawn to
// its edge, and the line starts again where it comes back. A point in the
// middle of a level run (the same height, to a tenth of a pixel, as the
// points either side of it) is left out: the path draws the same line.
func polyline(xs, ys []float64, lo, hi float64, px, py func(float64) float64) string {
	var d strings.Builder
	var run [][2]string // the subpath being written, as formatted
	flush := func() {
		for i, p := range run {
			if i > 0 && i < len(run)-1 && run[i-1][1] == p[1] && run[i+1][1] == p[1] {
				continue
			}
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			d.WriteString(cmd + p[0] + " " + p[1])
		}
		run = run[:0]
	}
	point := func(x, y float64) [2]string {
		return [2]string{strconv.FormatFloat(px(x), 'f', 1, 64), strconv.FormatFloat(py(y), 'f', 1, 64)}
	}
	pen := false // the last point drawn is the previous one
	for j := 1; j < len(xs); j++ {
		x0, y0, x1, y1 := xs[j-1], ys[j-1], xs[j], ys[j]
		if math.IsNaN(y0) || math.IsNaN(y1) {
			pen = false
			continue
		}
		t0, t1 := 0.0, 1.0
		if dy := y1 - y0; dy != 0 {
			a, b := (lo-y0)/dy, (hi-y0)/dy
			t0, t1 = max(t0, min(a, b)), min(t1, max(a, b))
		} else if y0 < lo || y0 > hi {
			t0 = 2 // outside all along
		}
		if t0 > t1 {
			pen = false
			continue
		}
		if !pen || t0 > 0 {
			flush()
			run = append(run, point(x0+(x1-x0)*t0, y0+(y1-y0)*t0))
		}
		run = append(run, point(x0+(x1-x0)*t1, y0+(y1-y0)*t1))
		pen = t1 == 1
	}
	flush()
	if len(xs) == 1 && !math.IsNaN(ys[0]) && ys[0] >= lo && ys[0] <= hi {
		fmt.Fprintf(&d, "M%.1f %.1fL%.1f %.1f", px(xs[0]), py(ys[0]), px(xs[0])+1, py(ys[0]))
	}
	return d.String()
}

// phaseLabel is where a phase's name goes: centred over its span, on row
// 0 or, when it would run into the name before it, row 1.
type phaseLabel struct {
	name string
	x    float64
	row  int
}

// phaseLabels places the names of the phases that are not empty, and
// returns how many rows of names they take.
func phaseLabels(phases []phaseMark, px func(float64) float64) ([]phaseLabel, int) {
	var out []phaseLabel
	rows := 0
	start, lastEnd := 0.0, math.Inf(-1)
	for _, p := range phases {
		if p.end <= start {
			continue
		}
		mid := (px(start) + px(p.end)) / 2
		half := float64(len(p.name)) * 3.5 // about half the name's width
		l := phaseLabel{name: p.name, x: mid}
		if mid-half < lastEnd+6 {
			l.row = 1
		} else {
			lastEnd = mid + half
		}
		rows = max(rows, l.row+1)
		out = append(out, l)
		start = p.end
	}
	return out, rows
}

// axes draws the frame, grid, ticks and axis labels of a chart h high
// whose plot starts at top.
func axes(b *strings.Builder, top, h int, xt, yt []float64, px, py func(float64) float64, xl, yl func(float64) string, xLabel, yLabel string) {
	plotH := h - top - marginB
	fmt.Fprintf(b, `<g stroke="#ddd">`)
	for _, y := range yt {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, marginL, marginL+plotW, py(y), py(y))
	}
	b.WriteString(`</g><g fill="#333">`)
	for _, y := range yt {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, marginL-6, py(y), esc(yl(y)))
	}
	for _, x := range xt {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(x), top+plotH+16, esc(xl(x)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, marginL+plotW/2, h-10, esc(xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, top+plotH/2, esc(yLabel))
	fmt.Fprintf(b, `</g><rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`, marginL, top, plotW, plotH)
}

// legendItem draws entry i of a legend on the right of a chart whose
// plot starts at top.
func legendItem(b *strings.Builder, top, i int, name string, l look) {
	x, y := chartW-marginR+14, top+8+i*legendDY
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d" dominant-baseline="middle">%s</text>`,
		x, x+26, y, y, l.Color, dashAttr(l.Dash), x+32, y, esc(name))
}

// barGroup is one measure of a grouped bar chart: a value per category.
type barGroup struct {
	name   string
	color  string
	values []float64 // NaN: no bar
}

// barChart draws horizontal bars: a group of bars (one per measure) for
// each category, the value written at the end of each bar, and a dashed
// reference line at ref (1: no fragmentation).
func barChart(title, unit string, cats []string, groups []barGroup, ref float64) string {
	per := len(groups)
	rowH := 10*per + 12
	h := marginT + marginB + rowH*len(cats)
	var b strings.Builder
	svgOpen(&b, chartW, h, title)
	var vmax float64
	for _, g := range groups {
		for _, v := range g.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vmax = max(vmax, v)
			}
		}
	}
	ticks := niceTicks(0, max(vmax, ref)*1.05, 6)
	top := max(ticks[len(ticks)-1], 1e-9)
	left := 170
	w := chartW - left - marginR
	px := func(v float64) float64 { return float64(left) + v/top*float64(w) }
	fmt.Fprintf(&b, `<g stroke="#ddd">`)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, px(t), px(t), marginT, h-marginB)
	}
	b.WriteString(`</g><g fill="#333">`)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(t), h-marginB+16, ratioLabel(t))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text></g>`, left+w/2, h-12, esc(unit))
	for c, cat := range cats {
		y0 := marginT + c*rowH + 6
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle" fill="#333">%s</text>`, left-6, y0+5*per, esc(cat))
		for g, grp := range groups {
			v := grp.values[c]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			y := y0 + g*10
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="9" fill="%s"><title>%s, %s: %s</title></rect>`,
				left, y, max(px(v)-float64(left), 0.5), grp.color, esc(cat), esc(grp.name), strconv.FormatFloat(v, 'f', 3, 64))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9" dominant-baseline="middle" fill="#333">%s</text>`, px(v)+3, y+5, strconv.FormatFloat(v, 'f', 3, 64))
		}
	}
	if ref > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-dasharray="4 3"/>`, px(ref), px(ref), marginT, h-marginB)
	}
	for g, grp := range groups {
		legendItem(&b, marginT, g, grp.name, look{Color: grp.color})
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/></svg>`, left, marginT, w, h-marginT-marginB)
	return b.String()
}

// histogram draws counts per bucket as vertical bars, the count axis on a
// log scale when the largest count is above 100.
func histogram(title, xLabel string, labels []string, counts []int64) string {
	const plotH = chartH - marginT - marginB
	var b strings.Builder
	svgOpen(&b, chartW, chartH, title)
	var cmax int64
	for _, c := range counts {
		cmax = max(cmax, c)
	}
	logScale := cmax > 100
	val := func(c int64) float64 {
		if logScale {
			return math.Log10(float64(c) + 1)
		}
		return float64(c)
	}
	top := max(val(cmax)*1.05, 1)
	w := float64(plotW+marginR-20) / float64(max(len(counts), 1))
	py := func(v float64) float64 { return marginT + plotH - v/top*plotH }
	fmt.Fprintf(&b, `<g fill="#333">`)
	if logScale {
		for p := 0; float64(p) <= top; p++ {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text><line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`,
				marginL-6, py(float64(p)), countLabel(math.Pow(10, float64(p))), marginL, marginL+plotW+marginR-20, py(float64(p)), py(float64(p)))
		}
	} else {
		for _, t := range niceTicks(0, top, 5) {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, marginL-6, py(t), countLabel(t))
		}
	}
	scale := "count"
	if logScale {
		scale = "count (log scale)"
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text><text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text></g>`,
		marginL+(plotW+marginR-20)/2, chartH-8, esc(xLabel), marginT+plotH/2, scale)
	// Every bucket is labelled: across, or turned a quarter where the
	// longest label (about 6 pixels a character in 9-pixel type) is wider
	// than a bucket.
	longest := 0
	for _, l := range labels {
		longest = max(longest, len(l))
	}
	turned := float64(6*longest+4) > w
	for i, c := range counts {
		x := marginL + float64(i)*w
		if c > 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d</title></rect>`,
				x+1, py(val(c)), max(w-2, 1), marginT+plotH-py(val(c)), lk.Indigo, esc(labels[i]), c)
		}
		if turned {
			fmt.Fprintf(&b, `<text transform="translate(%.1f %d) rotate(-90)" text-anchor="end" dominant-baseline="middle" font-size="9" fill="#333">%s</text>`, x+w/2, marginT+plotH+4, esc(labels[i]))
		} else {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="9" fill="#333">%s</text>`, x+w/2, marginT+plotH+14, esc(labels[i]))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/></svg>`, marginL, marginT, plotW+marginR-20, plotH)
	return b.String()
}
