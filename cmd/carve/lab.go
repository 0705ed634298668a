package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/carvelab/carve/replay"
	"github.com/carvelab/carve/trace"
)

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// output opens the -o file, or returns standard output.
func output(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// cmdGen writes a generated trace: carve gen NAME [-o FILE] [param=value...].
func cmdGen(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return badUsage("carve gen: want a generator name: %s", generatorNames())
	}
	name := args[0]
	// -o may come before or after the name=value parameters.
	var out string
	var kv []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" || a == "--o":
			if i+1 == len(args) {
				return badUsage("carve gen: -o wants a FILE")
			}
			out = args[i+1]
			i++
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			out = a[strings.Index(a, "=")+1:]
		default:
			kv = append(kv, a)
		}
	}
	g, ok := trace.Lookup(name)
	if !ok {
		return badUsage("carve gen: unknown generator %q (want one of %s)", name, generatorNames())
	}
	params, err := g.ParseArgs(kv)
	if err != nil {
		return badUsage("carve gen %s: %v", name, err)
	}
	w, done, err := output(out, stdout)
	if err != nil {
		return err
	}
	tw := trace.NewWriter(w)
	if err := g.Generate(tw, params); err != nil {
		done()
		return err
	}
	if err := tw.Flush(); err != nil {
		done()
		return err
	}
	return done()
}

func generatorNames() string {
	var names []string
	for _, g := range trace.Generators() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

// cmdConvert rewrites any trace in carve's native format: carve convert
// [-o FILE] TRACE.
func cmdConvert(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve convert: %v", err)
	}
	if fs.NArg() != 1 {
		return badUsage("carve convert: want one TRACE, got %d arguments", fs.NArg())
	}
	r, err := trace.Open(fs.Arg(0))
	if err != nil {
		return inputError{err}
	}
	defer r.Close()
	w, done, err := output(*out, stdout)
	if err != nil {
		return err
	}
	tw := trace.NewWriter(w)
	batch := make([]trace.Event, 4096)
	for {
		n, rerr := r.Read(batch)
		for _, e := range batch[:n] {
			if err := tw.Write(e); err != nil {
				done()
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			done()
			return inputError{rerr}
		}
	}
	if err := tw.Flush(); err != nil {
		done()
		return err
	}
	return done()
}

// inputError is unreadable input: exit code 2.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// cmdStats describes a trace: carve stats TRACE.
func cmdStats(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return badUsage("carve stats: want one TRACE, got %d arguments", len(args))
	}
	r, err := trace.Open(args[0])
	if err != nil {
		return inputError{err}
	}
	defer r.Close()
	s, err := trace.Summarize(r)
	if err != nil {
		return inputError{err}
	}
	fmt.Fprintf(stdout, "%s (%s): %d events\n", args[0], r.Format(), s.Events)
	fmt.Fprintf(stdout, "requests: smallest %d B, largest %d B, %d of 0 B\n", s.Smallest, s.Largest, s.Zero)
	fmt.Fprintf(stdout, "peak live: %d B in %d objects (after event %d); live at the end: %d B in %d objects\n",
		s.PeakLive, s.PeakObjects, s.PeakAt, s.EndLive, s.EndObjects)
	ff, bf := s.Robson()
	fmt.Fprintf(stdout, "Robson's worst cases for this peak live M and n = largest/smallest: first fit ~ M log2 n = %.0f B, best fit ~ M n = %.0f B\n", ff, bf)
	fmt.Fprintf(stdout, "trace errors: %d frees and %d reallocs of objects not live, %d allocations of live ids\n",
		s.UnknownFrees, s.UnknownReallocs, s.LiveAllocs)
	fmt.Fprintln(stdout, "\nrequest sizes (bytes)          count   lifetimes (events)   count")
	for k := range s.Sizes {
		if s.Sizes[k] == 0 && s.Lifetimes[k] == 0 {
			continue
		}
		fmt.Fprintf(stdout, "%-28s %8d   %-18s %8d\n", bucket(k), s.Sizes[k], bucket(k), s.Lifetimes[k])
	}
	return nil
}

// bucket names power-of-two histogram bucket k: 0, or 2^(k-1) to 2^k - 1.
func bucket(k int) string {
	if k == 0 {
		return "0"
	}
	lo := uint64(1) << (k - 1)
	return fmt.Sprintf("%d-%d", lo, lo*2-1)
}

// cmdReplay runs traces through allocators and prints one table per trace:
// carve replay [--alloc LIST|all] [--pool SIZE] [--strict] TRACE...
func cmdReplay(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	alloc := fs.String("alloc", "all", "comma-separated `LIST` of allocators, or all: "+strings.Join(replay.Names(), ", "))
	poolSize := fs.Int("pool", 0, "put requests of exactly `SIZE` bytes in a dedicated pool in front of each allocator")
	strict := fs.Bool("strict", false, "stop at the first trace error")
	format := fs.String("format", "text", "output `FORMAT`: text, markdown, csv or json (schema "+replaySchema+")")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve replay: %v", err)
	}
	switch *format {
	case "text", "markdown", "csv", "json":
	default:
		return badUsage("carve replay: --format %q: want text, markdown, csv or json", *format)
	}
	if fs.NArg() == 0 {
		return badUsage("carve replay: want at least one TRACE")
	}
	var names []string
	if *alloc == "all" {
		// The Go heap's figures come from runtime.ReadMemStats of this
		// process, which the other replays' bookkeeping shares: it is
		// replayed only when named, until rows run in processes of their
		// own.
		for _, n := range replay.Names() {
			if n != "go" {
				names = append(names, n)
			}
		}
	} else {
		names = strings.Split(*alloc, ",")
	}
	var all []row
	for _, path := range fs.Args() {
		rows, err := replayOne(path, names, *poolSize, *strict)
		if err != nil {
			return err
		}
		if *format == "json" {
			all = append(all, rows...)
			continue
		}
		if err := printRows(stdout, *format, rows); err != nil {
			return err
		}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Schema string `json:"schema"`
			Rows   []row  `json:"rows"`
		}{replaySchema, all})
	}
	return nil
}

