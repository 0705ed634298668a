package report

import (
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// PNG export. The charts and heap maps are carve's own SVG, a small
// subset: rect, line, path (M, L, H, V and Z, absolute or relative;
// filled, stroked, or both), text (anchored, possibly turned a quarter),
// g, title. That subset is rasterized here, in pure Go, with the Go team's
// golang.org/x/image: its vector rasterizer (anti-aliased fills; a stroke
// is filled as a band around its line) and its fixed bitmap face for the
// text. The result is meant to be pasted into a chat: it is faithful in
// shapes and colours, plainer in type than a browser's rendering.

// WritePNG rasterizes one of the report's charts or heap maps (SVG as
// this package writes it) at scale times its size.
func WritePNG(w io.Writer, svg string, scale float64) error {
	img, _, err := rasterize(svg, scale)
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// Charts returns the SVG of every chart of a trace, in the report's
// order, each with a short name for a file of its own: fragmentation,
// rss-ratio, resident, footprint, sizes, lifetimes.
func Charts(t Trace) (names []string, svgs []string) {
	for _, c := range charts(t) {
		names, svgs = append(names, c.name), append(svgs, string(c.SVG))
	}
	return names, svgs
}

// style is what an element inherits from its group.
type style struct {
	fill, stroke color.RGBA
	hasFill      bool
	width        float64
	fontSize     float64
}

// rasterize draws svg into an image, and returns it with the texts it
// wrote there, in order (a text wholly outside the image is not among them).
func rasterize(svg string, scale float64) (*image.RGBA, []string, error) {
	d := xml.NewDecoder(strings.NewReader(svg))
	var img *image.RGBA
	var stack []style
	cur := style{fill: color.RGBA{0, 0, 0, 255}, hasFill: true, width: 1, fontSize: 13}
	inTitle := false
	var text *xml.StartElement
	var texts []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("report: chart SVG: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			a := attrs(t)
			stack = append(stack, cur)
			cur = inherit(cur, a)
			switch t.Name.Local {
			case "svg":
				w, _ := strconv.ParseFloat(a["width"], 64)
				h, _ := strconv.ParseFloat(a["height"], 64)
				if w <= 0 || h <= 0 {
					return nil, nil, fmt.Errorf("report: chart SVG has no size")
				}
				img = image.NewRGBA(image.Rect(0, 0, int(w*scale), int(h*scale)))
				draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
			case "title":
				inTitle = true
			case "rect":
				if img != nil {
					drawRect(img, a, cur, scale)
				}
			case "line":
				if img != nil {
					x1, y1, x2, y2 := num(a["x1"]), num(a["y1"]), num(a["x2"]), num(a["y2"])
					strokePath(img, [][2]float64{{x1, y1}, {x2, y2}}, cur, a["stroke-dasharray"], scale)
				}
			case "path":
				if img != nil {
					for _, pts := range parsePath(a["d"]) {
						if cur.hasFill && len(pts) >= 3 {
							fillPoly(img, scaled(pts, scale), cur.fill)
						}
						strokePath(img, pts, cur, a["stroke-dasharray"], scale)
					}
				}
			case "text":
				t := t
				text = &t
			}
		case xml.CharData:
			if text != nil && !inTitle && img != nil && drawText(img, attrs(*text), cur, string(t), scale) {
				texts = append(texts, string(t))
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "title":
				inTitle = false
			case "text":
				text = nil
			}
			cur = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
	}
	if img == nil {
		return nil, nil, fmt.Errorf("report: no <svg> element")
	}
	return img, texts, nil
}

func attrs(e xml.StartElement) map[string]string {
	m := make(map[string]string, len(e.Attr))
	for _, a := range e.Attr {
		m[a.Name.Local] = a.Value
	}
	return m
}

func num(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v
}

// inherit applies an element's presentation attributes.
func inherit(s style, a map[string]string) style {
	if v, ok := a["fill"]; ok {
		s.fill, s.hasFill = parseColor(v)
	}
	if v, ok := a["stroke"]; ok {
		s.stroke, _ = parseColor(v)
	}
	if v, ok := a["stroke-width"]; ok {
		s.width = num(v)
	}
	if v, ok := a["font-size"]; ok {
		s.fontSize = num(v)
	}
	return s
}

// parseColor reads #rgb, #rrggbb and a few names; "none" is no colour.
func parseColor(v string) (color.RGBA, bool) {
	switch v {
	case "none", "":
		return color.RGBA{}, false
	case "white":
		return color.RGBA{255, 255, 255, 255}, true
	case "black":
		return color.RGBA{0, 0, 0, 255}, true
	}
	if strings.HasPrefix(v, "#") {
		h := v[1:]
		if len(h) == 3 {
			h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
		}
		if n, err := strconv.ParseUint(h, 16, 32); err == nil && len(h) == 6 {
			return color.RGBA{uint8(n >> 16), uint8(n >> 8), uint8(n), 255}, true
		}
	}
	return color.RGBA{0, 0, 0, 255}, true
}

func drawRect(img *image.RGBA, a map[string]string, s style, scale float64) {
	x, y, w, h := num(a["x"])*scale, num(a["y"])*scale, num(a["width"])*scale, num(a["height"])*scale
	if s.hasFill && w > 0 && h > 0 {
		fillPoly(img, [][2]float64{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}}, s.fill)
	}
	if s.stroke.A != 0 && a["stroke"] != "none" && a["stroke"] != "" {
		pts := [][2]float64{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}, {x, y}}
		strokeScaled(img, pts, s.stroke, max(s.width*scale, 1))
	}
}

