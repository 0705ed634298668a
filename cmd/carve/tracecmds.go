package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

func generatorList() string {
	var b strings.Builder
	for _, g := range gen.All() {
		fmt.Fprintf(&b, "  %s: %s\n", g.Name, g.Doc)
		for _, p := range g.Params {
			fmt.Fprintf(&b, "      %s=%s  %s\n", p.Name, strconv.FormatFloat(p.Default, 'f', -1, 64), p.Doc)
		}
	}
	return b.String()
}

func generatorNames() string {
	var names []string
	for _, g := range gen.All() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

var genCommand = &command{
	name: "gen", args: "NAME [-o FILE] [param=value...]", interspersed: true,
	short: "write a generated trace in carve's native format",
	long:  "The generators and their parameters (a TRACE gen:NAME:param=value,... names the same trace):\n\n" + generatorList(),
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
		return func(c *cli, args []string) error {
			if len(args) == 0 {
				return badUsage("want a generator name: %s", generatorNames())
			}
			name, kv := args[0], args[1:]
			g, ok := gen.Lookup(name)
			if !ok {
				var names []string
				for _, g := range gen.All() {
					names = append(names, g.Name)
				}
				return badUsage("unknown generator %q%s (want one of %s)", name, suggest(name, names), generatorNames())
			}
			params, err := g.ParseArgs(kv)
			if err != nil {
				return badUsage("%s: %v", name, err)
			}
			o, err := openOutput(*out, c.stdout)
			if err != nil {
				return err
			}
			return o.written(func(w io.Writer) error {
				tw := trace.NewWriter(w)
				if err := g.Generate(tw, params); err != nil {
					return err
				}
				return tw.Flush()
			})
		}
	},
}

// openTrace resolves and opens a TRACE argument, read with f.
func openTrace(f *traceFlags, arg string) (traces.Trace, trace.Source, io.Closer, error) {
	t, err := f.resolve(arg)
	if err != nil {
		return t, nil, nil, inputError{err}
	}
	src, closer, err := t.Open()
	if err != nil {
		return t, nil, nil, inputError{err}
	}
	return t, src, closer, nil
}

// formatsHelp lists the formats of the files carve reads, one a line
// with its doc, as the trace package's table of formats has them.
func formatsHelp() string {
	var b strings.Builder
	for _, f := range trace.Formats() {
		fmt.Fprintf(&b, "  %-10s %s\n", f, f.Doc())
	}
	return b.String()
}

var convertCommand = &command{
	name: "convert", args: "[-o FILE] TRACE", interspersed: true,
	short: "rewrite a trace in carve's native format",
	long: "A TRACE is " + traces.Usage() + ". The objects' labels (a Go trace's types) and a Go trace's\n" +
		"samples of its heap are kept: the output is version 2 of the format when the trace has labels.\n" +
		"A file may be in any of these formats:\n" + formatsHelp(),
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
		var tf traceFlags
		tf.register(fs)
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one TRACE, got %d arguments", len(args))
			}
			o, err := openOutput(*out, c.stdout, args[0])
			if err != nil {
				return err
			}
			_, src, closer, err := openTrace(&tf, args[0])
			if err != nil {
				o.finish(false)
				return err
			}
			defer closer.Close()
			return o.written(func(w io.Writer) error {
				tw := trace.NewWriter(w)
				if labels := trace.LabelsOf(src); labels != nil {
					if err := tw.SetLabels(labels); err != nil {
						return err
					}
				}
				if _, err := trace.Copy(tw, src); err != nil {
					return inputError{err}
				}
				return tw.Flush()
			})
		}
	},
}

