package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

var replayCommand = &command{
	name: "replay", args: "[flags] TRACE...", interspersed: true,
	short: "replay each trace through the allocators, one table per trace",
	long: `Each TRACE is replayed through every allocator of --alloc: carve's heaps in
this process, checked as they go (no overlap, alignment, contents intact);
the Go heap and the real mallocs each in a child process of its own, the
real mallocs with LD_PRELOAD. A TRACE is ` + traces.Usage() + `.

The rows (--alloc):
` + rowsHelp() + `
The columns, in the table's order:
` + columnsHelp(),
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var f replayFlags
		f.register(fs)
		// replay's own: carve report writes the report, and carve lab none.
		html := fs.String("html", "", "also write the HTML report (charts over time, fragmentation, sizes, lifetimes) to `FILE`")
		return func(c *cli, args []string) error {
			cfg, err := f.config(args)
			if err != nil {
				return err
			}
			if *html != "" {
				return writeReport(c, cfg, &f, reportOptions{path: *html, command: "carve replay --html " + *html, maps: true})
			}
			return emit(c, f.replay(c, cfg), &f)
		}
	},
}

// replayConfig is what carve replay, carve lab and carve report replay:
// every trace through every spec.
type replayConfig struct {
	traces []traces.Trace
	specs  []rows.Spec
	opt    rows.Options
	jobs   int
}

// replays returns how many replays c makes.
func (c replayConfig) replays() int { return len(c.traces) * len(c.specs) }

// replayFlags are the flags carve replay, carve lab and carve report
// share.
type replayFlags struct {
	traceFlags
	alloc, format string
	routes        []replay.Route // --pool, --arena and --heap, in order
	strict        bool
	noCheck       bool
	isolate       bool
	stable        bool
	wide          bool
	jobs          int
	progress      bool
	touch         bool
	maxRequest    byteSize
	maxRSS        byteSize
	gogc          int
}

// byteSize is a flag of a byte count: 65536, 64KiB, 256MiB, 1GiB.
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return ""
	}
	return size.Format(int64(*b))
}

func (b *byteSize) Set(s string) error {
	n, err := size.Parse(s)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("want more than 0 bytes")
	}
	*b = byteSize(n)
	return nil
}

// traceFlags are the flags of every command that reads TRACE arguments:
// how a trace is read.
type traceFlags struct {
	maxGoGeneration byteSize
	frees           freesWhere
}

// freesWhere is the value of --frees: "" is freesAtMark.
type freesWhere string

func (w *freesWhere) String() string { return string(*w) }

func (w *freesWhere) Set(v string) error {
	if v != freesAtMark && v != freesAtSweep {
		return fmt.Errorf("want %s or %s", freesAtMark, freesAtSweep)
	}
	*w = freesWhere(v)
	return nil
}

// The values of --frees.
const (
	freesAtMark  = traces.FreesAtMarkName
	freesAtSweep = traces.FreesAtSweepName
)

func (f *traceFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.maxGoGeneration, trace.MaxGoGenerationFlag, "bound the memory one generation of a Go execution trace may cost its reader "+
		"("+trace.GoGenerationCost+") to `SIZE` (default "+size.Format(trace.DefaultMaxGoGeneration)+"; a reader holds up to two generations)")
}

// registerFrees registers --frees, for the commands that count a trace's
// live memory.
func (f *traceFlags) registerFrees(fs *flag.FlagSet) {
	fs.Var(&f.frees, "frees", "`WHERE` a Go program's objects die, in a trace that records its collections: "+
		freesAtMark+" (where the collection's mark proved them dead, so live is what the collector found) or "+
		freesAtSweep+" (where the sweeper freed them, a cycle later, as the trace has them; default "+freesAtMark+")")
}

// resolve resolves a TRACE argument, read with the flags.
func (f *traceFlags) resolve(arg string) (traces.Trace, error) {
	t, err := traces.ResolveOptions(arg, trace.ReaderOptions{MaxGoGeneration: int64(f.maxGoGeneration)})
	if err == nil && f.frees == freesAtSweep {
		t = t.FreesAtSweep()
	}
	return t, err
}

