package report

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/text"
)

// This file draws a heap map (package heapmap) as a self-contained SVG picture: the space wrapped
// into rows of cells, each cell a fixed number of bytes, coloured by the
// kinds of its bytes.

// The picture's geometry, in pixels, and its bounds.
const (
	minWidth, minHeight = 320, 140
	margin              = 10
	captionDY           = 18 // between the lines of caption above the strip
	legendHeight        = 24 // one line of legend below it
	minStripH           = 20 // the least height of the strip: a picture grows taller for its caption
	minCellPx           = 1  // the narrowest a cell gets, before rounding columns down to a power of two
	// maxCells bounds the grid, whatever the picture's size: the work and
	// the output stay small for heaps of any size.
	maxCells = 1 << 16
	// maxRegions bounds the region marks drawn; further regions are left
	// out of the picture (the caption says how many).
	maxRegions = 256
	// shares is the resolution of a cell's mixture: each kind's share of
	// the cell is rounded to eighths before the colours are mixed, so that
	// cells of similar contents get the same colour and merge into runs.
	shares = 8
)

// kindPalette holds each kind's colour (the Tango palette: distinct, and
// readable when mixed).
var kindPalette = [numKinds]rgb{
	heapmap.Live:     {0x34, 0x65, 0xa4}, // blue
	heapmap.Free:     {0xef, 0x29, 0x29}, // red: the holes
	heapmap.Header:   {0x2e, 0x34, 0x36}, // near black
	heapmap.Padding:  {0xed, 0xd4, 0x00}, // yellow
	heapmap.Unused:   {0xba, 0xbd, 0xb6}, // grey
	heapmap.Reserved: {0xee, 0xee, 0xec}, // pale grey: no memory behind it
	heapmap.Rounding: {0x72, 0x9f, 0xcf}, // light blue: live, but not asked for
}

// numKinds is the number of kinds a map's bytes come in.
const numKinds = heapmap.NumKinds

type rgb [3]uint8

func (c rgb) String() string { return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2]) }

// grid is how the space is cut into cells: cols cells per row, rows rows,
// each cell cellBytes bytes (a power of two, so that a row is one too).
type grid struct {
	cols, rows int
	cellBytes  int64
}

// capacity returns the grid of the finest cells a strip of w by h pixels
// holds, cells at least cellPx pixels wide and square: cols a power of
// two, and the cells, at most maxCells.
func capacity(w, h, cellPx int) (cols int, cells int64) {
	cols = 1
	for cols*2 <= w/cellPx {
		cols *= 2
	}
	return cols, int64(min(cols*rowsFit(w, h, cols), maxCells))
}

// rowsFit returns how many rows of cols square cells a strip of w by h
// pixels holds.
func rowsFit(w, h, cols int) int { return max(1, h*cols/w) }

