package report

import (
	"fmt"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/heapmap"
)

// part is a stretch of a heap built for a test: n bytes of one kind, or,
// with hole > 0, blocks of block bytes and holes of hole bytes taking
// turns.
type part struct {
	kind        heapmap.Kind
	n           int64
	block, hole int64
}

// build lays parts out one after the other and returns the map, where
// the first interleaved part lies, and its block and hole together.
func build(parts ...part) (m heapmap.Map, at, n, period int64) {
	m = heapmap.Map{Name: "test", Base: 0x7f0000000000}
	at = -1
	for _, p := range parts {
		if p.hole == 0 {
			m.Append(p.kind, 0, p.n)
			continue
		}
		if at < 0 {
			at, n, period = m.Size, p.n, p.block+p.hole
		}
		for end := m.Size + p.n; m.Size < end; {
			m.Append(heapmap.Header, 0, min(8, end-m.Size))
			m.Append(heapmap.Live, 0, min(p.block-8, end-m.Size))
			m.Append(heapmap.Free, 0, min(p.hole, end-m.Size))
		}
	}
	return m, at, n, period
}

// TestPickWindow builds heaps of one kind with a stretch where blocks and
// holes interleave, and checks that the zoom finds the stretch, the
// denser of two, at the scale where its blocks and holes show, and that
// it draws nothing where nothing interleaves or where the whole heap's
// map shows the stretch as well.
func TestPickWindow(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name  string
		parts []part
		// cell is the zoom's cell: the largest at which the stretch's
		// blocks and holes span two cells each; 0: no zoom (no changes,
		// or the whole heap's map shows them).
		cell int64
	}{
		{"in live memory", []part{{kind: heapmap.Live, n: 40 * MiB}, {n: 2 * MiB, block: 512, hole: 512}, {kind: heapmap.Live, n: 22 * MiB}}, 256},
		{"in a hole", []part{{kind: heapmap.Free, n: 3 * MiB}, {n: MiB, block: 16, hole: 48}, {kind: heapmap.Free, n: 60 * MiB}}, 8},
		{"at the start", []part{{n: 4 * MiB, block: 1024, hole: 3072}, {kind: heapmap.Live, n: 100 * MiB}}, 512},
		{"at the end, before unused memory", []part{{kind: heapmap.Live, n: 100 * MiB}, {n: 8 * MiB, block: 4096, hole: 8192}, {kind: heapmap.Unused, n: 3 * MiB}}, 2048},
		{"pages", []part{{kind: heapmap.Live, n: 100 * MiB}, {n: 64 * MiB, block: 8192, hole: 8192}, {kind: heapmap.Live, n: 100 * MiB}}, 4096},
		{"runs the whole heap's cells show", []part{{kind: heapmap.Live, n: 100 * MiB}, {n: 64 * MiB, block: 16384, hole: 16384}, {kind: heapmap.Live, n: 100 * MiB}}, 0},
		{"the denser of two", []part{{kind: heapmap.Live, n: 10 * MiB}, {n: 8 * MiB, block: 64, hole: 64}, {kind: heapmap.Live, n: 10 * MiB}, {n: 8 * MiB, block: 4096, hole: 4096}}, 32},
		{"uniform", []part{{kind: heapmap.Live, n: 64 * MiB}, {kind: heapmap.Unused, n: MiB}}, 0},
		{"too few changes to draw", []part{{kind: heapmap.Live, n: 40 * MiB}, {n: 15 << 10, block: 512, hole: 512}, {kind: heapmap.Live, n: 22 * MiB}}, 0},
		{"just enough changes", []part{{kind: heapmap.Live, n: 40 * MiB}, {n: 32 << 10, block: 512, hole: 512}, {kind: heapmap.Live, n: 22 * MiB}}, 256},
		{"runs the whole map shows", []part{{kind: heapmap.Live, n: 64 * MiB}, {kind: heapmap.Free, n: MiB}, {kind: heapmap.Unused, n: MiB}, {kind: heapmap.Free, n: MiB}}, 0},
		{"a heap the whole map draws as finely", []part{{kind: heapmap.Live, n: 4096}, {n: 64 << 10, block: 64, hole: 64}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, at, n, period := build(tc.parts...)
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			w, ok := pickWindow(m)
			if tc.cell == 0 {
				if ok {
					t.Errorf("pickWindow = %+v, want none", w)
				}
				return
			}
			if !ok {
				t.Fatalf("pickWindow: none, want a window in [%#x, %#x)", at, at+n)
			}
			cells := zoomCells(false)
			if w.cellBytes != tc.cell || w.n != min(cells*tc.cell, m.Size-w.off) {
				t.Errorf("pickWindow = %d bytes of %d-byte cells, want %d-byte cells, %d of them", w.n, w.cellBytes, tc.cell, cells)
			}
			// The window lies in the stretch, or holds it, but for the
			// part of a block and a hole that centring the window on the
			// stretch's changes may leave out.
			overlap := min(w.off+w.n, at+n) - max(w.off, at)
			if overlap < min(w.n, n)-period {
				t.Errorf("pickWindow = [%#x, %#x), want it in the stretch [%#x, %#x) or around it", w.off, w.off+w.n, at, at+n)
			}
			if w.off%w.cellBytes != 0 || w.changes < 1 || w.changes > w.total {
				t.Errorf("pickWindow = %+v: want a start on a cell, and some of the map's changes", w)
			}
			// The zoomed map is the window's part of the heap, drawn at
			// the window's scale.
			z := cut(m, w)
			if err := z.Check(); err != nil {
				t.Errorf("cut: %v", err)
			}
			if z.Size != w.n || z.Base != m.Base+uintptr(w.off) {
				t.Errorf("cut = %d bytes at %#x, want %d at %#x", z.Size, z.Base, w.n, m.Base+uintptr(w.off))
			}
			svg := drawMap(z, zoomStyle(w))
			if want := "one cell = " + fmtBytes(tc.cell); !strings.Contains(svg, want) {
				t.Errorf("the zoomed map does not say %q", want)
			}
			caption := zoomCaption("test", m, w)
			for _, want := range []string{fmt.Sprintf("offsets %#x to %#x", w.off, w.off+w.n), fmt.Sprintf("addresses %#x", m.Base+uintptr(w.off)), "one cell = "} {
				if !strings.Contains(caption, want) {
					t.Errorf("the caption does not say %q: %s", want, caption)
				}
			}
		})
	}
}