// parsePath reads a path of M, L, H, V and Z commands (and their
// relative forms, m, l, h, v, z): a polyline for each subpath, a closed
// one ending where it started.
func parsePath(d string) [][][2]float64 {
	var lines [][][2]float64
	var pts [][2]float64
	var at, start [2]float64
	end := func() {
		if len(pts) > 0 {
			lines = append(lines, pts)
		}
		pts = nil
	}
	cmd := byte('M')
	for i := 0; i < len(d); {
		c := d[i]
		switch {
		case c == ' ' || c == ',':
			i++
			continue
		case c == 'Z' || c == 'z':
			if len(pts) > 0 {
				pts = append(pts, start)
			}
			at = start
			end()
			i++
			continue
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			cmd = c
			i++
			continue
		}
		// The numbers of one command: one for H and V, two for the rest.
		n := 2
		if cmd == 'H' || cmd == 'h' || cmd == 'V' || cmd == 'v' {
			n = 1
		}
		var v [2]float64
		for k := range n {
			for i < len(d) && (d[i] == ' ' || d[i] == ',') {
				i++
			}
			j := i
			for j < len(d) && (d[j] >= '0' && d[j] <= '9' || d[j] == '.' || d[j] == 'e' || (d[j] == '-' || d[j] == '+') && (j == i || d[j-1] == 'e')) {
				j++
			}
			if j == i { // not a number: the path ends here
				end()
				return lines
			}
			v[k] = num(d[i:j])
			i = j
		}
		rel := cmd >= 'a'
		switch cmd {
		case 'M', 'm':
			end()
			if rel {
				v[0], v[1] = at[0]+v[0], at[1]+v[1]
			}
			at, start = v, v
			pts = append(pts, at)
			// The pairs after a moveto's first are linetos.
			if cmd = 'L'; rel {
				cmd = 'l'
			}
			continue
		case 'L':
			at = v
		case 'l':
			at = [2]float64{at[0] + v[0], at[1] + v[1]}
		case 'H':
			at[0] = v[0]
		case 'h':
			at[0] += v[0]
		case 'V':
			at[1] = v[0]
		case 'v':
			at[1] += v[0]
		default:
			continue // a command this subset does not draw
		}
		pts = append(pts, at)
	}
	end()
	return lines
}

// scaled returns the points pts (in SVG units) in pixels at scale.
func scaled(pts [][2]float64, scale float64) [][2]float64 {
	out := make([][2]float64, len(pts))
	for i, p := range pts {
		out[i] = [2]float64{p[0] * scale, p[1] * scale}
	}
	return out
}

// strokePath strokes a polyline given in SVG units, dashed if asked (a
// stroke-dasharray of any even or odd length, as SVG reads it).
func strokePath(img *image.RGBA, pts [][2]float64, s style, dash string, scale float64) {
	if s.stroke.A == 0 || len(pts) < 2 {
		return
	}
	pts = scaled(pts, scale)
	w := max(s.width*scale, 1)
	var pattern []float64
	for _, f := range strings.FieldsFunc(dash, func(r rune) bool { return r == ' ' || r == ',' }) {
		pattern = append(pattern, max(num(f)*scale, 1))
	}
	if len(pattern)%2 == 1 {
		pattern = append(pattern, pattern...) // SVG repeats an odd list
	}
	if len(pattern) == 0 {
		strokeScaled(img, pts, s.stroke, w)
		return
	}
	// Walk the polyline, drawing the on-lengths (even places of the
	// pattern) and skipping the off-lengths.
	k, left := 0, pattern[0]
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		seg := math.Hypot(b[0]-a[0], b[1]-a[1])
		for seg > 0 {
			step := min(seg, left)
			t := step / seg
			m := [2]float64{a[0] + (b[0]-a[0])*t, a[1] + (b[1]-a[1])*t}
			if k%2 == 0 {
				strokeScaled(img, [][2]float64{a, m}, s.stroke, w)
			}
			a, seg, left = m, seg-step, left-step
			if left <= 0 {
				k = (k + 1) % len(pattern)
				left = pattern[k]
			}
		}
	}
}