// budgetFlags registers --max-request and --max-rss.
func budgetFlags(fs *flag.FlagSet, maxRequest, maxRSS *byteSize) {
	fs.Var(maxRequest, "max-request", "the most `SIZE` one request may ask for: one above it is a trace error, skipped (default "+size.Format(replay.DefaultMaxRequest())+": half the physical memory, at most 64 GiB)")
	if maxRSS != nil {
		fs.Var(maxRSS, "max-rss", "the most `SIZE` one row may hold: a child process above it is stopped, a heap in this process stops (default: the row's need, "+
			strconv.Itoa(rows.Margin)+" times the trace's peak live memory and the replayer's tables; the rows running at once share "+size.Format(replay.DefaultBudget())+", half the physical memory, each waiting for its share, and a row whose need passes it all fails)")
	}
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	f.traceFlags.register(fs)
	f.traceFlags.registerFrees(fs)
	fs.StringVar(&f.alloc, "alloc", "all", "comma-separated `LIST` of allocators, or all: "+strings.Join(rows.Names(), ", "))
	fs.Var(routeFlag{replay.IntoPools, &f.routes}, "pool", "put requests of exactly `SIZE` bytes (a comma-separated list for more), or the objects of a type (type=NAME, as carve stats names it: []byte, main.Entry), in dedicated pools in front of each allocator: a type of one size (a struct) in one pool of its own size, as pool.NewOf[T] holds it, a slice type in a pool per size (repeat for more)")
	fs.Var(routeFlag{replay.IntoArena, &f.routes}, "arena", "put the objects of a type (`type=NAME`), or the requests of exactly SIZE bytes, in an arena of their own, reset when the last of them dies (repeat for more)")
	fs.Var(routeFlag{replay.IntoHeap, &f.routes}, "heap", "put the objects of a type (`type=NAME`, whatever their sizes), or the requests of exactly SIZE bytes, in a carve heap of their own in front of each allocator (repeat for more); site=PATTERN (a function or file:line, as carve stats --by site names the sites), alone or after type=NAME and a comma, takes the objects allocated there, in --pool and --arena too")
	fs.BoolVar(&f.strict, "strict", false, "stop a replay at its first trace error, and exit 1")
	fs.BoolVar(&f.noCheck, "nocheck", false, "skip the correctness checks (overlap, alignment, contents): faster replays")
	fs.StringVar(&f.format, "format", tableFormats[0], "output `FORMAT`: "+text.Or(tableFormats)+" (schema "+rows.Schema+")")
	fs.BoolVar(&f.isolate, "isolate", false, "replay carve's heaps in child processes too, so every row's RSS is measured alike")
	fs.BoolVar(&f.wide, "wide", false, "print every column of the text tables, and their notes unwrapped, however wide (without it they fit "+strconv.Itoa(maxWidth)+" characters; csv, markdown and json have every column)")
	fs.BoolVar(&f.stable, "stable", false, "leave out the columns that vary from run to run ("+strings.Join(unstableColumns(), ", ")+"), for diffs; in JSON, the keys of every such figure (unstable_left_out names them, docs/json.md)")
	fs.IntVar(&f.jobs, "jobs", runtime.GOMAXPROCS(0), "replays to run at once (1 for the steadiest ns/op)")
	fs.BoolVar(&f.touch, "touch", true, "write every byte of every block, as a program would, so that resident memory counts it (--touch=false: only the check's pattern)")
	fs.BoolVar(&f.progress, "progress", true, "show progress on standard error: a bar on a terminal, a line every 10 s elsewhere")
	budgetFlags(fs, &f.maxRequest, &f.maxRSS)
	fs.IntVar(&f.gogc, "gogc", rows.DefaultGOGC, "the go row's `GOGC`, set in its child whatever the environment says (another than 100 names the row go(gogc=N))")
}

