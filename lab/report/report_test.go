package report

import (
	"bytes"
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
)

// fakeReport is a report of one trace, two allocators and a failure.
func fakeReport() Report {
	var s summary.Trace
	s.Events, s.Smallest, s.Largest, s.PeakLive, s.PeakObjects = 1000, 8, 4096, 1<<20, 300
	s.Sizes[4], s.Sizes[7], s.Sizes[12] = 500, 3000, 12
	s.Lifetimes[2], s.Lifetimes[9] = 40, 400
	series := func(k int64) []replay.Point {
		var ps []replay.Point
		for i := int64(1); i <= 100; i++ {
			ps = append(ps, replay.Point{Event: i * 10, Live: i * 1000, Footprint: i * 1000 * k, Resident: i * 900 * k})
		}
		return ps
	}
	return Report{
		Title:     "carve report <test>",
		Generated: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Command:   "carve report a&b.trace",
		Traces: []Trace{{
			Name:     "a&b.trace",
			About:    "A trace <of> tests.",
			Summary:  &s,
			Findings: []string{"lowest peak RSS / peak live: first-fit, 1.100", "glibc 1.500, 36.4% above first-fit's"},
			Rows: []Row{
				{Allocator: "first-fit", Measured: "in process", Events: 1000, PeakLive: 100000, PeakFootprint: 120000, PeakRSS: 110000, RSSRatio: 1.1, Best: true, PeakRatio: 1.2, AvgRatio: 1.3, Fragmentation: 20, Series: series(1), GrowthPhase: "second wave", Growth: 4096},
				{Allocator: "glibc", Measured: "child", Events: 1000, PeakLive: 100000, PeakFootprint: 200000, PeakRSS: 150000, RSSRatio: 1.5, PeakRatio: 2, AvgRatio: 2.1, Fragmentation: math.NaN(), Series: series(2)},
				{Allocator: "jemalloc", Error: "unavailable: libjemalloc.so.2 is not installed"},
			},
			Maps: []Map{{Caption: "a map", SVG: `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`}},
		}},
	}
}

var svgRE = regexp.MustCompile(`(?s)<svg.*?</svg>`)

// TestWrite renders a report and checks it: every chart a well-formed SVG
// with content, the text escaped, the table's rows present with the
// headline first, the verdict under the table and in the closing
// summary, the sources named, nothing fetched from elsewhere.
func TestWrite(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, fakeReport()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	svgs := svgRE.FindAllString(out, -1)
	if len(svgs) != 7 { // fragmentation, rss-ratio, resident, footprint, sizes, lifetimes, the map
		t.Fatalf("%d charts, want 7", len(svgs))
	}
	for i, s := range svgs {
		if err := xml.Unmarshal([]byte(s), new(struct{})); err != nil {
			t.Errorf("chart %d is not well-formed XML: %v", i, err)
		}
		if !strings.Contains(s, "<path") && !strings.Contains(s, "<rect x=") && i < 6 {
			t.Errorf("chart %d draws nothing", i)
		}
	}
	for _, want := range []string{
		"carve report &lt;test&gt;", "a&amp;b.trace", "A trace &lt;of&gt; tests.", "footprint grew in second wave", "unavailable: libjemalloc.so.2",
		"<td>* first-fit</td>", "glibc", "1.200", "peak RSS / live (headline)",
		"<li>glibc 1.500, 36.4% above first-fit&#39;s</li>",
		`"Are Mallocs Free of Fragmentation?"`, `"The Memory Fragmentation Problem: Solved?"`, `"Block Allocators and Memory Fragmentation"`,
		"rank nothing across allocators",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The headline is the first ratio of the table, and the first bar.
	head := strings.Index(out, "peak RSS / live (headline)")
	if fp := strings.Index(out, "peak fp / live</th>"); head < 0 || fp < head {
		t.Errorf("the table's headline (at %d) does not come before peak fp / live (at %d)", head, fp)
	}
	if i, j := strings.Index(svgs[0], "peak RSS / live"), strings.Index(svgs[0], "peak fp / live"); i < 0 || j < i {
		t.Errorf("the bars' headline (at %d) does not come before peak fp / live (at %d)", i, j)
	}
	// The verdict twice: under the table, and in the summary at the end.
	if n := strings.Count(out, "lowest peak RSS / peak live: first-fit, 1.100"); n != 2 {
		t.Errorf("the verdict appears %d times, want 2 (under the table, in the summary)", n)
	}
	if strings.Contains(out, "Bump Allocator") {
		t.Error("the bump post is cited in a report with no bump trace")
	}
	bump := fakeReport()
	bump.Traces[0].Name = "gen:bump:n=100"
	b.Reset()
	if err := Write(&b, bump); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `The post "Bump Allocator" (30 Sep 2026)`) {
		t.Error("a report of the bump scenario does not cite the post")
	}
	for _, bad := range []string{"http://", "https://", "<script", "src="} {
		if strings.Contains(strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report contains %q: it must be self-contained", bad)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tt := range []struct {
		lo, hi float64
		n      int
	}{{0, 1, 5}, {0, 97, 6}, {0, 1e9, 6}, {0, 0, 4}, {0, 3.3e6, 8}} {
		ts := niceTicks(tt.lo, tt.hi, tt.n)
		if len(ts) < 2 || ts[0] > tt.lo || ts[len(ts)-1] < tt.hi*0.999 || len(ts) > 2*tt.n+2 {
			t.Errorf("niceTicks(%v, %v, %d) = %v", tt.lo, tt.hi, tt.n, ts)
		}
	}
}

// TestPNG rasterizes every chart of a report: the PNG decodes, has the
// chart's size times the scale, and is not blank.
func TestPNG(t *testing.T) {
	tr := fakeReport().Traces[0]
	tr.Phases = []Phase{{"setup", 300}, {"the rest", 1000}}
	for i := range int64(50) {
		tr.GoHeap = append(tr.GoHeap, trace.GoHeapSample{Events: i * 20, Objects: uint64(i) * 900, Goal: 60000})
	}
	names, svgs := Charts(tr)
	if want := []string{"fragmentation", "rss-ratio", "resident", "footprint", "sizes", "lifetimes"}; !slices.Equal(names, want) {
		t.Fatalf("Charts = %v, want %v", names, want)
	}
	for i, s := range svgs {
		var b bytes.Buffer
		if err := WritePNG(&b, s, 2); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if img.Bounds().Dx() != 2*chartW {
			t.Errorf("%s: %d pixels wide, want %d", names[i], img.Bounds().Dx(), 2*chartW)
		}
		colours := map[color.RGBA]bool{}
		for y := 0; y < img.Bounds().Dy(); y += 3 {
			for x := 0; x < img.Bounds().Dx(); x += 3 {
				colours[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)] = true
			}
		}
		if len(colours) < 5 {
			t.Errorf("%s: %d colours, want a chart", names[i], len(colours))
		}
	}
	if err := WritePNG(io.Discard, "<g/>", 1); err == nil {
		t.Error("WritePNG of no <svg> succeeded")
	}
}