// strokeScaled fills a band of width w around each segment of pts (in
// pixels), with round-enough joins from the overlap of the bands: each
// band reaches a little past the joints, and not past the ends (a dash
// keeps its length).
func strokeScaled(img *image.RGBA, pts [][2]float64, c color.RGBA, w float64) {
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		dx, dy := b[0]-a[0], b[1]-a[1]
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		nx, ny := -dy/l*w/2, dx/l*w/2
		ex, ey := dx/l*w/4, dy/l*w/4 // past a joint: joins without gaps
		sx, sy, fx, fy := ex, ey, ex, ey
		if i == 1 {
			sx, sy = 0, 0
		}
		if i == len(pts)-1 {
			fx, fy = 0, 0
		}
		fillPoly(img, [][2]float64{
			{a[0] + nx - sx, a[1] + ny - sy}, {b[0] + nx + fx, b[1] + ny + fy},
			{b[0] - nx + fx, b[1] - ny + fy}, {a[0] - nx - sx, a[1] - ny - sy},
		}, c)
	}
}

// fillPoly fills a polygon, anti-aliased. The rasterizer covers the
// polygon's bounding box only: its mask costs the box, not the image.
func fillPoly(img *image.RGBA, pts [][2]float64, c color.RGBA) {
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, p := range pts {
		x0, y0, x1, y1 = min(x0, p[0]), min(y0, p[1]), max(x1, p[0]), max(y1, p[1])
	}
	box := image.Rect(int(math.Floor(x0)), int(math.Floor(y0)), int(math.Ceil(x1))+1, int(math.Ceil(y1))+1).Intersect(img.Bounds())
	if box.Empty() {
		return
	}
	r := vector.NewRasterizer(box.Dx(), box.Dy())
	ox, oy := float64(box.Min.X), float64(box.Min.Y)
	r.MoveTo(float32(pts[0][0]-ox), float32(pts[0][1]-oy))
	for _, p := range pts[1:] {
		r.LineTo(float32(p[0]-ox), float32(p[1]-oy))
	}
	r.ClosePath()
	r.Draw(img, box, image.NewUniform(c), image.Point{})
}

// drawText draws a text element with the fixed 7×13 face, each of its
// pixels a square of the side that brings it nearest the font size at
// the scale (at least one pixel), honouring text-anchor, a middle
// baseline, and a quarter turn. It reports whether any of the text fell
// inside the image.
func drawText(img *image.RGBA, a map[string]string, s style, str string, scale float64) bool {
	face := basicfont.Face7x13
	str = ascii.Replace(str)
	k := max(int(math.Round(scale*s.fontSize/13)), 1)
	width := font.MeasureString(face, str).Ceil()
	x, y := num(a["x"])*scale, num(a["y"])*scale
	rotate := false
	if tr := a["transform"]; strings.HasPrefix(tr, "translate(") {
		var tx, ty float64
		fmt.Sscanf(tr, "translate(%g %g)", &tx, &ty)
		x, y = tx*scale, ty*scale
		rotate = strings.Contains(tr, "rotate(-90)")
	}
	col := s.fill
	if !s.hasFill {
		col = color.RGBA{0, 0, 0, 255}
	}
	// Draw into a small image first, then copy it, enlarged and turned.
	tmp := image.NewRGBA(image.Rect(0, 0, width+2, 14))
	dr := font.Drawer{Dst: tmp, Src: image.NewUniform(col), Face: face, Dot: fixed.P(1, 11)}
	dr.DrawString(str)
	along := float64(width * k) // the text's length on the image
	switch a["text-anchor"] {
	case "middle":
		if rotate {
			y += along / 2
		} else {
			x -= along / 2
		}
	case "end":
		if rotate {
			y += along
		} else {
			x -= along
		}
	}
	if a["dominant-baseline"] == "middle" { // down the glyphs: across the line of text
		if rotate {
			x += float64(4 * k)
		} else {
			y += float64(4 * k)
		}
	}
	ox, oy := int(math.Round(x)), int(math.Round(y))
	tb := tmp.Bounds()
	drawn := false
	for py := 0; py < tb.Dy(); py++ {
		for px := 0; px < tb.Dx(); px++ {
			p := tmp.RGBAAt(px, py)
			if p.A == 0 {
				continue
			}
			for i := range k {
				for j := range k {
					// Glyph pixel (px, py), baseline at row 11.
					u, v := px*k+i, (py-11)*k+j
					dx, dy := ox+u, oy+v
					if rotate { // a quarter turn counter-clockwise about (x, y)
						dx, dy = ox+v, oy-u
					}
					if image.Pt(dx, dy).In(img.Bounds()) {
						img.SetRGBA(dx, dy, blend(img.RGBAAt(dx, dy), p))
						drawn = true
					}
				}
			}
		}
	}
	return drawn
}

// ascii spells the few other characters the report's pictures write in
// the characters of the fixed face, which has ASCII's only.
var ascii = strings.NewReplacer("·", "|", "…", "...", "×", "x", "–", "-", "—", "-", "µ", "u")

// blend puts the premultiplied colour p over q.
func blend(q, p color.RGBA) color.RGBA {
	k := 255 - uint32(p.A)
	return color.RGBA{
		uint8(uint32(p.R) + uint32(q.R)*k/255), uint8(uint32(p.G) + uint32(q.G)*k/255),
		uint8(uint32(p.B) + uint32(q.B)*k/255), uint8(uint32(p.A) + uint32(q.A)*k/255),
	}
}
