package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/carvelab/carve/lab/traces"

	"github.com/carvelab/carve/lab/replay"
)

// replayConfig is what carve replay and carve lab replay: every traces.Trace
// through every allocator, with the options of the command line.
type replayConfig struct {
	sources []traces.Trace
	allocs  []allocSpec
	isolate bool // every row in a child process of its own
	touch   bool // write every byte of every block (the scenarios; children do unless untouched)
	// untouched: children write no more than in process either (the bump
	// benchmark times the calls, not the writes).
	untouched bool
	series    int // points of the series to keep per replay (replay.Options.Series); 0: none
	strict    bool
	noCheck   bool
	jobs      int // replays run at once
}

// allocSpec is one row of each table: an allocator, with dedicated pools
// in front of it for requests of the sizes in pools.
type allocSpec struct {
	name  string
	pools []int
}

// label is the row's name: "first-fit", "first-fit+pool(64,1024)".
func (s allocSpec) label() string {
	if len(s.pools) == 0 {
		return s.name
	}
	var sizes []string
	for _, p := range s.pools {
		sizes = append(sizes, strconv.Itoa(p))
	}
	return s.name + "+pool(" + strings.Join(sizes, ",") + ")"
}

// poolSizes is the repeatable --pool flag.
type poolSizes []int

func (p *poolSizes) String() string { return fmt.Sprint(*p) }

func (p *poolSizes) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive size in bytes, got %q", f)
		}
		*p = append(*p, n)
	}
	return nil
}

// replayFlags are the flags carve replay and carve lab share.
type replayFlags struct {
	alloc, format string
	pools         poolSizes
	strict        bool
	noCheck       bool
	isolate       bool
	stable        bool
	jobs          int
	progress      bool
	html          string
	png           string // carve report --png: the directory
	maps          bool   // carve report --maps
	mapAt         int64  // carve report --map-at
	touch         bool
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.alloc, "alloc", "all", "comma-separated `LIST` of allocators, or all: "+strings.Join(allNames(), ", "))
	fs.Var(&f.pools, "pool", "put requests of exactly `SIZE` bytes in a dedicated pool in front of each allocator (repeat for more pools)")
	fs.BoolVar(&f.strict, "strict", false, "stop a replay at its first trace error, and exit 1")
	fs.BoolVar(&f.noCheck, "nocheck", false, "skip the correctness checks (overlap, alignment, contents): faster replays")
	fs.StringVar(&f.format, "format", "text", "output `FORMAT`: text, markdown, csv or json (schema "+replaySchema+")")
	fs.BoolVar(&f.isolate, "isolate", false, "replay carve's heaps in child processes too, so every row's RSS is measured alike")
	fs.BoolVar(&f.stable, "stable", false, "leave out the columns that vary from run to run (ns/op, peak RSS), for diffs")
	fs.IntVar(&f.jobs, "jobs", runtime.GOMAXPROCS(0), "replays to run at once (1 for the steadiest ns/op)")
	fs.BoolVar(&f.touch, "touch", true, "write every byte of every block, as a program would, so that resident memory counts it (--touch=false: only the check's pattern)")
	fs.StringVar(&f.html, "html", "", "also write the HTML report (charts over time, fragmentation, sizes, lifetimes) to `FILE`")
	fs.BoolVar(&f.progress, "progress", true, "show progress on standard error when it is a terminal")
}

// config checks the flags and returns the replay they ask for.
func (f *replayFlags) config(cmd string) (replayConfig, error) {
	switch f.format {
	case "text", "markdown", "csv", "json":
	default:
		return replayConfig{}, badUsage("carve %s: --format %q: want text, markdown, csv or json", cmd, f.format)
	}
	if f.jobs < 1 {
		return replayConfig{}, badUsage("carve %s: --jobs %d: want 1 or more", cmd, f.jobs)
	}
	c := replayConfig{strict: f.strict, noCheck: f.noCheck, jobs: f.jobs, isolate: f.isolate, touch: f.touch, untouched: !f.touch}
	names, err := allocNames(cmd, f.alloc)
	if err != nil {
		return replayConfig{}, err
	}
	for _, n := range names {
		c.allocs = append(c.allocs, allocSpec{n, f.pools})
	}
	return c, nil
}

