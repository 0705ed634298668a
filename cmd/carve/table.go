package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/rows"
)

// tableOf is what decides a table's columns: the rows of one trace,
// whether it is the --stable form, and whether it has every column.
type tableOf struct {
	stable bool
	wide   bool   // every column, not only those that fit 100 characters (--wide, and csv and markdown)
	marked int64  // a Go program's peak marked heap, the same in every row
	phase  string // the trace's last phase, if it has phases
	errors bool   // a row met trace errors
}

// maxWidth is the most characters a line of the text output takes without
// --wide: the tables' and carve advise's (which lays its text out to it).
const maxWidth = text.Width

// A column is one column of the replay tables, in their order: its head,
// what it is (carve help replay lists the columns from here), whether a
// table has it, whether only a wide one does, and a row's cell.
type column struct {
	head string
	doc  string
	has  func(t tableOf) bool // nil: every table
	wide bool                 // only with --wide (and in csv and markdown)
	cell func(r rows.Row, t tableOf) string
}

// shows reports whether a table of t has the column.
func (c column) shows(t tableOf) bool {
	return (c.has == nil || c.has(t)) && (t.wide || !c.wide)
}

// columns are the replay tables' columns, the headline first after the
// names. A failed row has its message in the second and nothing else.
var columns = []column{
	{head: "allocator", doc: "the row: an allocator, with its routes (+pool(SIZE)...); * marks the best by the headline",
		cell: func(r rows.Row, _ tableOf) string { return r.Allocator }},
	{head: "peak live", doc: "the most bytes the trace held live at once, the same in every row (the verdict gives it)",
		wide: true, cell: func(r rows.Row, _ tableOf) string { return size.Format(r.PeakLive) }},
	{head: "peak RSS", doc: "the most bytes the row held resident",
		has: unstable, cell: func(r rows.Row, _ tableOf) string { return size.Format(r.PeakRSS) }},
	{head: "RSS/live", doc: "the headline: peak RSS / peak live, the one measure every row shares",
		has: unstable, cell: func(r rows.Row, _ tableOf) string { return ratio(r.RSSRatio) }},
	{head: "RSS/marked", doc: "for a Go program's trace, peak RSS / the program's peak marked heap",
		has: func(t tableOf) bool { return !t.stable && t.marked > 0 }, cell: func(r rows.Row, _ tableOf) string { return ratio(r.MarkedRatio) }},
	{head: "peak footprint", doc: "the most bytes the allocator held from the OS, by its own count",
		wide: true, cell: func(r rows.Row, _ tableOf) string { return footprintCell(r, r.PeakFootprint) }},
	{head: "fp/live", doc: "peak footprint / peak live (Johnstone and Wilson's measure #4)",
		cell: func(r rows.Row, _ tableOf) string { return ratio(r.PeakRatio) }},
	{head: "avg fp/live", doc: "footprint / live averaged over the trace's samples (their measure #1)",
		wide: true, cell: func(r rows.Row, _ tableOf) string { return ratio(r.AvgRatio) }},
	{head: "frag. at end", doc: "the FREENIX paper's fragmentation at the end, 100 x (footprint / live - 1)",
		cell: func(r rows.Row, _ tableOf) string {
			if r.Fragmentation == nil {
				return "-"
			}
			return strconv.FormatFloat(*r.Fragmentation, 'f', 1, 64) + "%"
		}},
	{head: "grew in PHASE", doc: "for a generated scenario, how much the footprint grew in its last phase",
		has: func(t tableOf) bool { return t.phase != "" }, cell: func(r rows.Row, _ tableOf) string {
			_, grew, _ := r.Growth()
			return footprintCell(r, grew)
		}},
	{head: "ns/op", doc: nsPerOpDoc,
		has: unstable, cell: func(r rows.Row, _ tableOf) string {
			if !r.Timed() {
				return "-"
			}
			return sig3(r.NsPerOp)
		}},
	{head: "trace errors", doc: "the trace's events skipped: frees of nothing live, or past the budget (without --wide, only where a row skipped some)",
		has: func(t tableOf) bool { return t.wide || t.errors }, cell: func(r rows.Row, _ tableOf) string { return strconv.FormatInt(r.TraceErrors, 10) }},
}

// nsPerOpDoc says what the time per call includes (package replay's
// callClock measures it so, and libc's loop.c).
var nsPerOpDoc = fmt.Sprintf("nanoseconds inside an allocator call: every call timed, the system calls (brk, mmap, madvise, trims) and page faults it makes included (one that writes a header into a fresh page takes the page's first fault, which a program would take at its first write otherwise); not the replayer's checks, its writes into the blocks (--touch), its pipe to a child, the clock's own cost or the time the thread was off the CPU; - under %s timed calls",
	text.Thousands(rows.MinTimedOps))