var statsCommand = &command{
	name: "stats", args: "TRACE", interspersed: true,
	short: "describe a trace: sizes, lifetimes, peak live, Robson's bounds",
	long:  "A TRACE is " + traces.Usage() + ".",
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var tf traceFlags
		tf.register(fs)
		tf.registerFrees(fs)
		by := fs.String("by", "", "for a trace of labels, list its objects by `WHAT`: type, or site (where the program allocated them: a go test's heap profile, a C program's call stacks, as carve record keeps them); default type, or site for a trace of sites and no types (a C program's)")
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one TRACE, got %d arguments", len(args))
			}
			if *by != "" && *by != "type" && *by != "site" {
				return badUsage("--by %q: want type or site", *by)
			}
			t, err := tf.resolve(args[0])
			if err != nil {
				return inputError{err}
			}
			// Spooled: a Go program's frees moved to its marks' ends.
			t = t.Spooled()
			src, closer, err := t.Open()
			if err != nil {
				return inputError{err}
			}
			defer closer.Close()
			s, err := summary.OfSource(src)
			if err != nil {
				return inputError{err}
			}
			format := "generated"
			if r, ok := src.(interface{ Format() trace.Format }); ok {
				format = r.Format().String()
			}
			o, err := openOutput("", c.stdout)
			if err != nil {
				return err
			}
			return o.written(func(w io.Writer) error {
				writeSummary(w, t.Label, format, s)
				if f := t.Frees().String(); f != "" {
					fmt.Fprintf(w, "frees: %s\n", f)
				}
				if p := (rows.Table{Trace: t}).Program(); p != nil {
					fmt.Fprintf(w, "the program's RSS: %s\n", p)
				}
				writeHistograms(w, s)
				writeCycles(w, s.Cycles)
				typed := slices.ContainsFunc(s.Labels, func(l summary.LabelStat) bool { return l.Name != "" })
				if *by == "" {
					*by = "type"
					if len(s.Sites) > 0 && !typed {
						*by = "site" // a C program's: sites, no types
					}
				}
				switch {
				case *by == "type" && len(s.Sites) > 0 && !typed:
					fmt.Fprintln(w, "\ntypes: none (a C program's trace: its labels are the allocation sites of its call stacks, --by site)")
				case *by == "site" && len(s.Sites) == 0:
					fmt.Fprintln(w, "\nsites: none (the trace's labels carry no sites: record a go test with this carve, which takes a heap profile beside the trace, or a C program with carve's recorder or heaptrack, which keep call stacks)")
				case *by == "site" && !typed:
					fmt.Fprintln(w, "\nsites by bytes live at the peak (each the function that called the allocator, from the call stack the recorder kept: a realloc's bytes are its caller's)")
					return s.WriteSites(w, 20)
				case *by == "site":
					fmt.Fprintln(w, "\nsites by bytes live at the peak (each a call site and the types allocated there; an object of a size several sites share was given one by share, in proportion to their allocations of that size; one of a size the heap profile does not count has none)")
					return s.WriteSites(w, 20)
				case len(s.Labels) > 0:
					fmt.Fprintln(w, "\ntypes (labels) by bytes live at the peak")
					return s.WriteLabels(w, 20)
				}
				return nil
			})
		}
	},
}

// writeSummary prints what carve stats says of a trace before its
// histograms: its events, requests, peak and end, Robson's bounds, and
// the trace's own errors.
func writeSummary(w io.Writer, label, format string, s summary.Trace) {
	allocs := s.Ops[trace.Alloc] + s.Ops[trace.Calloc] + s.Ops[trace.Memalign]
	fmt.Fprintf(w, "%s (%s): %s\n", label, format, text.Count(s.Events, "event"))
	fmt.Fprintf(w, "requests: %s (%s of 0 B), %s, %s", text.Count(allocs, "allocation"), text.Count(s.Zero, "request"),
		text.Count(s.Ops[trace.Realloc], "realloc"), text.Count(s.Ops[trace.Free], "free"))
	if s.Largest > 0 {
		fmt.Fprintf(w, "; sizes from %s to %s", bytesOf(s.Smallest), bytesOf(s.Largest))
	}
	fmt.Fprintln(w)
	at := "more than "
	if !s.Overflow {
		at = ""
	}
	fmt.Fprintf(w, "peak live: %s%s in %s, after event %d; at the end: %s%s in %s\n",
		at, bytesOf(s.PeakLive), text.Count(s.PeakObjects, "object"), s.PeakAt+1, at, bytesOf(s.EndLive), text.Count(s.EndObjects, "object"))
	if s.Overflow {
		fmt.Fprintln(w, "  (the trace's live bytes pass 2^64 - 1: its sizes are impossible)")
	}
	if ff, bf := s.Robson(); ff > 0 {
		fmt.Fprintf(w, "Robson's worst cases for this peak live M and n = largest / smallest request (%.0f): first fit may need M × log2 n = %s, best fit M × n = %s\n",
			float64(s.Largest)/float64(s.Smallest), bytesOf(uint64(min(ff, 1<<63))), bytesOf(uint64(min(bf, 1<<63))))
	}
	if len(s.Cycles) > 0 {
		peak := 0
		for i, c := range s.Cycles {
			if c.Live > s.Cycles[peak].Live {
				peak = i
			}
		}
		c := s.Cycles[peak]
		fmt.Fprintf(w, "marked heap: %s at its peak, after collection %d of %d (event %s); the runtime counted %s\n",
			bytesOf(s.PeakMarked), peak+1, len(s.Cycles), text.Thousands(c.End), bytesOf(c.Marked))
		fmt.Fprintln(w, "  (the marked heap is what a collection found reachable; peak live counts the bytes allocated and not yet known dead)")
	}
	if s.UnknownFrees+s.UnknownReallocs+s.LiveAllocs == 0 {
		fmt.Fprintln(w, "trace errors: none")
	} else {
		fmt.Fprintf(w, "trace errors: %s and %s of objects not live, %s of ids already live\n",
			text.Count(s.UnknownFrees, "free"), text.Count(s.UnknownReallocs, "realloc"), text.Count(s.LiveAllocs, "allocation"))
	}
}

