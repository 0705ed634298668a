package advise

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/carvelab/carve/internal/text"
)

// The advice's text is laid out to a width, the most columns a line
// takes on a terminal (a tab to the next multiple of 8): its paragraphs
// wrapped, its tables cut to the columns that fit (the headline first),
// its code's long lines broken where Go allows. With no width (0), each
// paragraph is one line and every column is printed: carve advise --wide.

// textWriter writes the advice's text laid out to width (0: none),
// keeping the first write error.
type textWriter struct {
	w     io.Writer
	width int
	err   error
}

func (e *textWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *textWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

// para writes s as a paragraph: its first line after first, the others
// after rest.
func (e *textWriter) para(first, rest, s string) {
	if e.width <= 0 {
		e.printf("%s%s\n", first, s)
		return
	}
	e.fill(first, rest, strings.Fields(s))
}

// list writes head and items, the items joined by ", ", as a paragraph
// that breaks between two items where it can: "round 1, saving per
// candidate: 12 B 348.0 KiB, 20 B 290.0 KiB, ...".
func (e *textWriter) list(first, rest, head string, items []string) {
	if e.width <= 0 {
		e.printf("%s%s%s\n", first, head, strings.Join(items, ", "))
		return
	}
	room := e.width - max(len(first), len(rest))
	words := strings.Fields(head)
	for i, it := range items {
		if i < len(items)-1 {
			it += ","
		}
		if len(it) > room {
			words = append(words, strings.Fields(it)...)
			continue
		}
		words = append(words, it)
	}
	e.fill(first, rest, words)
}

// fill writes words in lines of at most e.width, the first after first,
// the others after rest, a size's unit on the line of its number
// ("19.53 MiB").
func (e *textWriter) fill(first, rest string, words []string) {
	for _, l := range text.Hang(first, rest, words, e.width) {
		e.printf("%s\n", l)
	}
}

// code writes Go code, each line after indent; with a width, a line
// too long for it is broken: a comment wrapped, a comment at the end of
// a line of code put above it, a line of code broken after a comma,
// where Go allows a newline, its continuation indented by a tab.
func (e *textWriter) code(indent, code string) {
	for line := range strings.Lines(code) {
		line = strings.TrimSuffix(line, "\n")
		if e.width <= 0 || columns(indent+line) <= e.width {
			e.printf("%s%s\n", indent, line)
			continue
		}
		in := indent + line[:len(line)-len(strings.TrimLeft(line, "\t"))]
		stmt := strings.TrimLeft(line, "\t")
		comment := ""
		if c, ok := strings.CutPrefix(stmt, "// "); ok {
			stmt, comment = "", c
		} else if s, c, ok := strings.Cut(stmt, " // "); ok {
			stmt, comment = s, c
		}
		if comment != "" {
			for _, l := range text.Wrap(comment, e.width-columns(in)-len("// ")) {
				e.printf("%s// %s\n", in, l)
			}
		}
		if stmt != "" {
			e.stmt(in, stmt)
		}
	}
}

// stmt writes a line of code after indent, broken after its commas
// where it is too long for e.width.
func (e *textWriter) stmt(indent, stmt string) {
	words := strings.SplitAfter(stmt, ", ")
	for i := range words[:len(words)-1] {
		words[i] = strings.TrimSuffix(words[i], " ")
	}
	for i, l := range text.Fill(words, e.width-columns(indent+"\t")) {
		if i == 0 {
			e.printf("%s%s\n", indent, l)
		} else {
			e.printf("%s\t%s\n", indent, l)
		}
	}
}

// columns returns how many columns s takes on a terminal: one a rune, a
// tab to the next multiple of 8.
func columns(s string) int {
	n := 0
	for _, r := range s {
		if r == '\t' {
			n += 8 - n%8
			continue
		}
		n++
	}
	return n
}

// A table is a text table: its columns, in the order they are worth,
// and its rows. With a width, it keeps the first columns whose lines fit
// (at least headline of them) and names the others below, for --wide.
type table struct {
	heads    []string
	left     []bool // the columns aligned left; the others, right
	headline int    // the columns always kept
	rows     [][]string
	// under is, for each row, a line printed below it, or "": the
	// trial's site, where its name with the site leaves out columns.
	under []string
}

// add adds a row and, when under is not "", the line printed below it.
func (t *table) add(under string, cells ...string) {
	t.rows = append(t.rows, cells)
	t.under = append(t.under, under)
}

// kept returns how many columns the table keeps, indented by indent, at
// width (all of them at 0).
func (t *table) kept(indent string, width int) int {
	if width <= 0 {
		return len(t.heads)
	}
	n, used := 0, len(indent)
	for i, w := range t.widths() {
		if i > 0 {
			used += 2
		}
		if used += w; used > width && n >= max(t.headline, 1) {
			break
		}
		n++
	}
	return n
}

// widths returns each column's width: its widest cell, head included.
func (t *table) widths() []int {
	ws := make([]int, len(t.heads))
	for i, h := range t.heads {
		ws[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			ws[i] = max(ws[i], utf8.RuneCountInString(c))
		}
	}
	return ws
}

// write writes the table, each line after indent, with the columns it
// keeps at e.width, and then, when it left some out, a line naming them.
func (t *table) write(e *textWriter, indent string) {
	n := t.kept(indent, e.width)
	ws := t.widths()
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range cells[:n] {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", ws[i]-utf8.RuneCountInString(c))
			if t.left[i] {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		e.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
	line(t.heads)
	for i, r := range t.rows {
		line(r)
		if t.under[i] != "" {
			e.para(indent+"  ", indent+"    ", t.under[i])
		}
	}
	switch left := t.heads[n:]; len(left) {
	case 0:
	case 1:
		e.para(indent, indent+"  ", "--wide adds the column "+left[0])
	default:
		e.para(indent, indent+"  ", "--wide adds the columns "+strings.Join(left[:len(left)-1], ", ")+" and "+left[len(left)-1])
	}
}