func unstable(t tableOf) bool { return !t.stable }

// ratio writes a ratio with three decimals, or - where there is none.
func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// footprintCell writes a footprint, or - for a --stable row measured in a
// child, whose footprint is its RSS.
func footprintCell(r rows.Row, n int64) string {
	if r.Stable && r.Measured == "child" {
		return "-"
	}
	return size.Format(n)
}

// unstableColumns returns the heads of the columns --stable leaves out.
func unstableColumns() []string {
	every := tableOf{stable: true, wide: true, marked: 1, phase: "PHASE", errors: true} // a --stable table with every other column
	var heads []string
	for _, c := range columns {
		if !c.shows(every) {
			heads = append(heads, c.head)
		}
	}
	return heads
}

// columnsHelp lists the columns for carve help replay, in the tables'
// order, each marked if --stable leaves it out.
func columnsHelp() string {
	var b strings.Builder
	unstable := unstableColumns()
	for _, c := range columns {
		doc := c.doc
		if c.wide {
			doc += " (with --wide)"
		}
		if slices.Contains(unstable, c.head) {
			doc += " (not in --stable)"
		}
		for i, l := range text.Wrap(doc, 80) {
			head := ""
			if i == 0 {
				head = c.head
			}
			fmt.Fprintf(&b, "  %-15s %s\n", head, l)
		}
	}
	return b.String()
}

// tableStyle is how the tables are printed: the format (text, markdown
// or csv), --stable and --wide.
type tableStyle struct {
	format       string
	stable, wide bool
}