// layout chooses the grid for size bytes in a strip of w by h pixels:
// the finest cells the strip (cells at least cellPx pixels wide) and
// maxCells allow, cols a power of two, and then cells as large as the
// strip allows for that many bytes per cell.
func layout(size int64, w, h, cellPx int) grid {
	cols, cells := capacity(w, h, cellPx)
	g := grid{cellBytes: 1}
	for (size+g.cellBytes-1)/g.cellBytes > cells {
		g.cellBytes *= 2
	}
	n := (size + g.cellBytes - 1) / g.cellBytes
	for cols > 1 && ceilDiv(n, int64(cols/2)) <= int64(rowsFit(w, h, cols/2)) {
		cols /= 2
	}
	g.cols, g.rows = cols, int(ceilDiv(n, int64(cols)))
	return g
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// MapSVG returns the heap map m drawn as a self-contained SVG document of width by
// height pixels (at least 320 by 140, and taller where the caption's
// lines, wrapped to the width, leave too little room): a caption with the
// map's figures (name, size, live and free bytes, the number of holes and
// the largest), the space as a strip of rows, and a legend of the kinds'
// colours.
//
// The strip wraps the space into rows of cells, each a power-of-two
// number of bytes: as fine as the picture allows, and at most 65,536
// cells however large the heap. A cell's colour mixes the colours of the
// kinds of its bytes, in eighths: one eighth for every kind present, so
// that a small live block among holes shows (and a small hole among live
// blocks), the rest by the kinds' shares of the cell's bytes. Adjacent
// cells of one colour in a row make one rectangle, and the rectangles of
// each colour one path: the document holds a few dozen elements (one per
// colour, of at most 1,287 mixtures, plus two per region marked, at most
// 256: sizeclass's classes) and stays near 1 MiB at worst: 0.8 MiB for a
// picture of 1024 by 320 pixels in which every cell differs from the
// next, 1.3 MiB for one of 8000 by 8000. Rendering costs O(segments +
// cells) time.
func MapSVG(m heapmap.Map, width, height int) string {
	return drawMap(m, mapStyle{width: width, height: height, cellPx: minCellPx})
}

// mapStyle is how drawMap draws a map: the picture's size, the narrowest
// a cell gets, the bytes of a cell (0: the fewest the strip allows), and a
// part of the space to frame (the window a zoomed map draws; n 0 for
// none).
type mapStyle struct {
	width, height, cellPx int
	cellBytes             int64
	frame                 window
}

// mapPicture is where a map's parts go in its picture: the caption's
// lines, the strip, and the grid of the strip's cells.
type mapPicture struct {
	width, height int
	caption       []captionLine
	x, y, w, h    int // the strip
	grid          grid
	cellX, cellY  func(int64) int64 // the left edge of a column, the top of a row
}

// pictureOf places the parts of m's picture in the style st.
func pictureOf(m heapmap.Map, st mapStyle) mapPicture {
	p := mapPicture{width: max(st.width, minWidth), height: max(st.height, minHeight)}
	p.caption = captionOf(m, p.width-2*margin)
	if _, _, _, h := stripAt(len(p.caption), p.width, p.height); h < minStripH {
		p.height += minStripH - h // a narrow picture's caption takes many lines
	}
	p.x, p.y, p.w, p.h = stripAt(len(p.caption), p.width, p.height)
	p.grid = layout(m.Size, p.w, p.h, st.cellPx)
	if st.cellBytes > 0 { // a scale of the caller's: as many rows as it takes
		p.grid.cellBytes = st.cellBytes
		p.grid.rows = int(ceilDiv(m.Size, st.cellBytes*int64(p.grid.cols)))
	}
	// Cell i of a row spans x(i) to x(i+1), row r y(r) to y(r+1), their
	// edges rounded to whole pixels: stripW/cols pixels wide, and as tall
	// as the rows can be to fill the strip, up to four times that.
	g := p.grid
	p.cellX = func(i int64) int64 { return int64(p.x) + i*int64(p.w)/int64(g.cols) }
	rowNum, rowDen := int64(p.h), int64(max(g.rows, 1))
	if rowNum*int64(g.cols) > 4*int64(p.w)*rowDen {
		rowNum, rowDen = 4*int64(p.w), int64(g.cols)
	}
	p.cellY = func(r int64) int64 { return int64(p.y) + r*rowNum/rowDen }
	return p
}

// stripAt returns where the strip of a map lies in a picture of width by
// height pixels, below lines of caption and above the legend.
func stripAt(lines, width, height int) (x, y, w, h int) {
	x, y = margin, margin+lines*captionDY+4
	return x, y, width - 2*margin, height - y - legendHeight - margin
}

// drawMap is MapSVG in the style st.
func drawMap(m heapmap.Map, st mapStyle) string {
	p := pictureOf(m, st)
	g, x, y := p.grid, p.cellX, p.cellY
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		p.width, p.height, p.width, p.height)
	b.WriteString("<title>")
	escape(&b, m.Name+" heap map")
	b.WriteString("</title>\n")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", p.width, p.height)
	scale := ""
	if m.Size > 0 {
		scale = fmt.Sprintf("one cell = %s, one row = %s", fmtBytes(g.cellBytes), fmtBytes(g.cellBytes*int64(g.cols)))
	}
	for i, l := range p.caption {
		fmt.Fprintf(&b, `<text x="%d" y="%d"`, p.x, margin+12+i*captionDY)
		if l.bold {
			b.WriteString(` font-weight="bold"`)
		}
		b.WriteString(">")
		escape(&b, strings.Replace(l.text, widestScale, scale, 1))
		b.WriteString("</text>\n")
	}

	// The strip: one path per colour.
	b.WriteString(`<g shape-rendering="crispEdges">` + "\n")
	for _, r := range paintMap(m, g, x, y) {
		fmt.Fprintf(&b, `<path fill="%v" d="%s"/>`+"\n", r.colour, r.d.String())
	}
	if g.rows > 0 {
		// The outline of the rows the space takes.
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#555753" stroke-width="1"/>`+"\n",
			p.x, p.y, x(int64(g.cols))-int64(p.x), y(int64(g.rows))-int64(p.y))
	}
	mapMarks(&b, m, g, x, y)
	if st.frame.n > 0 {
		mapFrame(&b, st.frame, g, x, y)
	}
	b.WriteString("</g>\n")

	mapLegend(&b, p.x, p.height-margin-6)
	b.WriteString("</svg>\n")
	return b.String()
}