// TestPNGPaths: a path of several subpaths is drawn as that many lines,
// not joined, and a dash pattern of any length draws less than a solid
// line and more than nothing.
func TestPNGPaths(t *testing.T) {
	if got := parsePath("M0 0L10 10L20 0M30 30L40 40"); len(got) != 2 || len(got[0]) != 3 || len(got[1]) != 2 {
		t.Errorf("parsePath = %v, want two polylines of 3 and 2 points", got)
	}
	inked := func(path, dash string) int {
		svg := `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><path d="` + path + `" stroke="#000" stroke-width="2"` + dashAttr(dash) + `/></svg>`
		img, _, err := rasterize(svg, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for y := range 100 {
			for x := range 200 {
				if img.RGBAAt(x, y).R < 128 {
					n++
				}
			}
		}
		return n
	}
	solid := inked("M10 50L190 50", "")
	for _, dash := range []string{"7 3", "2 2", "9 3 2 3", "5"} {
		if n := inked("M10 50L190 50", dash); n <= 0 || n >= solid*9/10 {
			t.Errorf("dash %q inks %d pixels, a solid line %d", dash, n, solid)
		}
	}
	// The gap between two subpaths stays white.
	img, _, _ := rasterize(`<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><path d="M10 50L80 50M120 50L190 50" stroke="#000" stroke-width="2"/></svg>`, 1)
	if c := img.RGBAAt(100, 50); c.R < 200 {
		t.Errorf("the gap between two subpaths is drawn: %v", c)
	}
}

// TestPNGBandNote: the zoomed chart's rows whose lines leave the band are
// named in the chart itself, so that its PNG, which has no caption, says
// so as its caption does.
func TestPNGBandNote(t *testing.T) {
	tr := fakeReport().Traces[0] // glibc's ratio, 1.8 for most of the trace, is above the band
	var c chart
	for _, ch := range charts(tr) {
		if ch.name == "rss-ratio" {
			c = ch
		}
	}
	const want = "Above the band for part of the trace or all of it: glibc (ends at 1.500)."
	if !strings.Contains(c.Caption, want) {
		t.Fatalf("the caption does not say %q: %s", want, c.Caption)
	}
	_, texts, err := rasterize(string(c.SVG), 2)
	if err != nil {
		t.Fatal(err)
	}
	if drawn := strings.Join(texts, " "); !strings.Contains(drawn, want) {
		t.Errorf("the PNG does not say %q; its texts: %q", want, texts)
	}
	// A chart whose every line is in the band says nothing of the kind.
	tr.Rows = tr.Rows[:1]
	drawn := false
	for _, ch := range charts(tr) {
		if ch.name != "rss-ratio" {
			continue
		}
		_, texts, err := rasterize(string(ch.SVG), 2)
		if err != nil {
			t.Fatal(err)
		}
		if drawn = true; strings.Contains(strings.Join(texts, " "), "band") {
			t.Errorf("a chart of one row in its band says %q", texts)
		}
	}
	if !drawn {
		t.Error("no zoomed chart for one row")
	}
}
