package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/carvelab/carve/lab/advise"
	"github.com/carvelab/carve/lab/report"
	"github.com/carvelab/carve/lab/rows"
)

var reportCommand = &command{
	name: "report", args: "[-o FILE] [flags] TRACE...", interspersed: true,
	short: "replay and write one self-contained HTML file of charts, tables and heap maps",
	long: `The report shows, per trace, the table with the headline (peak RSS over
peak live) first and its verdict; peak RSS over peak live so far for every
allocator, zoomed; the footprint and resident memory of every allocator over
time against the live line, the trace's phases marked; a bar chart of the
measures; the trace's size and lifetime histograms; and a map of each of
carve's heaps at its peak footprint (live, free, headers, padding) and,
where its holes and blocks are too small for that map to show, the window
of it where free and used memory take turns most often (64 times or more),
zoomed. For a Go
program's trace it adds its types (as carve stats lists them) and the
program's own heap and GC goal from the trace's metrics, beside the replays.
With --advise, a Go program's trace gets the advisor's result too, as
carve advise prints it: the types it moved off the Go heap, measured, their
bounds and the code. A summary of the verdicts and the sources close it.
The file needs no
script, font or network. The other flags are carve
replay's but --html (this command writes the report); the tables are
printed as carve replay prints them.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var f replayFlags
		f.register(fs)
		out := fs.String("o", "report.html", "write the report to `FILE`")
		pngDir := fs.String("png", "", "also write every chart and heap map as a PNG file into `DIR` (for pasting into chat)")
		maps := fs.Bool("maps", true, "draw a map of each of carve's heaps at its peak footprint, and a window of it zoomed (another replay each, up to that event)")
		mapAt := fs.Int64("map-at", 0, "draw the heap maps after event `N` instead of at each heap's peak footprint")
		adv := fs.Bool("advise", false, "for a Go program's trace, add what carve advise measures: its types moved off the Go heap, their bounds and the code (its replays besides the report's)")
		return func(c *cli, args []string) error {
			cfg, err := f.config(args)
			if err != nil {
				return err
			}
			if *mapAt < 0 {
				return badUsage("--map-at %d: want an event number from 1", *mapAt)
			}
			return writeReport(c, cfg, &f, reportOptions{path: *out, png: *pngDir, maps: *maps, mapAt: *mapAt, advise: *adv,
				command: "carve report " + strings.Join(c.args, " ")})
		}
	},
}

// unreadable returns the error of a trace every row of which could not
// read it: a report of it would show nothing.
func unreadable(tables []rows.Table) error {
	for _, t := range tables {
		all := len(t.Rows) > 0
		for _, r := range t.Rows {
			all = all && r.ErrorKind == rows.KindInput
		}
		if all {
			return inputError{fmt.Errorf("%s: %s", t.Trace.Label, t.Rows[0].Error)}
		}
	}
	return nil
}

// reportOptions are what carve report (or replay --html) writes.
type reportOptions struct {
	path, png, command string
	maps, advise       bool
	mapAt              int64
}

// writeReport replays cfg's traces, writes the report, and prints the
// tables as carve replay does.
func writeReport(c *cli, cfg replayConfig, f *replayFlags, o reportOptions) error {
	if o.path == "" {
		return badUsage("-o: want the report's FILE")
	}
	var inputs []string
	for _, t := range cfg.traces {
		inputs = append(inputs, t.Label)
	}
	out, err := openOutput(o.path, nil, inputs...)
	if err != nil {
		return err
	}
	if o.png != "" {
		if err := os.MkdirAll(o.png, 0o755); err != nil {
			out.finish(false)
			return badUsage("--png %s: %v", o.png, err)
		}
	}
	cfg.opt.Series = report.Series
	var sums []*report.Summary
	var wg sync.WaitGroup
	wg.Go(func() { sums = report.Summarize(cfg.traces) })
	tables := f.replay(c, cfg)
	wg.Wait()

	if err := unreadable(tables); err != nil {
		out.finish(false)
		emit(c, tables, f)
		return err
	}
	var prog *progress
	if o.maps {
		prog = startProgress(c.stderr, 0)
	}
	rep := report.Report{Title: "carve: fragmentation report", Generated: time.Now(), Command: o.command,
		Traces: report.Build(tables, sums, cfg.specs, report.MapOptions{Draw: o.maps, At: o.mapAt, Jobs: cfg.jobs, Progress: prog.counts()})}
	prog.stop()
	if o.advise {
		for i, t := range cfg.traces {
			if !advise.Typed(t) {
				continue
			}
			text, err := adviseText(c, advise.TypeConfig{Trace: t, Jobs: cfg.jobs, MaxRequest: cfg.opt.MaxRequest, MaxRSS: cfg.opt.MaxRSS})
			if err != nil {
				out.finish(false)
				return classify(err)
			}
			rep.Traces[i].Advice = text
		}
	}
	if err := out.written(func(w io.Writer) error { return report.Write(w, rep) }); err != nil {
		return err
	}
	fi, _ := os.Stat(o.path)
	fmt.Fprintf(c.stderr, "carve: report written to %s (%d KiB)\n", o.path, fi.Size()>>10)
	if o.png != "" {
		if err := report.WritePNGs(o.png, rep); err != nil {
			return err
		}
	}
	return emit(c, tables, f)
}

// adviseText runs the type advisor on tc's trace, its progress on
// stderr, and returns its advice as carve advise prints it.
func adviseText(c *cli, tc advise.TypeConfig) (string, error) {
	adv, err := runTypeAdvice(c, tc)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := adv.WriteText(&b, maxWidth); err != nil {
		return "", err
	}
	return b.String(), nil
}
