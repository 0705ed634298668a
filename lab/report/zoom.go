package report

import (
	"slices"

	"github.com/carvelab/carve/heapmap"
)

// This file picks the part of a heap map to draw zoomed. The map of a
// whole heap of tens of MiB has cells of kilobytes: where small holes and
// small blocks alternate, every cell mixes them, and the picture is one
// colour. The zoomed map draws the window of the heap that shows the most
// of what the whole heap's map cannot, by one rule for every heap:
//
//  1. A byte is free (a hole), used (live, rounding, a header, padding:
//     a block's), or neither (unused, reserved: never handed out). A
//     change is where a run of free bytes meets a run of used ones.
//  2. A picture shows a change when both its runs span zoomRun of the
//     picture's cells or more. The changes the whole map's picture shows
//     need no zoom; the zoom counts the others.
//  3. The zoomed picture's cell is a power of two, up to a page (4 KiB)
//     and smaller than the whole map's; its window holds as many cells as
//     the picture does. Of every cell size and every window, the zoom
//     takes the one that shows the most changes: the larger cell of equal
//     ones, and the lowest window, centred on the changes it shows.
//  4. Where it would show fewer than minZoomChanges, no zoom is drawn:
//     the heap's free and used memory barely interleave finer than its
//     map shows, and a window of a few of them, tens of KiB of a heap of
//     tens of MiB, would be a picture of nothing.
//
// A window of cells of c bytes shows at most one change in zoomRun cells,
// where the runs are zoomRun cells long: the rule finds the part of the
// heap where free and used memory take turns most often at a scale where
// each turn shows.

// The zoomed map's rule.
const (
	// zoomCellPx is the narrowest a cell of the zoomed map gets, in
	// pixels: a square that shows its colour.
	zoomCellPx = 4
	// maxZoomCell is the largest a cell of the zoomed map is: a page.
	maxZoomCell = 4096
	// zoomRun is the cells the two runs of a change span at least, each,
	// for a picture to show it.
	zoomRun = 2
	// minZoomChanges is the fewest changes the whole map cannot show that
	// a zoomed map is drawn for.
	minZoomChanges = 64
)

// window is a part of a map's space, [off, off+n), drawn zoomed with
// cells of cellBytes; changes is how many changes between free and used
// memory it shows that the whole map's picture does not, of total in the
// whole map.
type window struct {
	off, n, cellBytes int64
	changes, total    int
}

// use is what a zoom counts a byte as: free, used, or neither.
type use uint8

const (
	neither use = iota
	freeBytes
	usedBytes
)

func useOf(k heapmap.Kind) use {
	switch k {
	case heapmap.Free:
		return freeBytes
	case heapmap.Unused, heapmap.Reserved:
		return neither
	}
	return usedBytes
}

// stretch is the bytes [off, end) of one use.
type stretch struct {
	off, end int64
	use      use
}

// runsOf returns m's segments merged into runs: stretches of one use,
// each next to one of another.
func runsOf(m heapmap.Map) []stretch {
	var rs []stretch
	for _, s := range m.Segments {
		u := useOf(s.Kind)
		if n := len(rs); n > 0 && rs[n-1].use == u {
			rs[n-1].end = s.End()
			continue
		}
		rs = append(rs, stretch{s.Off, s.End(), u})
	}
	return rs
}

// pickWindow returns the window of m to draw zoomed, by the rule above,
// and false when there is none; the window it would be then, if any
// (changes > 0), says how few changes it shows. O(segments ×
// log(maxZoomCell)).
func pickWindow(m heapmap.Map) (window, bool) {
	rs := runsOf(m)
	// Each change, and the shorter of its runs.
	type change struct{ off, shorter int64 }
	var changes []change
	for i := 1; i < len(rs); i++ {
		if rs[i-1].use != neither && rs[i].use != neither {
			changes = append(changes, change{rs[i].off, min(rs[i-1].end-rs[i-1].off, rs[i].end-rs[i].off)})
		}
	}
	whole := overviewCell(m)
	cells := zoomCells(len(m.Regions) > 0)
	var best window
	for c := min(int64(maxZoomCell), whole/2); c >= 1; c /= 2 {
		var shown []int64 // the changes a picture of cells of c bytes shows, and the whole map's does not
		for _, ch := range changes {
			if ch.shorter >= zoomRun*c && ch.shorter < zoomRun*whole {
				shown = append(shown, ch.off)
			}
		}
		if len(shown) == 0 {
			continue
		}
		if w := densest(m.Size, shown, cells*c, c); w.changes > best.changes {
			best = w
			best.cellBytes = c
		}
	}
	best.total = len(changes)
	return best, best.changes >= minZoomChanges
}