// mapFrame writes a black frame around the cells of the window f, a
// rectangle a little larger than them in each row they take (rows of a
// pixel or two stay visible inside).
func mapFrame(b *strings.Builder, f window, g grid, x, y func(int64) int64) {
	first, last := f.off/g.cellBytes, (f.off+f.n-1)/g.cellBytes
	cols := int64(g.cols)
	for r := first / cols; r <= last/cols; r++ {
		c0, c1 := int64(0), cols
		if r == first/cols {
			c0 = first % cols
		}
		if r == last/cols {
			c1 = last%cols + 1
		}
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#000000" stroke-width="1.5"><title>`,
			x(c0)-2, y(r)-2, x(c1)-x(c0)+4, y(r+1)-y(r)+4)
		escape(b, fmt.Sprintf("drawn zoomed: %s from offset %d", fmtBytes(f.n), f.off))
		b.WriteString("</title></rect>\n")
	}
}

// captionLine is a line of a map's caption.
type captionLine struct {
	text string
	bold bool
}

// widestScale stands for the caption's scale (one cell = 256 B, ...)
// until the grid is laid out: as wide as the scale is written at most, so
// that the lines the caption takes do not depend on the grid.
const widestScale = "one cell = 1023.9 KiB, one row = 1023.9 MiB"

// captionOf returns the lines of m's caption in a box w pixels wide
// (about 7 pixels a character), each wrapped where it is too long: the
// map's name, size and address (bold), and its scale; its figures; and
// its regions, as many as one line holds.
func captionOf(m heapmap.Map, w int) []captionLine {
	chars := w / 7
	var out []captionLine
	title := []string{m.Name + ":", fmtBytes(m.Size) + " mapped"}
	if m.Base != 0 {
		title[1] += fmt.Sprintf(" at %#x", m.Base)
	}
	if m.Size > 0 {
		title[1] += ","
		title = append(title, widestScale)
	}
	for _, l := range wrap(title, " ", chars) {
		out = append(out, captionLine{l, true})
	}
	st := m.Stats()
	holes := "holes"
	if st.Holes == 1 {
		holes = "hole"
	}
	figures := []string{"live " + fmtBytes(st.Live), "rounding " + fmtBytes(st.Rounding),
		fmt.Sprintf("free %s in %d %s, largest %s", fmtBytes(st.Free), st.Holes, holes, fmtBytes(st.Largest)),
		"header " + fmtBytes(st.Header), "padding " + fmtBytes(st.Padding), "unused " + fmtBytes(st.Unused), "reserved " + fmtBytes(st.Reserved)}
	for _, l := range wrap(figures, " · ", chars) {
		out = append(out, captionLine{l, false})
	}
	if len(m.Regions) == 0 {
		return out
	}
	// The regions, as many as the line holds; every one drawn has a mark
	// with its title.
	line := text.Count(int64(len(m.Regions)), "region") + ", marked where they start:"
	for i, r := range m.Regions {
		item := fmt.Sprintf(" %s (%s)", r.Label, fmtBytes(r.Len))
		if i > 0 {
			item = " ·" + item
		}
		if len(line)+len(item)+5 > chars {
			line += " …"
			break
		}
		line += item
	}
	return append(out, captionLine{line, false})
}

