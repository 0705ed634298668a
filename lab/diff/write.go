package diff

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/trace"
)

// TopGroups is how many groups of a grouping the text lists, the largest
// changes; a line sums the rest.
const TopGroups = 15

// WriteText prints the comparison: the two traces, the headline figures
// A -> B (those at least one trace has), each grouping's largest changes (TopGroups, and a line for the
// rest), and the verdict.
func (d Traces) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "A: %s (%s)\nB: %s (%s)\n\n", d.A.Trace, d.A.Format, d.B.Trace, d.B.Format)
	tw := newTable(w)
	fmt.Fprintln(tw, "\tA\tB\tchange\t%\t")
	for _, m := range d.Headline {
		if m.A == nil && m.B == nil {
			continue // neither trace has it
		}
		name := m.Text
		if m.Name == ProgramPeakRSS {
			name += " (VmHWM)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, m.value(m.A), m.value(m.B), m.change(), m.percent())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if a, b := d.A.RSSOf, d.B.RSSOf; a != "" && b != "" && a != b {
		fmt.Fprintf(w, "  (the RSS is of %s in A, of %s in B)\n", trace.RSSOfText(a), trace.RSSOfText(b))
	}
	for _, g := range d.Groupings {
		if len(g.Groups) == 0 {
			continue
		}
		if err := writeGroups(w, g); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", d.Verdict)
	return err
}

func writeGroups(w io.Writer, g Grouped) error {
	fmt.Fprintf(w, "\nper %s: bytes live at the trace's peak, the largest changes first (%s)\n", g.By, text.Count(int64(len(g.Groups)), g.By))
	tw := newTable(w)
	fmt.Fprintf(tw, "A\tB\tchange\t%%\tobjects A\tB\tallocs A\tB\t  %s\n", g.By)
	top := g.Groups[:min(len(g.Groups), TopGroups)]
	for _, grp := range top {
		fmt.Fprintln(tw, groupCells(grp.A, grp.B, grp.Key))
	}
	if rest := g.Groups[len(top):]; len(rest) > 0 {
		var a, b Figures
		for _, grp := range rest {
			if grp.A != nil {
				a.add(*grp.A)
			}
			if grp.B != nil {
				b.add(*grp.B)
			}
		}
		fmt.Fprintln(tw, groupCells(&a, &b, fmt.Sprintf("(%d more)", len(rest))))
	}
	return tw.Flush()
}

// groupCells is one line of a grouping's table.
func groupCells(a, b *Figures, key string) string {
	m := measure("", "", "bytes", ptr(a, func(f *Figures) int64 { return f.Bytes }), ptr(b, func(f *Figures) int64 { return f.Bytes }))
	pct := m.percent()
	switch {
	case a == nil:
		pct = "new"
		m.Change = &b.Bytes
	case b == nil:
		pct = "gone"
		d := -a.Bytes
		m.Change = &d
	}
	count := func(f *Figures, v func(*Figures) int64) string {
		if f == nil {
			return "-"
		}
		return text.Thousands(v(f))
	}
	objects := func(f *Figures) int64 { return f.Objects }
	allocs := func(f *Figures) int64 { return f.Allocs }
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t  %s", m.value(m.A), m.value(m.B), m.change(), pct,
		count(a, objects), count(b, objects), count(a, allocs), count(b, allocs), key)
}

func ptr(f *Figures, v func(*Figures) int64) *int64 {
	if f == nil {
		return nil
	}
	x := v(f)
	return &x
}

// value writes one side's figure in the measure's unit, "-" for none.
func (m Measure) value(v *int64) string {
	switch {
	case v == nil:
		return "-"
	case m.Unit == "bytes":
		return size.Format(*v)
	}
	return text.Thousands(*v)
}

// change writes B - A with its sign, "" unless both have the figure.
func (m Measure) change() string {
	if m.Change == nil {
		return ""
	}
	s := m.value(m.Change)
	if *m.Change > 0 {
		s = "+" + s
	}
	return s
}

// percent writes the change in percent, "" when it has none or is 0.
func (m Measure) percent() string {
	switch {
	case m.Change != nil && *m.Change == 0:
		return ""
	case m.Percent != nil:
		return Percent(*m.Percent)
	case m.Change != nil && *m.Change != 0:
		return "from 0"
	}
	return ""
}

// WriteText prints the comparison of two tables: a line per row, its
// peak RSS and peak live A -> B with the change, and the rows only in
// one table.
func (d Replays) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "A: %s (%s)\nB: %s (%s)\nrows matched by %s\n\n", d.A.File, d.A.Schema, d.B.File, d.B.Schema, d.MatchedBy)
	tw := newTable(w)
	fmt.Fprintln(tw, "trace\tallocator\tpeak RSS A\tB\tchange\t%\tpeak live A\tB\tchange\t%\t")
	var onlyA, onlyB []RowDiff
	for _, r := range d.Rows {
		switch {
		case r.B == nil:
			onlyA = append(onlyA, r)
			continue
		case r.A == nil:
			onlyB = append(onlyB, r)
			continue
		}
		name := r.Trace
		if r.TraceB != "" {
			name += " -> " + r.TraceB
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.Allocator,
			r.PeakRSS.value(r.PeakRSS.A), r.PeakRSS.value(r.PeakRSS.B), r.PeakRSS.change(), r.PeakRSS.percent(),
			r.PeakLive.value(r.PeakLive.A), r.PeakLive.value(r.PeakLive.B), r.PeakLive.change(), r.PeakLive.percent(), rowErrors(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, only := range []struct {
		side string
		rows []RowDiff
	}{{"A", onlyA}, {"B", onlyB}} {
		if len(only.rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nonly in %s:\n", only.side)
		for _, r := range only.rows {
			fmt.Fprintf(w, "  %s %s\n", r.Trace, r.Allocator)
		}
	}
	return nil
}

// rowErrors says which side's replay stopped at an error: its figures
// are then incomplete.
func rowErrors(r RowDiff) string {
	switch a, b := r.A.Error != "", r.B.Error != ""; {
	case a && b:
		return "both stopped at an error"
	case a:
		return "A stopped at an error"
	case b:
		return "B stopped at an error"
	}
	return ""
}

// A table is a tabwriter of right-aligned columns whose lines lose the
// padding of their empty last cells when it is flushed.
type table struct {
	*tabwriter.Writer
	buf bytes.Buffer
	w   io.Writer
}

func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	return t
}

// Flush writes the table's lines, each without trailing spaces.
func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	for line := range bytes.Lines(t.buf.Bytes()) {
		if _, err := t.w.Write(append(bytes.TrimRight(line, " \n"), '\n')); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}