// The report's pictures of a heap: the whole heap's, and a window of it
// zoomed, taller and of larger cells.
const mapWidth, mapHeight, zoomHeight = 900, 256, 336

// overviewStyle is the style of the report's picture of a whole heap,
// the window w framed (w.n 0: none).
func overviewStyle(w window) mapStyle {
	return mapStyle{width: mapWidth, height: mapHeight, cellPx: minCellPx, frame: w}
}

// zoomStyle is the style of the report's picture of the window w, zoomed.
func zoomStyle(w window) mapStyle {
	return mapStyle{width: mapWidth, height: zoomHeight, cellPx: zoomCellPx, cellBytes: w.cellBytes}
}

// zoomCaptionLines is the lines of caption a zoomed map's picture is laid
// out for: two of its name and scale, two of its figures (a map of
// regions has one more). A caption of more lines leaves the cells their
// size and makes the rows flatter.
const zoomCaptionLines = 4

// zoomCells returns how many cells a zoomed map's picture holds, for a
// map of regions or of none.
func zoomCells(regions bool) int64 {
	lines := zoomCaptionLines
	if regions {
		lines++
	}
	_, _, w, h := stripAt(lines, mapWidth, zoomHeight)
	_, cells := capacity(w, h, zoomCellPx)
	return cells
}

// overviewCell returns the cell of the report's picture of the whole map
// m.
func overviewCell(m heapmap.Map) int64 {
	return pictureOf(m, overviewStyle(window{})).grid.cellBytes
}

// densest returns the window of n bytes (or the whole space of size
// bytes, if smaller) holding the most of changes (in order), centred on
// them and starting at a multiple of cell: the lowest of equal ones.
func densest(size int64, changes []int64, n, cell int64) window {
	best, bi, bj := 0, 0, 0
	for i, j := 0, 0; i < len(changes); i++ {
		for j < len(changes) && changes[j] < changes[i]+n {
			j++
		}
		if j-i > best {
			best, bi, bj = j-i, i, j
		}
	}
	mid := changes[bi] + (changes[bj-1]-changes[bi])/2
	off := min(max(mid-n/2, 0), max(size-n, 0))
	off -= off % cell
	w := window{off: off, n: min(n, size-off)}
	lo, _ := slices.BinarySearch(changes, w.off)
	hi, _ := slices.BinarySearch(changes, w.off+w.n)
	w.changes = hi - lo
	return w
}

// cut returns the part of m in the window w as a map of its own: its
// segments, regions and spans cut at w's edges, offsets from w's start.
func cut(m heapmap.Map, w window) heapmap.Map {
	out := heapmap.Map{Name: m.Name, Size: w.n}
	if m.Base != 0 && m.Spans == nil {
		out.Base = m.Base + uintptr(w.off)
	}
	lo, hi := w.off, w.off+w.n
	clip := func(off, end int64) (int64, int64, bool) {
		off, end = max(off, lo), min(end, hi)
		return off - lo, end - off, end > off
	}
	for _, s := range m.Segments {
		if off, n, ok := clip(s.Off, s.End()); ok {
			out.Segments = append(out.Segments, heapmap.Segment{Off: off, Len: n, Kind: s.Kind, Class: s.Class})
		}
	}
	for _, r := range m.Regions {
		if off, n, ok := clip(r.Off, r.Off+r.Len); ok {
			out.Regions = append(out.Regions, heapmap.Region{Off: off, Len: n, Label: r.Label})
		}
	}
	for _, s := range m.Spans {
		if off, n, ok := clip(s.Off, s.Off+s.Len); ok {
			out.Spans = append(out.Spans, heapmap.Span{Off: off, Len: n, Addr: s.Addr + uintptr(off+lo-s.Off)})
		}
	}
	return out
}
