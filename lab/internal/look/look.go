// Package look is how the lab's charts draw a row: a colour of Paul Tol's
// "muted" scheme and a dash pattern. The row tables (replay's heaps,
// rows' real mallocs) give each allocator its look; package report draws
// them, and gives the rows no table knows the looks left.
//
// Tol's nine colours stay apart for colour-blind readers (protanopia,
// deuteranopia, tritanopia) and on white; past nine, a colour comes back
// with another dash pattern, so that up to 9 × 5 rows are told apart.
package look

// A Look is how a series is drawn: a colour and a dash pattern ("" draws
// a solid line).
type Look struct {
	Color, Dash string
}

// Tol's muted colours.
const (
	Indigo = "#332288"
	Cyan   = "#88CCEE"
	Teal   = "#44AA99"
	Green  = "#117733"
	Olive  = "#999933"
	Sand   = "#DDCC77"
	Rose   = "#CC6677"
	Wine   = "#882255"
	Purple = "#AA4499"
)

// Colours is the order in which rows no table knows take colours.
var Colours = []string{Indigo, Rose, Teal, Wine, Green, Purple, Cyan, Olive, Sand}

// The dash patterns, in the order a taken look moves on to them.
const (
	Solid  = ""
	Dashed = "7 3"
	Dotted = "2 2" // a row behind a pool: its allocator's colour, dotted
)

// Dashes are the line patterns, solid first.
var Dashes = []string{Solid, Dashed, Dotted, "9 3 2 3", "14 4"}
