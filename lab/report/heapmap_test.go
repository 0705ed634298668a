package report_test

import (
	"encoding/xml"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/lab/report"
)

// The strip SVG draws in, for a picture of 1024 by 320 pixels.
const stripW, stripH = 1024 - 20, 320 - 50 - 24 - 10

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		size       int64
		w, h       int
		cols, rows int   // 0: only the properties below
		cellBytes  int64 // 0: only the properties below
	}{
		{size: 0, w: stripW, h: stripH, cols: 1, rows: 0, cellBytes: 1},
		{size: 1, w: stripW, h: stripH, cols: 1, rows: 1, cellBytes: 1},
		{size: 48, w: stripW, h: stripH},
		{size: 4096, w: stripW, h: stripH},
		{size: 11210752, w: stripW, h: stripH, cols: 512, rows: 86, cellBytes: 256}, // the connection scenario, n = 10000
		{size: 100 << 20, w: stripW, h: stripH},
		{size: 1 << 40, w: stripW, h: stripH},
		{size: 1<<40 + 1, w: 4000, h: 3000},
		{size: 12345, w: 300, h: 66},
	} {
		t.Run(fmt.Sprint(tc.size, "in", tc.w, "x", tc.h), func(t *testing.T) {
			cols, rows, cell := report.Layout(tc.size, tc.w, tc.h)
			if tc.cellBytes != 0 && (cols != tc.cols || rows != tc.rows || cell != tc.cellBytes) {
				t.Errorf("Layout = %d cols, %d rows of %d-byte cells, want %d, %d, %d", cols, rows, cell, tc.cols, tc.rows, tc.cellBytes)
			}
			cells := (tc.size + cell - 1) / cell
			switch {
			case bits.OnesCount(uint(cols)) != 1 || bits.OnesCount64(uint64(cell)) != 1:
				t.Errorf("Layout = %d cols of %d bytes: want powers of two", cols, cell)
			case cells > report.MaxCells:
				t.Errorf("Layout: %d cells of %d bytes, more than %d", cells, cell, report.MaxCells)
			case int64(rows) != (cells+int64(cols)-1)/int64(cols):
				t.Errorf("Layout: %d rows of %d cols for %d cells", rows, cols, cells)
			case rows > max(1, tc.h*cols/tc.w):
				t.Errorf("Layout: %d rows of %d square cells do not fit %d by %d pixels", rows, cols, tc.w, tc.h)
			case cell > 1 && (tc.size+cell/2-1)/(cell/2) <= report.MaxCells && (tc.size+cell/2-1)/(cell/2) <= int64(cols*max(1, tc.h*cols/tc.w)):
				t.Errorf("Layout: %d-byte cells, but %d-byte ones would fit", cell, cell/2)
			}
		})
	}
}

func TestMix(t *testing.T) {
	for _, k := range heapmap.Kinds() {
		var acc [heapmap.NumKinds]int64
		acc[k] = 1000
		if c, ok := report.Mix(acc); !ok || c != report.Colour(k) {
			t.Errorf("Mix(all %v) = %s, %t, want %s", k, c, ok, report.Colour(k))
		}
	}
	if _, ok := report.Mix([heapmap.NumKinds]int64{}); ok {
		t.Errorf("Mix(empty) = _, true, want false")
	}
	// One live byte among a million free shows; and the same shares give
	// the same colour.
	speck, _ := report.Mix([heapmap.NumKinds]int64{heapmap.Live: 1, heapmap.Free: 1e6})
	if speck == report.Colour(heapmap.Free) {
		t.Errorf("Mix(1 live byte, 1e6 free) = the colour of free: the live byte does not show")
	}
	if a, _ := report.Mix([heapmap.NumKinds]int64{heapmap.Live: 80, heapmap.Free: 176}); a != func() string {
		b, _ := report.Mix([heapmap.NumKinds]int64{heapmap.Live: 160, heapmap.Free: 352})
		return b
	}() {
		t.Errorf("Mix: the same shares of different cell sizes give different colours")
	}
}

// parse decodes an SVG document and returns its root and the number of
// elements it holds.
func parse(t *testing.T, doc string) (root xml.StartElement, elements int) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v\n%s", err, doc[:min(len(doc), 2000)])
		}
		if se, ok := tok.(xml.StartElement); ok {
			if elements == 0 {
				root = se
			}
			elements++
		}
	}
	return root, elements
}

