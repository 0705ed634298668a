package report

import "strings"

// The look of the rows in the charts. The colours are Paul Tol's "muted"
// scheme, nine colours chosen to stay apart for colour-blind readers
// (protanopia, deuteranopia, tritanopia) and on white; past nine, a colour
// comes back with another dash pattern, so that up to 9 × 5 rows (the
// lab's scenario tables have 20) are told apart by colour and line. The
// known allocators keep one look in every report: the four fit policies
// and glibc, the rows the shipped trace compares, have five different
// colours, all solid; glibc's and mimalloc's are far apart; a heap's
// variant (buddy-header beside buddy) shares its colour with another
// dash. A row behind a pool takes its allocator's colour, dotted. Black
// is live memory's, and grey the program's own heap's (a Go trace).

// Tol's muted colours.
const (
	indigo = "#332288"
	cyan   = "#88CCEE"
	teal   = "#44AA99"
	green  = "#117733"
	olive  = "#999933"
	sand   = "#DDCC77"
	rose   = "#CC6677"
	wine   = "#882255"
	purple = "#AA4499"
)

// colours is the order in which rows of unknown allocators take colours.
var colours = []string{indigo, rose, teal, wine, green, purple, cyan, olive, sand}

// dashes are the line patterns, solid first ("" draws a solid line).
var dashes = []string{"", "7 3", "2 2", "9 3 2 3", "14 4"}

// look is how a series is drawn.
type look struct {
	color, dash string
}

// known are the looks of the allocators the lab knows.
var known = map[string]look{
	"first-fit":    {indigo, ""},
	"next-fit":     {teal, ""},
	"best-fit":     {green, ""},
	"ao-first-fit": {olive, ""},
	"glibc":        {rose, ""},
	"buddy":        {wine, ""},
	"buddy-header": {wine, "7 3"},
	"sizeclass":    {sand, ""},
	"go":           {purple, ""},
	"jemalloc":     {cyan, ""},
	"tcmalloc":     {indigo, "7 3"},
	"mimalloc":     {teal, "7 3"},
}

// looks gives each of names (the rows of a chart, in order) a look of its
// own: the allocator's known look, or for a row behind a pool its
// allocator's colour dotted, or the next unused one; a look already taken
// in the chart moves on to its colour's next dash pattern, then to the
// next colour.
func looks(names []string) []look {
	used := map[look]bool{}
	out := make([]look, len(names))
	next := 0 // the next colour for an unknown allocator
	for i, name := range names {
		base, pooled, _ := strings.Cut(name, "+pool(")
		base, _, _ = strings.Cut(base, "(") // go(gogc=50) is go's
		l, ok := known[base]
		if !ok {
			l = look{colours[next%len(colours)], ""}
			next++
		}
		if pooled != "" {
			l.dash = dashes[2]
		}
		out[i] = free(l, used)
		used[out[i]] = true
	}
	return out
}

// free returns l if it is not used, else the first look after it that is
// not: the same colour with the next dash patterns, then the next
// colours.
func free(l look, used map[look]bool) look {
	c := 0
	for i, col := range colours {
		if col == l.color {
			c = i
		}
	}
	d := 0
	for i, p := range dashes {
		if p == l.dash {
			d = i
		}
	}
	for k := range len(colours) * len(dashes) {
		cand := look{colours[(c+(d+k)/len(dashes))%len(colours)], dashes[(d+k)%len(dashes)]}
		if !used[cand] {
			return cand
		}
	}
	return l // more rows than looks: repeat
}