// mapLegend writes one swatch per kind along the baseline y.
func mapLegend(b *strings.Builder, left, y int) {
	at := left
	for _, k := range heapmap.Kinds() {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%v" stroke="#555753" stroke-width="0.5"/>`+"\n", at, y-10, kindPalette[k])
		fmt.Fprintf(b, `<text x="%d" y="%d">%v</text>`+"\n", at+16, y, k)
		at += 16 + 8*len(k.String()) + 14
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555753">(a cell mixes the colours of the kinds in it)</text>`+"\n", at, y)
}

// run is the cells of one colour: a path of one rectangle per run of
// adjacent cells in a row.
type run struct {
	colour rgb
	d      strings.Builder
}

// paintMap adds up the bytes of each kind in every cell, one row at a time,
// and returns the paths of the cells' colours, in the order the colours
// first appear.
func paintMap(m heapmap.Map, g grid, x, y func(int64) int64) []*run {
	if g.rows == 0 {
		return nil
	}
	var (
		runs    []*run
		byRGB   = map[rgb]*run{}
		acc     = make([][numKinds]int64, g.cols) // the current row's cells
		colours = make([]rgb, g.cols)             // their colours,
		painted = make([]bool, g.cols)            // unless they are empty
		row     int64
		cols    = int64(g.cols)
		filled  bool // some cell of the current row holds bytes
	)
	flush := func() {
		if filled {
			for i := range acc {
				colours[i], painted[i] = mix(acc[i])
			}
			for i := int64(0); i < cols; {
				c, ok := colours[i], painted[i]
				j := i + 1
				for j < cols && painted[j] == ok && colours[j] == c {
					j++
				}
				if ok {
					r := byRGB[c]
					if r == nil {
						r = &run{colour: c}
						byRGB[c] = r
						runs = append(runs, r)
					}
					fmt.Fprintf(&r.d, "M%d %dh%dv%dh%dz", x(i), y(row), x(j)-x(i), y(row+1)-y(row), x(i)-x(j))
				}
				i = j
			}
			clear(acc)
		}
		filled = false
		row++
	}
	for _, s := range m.Segments {
		for off, end := s.Off, s.End(); off < end; {
			cell := off / g.cellBytes
			for cell/cols > row {
				flush()
			}
			n := min(end, (cell+1)*g.cellBytes) - off
			acc[cell%cols][int(s.Kind)%numKinds] += n
			filled = true
			off += n
		}
	}
	flush()
	return runs
}

// mix returns the colour of a cell holding acc[k] bytes of each kind k,
// and false for an empty cell. The kinds' colours are mixed in eighths:
// every kind present gets one, so that a small live block among holes, or
// a small hole among live blocks, shows; the rest go by the kinds' shares
// of the cell's bytes, largest remainders first.
func mix(acc [numKinds]int64) (rgb, bool) {
	var w [numKinds]int64
	var total int64
	left := int64(shares)
	for k, n := range acc {
		if n > 0 {
			w[k] = 1
			left--
		}
		total += n
	}
	if total == 0 {
		return rgb{}, false
	}
	rest := left
	for k, n := range acc {
		q := n * rest / total
		w[k] += q
		left -= q
	}
	for ; left > 0; left-- {
		// The kind whose share of the rest lost the most to rounding down.
		best, most := 0, int64(-1)
		for k, n := range acc {
			if r := n*rest - (n*rest/total)*total; n > 0 && r > most {
				best, most = k, r
			}
		}
		w[best]++
		acc[best] = 0 // one extra share each at most
	}
	var c rgb
	for ch := range c {
		var sum int64
		for k := range w {
			sum += w[k] * int64(kindPalette[k][ch])
		}
		c[ch] = uint8((sum + shares/2) / shares)
	}
	return c, true
}

// mapMarks writes a mark at the start of each region: a bar across the
// start cell's row, with the region's label as its title, and the label
// itself beside the bar where the region's first row has room for it.
func mapMarks(b *strings.Builder, m heapmap.Map, g grid, x, y func(int64) int64) {
	for _, r := range m.Regions[:min(len(m.Regions), maxRegions)] {
		cell := r.Off / g.cellBytes
		row, col := cell/int64(g.cols), cell%int64(g.cols)
		top, bottom := y(row), y(row+1)
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="2" height="%d" fill="#000000"><title>`, x(col), top-3, bottom-top+6)
		escape(b, fmt.Sprintf("%s: %s from offset %d", r.Label, fmtBytes(r.Len), r.Off))
		b.WriteString("</title></rect>\n")
		// The label, in 10-pixel type (about 6 pixels a character), if
		// the row is tall enough and the region wide enough there.
		end := min(int64(g.cols), (r.Off+r.Len+g.cellBytes-1)/g.cellBytes-row*int64(g.cols))
		if bottom-top >= 9 && x(end)-x(col) >= int64(6*len(r.Label)+8) {
			fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10" fill="#ffffff">`, x(col)+4, (top+bottom)/2+4)
			escape(b, r.Label)
			b.WriteString("</text>\n")
		}
	}
}

// fmtBytes writes n bytes with a binary unit: 512 B, 1.5 KiB, 11.2 MiB.
func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// escape writes s as XML character data.
func escape(b *strings.Builder, s string) {
	xml.EscapeText(b, []byte(s)) // a strings.Builder never fails a write
}
