package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// The rows of the lab's scenario tables: every allocator, and carve's
// heaps and the Go heap behind a pool as well.
var scenarioRows = []string{
	"first-fit", "first-fit+pool(1024)", "next-fit", "next-fit+pool(1024)", "best-fit", "best-fit+pool(1024)",
	"ao-first-fit", "ao-first-fit+pool(1024)", "buddy", "buddy+pool(1024)", "buddy-header", "buddy-header+pool(1024)",
	"sizeclass", "sizeclass+pool(1024)", "go", "go+pool(1024)", "glibc", "jemalloc", "tcmalloc", "mimalloc",
}

func colourOf(t *testing.T, hex string) color.RGBA {
	c, ok := parseColor(hex)
	if !ok {
		t.Fatalf("colour %q", hex)
	}
	return c
}

func distance(a, b color.RGBA) float64 {
	dr, dg, db := float64(a.R)-float64(b.R), float64(a.G)-float64(b.G), float64(a.B)-float64(b.B)
	return math.Sqrt(dr*dr + dg*dg + db*db)
}

// TestLooks: every row of a chart is drawn its own way, for the lab's 20
// rows and for 24 rows of unknown names; the rows the shipped trace
// compares have five colours, solid; glibc's and mimalloc's colours are
// far apart; a pooled row keeps its allocator's colour.
func TestLooks(t *testing.T) {
	var unknown []string
	for i := range 24 {
		unknown = append(unknown, fmt.Sprintf("heap%d", i))
	}
	for _, names := range [][]string{scenarioRows, unknown, append(scenarioRows, "go(gogc=50)", "mystery")} {
		seen := map[look]string{}
		for i, l := range looks(names) {
			if other, ok := seen[l]; ok {
				t.Errorf("%s and %s are both drawn %v", other, names[i], l)
			}
			seen[l] = names[i]
		}
	}
	ls := looks(scenarioRows)
	byName := map[string]look{}
	for i, l := range ls {
		byName[scenarioRows[i]] = l
	}
	story := map[string]bool{}
	for _, name := range []string{"first-fit", "next-fit", "best-fit", "ao-first-fit", "glibc"} {
		l := byName[name]
		if l.Dash != "" {
			t.Errorf("%s is dashed (%q), want solid", name, l.Dash)
		}
		story[l.Color] = true
	}
	if len(story) != 5 {
		t.Errorf("the fit policies and glibc have %d colours, want 5", len(story))
	}
	if d := distance(colourOf(t, byName["glibc"].Color), colourOf(t, byName["mimalloc"].Color)); d < 120 {
		t.Errorf("glibc's colour %s and mimalloc's %s are %.0f apart in RGB, want 120 or more", byName["glibc"].Color, byName["mimalloc"].Color, d)
	}
	for _, name := range scenarioRows {
		if base, _, ok := strings.Cut(name, "+pool("); ok && byName[name].Color != byName[base].Color {
			t.Errorf("%s is %s, its allocator %s", name, byName[name].Color, byName[base].Color)
		}
	}
}

var pathRE = regexp.MustCompile(`<path d="([^"]*)"[^>]*><title>([^<]*)</title>`)

// paths returns the points of each titled path of an SVG, by title, each
// subpath (M) a slice of its own.
func paths(svg string) map[string][][][2]float64 {
	out := map[string][][][2]float64{}
	for _, m := range pathRE.FindAllStringSubmatch(svg, -1) {
		out[m[2]] = parsePath(m[1])
	}
	return out
}