// row is one allocator's replay of one trace, as every format prints it.
// The JSON field names are part of the versioned schema (replaySchema):
// fields are added, never renamed.
type row struct {
	Trace     string `json:"trace"`
	Allocator string `json:"allocator"`
	Error     string `json:"error,omitempty"`

	Events              int64    `json:"events"`
	Ops                 int64    `json:"ops"`
	NsPerOp             float64  `json:"ns_per_op"`
	TraceErrors         int64    `json:"trace_errors"`
	PeakLive            int64    `json:"peak_live"`
	PeakFootprint       int64    `json:"peak_footprint"`
	PeakResident        int64    `json:"peak_resident"`
	FootprintAtPeakLive int64    `json:"footprint_at_peak_live"`
	LiveAtPeakFootprint int64    `json:"live_at_peak_footprint"`
	AvgRatio            float64  `json:"jw1_avg_footprint_over_live"`
	RatioAtPeakLive     float64  `json:"jw2_footprint_over_live_at_peak_live"`
	RatioAtPeakFP       float64  `json:"jw3_footprint_over_live_at_peak_footprint"`
	PeakRatio           float64  `json:"jw4_peak_footprint_over_peak_live"`
	Fragmentation       *float64 `json:"fragmentation_percent_at_end"` // null when live at the end is 0
	Live                int64    `json:"live_at_end"`
	Internal            int64    `json:"internal_at_end"`
	External            int64    `json:"external_at_end"`
}

// replaySchema names the version of the JSON that carve replay prints.
const replaySchema = "carve.replay/v1"

func replayOne(path string, names []string, poolSize int, strict bool) ([]row, error) {
	var rows []row
	for _, name := range names {
		a, err := replay.New(name)
		if err != nil {
			return nil, badUsage("carve replay: %v", err)
		}
		label := name
		if poolSize > 0 {
			if a, err = replay.WithPool(poolSize, a); err != nil {
				return nil, badUsage("carve replay: --pool %d: %v", poolSize, err)
			}
			label = fmt.Sprintf("%s+pool(%d)", name, poolSize)
		}
		r, err := trace.Open(path)
		if err != nil {
			a.Close()
			return nil, inputError{err}
		}
		res, err := replay.Run(r, a, replay.Options{Strict: strict})
		r.Close()
		a.Close()
		var te *replay.TraceError
		var v *replay.Violation
		switch {
		case errors.As(err, &v), errors.As(err, &te):
			return nil, checkFailed{fmt.Errorf("%s on %s: %w", name, path, err)}
		case err != nil:
			rows = append(rows, row{Trace: path, Allocator: label, Error: err.Error()})
			continue
		}
		rw := row{
			Trace: path, Allocator: label,
			Events: res.Events, Ops: res.Ops, NsPerOp: res.NsPerOp, TraceErrors: res.TraceErrors,
			PeakLive: res.PeakLive, PeakFootprint: res.PeakFootprint, PeakResident: res.PeakResident,
			FootprintAtPeakLive: res.FootprintAtPeakLive, LiveAtPeakFootprint: res.LiveAtPeakFootprint,
			AvgRatio: res.AvgRatio, RatioAtPeakLive: res.RatioAtPeakLive,
			RatioAtPeakFP: res.RatioAtPeakFootprint, PeakRatio: res.PeakRatio,
			Live: res.Live, Internal: res.Internal, External: res.External,
		}
		if !math.IsNaN(res.Fragmentation) {
			f := res.Fragmentation
			rw.Fragmentation = &f
		}
		rows = append(rows, rw)
	}
	return rows, nil
}

// printRows prints the rows of one trace in format: text, markdown or csv.
func printRows(w io.Writer, format string, rows []row) error {
	head := []string{"allocator", "peak live", "peak footprint", "peak fp/live", "avg fp/live", "frag. at end", "peak RSS", "ns/op", "trace errors"}
	cells := func(r row) []string {
		if r.Error != "" {
			return []string{r.Allocator, r.Error, "", "", "", "", "", "", ""}
		}
		frag := "-"
		if r.Fragmentation != nil {
			frag = strconv.FormatFloat(*r.Fragmentation, 'f', 1, 64) + "%"
		}
		return []string{r.Allocator, mb(r.PeakLive), mb(r.PeakFootprint),
			strconv.FormatFloat(r.PeakRatio, 'f', 3, 64), strconv.FormatFloat(r.AvgRatio, 'f', 3, 64),
			frag, mb(r.PeakResident), strconv.FormatFloat(r.NsPerOp, 'f', 1, 64), strconv.FormatInt(r.TraceErrors, 10)}
	}
	switch format {
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(append([]string{"trace"}, head...))
		for _, r := range rows {
			cw.Write(append([]string{r.Trace}, cells(r)...))
		}
		cw.Flush()
		return cw.Error()
	case "markdown":
		if len(rows) > 0 {
			fmt.Fprintf(w, "%s\n\n", rows[0].Trace)
		}
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells(r), " | "))
		}
		fmt.Fprintln(w)
		return nil
	}
	if len(rows) > 0 {
		fmt.Fprintf(w, "%s\n", rows[0].Trace)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(cells(r), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return nil
}

// checkFailed is a correctness violation or a strict trace error: exit
// code 1.
type checkFailed struct{ err error }

func (e checkFailed) Error() string { return e.err.Error() }
func (e checkFailed) Unwrap() error { return e.err }

func mb(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + " MiB" }