// allNames are the rows of --alloc all: carve's heaps, the Go heap and the
// real mallocs (a real malloc not installed gives a row that says so).
func allNames() []string {
	return append(replay.Names(), realMallocNames...)
}

// allocNames reads an --alloc list.
func allocNames(cmd, list string) ([]string, error) {
	if list == "all" {
		return allNames(), nil
	}
	names := strings.Split(list, ",")
	for _, n := range names {
		if _, real := realMallocs[n]; real {
			continue
		}
		a, err := replay.New(n)
		if err != nil {
			return nil, badUsage("carve %s: %v (want one of %s)", cmd, err, strings.Join(allNames(), ", "))
		}
		a.Close()
	}
	return names, nil
}

// cmdReplay runs traces through allocators and prints one table per trace:
// carve replay [flags] TRACE...
func cmdReplay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f replayFlags
	f.register(fs)
	c, err := f.parse(fs, "replay", args)
	if err != nil {
		return err
	}
	return runReplays(c, &f, stdout, stderr)
}

// parse reads the flags of fs (f's among them) and the TRACE arguments
// of command cmd, and returns the replays they ask for.
func (f *replayFlags) parse(fs *flag.FlagSet, cmd string, args []string) (replayConfig, error) {
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return replayConfig{}, badUsage("carve %s: %v", cmd, err)
	}
	c, err := f.config(cmd)
	if err != nil {
		return replayConfig{}, err
	}
	if len(paths) == 0 {
		return replayConfig{}, badUsage("carve %s: want at least one TRACE (a file, a shipped trace: %s, or gen:NAME[:param=value,...])", cmd, traces.Names())
	}
	for _, arg := range paths {
		s, err := traces.Resolve(arg)
		if err != nil {
			return replayConfig{}, inputError{err}
		}
		c.sources = append(c.sources, s)
	}
	return c, nil
}

// runReplays replays, prints the tables and returns the error the exit
// code comes from: a violation or a strict trace error (1), an unreadable
// trace (2).
func runReplays(c replayConfig, f *replayFlags, stdout, stderr io.Writer) error {
	if f.html != "" {
		return writeReport(c, f, f.html, "carve replay --html "+f.html, stdout, stderr)
	}
	var prog *progress
	if f.progress {
		prog = startProgress(stderr, c.replays())
	}
	tables := c.run(prog)
	prog.stop()
	return emit(tables, f, stdout)
}

// replays returns how many replays c makes.
func (c replayConfig) replays() int { return len(c.sources) * len(c.allocs) }

// emit prints the tables as f asks and returns the error the exit code
// comes from.
func emit(tables []table, f *replayFlags, stdout io.Writer) error {
	if f.format == "json" {
		var all []row
		for _, t := range tables {
			all = append(all, t.rows...)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Schema string `json:"schema"`
			Rows   []row  `json:"rows"`
		}{replaySchema, all}); err != nil {
			return err
		}
	} else {
		for _, t := range tables {
			if err := printTable(stdout, f.format, f.stable, t); err != nil {
				return err
			}
		}
	}
	var input, check error
	for _, t := range tables {
		for _, r := range t.rows {
			switch {
			case r.ErrorKind == kindInput && input == nil:
				input = inputError{fmt.Errorf("carve: %s: %s", t.src.Label, r.Error)}
			case r.ErrorKind == kindCheck && check == nil:
				check = checkFailed{fmt.Errorf("carve: %s on %s: %s", r.Allocator, t.src.Label, r.Error)}
			}
		}
	}
	if input != nil {
		return input
	}
	return check
}

// The kinds of a row's error, as the JSON's error_kind names them.
const (
	kindInput       = "input"       // the trace could not be read: exit 2
	kindCheck       = "check"       // a violation, or a strict trace error: exit 1
	kindAllocator   = "allocator"   // the allocator failed (exhausted, say): a result, not a failure of carve's
	kindUnavailable = "unavailable" // the allocator is not on this machine
)