// TestRatioChart: rows a percent apart end a few pixels apart or more on
// the zoomed chart, each line ends at its row's headline, a row far
// above the band is clipped and named in the caption, and every point is
// inside the plot.
func TestRatioChart(t *testing.T) {
	row := func(name string, rss float64) Row {
		var ps []replay.Point
		for i := int64(1); i <= 200; i++ {
			live := 1000 * min(i, 150)
			ps = append(ps, replay.Point{Event: i * 10, Live: live, Resident: int64(float64(1000*min(i, 150)) * rss * (1 + 0.2/float64(i)))})
		}
		peak := ps[149].Resident
		for _, p := range ps {
			peak = max(peak, p.Resident)
		}
		return Row{Allocator: name, PeakLive: 150000, PeakRSS: peak, RSSRatio: float64(peak) / 150000, Series: ps}
	}
	rs := []Row{row("best-fit", 1.12), row("glibc", 1.13), row("buddy", 1.4), row("go", 3)}
	c, ok := ratioChart("t", rs, looks([]string{"best-fit", "glibc", "buddy", "go"}), nil)
	if !ok {
		t.Fatal("no chart")
	}
	svg := string(c.SVG)
	ps := paths(svg)
	last := func(name string) [2]float64 {
		subs := ps[name]
		if len(subs) == 0 {
			t.Fatalf("no path for %s", name)
		}
		s := subs[len(subs)-1]
		return s[len(s)-1]
	}
	bf, gl := last("best-fit"), last("glibc")
	if gap := bf[1] - gl[1]; gap < 5 {
		t.Errorf("best-fit (1.12) and glibc (1.13) end %.1f pixels apart, want 5 or more", gap)
	}
	if !strings.Contains(c.Caption, "go (ends at "+ratio(rs[3].RSSRatio)+")") {
		t.Errorf("the caption does not name go above the band: %s", c.Caption)
	}
	// The plot's frame is the last rect drawn before the lines.
	frame := regexp.MustCompile(`<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" fill="none"`).FindStringSubmatch(svg)
	y0, _ := strconv.ParseFloat(frame[2], 64)
	h, _ := strconv.ParseFloat(frame[4], 64)
	for name, subs := range ps {
		for _, s := range subs {
			for _, p := range s {
				if p[1] < y0-0.1 || p[1] > y0+h+0.1 {
					t.Errorf("%s: point %v outside the plot (y from %g to %g)", name, p, y0, y0+h)
				}
			}
		}
	}
	// The line ends at the headline: the last point's height is the
	// headline's on the axis (read from two of its ticks).
	ticks := regexp.MustCompile(fmt.Sprintf(`<text x="%d" y="([\d.]+)" text-anchor="end" dominant-baseline="middle">([\d.]+)</text>`, marginL-6)).FindAllStringSubmatch(svg, -1)
	if len(ticks) < 2 {
		t.Fatalf("axis ticks: %v", ticks)
	}
	ya, _ := strconv.ParseFloat(ticks[0][1], 64)
	va, _ := strconv.ParseFloat(ticks[0][2], 64)
	yb, _ := strconv.ParseFloat(ticks[1][1], 64)
	vb, _ := strconv.ParseFloat(ticks[1][2], 64)
	at := va + (bf[1]-ya)/(yb-ya)*(vb-va)
	if math.Abs(at-rs[0].RSSRatio) > 0.002 {
		t.Errorf("best-fit's line ends at %.4f, its headline is %.4f", at, rs[0].RSSRatio)
	}
}

// TestPolyline: a line that leaves the band is cut at its edges and starts
// again where it comes back; NaNs are gaps.
func TestPolyline(t *testing.T) {
	id := func(v float64) float64 { return v }
	for _, tc := range []struct {
		ys   []float64
		subs int
	}{
		{[]float64{1, 1.5, 1.2}, 1},
		{[]float64{1, 3, 1}, 2},                    // out over the top and back
		{[]float64{1, 1.5, math.NaN(), 1, 1.2}, 2}, // a gap
		{[]float64{3, 4, 5}, 0},                    // above all along
		{[]float64{-1, 1}, 1},                      // comes in from below
	} {
		xs := make([]float64, len(tc.ys))
		for i := range xs {
			xs[i] = float64(i)
		}
		d := polyline(xs, tc.ys, 0, 2, id, id)
		subs := parsePath(d)
		if d == "" {
			subs = nil
		}
		if got := len(subs); got != tc.subs {
			t.Errorf("polyline(%v) = %q: %d subpaths, want %d", tc.ys, d, len(subs), tc.subs)
		}
		for _, s := range subs {
			for _, p := range s {
				if p[1] < 0 || p[1] > 2 {
					t.Errorf("polyline(%v) = %q: y %g outside [0, 2]", tc.ys, d, p[1])
				}
			}
		}
	}
}

