package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/advise"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/traces"
)

var adviseCommand = &command{
	name: "advise", args: "[flags] TRACE", interspersed: true,
	short: "which pools would lower a heap's peak, or which Go types to move off the Go heap, measured by replaying candidates",
	long: `The advisor replays the trace through the base heap, then behind a pool for
each candidate size (the sizes requested most often and those taking the most
bytes), keeps the pool that lowered the peak footprint most, and repeats with
the remaining candidates: every figure is a measured replay. It prints the
savings and the Go code that makes the pools; on a C program's trace whose
objects carry their allocation sites (carve's recorder and heaptrack keep
call stacks), the sites each pool takes its requests from, at most ` + strconv.Itoa(advise.MaxSites) + `.

For a Go program's trace (carve record -- go test ..., its objects labelled
with their types) and no --base, it advises on types instead: it replays the
trace through the Go heap, then with each of the --types largest
pointer-free types that hold at least --min-type at the trace's peak
(default ` + advise.DefaultFloor.String() + `: that share of the peak marked heap, and that
many bytes) moved to carve memory: a type of one size into one pool of its
own size (pool.NewOf[T]) and into one carve heap, a slice ([]byte, []T) or a
type of many sizes into one carve heap and into a pool per size (a type
most of whose bytes have an allocation site, in a trace carve record took
of a go test, site by site: each site's objects are a candidate of their
own, routed by the site, and the code says where it goes), --repeats
times each at GOGCs around --gogc, and measures the peak RSS each saves
against the Go heap at the same GOGC. The runtime's and the testing
package's own types, the objects of no type, and the types that hold
pointers are never tried; each is summed in a line. On a trace that
records the program's collections the Go heap is paced by the program's
own marks (its marked heap less the moved objects, times how far its heap
grew in that cycle), and once collected where the program collected, to
print the model's error; each move is replayed with every object freed at
the start of the mark that did not find it (the latest it can have died)
and the program's marks as long as they were, and with every object freed
as early as the trace allows and the marks shorter by what moved: the
saving's two bounds (with a large type gone, the what-if collects far
more often than the program did, and where the objects left on the Go
heap died moves its peak too).

For each type it prints ` + advise.TargetRule + `.

A move is suggested with ` + advise.Rule(5) + ` (at --repeats 5).

The code printed is the code of the moves measured: the replays route what
it allocates, where it allocates it.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var cfg advise.Config
		fs.StringVar(&cfg.Base, "base", "", "the `ALLOCATOR` the pools go in front of: "+strings.Join(replay.Names(), ", ")+" (default: the Go heap for a Go program's trace, its types moved; "+advise.DefaultBase+" otherwise, sizes pooled)")
		var tc advise.TypeConfig
		fs.IntVar(&tc.GOGC, "gogc", rows.DefaultGOGC, "for a Go program's trace: the Go heap's `GOGC`")
		fs.IntVar(&tc.Repeats, "repeats", 5, "for a Go program's trace: replays of each candidate and of the Go heap, at GOGCs 2 apart around --gogc, the savings counted at the same GOGC (where the collections fall moves a peak); at most "+strconv.Itoa(advise.MaxRepeats))
		fs.IntVar(&tc.Candidates, "types", 5, "for a Go program's trace: try the `N` pointer-free types (or sites of a type, where most of its bytes have one) largest at the peak")
		floor := advise.DefaultFloor
		fs.Func("min-type", "for a Go program's trace: the least a type holds at the trace's peak to be tried: a `SHARE` of the peak marked heap (1%), bytes (1MiB), both (1%,1MiB: the larger), or 0 for none (default "+advise.DefaultFloor.String()+")", func(v string) error {
			f, err := advise.ParseFloor(v)
			floor = f
			return err
		})
		fs.Var(&cfg.Min, "min", "the least `SAVING` of peak footprint a pool must bring: bytes (65536, 64KiB, 1MiB) or a percentage of the baseline's peak (2%); default 1%, at least 64 KiB")
		fs.IntVar(&cfg.MaxPools, "max", 4, "suggest at most `N` pools")
		fs.IntVar(&cfg.Candidates, "candidates", 8, "replay the `N` most requested sizes and the N sizes taking the most bytes")
		fs.IntVar(&cfg.Jobs, "jobs", runtime.GOMAXPROCS(0), "replays to run at once")
		format := fs.String("format", textOrJSON[0], "output `FORMAT`: "+text.Or(textOrJSON)+" (schema "+advise.Schema+"; "+advise.TypesSchema+" for a Go program's trace)")
		wide := fs.Bool("wide", false, "text: every column of the tables, and each paragraph on one line (default: lines of at most "+strconv.Itoa(maxWidth)+" characters, the tables' headline columns first)")
		var maxRequest byteSize
		budgetFlags(fs, &maxRequest, nil)
		var tf traceFlags
		tf.register(fs)
		tf.registerFrees(fs)
		return func(c *cli, args []string) error {
			if err := checkFormat(*format, textOrJSON); err != nil {
				return err
			}
			width := maxWidth
			if *wide {
				width = 0
			}
			switch {
			case len(args) != 1:
				return badUsage("want one TRACE (%s), got %d", traces.Usage(), len(args))
			case cfg.MaxPools < 1:
				return badUsage("--max %d: want 1 or more", cfg.MaxPools)
			case cfg.Candidates < 1:
				return badUsage("--candidates %d: want 1 or more", cfg.Candidates)
			case cfg.Jobs < 1:
				return badUsage("--jobs %d: want 1 or more", cfg.Jobs)
			case tc.Repeats > advise.MaxRepeats:
				return badUsage("--repeats %d: want 1 to %d (each repeat is another replay of the Go heap, three on a trace of collections, and of each move of each type, late and early)", tc.Repeats, advise.MaxRepeats)
			case rows.IsReal(cfg.Base):
				return badUsage("--base %s: the real mallocs run in child processes, and the advisor replays in this one: want one of %s", cfg.Base, strings.Join(replay.Names(), ", "))
			}
			cfg.MaxRequest = int64(maxRequest)
			var err error
			if cfg.Trace, err = tf.resolve(args[0]); err != nil {
				return inputError{err}
			}
			if cfg.Base == "" && advise.Typed(cfg.Trace) {
				if tc.Repeats < 1 || tc.Candidates < 1 || tc.GOGC < 1 {
					return badUsage("--repeats, --types and --gogc want 1 or more")
				}

				tc.Trace, tc.Jobs, tc.MaxRequest, tc.Floor = cfg.Trace, cfg.Jobs, cfg.MaxRequest, &floor
				adv, err := runTypeAdvice(c, tc)
				if err != nil {
					return classify(err)
				}
				if *format == "json" {
					enc := json.NewEncoder(c.stdout)
					enc.SetIndent("", "  ")
					enc.SetEscapeHTML(false)
					return enc.Encode(adv)
				}
				return adv.WriteText(c.stdout, width)
			}
			if cfg.Base == "" {
				cfg.Base = advise.DefaultBase
			}
			prog := startProgress(c.stderr, 0)
			cfg.Progress = &prog.Events
			adv, err := advise.Advise(cfg)
			prog.stop()
			switch {
			case errors.Is(err, advise.ErrBase):
				return badUsage("--base: %v", err)
			case err != nil:
				return classify(err)
			}
			if *format == "json" {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // the Go snippet's << as is
				return enc.Encode(adv)
			}
			return adv.WriteText(c.stdout, width)
		}
	},
}

// runTypeAdvice runs the type advisor on tc's trace: it says how many
// replays it makes, and shows their progress as carve replay does.
func runTypeAdvice(c *cli, tc advise.TypeConfig) (*advise.TypeAdvice, error) {
	prog := startProgress(c.stderr, 0)
	defer prog.stop()
	tc.Progress = prog.counts()
	tc.Planned = func(n int) {
		fmt.Fprintf(c.stderr, "carve advise: %s: %s of the whole trace, %d at once\n", tc.Trace.Label, text.Count(int64(n), "replay"), max(tc.Jobs, 1))
	}
	return advise.AdviseTypes(tc)
}
