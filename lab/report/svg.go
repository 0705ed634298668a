package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The charts are SVG written by hand: a few hundred lines of the standard
// library do what the report needs (lines, bars, axes with round ticks,
// legends) with no script, no font file and no dependency, and the
// markup stays small because every series is drawn as one path.

// palette are the series colours: distinct on white, and in an order in
// which neighbours differ most.
var palette = []string{
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
	"#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#e6c700",
	"#637939", "#843c39", "#3182bd", "#31a354",
}

func seriesColor(i int) string { return palette[i%len(palette)] }

// Chart geometry, in SVG user units (pixels at 100%).
const (
	chartW   = 900
	chartH   = 360
	marginL  = 92
	marginR  = 190 // the legend
	marginT  = 34
	marginB  = 50
	plotW    = chartW - marginL - marginR
	plotH    = chartH - marginT - marginB
	fontSize = 12
)

// line is one series of a line chart.
type line struct {
	name   string
	color  string
	dashed bool
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
	// hi, so that the axis covers every value.
	var ts []float64
	for v := math.Floor(lo/step) * step; ; v += step {
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

// lineChart draws series over a shared x axis (events) with a y axis of
// bytes from 0, and a legend on the right.
func lineChart(title, xLabel string, lines []line) string {
	var b strings.Builder
	svgOpen(&b, chartW, chartH, title)
	var xmax, ymax float64
	for _, l := range lines {
		for i := range l.xs {
			xmax, ymax = max(xmax, l.xs[i]), max(ymax, l.ys[i])
		}
	}
	if xmax == 0 {
		xmax = 1
	}
	yt := byteTicks(ymax*1.05, 6)
	ytop := max(yt[len(yt)-1], 1)
	xt := niceTicks(0, xmax, 8)
	px := func(x float64) float64 { return marginL + x/xmax*plotW }
	py := func(y float64) float64 { return marginT + plotH - y/ytop*plotH }
	axes(&b, xt, yt, px, py, countLabel, bytesLabel, xLabel, "bytes")
	for i, l := range lines {
		if len(l.xs) == 0 {
			continue
		}
		var d strings.Builder
		for j := range l.xs {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, px(l.xs[j]), py(l.ys[j]))
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s><title>%s</title></path>`, d.String(), l.color, dash, esc(l.name))
		legendItem(&b, i, l.name, l.color, l.dashed)
	}
	b.WriteString("</svg>")
	return b.String()
}

// axes draws the frame, grid, ticks and axis labels.
func axes(b *strings.Builder, xt, yt []float64, px, py func(float64) float64, xl, yl func(float64) string, xLabel, yLabel string) {
	fmt.Fprintf(b, `<g stroke="#ddd">`)
	for _, y := range yt {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, marginL, marginL+plotW, py(y), py(y))
	}
	b.WriteString(`</g><g fill="#333">`)
	for _, y := range yt {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, marginL-6, py(y), esc(yl(y)))
	}
	for _, x := range xt {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(x), marginT+plotH+16, esc(xl(x)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, marginL+plotW/2, chartH-10, esc(xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`, marginT+plotH/2, esc(yLabel))
	fmt.Fprintf(b, `</g><rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`, marginL, marginT, plotW, plotH)
}

// legendItem draws entry i of a legend on the right of a chart.
func legendItem(b *strings.Builder, i int, name, col string, dashed bool) {
	x, y := chartW-marginR+14, marginT+8+i*18
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d" dominant-baseline="middle">%s</text>`,
		x, x+22, y, y, col, dash, x+28, y, esc(name))
}

// barGroup is one measure of a grouped bar chart: a value per category.
type barGroup struct {
	name   string
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
	left := 130
	w := chartW - left - marginR
	px := func(v float64) float64 { return float64(left) + v/top*float64(w) }
	fmt.Fprintf(&b, `<g stroke="#ddd">`)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, px(t), px(t), marginT, h-marginB)
	}
	b.WriteString(`</g><g fill="#333">`)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(t), h-marginB+16, strconv.FormatFloat(t, 'f', -1, 64))
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
				left, y, max(px(v)-float64(left), 0.5), seriesColor(g), esc(cat), esc(grp.name), strconv.FormatFloat(v, 'f', 3, 64))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9" dominant-baseline="middle" fill="#333">%s</text>`, px(v)+3, y+5, strconv.FormatFloat(v, 'f', 2, 64))
		}
	}
	if ref > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-dasharray="4 3"/>`, px(ref), px(ref), marginT, h-marginB)
	}
	for g, grp := range groups {
		legendItem(&b, g, grp.name, seriesColor(g), false)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/></svg>`, left, marginT, w, h-marginT-marginB)
	return b.String()
}

// histogram draws counts per bucket as vertical bars, the count axis on a
// log scale when the largest count is above 100.
func histogram(title, xLabel string, labels []string, counts []int64) string {
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
	for i, c := range counts {
		x := marginL + float64(i)*w
		if c > 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d</title></rect>`,
				x+1, py(val(c)), max(w-2, 1), marginT+plotH-py(val(c)), palette[0], esc(labels[i]), c)
		}
		if i%2 == 0 || len(counts) <= 16 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="9" fill="#333">%s</text>`, x+w/2, marginT+plotH+14, esc(labels[i]))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/></svg>`, marginL, marginT, plotW+marginR-20, plotH)
	return b.String()
}