// errorKind classifies the error a replay stopped with.
func errorKind(err error) string {
	var te *replay.TraceError
	var v *replay.Violation
	switch {
	case errors.Is(err, replay.ErrSource):
		return kindInput
	case errors.As(err, &v), errors.As(err, &te):
		return kindCheck
	case errors.Is(err, errUnavailable):
		return kindUnavailable
	}
	return kindAllocator
}

// table is the replays of one traces.Trace.
type table struct {
	src  traces.Trace
	rows []row
}

// run replays every (source, allocator) pair, c.jobs at a time (each in
// its own goroutine, or its own child process: see replayOne), and returns
// the rows in the order of the sources and allocators.
func (c replayConfig) run(prog *progress) []table {
	tables := make([]table, len(c.sources))
	type job struct{ t, a int }
	var all []job
	for t, s := range c.sources {
		tables[t] = table{src: s, rows: make([]row, len(c.allocs))}
		for a := range c.allocs {
			all = append(all, job{t, a})
		}
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range min(c.jobs, len(all)) {
		wg.Go(func() {
			for j := range jobs {
				tables[j.t].rows[j.a] = c.replayOne(c.sources[j.t], c.allocs[j.a], prog)
				prog.done()
			}
		})
	}
	for _, j := range all {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	return tables
}

// replayOne replays one traces.Trace through one allocator: in this process,
// or in a child process of its own (see child.go) for the real mallocs,
// the Go heap, and every allocator with --isolate.
func (c replayConfig) replayOne(s traces.Trace, spec allocSpec, prog *progress) row {
	if c.isolate || spec.inChild() {
		return c.replayInChild(s, spec, prog)
	}
	rw := row{Trace: s.Label, Allocator: spec.label()}
	res, err := func() (replay.Result, error) {
		a, err := replay.New(spec.name)
		if err != nil {
			return replay.Result{}, err
		}
		defer func() { a.Close() }()
		for _, p := range spec.pools {
			if a, err = replay.WithPool(p, a); err != nil {
				return replay.Result{}, fmt.Errorf("--pool %d: %w", p, err)
			}
		}
		src, closer, err := s.Open()
		if err != nil {
			return replay.Result{}, fmt.Errorf("%w: %w", replay.ErrSource, err)
		}
		defer closer.Close()
		return replay.Run(src, a, c.options(s, prog))
	}()
	return rw.fill(s, res, err)
}

// options are the replay options of c for traces.Trace s.
func (c replayConfig) options(s traces.Trace, prog *progress) replay.Options {
	opt := replay.Options{Strict: c.strict, NoCheck: c.noCheck, Touch: c.touch, Series: c.series}
	if prog != nil {
		opt.Progress = &prog.events
	}
	for _, p := range s.Phases {
		opt.Marks = append(opt.Marks, p.End)
	}
	return opt
}

// fill completes a row from a replay's result, or its error.
func (rw row) fill(s traces.Trace, res replay.Result, err error) row {
	if err != nil {
		rw.Error, rw.ErrorKind = err.Error(), errorKind(err)
		return rw
	}
	rw.Events, rw.Ops, rw.NsPerOp, rw.TraceErrors = res.Events, res.Ops, res.NsPerOp, res.TraceErrors
	rw.PeakLive, rw.PeakFootprint, rw.PeakResident = res.PeakLive, res.PeakFootprint, res.PeakResident
	rw.PeakFootprintAt = res.PeakFootprintAt
	rw.FootprintAtPeakLive, rw.LiveAtPeakFootprint = res.FootprintAtPeakLive, res.LiveAtPeakFootprint
	rw.AvgRatio, rw.RatioAtPeakLive, rw.RatioAtPeakFP, rw.PeakRatio = res.AvgRatio, res.RatioAtPeakLive, res.RatioAtPeakFootprint, res.PeakRatio
	rw.Live, rw.Internal, rw.External = res.Live, res.Internal, res.External
	rw.Series = res.Series
	if !math.IsNaN(res.Fragmentation) {
		f := res.Fragmentation
		rw.Fragmentation = &f
	}
	if res.FirstTraceError != nil {
		rw.FirstTraceError = res.FirstTraceError.Error()
	}
	for i, m := range res.Marks {
		rw.Phases = append(rw.Phases, phaseRow{Name: s.Phases[i].Name, EndEvent: m.Event, Live: m.Live, Footprint: m.Stats.Footprint, Resident: m.Stats.Resident})
	}
	return rw
}

// row is one allocator's replay of one trace, as every format prints it.
// The JSON field names are part of the versioned schema (replaySchema):
// fields are added, never renamed.
type row struct {
	Trace     string `json:"trace"`
	Allocator string `json:"allocator"`
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"` // input, check, allocator or unavailable
	// Measured says how: "in process" (footprint from the allocator's
	// statistics, resident from mincore of its memory) or "child" (its own
	// process: resident is RSS above the child's baseline).
	Measured string `json:"measured,omitempty"`

	Events              int64      `json:"events"`
	Ops                 int64      `json:"ops"`
	NsPerOp             float64    `json:"ns_per_op"`
	TraceErrors         int64      `json:"trace_errors"`
	FirstTraceError     string     `json:"first_trace_error,omitempty"`
	PeakLive            int64      `json:"peak_live"`
	PeakFootprint       int64      `json:"peak_footprint"`
	PeakFootprintAt     int64      `json:"peak_footprint_at_event"`
	PeakResident        int64      `json:"peak_resident"`
	FootprintAtPeakLive int64      `json:"footprint_at_peak_live"`
	LiveAtPeakFootprint int64      `json:"live_at_peak_footprint"`
	AvgRatio            float64    `json:"jw1_avg_footprint_over_live"`
	RatioAtPeakLive     float64    `json:"jw2_footprint_over_live_at_peak_live"`
	RatioAtPeakFP       float64    `json:"jw3_footprint_over_live_at_peak_footprint"`
	PeakRatio           float64    `json:"jw4_peak_footprint_over_peak_live"`
	Fragmentation       *float64   `json:"fragmentation_percent_at_end"` // null when live at the end is 0
	Live                int64      `json:"live_at_end"`
	Internal            int64      `json:"internal_at_end"`
	External            int64      `json:"external_at_end"`
	Phases              []phaseRow `json:"phases,omitempty"`
	// PeakRSS is, for a row measured in a child, the peak RSS above the
	// child's baseline (VmHWM, reset after the baseline was taken).
	PeakRSS int64 `json:"peak_rss_above_baseline,omitempty"`
	// Series is the replay over time, for the report (carve report,
	// --html): points of the largest live memory and footprint of the
	// events each stands for, and the resident bytes sampled.
	Series []replay.Point `json:"series,omitempty"`
}

// phaseRow is the state at the end of one phase of a generated trace.
type phaseRow struct {
	Name      string `json:"name"`
	EndEvent  int64  `json:"end_event"`
	Live      int64  `json:"live"`
	Footprint int64  `json:"footprint"`
	Resident  int64  `json:"resident"`
}

// replaySchema names the version of the JSON that carve replay prints.
const replaySchema = "carve.replay/v1"

// growth returns how much the footprint grew in the last phase, and the
// phase's name, or ok false when the row has fewer than two phases.
func (r row) growth() (name string, grew int64, ok bool) {
	n := len(r.Phases)
	if n < 2 {
		return "", 0, false
	}
	return r.Phases[n-1].Name, r.Phases[n-1].Footprint - r.Phases[n-2].Footprint, true
}

// progress shows, on a terminal, how far the replays have come, once they
// have run for a second. A nil *progress shows nothing.
type progress struct {
	events   atomic.Int64
	finished atomic.Int64
	total    int
	quit     chan struct{}
	wg       sync.WaitGroup
}

func (p *progress) done() {
	if p != nil {
		p.finished.Add(1)
	}
}

func (p *progress) stop() {
	if p != nil {
		close(p.quit)
		p.wg.Wait()
	}
}

// parseInterspersed parses flags wherever they stand among the arguments
// (carve replay TRACE --alloc buddy as well as carve replay --alloc buddy
// TRACE) and returns the other arguments in order. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}
