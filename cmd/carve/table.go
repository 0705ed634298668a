package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/rows"
)

// printTable prints the rows of one trace in format: text, markdown or
// csv. The headline comes first: peak RSS / peak live, the same measure
// for every row; then each allocator's own footprint and the ratios made
// of it, which rank nothing across allocators. A trace with phases gets a
// column for the growth of the footprint in its last phase, where the
// article's lessons are. stable leaves out the figures that vary from run
// to run (see rows.Row.ForStable) and names no best row.
func printTable(w io.Writer, format string, stable bool, t rows.Table) error {
	head := []string{"allocator", "peak live"}
	var marked int64 // a Go program's peak marked heap, the same in every row
	for _, r := range t.Rows {
		marked = max(marked, r.PeakMarked)
	}
	if !stable {
		head = append(head, "peak RSS", "RSS/live")
		if marked > 0 {
			head = append(head, "RSS/marked")
		}
	}
	head = append(head, "peak footprint", "fp/live", "avg fp/live", "frag. at end")
	var phase string
	for _, r := range t.Rows {
		if name, _, ok := r.Growth(); ok {
			phase = name
			break
		}
	}
	if phase != "" {
		head = append(head, "grew in "+phase)
	}
	if !stable {
		head = append(head, "ns/op")
	}
	head = append(head, "trace errors")
	ratio := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	cells := func(r rows.Row) []string {
		if r.Error != "" {
			c := make([]string, len(head))
			c[0], c[1] = r.Allocator, "failed: "+r.Error
			return c
		}
		footprint := func(n int64) string {
			if r.Stable && r.Measured == "child" {
				return "-"
			}
			return size.Format(n)
		}
		frag := "-"
		if r.Fragmentation != nil {
			frag = strconv.FormatFloat(*r.Fragmentation, 'f', 1, 64) + "%"
		}
		name := r.Allocator
		switch {
		case r.Best && format == "text":
			name = "* " + name
		case r.Best && format == "markdown":
			name = "**" + name + "**"
		}
		c := []string{name, size.Format(r.PeakLive)}
		if !stable {
			c = append(c, size.Format(r.PeakRSS), ratio(r.RSSRatio))
			if marked > 0 {
				c = append(c, ratio(r.MarkedRatio))
			}
		}
		c = append(c, footprint(r.PeakFootprint), ratio(r.PeakRatio), ratio(r.AvgRatio), frag)
		if phase != "" {
			_, grew, _ := r.Growth()
			c = append(c, footprint(grew))
		}
		if !stable {
			c = append(c, sig3(r.NsPerOp))
		}
		return append(c, strconv.FormatInt(r.TraceErrors, 10))
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
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
	for _, n := range t.Notes() {
		fmt.Fprintf(w, "  %s\n", n)
	}
	for _, r := range t.Rows {
		if r.RSSNote != "" && !stable {
			fmt.Fprintf(w, "  %s: no RSS/live: %s\n", r.Allocator, r.RSSNote)
		}
	}
	for _, r := range t.Rows {
		if r.FirstTraceError != "" {
			// The trace's errors are the trace's: every row meets the same.
			fmt.Fprintf(w, "  skipped events that do not fit the trace's live objects or the budget; the first: %s\n", r.FirstTraceError)
			break
		}
	}
	if f := t.Findings(); len(f) > 0 && !stable {
		fmt.Fprintf(w, "  verdict: %s\n", strings.Join(f, "\n           "))
	}
	_, err := fmt.Fprintln(w)
	return err
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
