package report

import "github.com/carvelab/carve/heapmap"

// Layout exposes the grid MapSVG draws size bytes in, for a strip of w by h
// pixels.
func Layout(size int64, w, h int) (cols, rows int, cellBytes int64) {
	g := layout(size, w, h, minCellPx)
	return g.cols, g.rows, g.cellBytes
}

// MaxCells is the most cells a grid holds.
const MaxCells = maxCells

// Mix exposes the colour of a cell holding acc[k] bytes of each kind k.
func Mix(acc [numKinds]int64) (string, bool) {
	c, ok := mix(acc)
	return c.String(), ok
}

// Colour returns kind k's colour in the picture.
func Colour(k heapmap.Kind) string { return kindPalette[k].String() }