// config checks the flags and the TRACE arguments and returns the
// replays they ask for.
func (f *replayFlags) config(args []string) (replayConfig, error) {
	c, err := f.specs()
	if err != nil {
		return c, err
	}
	if len(args) == 0 {
		return c, badUsage("want at least one TRACE (%s)", traces.Usage())
	}
	for _, arg := range args {
		t, err := f.resolve(arg)
		if err != nil {
			return c, inputError{err}
		}
		// Decoded once, for every row, the report's summary and its maps.
		c.traces = append(c.traces, t.Spooled())
	}
	if len(f.routes) > 0 {
		// The names and sizes checked against the traces' own, once,
		// before any replay.
		routes, err := rows.ResolveRoutes(c.traces, f.routes)
		if err != nil {
			return c, inputError{err}
		}
		for i := range c.specs {
			if len(c.specs[i].Routes) > 0 {
				c.specs[i].Routes = routes
			}
		}
	}
	c.pacedBaseline()
	return c, nil
}

// pacedBaseline adds, before each go row with pools or routes in front
// of it, the go row paced as they are (rows.Spec.Paced), when a trace
// records the program's collections: the routed row cannot collect
// where the program did, so its saving is taken against a baseline
// paced by the same model, never against the program-collected go row.
// It opens the traces to learn whether they record collections (their
// decoding, done once, is what every row reads).
func (c *replayConfig) pacedBaseline() {
	cycles := sync.OnceValue(func() bool { // opened only if a routed go row asks
		found := false
		for _, t := range c.traces {
			_, closer, err := t.Open()
			if err != nil {
				continue // every row says why
			}
			closer.Close()
			found = found || t.FreesMoved()
		}
		return found
	})
	var specs []rows.Spec
	for _, s := range c.specs {
		if s.Alloc == "go" && len(s.Routes) > 0 && cycles() {
			specs = append(specs, rows.Spec{Alloc: s.Alloc, GOGC: s.GOGC, Paced: true})
		}
		specs = append(specs, s)
	}
	c.specs = specs
}

// specs checks the flags other than the traces.
func (f *replayFlags) specs() (replayConfig, error) {
	if err := checkFormat(f.format, tableFormats); err != nil {
		return replayConfig{}, err
	}
	if f.jobs < 1 {
		return replayConfig{}, badUsage("--jobs %d: want 1 or more", f.jobs)
	}
	c := replayConfig{jobs: f.jobs, opt: rows.Options{Strict: f.strict, NoCheck: f.noCheck, Isolate: f.isolate, Touch: f.touch,
		MaxRequest: int64(f.maxRequest), MaxRSS: int64(f.maxRSS)}}
	names, err := rows.Parse(f.alloc)
	if err != nil {
		return replayConfig{}, inputError{fmt.Errorf("--alloc: %w", err)}
	}
	if f.gogc < 1 {
		return replayConfig{}, badUsage("--gogc %d: want 1 or more (the go row never turns the collector off)", f.gogc)
	}
	if err := rows.CheckRoutes(f.routes); err != nil {
		return replayConfig{}, inputError{err} // one line, as a name the traces refuse
	}
	for _, n := range names {
		s := rows.Spec{Alloc: n}
		if n == "go" {
			s.GOGC = f.gogc
		}
		c.specs = append(c.specs, s)
		if len(f.routes) > 0 {
			// Each routed row beside the same allocator without the
			// routes: the verdict says what they changed.
			s.Routes = f.routes
			c.specs = append(c.specs, s)
		}
	}
	return c, nil
}

// replay runs the replays of c, with progress on standard error.
func (f *replayFlags) replay(c *cli, cfg replayConfig) []rows.Table {
	var prog *progress
	if f.progress {
		prog = startProgress(c.stderr, cfg.replays())
	}
	tables := rows.Run(cfg.traces, cfg.specs, cfg.opt, cfg.jobs, prog.counts())
	prog.stop()
	return tables
}