// TestPhaseMarks: a generated trace's phases are marked on the time
// charts, each named, an empty phase neither marked nor named.
func TestPhaseMarks(t *testing.T) {
	tr := fakeReport().Traces[0]
	tr.Phases = []Phase{{"setup", 400}, {"scratch freed", 600}, {"small objects", 600}, {"second wave", 1000}}
	for _, c := range charts(tr) {
		if c.name != "resident" && c.name != "footprint" && c.name != "rss-ratio" {
			continue
		}
		svg := string(c.SVG)
		for _, name := range []string{"setup", "scratch freed", "second wave"} {
			if !strings.Contains(svg, ">"+name+"</text>") {
				t.Errorf("%s chart: no phase named %q", c.name, name)
			}
		}
		if strings.Contains(svg, "small objects") {
			t.Errorf("%s chart: the empty phase is named", c.name)
		}
		if n := strings.Count(svg, `stroke="#777" stroke-dasharray="2 3"`); n != 2 {
			t.Errorf("%s chart: %d phase marks, want 2 (the ends of setup and scratch freed)", c.name, n)
		}
		if !strings.Contains(c.Caption, "phases") {
			t.Errorf("%s chart: the caption does not say what the marks are", c.name)
		}
	}
}

// TestGoHeapLines: the program's own heap is drawn on the time charts
// beside the replays, in at most about 2 × Series points, its peak kept.
func TestGoHeapLines(t *testing.T) {
	tr := fakeReport().Traces[0]
	var peak uint64
	for i := range int64(5000) {
		s := trace.GoHeapSample{Events: i / 5, Objects: uint64(1000 + (i*7919)%3000), Goal: 4096}
		if i == 2345 {
			s.Objects = 9999
		}
		peak = max(peak, s.Objects)
		tr.GoHeap = append(tr.GoHeap, s)
	}
	ls := goHeapLines(tr.GoHeap)
	if len(ls) != 2 || len(ls[0].xs) > 2*Series+2 {
		t.Fatalf("goHeapLines: %d lines, %d points", len(ls), len(ls[0].xs))
	}
	top := 0.0
	for _, y := range ls[0].ys {
		top = max(top, y)
	}
	if top != float64(peak) {
		t.Errorf("the program's heap peaks at %g, its samples at %d", top, peak)
	}
	for _, c := range charts(tr) {
		if c.name == "resident" || c.name == "footprint" {
			ps := paths(string(c.SVG))
			if len(ps[esc("program's heap")]) == 0 || len(ps["its heap goal"]) == 0 {
				t.Errorf("%s chart: no line of the program's heap", c.name)
			}
			if !strings.Contains(c.Caption, "/memory/classes/heap/objects:bytes") {
				t.Errorf("%s chart: the caption does not name the metric", c.name)
			}
		}
	}
}

// TestLabelRows: the report's table of labels has the figures carve stats
// prints (summary.Trace.WriteLabels), row for row, for the labelled Go
// trace of the trace package's tests.
func TestLabelRows(t *testing.T) {
	f, err := os.Open("../trace/testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f, "go.trace", trace.Auto)
	if err != nil {
		t.Fatal(err)
	}
	s, err := summary.Of(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Labels) <= maxLabels {
		t.Fatalf("%d labels: the test wants more than %d", len(s.Labels), maxLabels)
	}
	var b bytes.Buffer
	if err := s.WriteLabels(&b, maxLabels); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:] // after the heading
	rows := labelRows(s.LabelCells(maxLabels))
	if len(rows) != len(lines) {
		t.Fatalf("%d rows in the report, %d in carve stats", len(rows), len(lines))
	}
	for i, l := range lines {
		rw := rows[i]
		var cells []string
		for _, c := range []string{rw.Bytes, rw.Share, rw.Objects, rw.PeakBytes, rw.Allocs, rw.MeanLife, rw.PtrBytes, rw.Size, rw.Name} {
			if c != "" {
				cells = append(cells, c)
			}
		}
		if got, want := strings.Join(cells, " "), strings.Join(strings.Fields(l), " "); got != want {
			t.Errorf("row %d:\nreport %s\nstats  %s", i, got, want)
		}
	}
}