// printTable prints the rows of one trace as style says, with the columns
// the table has (see columns): the headline comes first, peak RSS / peak
// live, the same measure for every row; then each allocator's own
// footprint and the ratios made of it, which rank nothing across
// allocators. A text table has the columns that fit maxWidth, unless
// wide; csv and markdown have every one. stable leaves out the figures
// that vary from run to run (see rows.Row.ForStable) and names no best
// row.
func printTable(w io.Writer, style tableStyle, t rows.Table) error {
	format, stable := style.format, style.stable
	of := tableOf{stable: stable, wide: style.wide || format != "text"}
	for _, r := range t.Rows {
		of.marked = max(of.marked, r.PeakMarked)
		if name, _, ok := r.Growth(); ok && of.phase == "" {
			of.phase = name
		}
		of.errors = of.errors || r.TraceErrors > 0
	}
	var cols []column
	var head []string
	for _, c := range columns {
		if c.shows(of) {
			cols = append(cols, c)
			head = append(head, strings.Replace(c.head, "PHASE", of.phase, 1))
		}
	}
	cells := func(r rows.Row) []string {
		c := make([]string, len(cols))
		if r.Error != "" {
			c[0], c[1] = r.Allocator, "failed: "+r.Error
			return c
		}
		for i, col := range cols {
			c[i] = col.cell(r, of)
		}
		switch {
		case r.Best && format == "text":
			c[0] = "* " + c[0]
		case r.Best && format == "markdown":
			c[0] = "**" + c[0] + "**"
		}
		return c
	}
	switch format {
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(append([]string{"trace"}, head...))
		for _, r := range t.Rows {
			cw.Write(append([]string{r.Trace}, cells(r)...))
		}
		cw.Flush()
		return cw.Error()
	case "markdown":
		fmt.Fprintf(w, "%s\n\n| %s |\n|%s\n", t.Trace.Label, strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells(r), " | "))
		}
		if v := t.Verdict(); v != "" && !stable {
			fmt.Fprintf(w, "\nVerdict: %s.\n", v)
		}
		_, err := fmt.Fprintln(w)
		return err
	}
	fmt.Fprintf(w, "%s\n", t.Trace.Label)
	for _, l := range text.Wrap(t.Trace.About, 96) {
		fmt.Fprintf(w, "  %s\n", l)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	var errs []string
	for _, r := range t.Rows {
		c := cells(r)
		if r.Error != "" {
			// A failure's message would stretch its column: it goes
			// under the table instead.
			errs = append(errs, fmt.Sprintf("  %s: %s", r.Allocator, r.Error))
			c[1] = "failed (below)"
		}
		fmt.Fprintln(tw, strings.Join(c, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The lines under the table, each wrapped to the width unless wide,
	// but for a failure's message, which names what failed whole (a
	// path, a line) for the reader to copy.
	width := maxWidth
	if style.wide {
		width = 0
	}
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
	for _, n := range t.Notes() {
		printWrapped(w, "  ", "    ", n, width)
	}
	for _, r := range t.Rows {
		if r.RSSNote != "" && !stable {
			printWrapped(w, "  ", "    ", r.Allocator+": no RSS/live: "+r.RSSNote, width)
		}
	}
	for _, r := range t.Rows {
		if r.FirstTraceError != "" {
			// The trace's errors are the trace's: every row meets the same.
			// The first, which names its file and line, whole.
			printWrapped(w, "  ", "    ", "skipped events that do not fit the trace's live objects or the budget; the first:", width)
			fmt.Fprintf(w, "    %s\n", r.FirstTraceError)
			break
		}
	}
	if f := t.Findings(); len(f) > 0 && !stable {
		for i, l := range f {
			first := "           "
			if i == 0 {
				first = "  verdict: "
			}
			printWrapped(w, first, "             ", l, width)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// printWrapped prints s after first, wrapped to width (0: not wrapped),
// its later lines after next.
func printWrapped(w io.Writer, first, next, s string, width int) {
	for _, l := range text.Hang(first, next, strings.Fields(s), width) {
		fmt.Fprintln(w, l)
	}
}

// sig3 writes v with three significant digits: 36.8, 245, 2080000.
func sig3(v float64) string {
	if v == 0 {
		return "0"
	}
	d := 3 - int(math.Floor(math.Log10(math.Abs(v)))) - 1
	if d <= 0 {
		p := math.Pow(10, float64(-d))
		return strconv.FormatFloat(math.Round(v/p)*p, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// progress shows, on a terminal, how far the replays have come, once they
// have run for a second. A nil *progress shows nothing.
type progress struct {
	rows.Progress
	quit chan struct{}
	wg   sync.WaitGroup
}

// counts returns what the replays count into, or nil.
func (p *progress) counts() *rows.Progress {
	if p == nil {
		return nil
	}
	return &p.Progress
}

func (p *progress) stop() {
	if p != nil {
		close(p.quit)
		p.wg.Wait()
	}
}

// startProgress shows how far the replays have come on w: on a terminal
// (a character device), a bar redrawn four times a second once they have
// run for a second, naming the replays under way; elsewhere (a file, a
// pipe, a CI log), a line every 10 seconds, so that a long run is never
// silent. total is the number of replays, 0 when not known.
func startProgress(w io.Writer, total int) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	p := &progress{quit: make(chan struct{})}
	p.Total = total
	every, after := 10*time.Second, 10*time.Second
	if tty {
		every, after = 250*time.Millisecond, time.Second
	}
	p.wg.Go(func() {
		start := time.Now()
		tick := time.NewTicker(every)
		defer tick.Stop()
		shown := false
		for {
			select {
			case <-p.quit:
				if shown && tty {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-tick.C:
				el := time.Since(start)
				switch {
				case el < after:
				case tty:
					fmt.Fprint(w, "\r\033[K"+clip(p.line(el), 120))
					shown = true
				default:
					fmt.Fprintln(w, p.line(el))
				}
			}
		}
	})
	return p
}

// line is the progress display: a bar of the replays finished, the
// events replayed, the time taken, and the replays under way.
func (p *progress) line(elapsed time.Duration) string {
	const width = 20
	done := int(p.Finished.Load())
	s := "carve: "
	if p.Total > 0 {
		n := min(done*width/p.Total, width)
		s += fmt.Sprintf("[%s%s] %d/%d replays, ", strings.Repeat("#", n), strings.Repeat(".", width-n), done, p.Total)
	}
	s += fmt.Sprintf("%.1fM events, %s", float64(p.Events.Load())/1e6, elapsed.Round(time.Second))
	if running := p.Running(); len(running) > 0 {
		s += "; running " + strings.Join(running, ", ")
	}
	return s
}

// clip cuts s to n bytes, with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// rowsHelp lists the allocators a row can replay, each with its line,
// for carve help replay, in the tables' order.
func rowsHelp() string {
	var b strings.Builder
	for _, a := range rows.Allocators() {
		fmt.Fprintf(&b, "  %-13s %s\n", a.Name, a.Doc)
	}
	return b.String()
}

// fitWriter writes each line it is given as text.Lines lays it out within
// maxWidth: the demonstrations' lines, in the article's wording, that run
// wider. A line is written once its newline comes; flush writes the rest.
type fitWriter struct {
	w    io.Writer
	line []byte
}

func (f *fitWriter) Write(p []byte) (int, error) {
	f.line = append(f.line, p...)
	for {
		i := bytes.IndexByte(f.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		if _, err := io.WriteString(f.w, text.Lines(string(f.line[:i]), maxWidth)+"\n"); err != nil {
			return 0, err
		}
		f.line = f.line[i+1:]
	}
}

func (f *fitWriter) flush() error {
	if len(f.line) == 0 {
		return nil
	}
	_, err := io.WriteString(f.w, text.Lines(string(f.line), maxWidth))
	f.line = nil
	return err
}