// routeFlag is a repeatable flag, --pool, --arena or --heap: sizes of
// requests (SIZE, or a comma-separated list), or a type (type=NAME), a
// site (site=PATTERN) or both, whose requests go to the target into,
// appended to routes.
type routeFlag struct {
	into   replay.Target
	routes *[]replay.Route
}

func (r routeFlag) String() string {
	if r.routes == nil {
		return ""
	}
	var args []string
	for _, rt := range *r.routes {
		if rt.Into == r.into {
			args = append(args, rt.Arg())
		}
	}
	return strings.Join(args, " ")
}

func (r routeFlag) Set(s string) error {
	if strings.HasPrefix(s, "type=") || strings.HasPrefix(s, "site=") {
		rt := replay.Route{Into: r.into}
		for _, part := range strings.Split(s, ",") {
			key, value, _ := strings.Cut(part, "=")
			switch {
			case value == "":
				return fmt.Errorf("want type=NAME (a type as carve stats names it), site=PATTERN (a function or file:line as carve stats --by site names it) or both, comma-separated; got %q", s)
			case key == "type" && rt.Label == "":
				rt.Label = value
			case key == "site" && rt.Site == "":
				rt.Site = value
			default:
				return fmt.Errorf("%q: want type=NAME, site=PATTERN or both, each once", s)
			}
		}
		*r.routes = append(*r.routes, rt)
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive size in bytes, or type=NAME, got %q", f)
		}
		*r.routes = append(*r.routes, replay.Route{Size: n, Into: r.into})
	}
	return nil
}

// emit prints the tables as f asks and returns the error the exit code
// comes from: an unreadable trace (2), else a violation or a strict trace
// error (1).
func emit(c *cli, tables []rows.Table, f *replayFlags) error {
	for _, t := range tables {
		if f.stable {
			for i := range t.Rows {
				t.Rows[i] = t.Rows[i].ForStable()
			}
		} else {
			rows.MarkBest(t.Rows)
		}
	}
	if f.format == "json" {
		var all []rows.Row
		for _, t := range tables {
			all = append(all, t.Rows...)
		}
		type verdict struct {
			Trace   string `json:"trace"`
			Verdict string `json:"verdict"`
		}
		var verdicts []verdict
		for _, t := range tables {
			if v := t.Verdict(); v != "" && !f.stable {
				verdicts = append(verdicts, verdict{t.Trace.Label, v})
			}
		}
		var programs []*rows.Program
		for _, t := range tables {
			if p := t.Program(); p != nil {
				programs = append(programs, p)
			}
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Schema   string          `json:"schema"`
			Rows     []rows.Row      `json:"rows"`
			Verdicts []verdict       `json:"verdicts,omitempty"`
			Programs []*rows.Program `json:"programs,omitempty"`
		}{rows.Schema, all, verdicts, programs}); err != nil {
			return err
		}
	} else {
		for _, t := range tables {
			if err := printTable(c.stdout, tableStyle{f.format, f.stable, f.wide}, t); err != nil {
				return err
			}
		}
		if f.format == "text" && !f.stable {
			note := "ns/op: the time inside the allocator's calls, their system calls and page faults included (carve help replay)"
			if f.jobs > 1 {
				note += fmt.Sprintf("; rows replayed side by side (--jobs %d) are noisier than --jobs 1", f.jobs)
			}
			for _, l := range text.Wrap(note+".", maxWidth) {
				fmt.Fprintln(c.stdout, l)
			}
		}
	}
	return tablesError(tables)
}

// tablesError returns the error of the first row that could not read its
// trace, else of the first that failed a check, or nil.
func tablesError(tables []rows.Table) error {
	var input, check error
	for _, t := range tables {
		for _, r := range t.Rows {
			switch {
			case r.ErrorKind == rows.KindInput && input == nil:
				input = inputError{fmt.Errorf("%s: %s", t.Trace.Label, r.Error)}
			case r.ErrorKind == rows.KindCheck && check == nil:
				check = checkFailed{r.Err()}
			}
		}
	}
	if input != nil {
		return input
	}
	return check
}