// TestSummarizeGoHeap: Summarize keeps the Go heap's samples of a trace
// that has them, and none for a trace without.
func TestSummarizeGoHeap(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int // samples; -1: at least one
	}{
		{"../trace/testdata/labelled/native-v2.trace", 2},
		{"../trace/testdata/labelled/go.trace", -1},
		{"gen:connection:n=100", 0},
	} {
		tr, err := traces.Resolve(tc.arg)
		if err != nil {
			t.Fatal(err)
		}
		sums := Summarize([]traces.Trace{tr})
		if sums[0] == nil {
			t.Fatalf("%s: no summary", tc.arg)
		}
		n := len(sums[0].GoHeap)
		if tc.want >= 0 && n != tc.want || tc.want < 0 && n == 0 {
			t.Errorf("%s: %d samples of the Go heap, want %d", tc.arg, n, tc.want)
		}
		if tc.want == 2 && (sums[0].GoHeap[0] != trace.GoHeapSample{Events: 1, Objects: 4096, Goal: 8192}) {
			t.Errorf("%s: first sample %+v", tc.arg, sums[0].GoHeap[0])
		}
	}
}

// TestHistograms: every bucket of the size and lifetime histograms is
// labelled with its least value, from the first bucket that counts
// anything to the last; the bucket of 0 B only where there are requests
// of 0 B; labels too many to fit across are turned a quarter.
func TestHistograms(t *testing.T) {
	label := regexp.MustCompile(`<text (x="[\d.]+" y="\d+"|transform="translate\([\d.]+ \d+\) rotate\(-90\)") text-anchor="(?:middle|end)"(?: dominant-baseline="middle")? font-size="9" fill="#333">([^<]*)</text>`)
	for _, tc := range []struct {
		name   string
		sizes  []uint64 // allocated in turn, each freed after the next is allocated
		labels []string // of the sizes' histogram
		lives  []string // of the lifetimes'
		turned bool
	}{
		{"from 1 B", []uint64{1, 3, 100}, []string{"1", "2", "4", "8", "16", "32", "64"}, []string{"2"}, false},
		{"a request of 0 B", []uint64{0, 8}, []string{"0", "1", "2", "4", "8"}, []string{"2"}, false},
		{"from 8 B", []uint64{8, 2048}, []string{"8", "16", "32", "64", "128", "256", "512", "1k", "2k"}, []string{"2"}, false},
		{"1 B to 1 TiB", []uint64{1, 1 << 40}, nil, []string{"2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("# carve trace v1\n")
			for i, n := range tc.sizes {
				fmt.Fprintf(&b, "a %d %d\n", i+1, n)
				if i > 0 {
					fmt.Fprintf(&b, "f %d\n", i)
				}
			}
			r, err := trace.NewReader(strings.NewReader(b.String()), "h", trace.Native)
			if err != nil {
				t.Fatal(err)
			}
			s, err := summary.Of(r)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			turned := map[string]bool{}
			for _, c := range charts(Trace{Name: "h", Summary: &s}) {
				for _, m := range label.FindAllStringSubmatch(string(c.SVG), -1) {
					got[c.name] = append(got[c.name], m[2])
					turned[c.name] = strings.HasPrefix(m[1], "transform")
				}
			}
			want := tc.labels
			if want == nil { // every power of two from 1 to the largest
				for k := 1; k <= bits.Len64(tc.sizes[len(tc.sizes)-1]); k++ {
					want = append(want, countLabelBytes(k))
					if k <= 10 {
						want[len(want)-1] = strconv.Itoa(1 << (k - 1))
					}
				}
			}
			if !slices.Equal(got["sizes"], want) {
				t.Errorf("sizes labelled %q, want %q", got["sizes"], want)
			}
			if !slices.Equal(got["lifetimes"], tc.lives) {
				t.Errorf("lifetimes labelled %q, want %q", got["lifetimes"], tc.lives)
			}
			if turned["sizes"] != tc.turned {
				t.Errorf("sizes' labels turned: %t, want %t", turned["sizes"], tc.turned)
			}
		})
	}
}
