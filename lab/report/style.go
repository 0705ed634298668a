package report

import (
	"strings"

	lk "github.com/carvelab/carve/lab/internal/look"
	"github.com/carvelab/carve/lab/rows"
)

// The look of the rows in the charts: the tables of rows give each known
// allocator its look (rows.LookOf: replay's heaps, rows' real mallocs),
// so that it keeps one look in every report. The four fit policies and
// glibc, the rows the shipped trace compares, have five different
// colours, all solid; glibc's and mimalloc's are far apart; a heap's
// variant (buddy-header beside buddy) shares its colour with another
// dash. A row behind a pool takes its allocator's colour, dotted; a row
// no table knows the next colour of look.Colours. Black is live
// memory's, and grey the program's own heap's (a Go trace).

// look is how a series is drawn.
type look = lk.Look

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
		l, ok := rows.LookOf(base)
		if !ok {
			l = look{Color: lk.Colours[next%len(lk.Colours)]}
			next++
		}
		if pooled != "" {
			l.Dash = lk.Dotted
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
	colours, dashes := lk.Colours, lk.Dashes
	for i, col := range colours {
		if col == l.Color {
			c = i
		}
	}
	d := 0
	for i, p := range dashes {
		if p == l.Dash {
			d = i
		}
	}
	for k := range len(colours) * len(dashes) {
		cand := look{Color: colours[(c+(d+k)/len(dashes))%len(colours)], Dash: dashes[(d+k)%len(dashes)]}
		if !used[cand] {
			return cand
		}
	}
	return l // more rows than looks: repeat
}