// TestPickWindowDeterministic: of equal windows, the lowest; and the same
// map gives the same window.
func TestPickWindowDeterministic(t *testing.T) {
	const MiB = 1 << 20
	m, at, _, _ := build(part{kind: heapmap.Live, n: 8 * MiB}, part{n: 2 * MiB, block: 256, hole: 256}, part{kind: heapmap.Live, n: 8 * MiB}, part{n: 2 * MiB, block: 256, hole: 256}, part{kind: heapmap.Live, n: 8 * MiB})
	w, ok := pickWindow(m)
	if !ok || w.off < at || w.off >= at+2*MiB {
		t.Fatalf("pickWindow = %+v, %t; want the first of the two stretches, from %#x", w, ok, at)
	}
	if again, _ := pickWindow(m); again != w {
		t.Errorf("pickWindow = %+v, then %+v", w, again)
	}
}

// TestCutSpans: a window of a map laid out in spans (sizeclass's slabs)
// keeps the addresses of its bytes.
func TestCutSpans(t *testing.T) {
	var m heapmap.Map
	m.Append(heapmap.Live, 16, 4096)
	m.Append(heapmap.Free, 16, 4096)
	m.Spans = []heapmap.Span{{Off: 0, Len: 4096, Addr: 0x10000}, {Off: 4096, Len: 4096, Addr: 0x40000}}
	z := cut(m, window{off: 2048, n: 4096})
	for _, tc := range []struct {
		addr uintptr
		off  int64
	}{{0x10800, 0}, {0x10fff, 2047}, {0x40000, 2048}, {0x407ff, 4095}} {
		if off, ok := z.Offset(tc.addr); !ok || off != tc.off {
			t.Errorf("Offset(%#x) = %d, %t, want %d", tc.addr, off, ok, tc.off)
		}
	}
	if _, ok := z.Offset(0x40800); ok {
		t.Errorf("Offset(0x40800) in the window, want outside")
	}
}

// TestWritePNGsMaps: the heap maps are written as PNGs beside the charts,
// their cells filled in their kinds' colours, the zoomed map's too.
func TestWritePNGsMaps(t *testing.T) {
	const MiB = 1 << 20
	m, _, _, _ := build(part{kind: heapmap.Live, n: 40 * MiB}, part{n: 2 * MiB, block: 512, hole: 512}, part{kind: heapmap.Live, n: 22 * MiB})
	w, ok := pickWindow(m)
	if !ok {
		t.Fatal("no window")
	}
	rep := fakeReport()
	rep.Traces[0].Maps = []Map{
		{Name: "test", SVG: drawMap(m, overviewStyle(w))},
		{Name: "test-zoom", SVG: drawMap(cut(m, w), zoomStyle(w))},
	}
	dir := t.TempDir()
	if err := WritePNGs(dir, rep); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		h    int
		free bool // free memory's colour shows
	}{{"1-a_b.trace-map-test.png", mapHeight, false}, {"1-a_b.trace-map-test-zoom.png", zoomHeight, true}} {
		f, err := os.Open(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if b := img.Bounds(); b.Dx() != 2*mapWidth || b.Dy() != 2*tc.h {
			t.Errorf("%s: %v, want %d by %d pixels", tc.file, b, 2*mapWidth, 2*tc.h)
		}
		seen := map[color.RGBA]int{}
		for y := 0; y < img.Bounds().Dy(); y++ {
			for x := 0; x < img.Bounds().Dx(); x++ {
				seen[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
			}
		}
		rgba := func(c rgb) color.RGBA { return color.RGBA{c[0], c[1], c[2], 255} }
		// Live memory fills much of either picture; free memory's pure
		// colour shows only where the cells are finer than the holes.
		if live := seen[rgba(kindPalette[heapmap.Live])]; live < img.Bounds().Dx()*img.Bounds().Dy()/10 {
			t.Errorf("%s: %d pixels of live memory's colour, want a tenth of the picture", tc.file, live)
		}
		if free := seen[rgba(kindPalette[heapmap.Free])]; (free > 1000) != tc.free {
			t.Errorf("%s: %d pixels of free memory's colour; want many: %t", tc.file, free, tc.free)
		}
	}
}