// maxCycleLines is the most collections carve stats lists one a line: of
// more, every k-th is listed, and the peak.
const maxCycleLines = 100

// writeCycles lists the marked heap after each collection: the trace's
// objects' count and the runtime's.
func writeCycles(w io.Writer, cs []summary.MarkedCycle) {
	if len(cs) == 0 {
		return
	}
	every := (len(cs) + maxCycleLines - 1) / maxCycleLines
	peak := 0
	for i, c := range cs {
		if c.Live > cs[peak].Live {
			peak = i
		}
	}
	fmt.Fprint(w, "\ncollections: the marked heap after each, as the trace's objects count it and as the runtime did")
	if every > 1 {
		fmt.Fprintf(w, " (every %d of %d, and the peak)", every, len(cs))
	}
	fmt.Fprintf(w, "\n%6s %14s %12s %12s %12s\n", "#", "mark end", "marked", "runtime", "goal")
	for i, c := range cs {
		if i%every != 0 && i != peak && i != len(cs)-1 {
			continue
		}
		goal := "-"
		if c.Goal > 0 {
			goal = bytesOf(c.Goal)
		}
		fmt.Fprintf(w, "%6d %14s %12s %12s %12s\n", i+1, text.Thousands(c.End), bytesOf(c.Live), bytesOf(c.Marked), goal)
	}
}

// bytesOf writes a byte count of a trace (which may pass 2^63) in binary
// units.
func bytesOf(n uint64) string {
	if n > math.MaxInt64 {
		return strconv.FormatFloat(float64(n)/(1<<60), 'f', 2, 64) + " EiB"
	}
	return size.Format(int64(n))
}

// writeHistograms prints the trace's histograms of request sizes and of
// lifetimes, one after the other, each with its own buckets.
func writeHistograms(w io.Writer, s summary.Trace) {
	var sizes, lifetimes int64
	for k := range s.Sizes {
		sizes += s.Sizes[k]
		lifetimes += s.Lifetimes[k]
	}
	fmt.Fprintf(w, "\nrequest sizes: %s (allocations and reallocs), by the bytes each asked for\n", text.Count(sizes, "request"))
	writeHistogram(w, "bytes", "requests", &s.Sizes)
	fmt.Fprintf(w, "\nlifetimes: %s freed, by the events from each one's allocation to its free\n", text.Count(lifetimes, "object"))
	if s.EndObjects > 0 {
		fmt.Fprintf(w, "(the %s live at the end have no lifetime yet)\n", text.Count(s.EndObjects, "object"))
	}
	writeHistogram(w, "events", "objects", &s.Lifetimes)
}

// statsWidth is the most characters a line of carve stats's histograms
// takes.
const statsWidth = 100

// writeHistogram prints h, a histogram of the power-of-two buckets of
// summary.Bucket, a bucket a line from the first that counts to the
// last (a bucket outside holds nothing, and none before the first can,
// when it is a bucket of values the trace has none under): the range
// of values it counts, in unit, its count of noun, its share, and a
// bar. The columns are headed unit and noun.
func writeHistogram(w io.Writer, unit, noun string, h *[65]int64) {
	first, last := -1, -1
	var total, most int64
	for k, n := range h {
		if n > 0 {
			if first < 0 {
				first = k
			}
			last, total, most = k, total+n, max(most, n)
		}
	}
	if first < 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	// The range's columns: the least value, and the most when it is
	// another.
	los, his := make([]string, last+1), make([]string, last+1)
	loW, hiW := 0, 0
	for k := first; k <= last; k++ {
		lo, hi := summary.Bucket(k)
		los[k] = text.ThousandsU(lo)
		if lo != hi {
			his[k] = text.ThousandsU(hi)
		}
		loW, hiW = max(loW, len(los[k])), max(hiW, len(his[k]))
	}
	rangeW := max(loW+3+hiW, len(unit))
	countW := max(len(text.Thousands(most)), len(noun))
	fmt.Fprintf(w, "  %-*s  %*s  %6s\n", rangeW, unit, countW, noun, "share")
	bar := min(40, statsWidth-(2+rangeW+2+countW+2+6+2))
	for k := first; k <= last; k++ {
		r := fmt.Sprintf("%*s", loW, los[k])
		if his[k] != "" {
			r += fmt.Sprintf(" - %*s", hiW, his[k])
		}
		share := fmt.Sprintf("%.1f%%", 100*float64(h[k])/float64(total))
		if h[k] > 0 && share == "0.0%" {
			share = "<0.1%"
		}
		line := fmt.Sprintf("  %-*s  %*s  %6s", rangeW, r, countW, text.Thousands(h[k]), share)
		if n := int(math.Ceil(float64(bar) * float64(h[k]) / float64(most))); n > 0 {
			line += "  " + strings.Repeat("#", n)
		}
		fmt.Fprintln(w, line)
	}
}