// connection returns the map a fit heap draws after the block-allocator
// article's connection
// scenario: n scratch blocks of 1 KiB and n sessions of 64 bytes back to
// back, the scratch freed: n holes of 1040 bytes.
func connection(n int) heapmap.Map {
	m := heapmap.Map{Name: "first-fit", Base: 0x7f0000000000}
	m.Append(heapmap.Padding, 0, 8)
	for range n {
		m.Append(heapmap.Free, 0, 1040)
		m.Append(heapmap.Header, 0, 8)
		m.Append(heapmap.Live, 0, 72)
	}
	m.Append(heapmap.Unused, 0, 4096)
	return m
}

// alternating returns a map whose every cell differs from the next: the
// most runs a picture can have.
func alternating(size int64) heapmap.Map {
	_, _, cell := report.Layout(size, stripW, stripH)
	m := heapmap.Map{Name: "worst case"}
	for i := 0; m.Size < size; i++ {
		m.Append(heapmap.Kinds()[i%len(heapmap.Kinds())], i, cell)
	}
	return m
}

func TestSVG(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m           heapmap.Map
		w, h        int
		maxElements int
		maxBytes    int
		caption     []string
	}{
		{"empty", heapmap.Map{Name: "buddy"}, 1024, 320, 30, 4 << 10, []string{"buddy: 0 B mapped", "0 holes"}},
		{"tiny", connection(1), 1024, 320, 40, 8 << 10, []string{"first-fit: 5.1 KiB mapped at 0x7f0000000000", "in 1 hole, largest 1.0 KiB"}},
		{"small picture", connection(100), 10, 10, 40, 32 << 10, []string{"100 holes"}},
		{"100k blocks", connection(100000), 1024, 320, 40, 1 << 20, []string{"100000 holes, largest 1.0 KiB", "one cell = 2.0 KiB"}},
		{"every cell differs", alternating(100 << 20), 1024, 320, 40, 1500 << 10, nil},
		{"name to escape", heapmap.Map{Name: `<a & "b">`, Size: 16, Segments: []heapmap.Segment{{Len: 16}}}, 1024, 320, 30, 4 << 10, []string{"&lt;a &amp;"}},
		{"regions", heapmap.Map{Name: "sizeclass", Size: 96,
			Segments: []heapmap.Segment{{Len: 64, Kind: heapmap.Live, Class: 64}, {Off: 64, Len: 32, Kind: heapmap.Free, Class: 32}},
			Regions:  []heapmap.Region{{Off: 0, Len: 64, Label: "class 64 B"}, {Off: 64, Len: 32, Label: "class 32 B"}}},
			1024, 320, 40, 4 << 10, []string{"2 regions, marked where they start: class 64 B (64 B) · class 32 B (32 B)", "class 32 B: 32 B from offset 64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.m.Check(); err != nil {
				t.Fatal(err)
			}
			doc := report.MapSVG(tc.m, tc.w, tc.h)
			root, n := parse(t, doc)
			if root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("root element %v, want svg in the SVG namespace", root.Name)
			}
			if n > tc.maxElements || len(doc) > tc.maxBytes {
				t.Errorf("SVG has %d elements and %d bytes, want at most %d and %d", n, len(doc), tc.maxElements, tc.maxBytes)
			}
			for _, s := range tc.caption {
				if !strings.Contains(doc, s) {
					t.Errorf("SVG does not say %q", s)
				}
			}
		})
	}
}

// BenchmarkSVG draws the connection scenario's heap with 100,000 holes.
func BenchmarkSVG(b *testing.B) {
	m := connection(100000)
	for b.Loop() {
		_ = report.MapSVG(m, 1024, 320)
	}
}

// TestMapSVGFit draws a real heap of 100,000 blocks, first fit's after the
// connection scenario: the picture is valid XML, says it has 50,000 holes,
// and stays a few dozen elements.
func TestMapSVGFit(t *testing.T) {
	h, err := fit.New(fit.FirstFit, fit.TopPad(64<<20), fit.TrimThreshold(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var scratch [][]byte
	for range 50000 {
		s, err := h.Alloc(1024, 8)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Alloc(64, 8); err != nil {
			t.Fatal(err)
		}
		scratch = append(scratch, s)
	}
	for _, s := range scratch {
		if err := h.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	doc := report.MapSVG(h.Map(), 1024, 320)
	_, elements := parse(t, doc)
	if elements > 100 || len(doc) > 1<<20 || !strings.Contains(doc, "in 50000 holes") {
		t.Errorf("SVG of a heap of 100,000 blocks: %d elements, %d bytes (want at most 100 and 1 MiB), saying it has 50000 holes: %t",
			elements, len(doc), strings.Contains(doc, "in 50000 holes"))
	}
}
