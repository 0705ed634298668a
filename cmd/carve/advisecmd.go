package main

import (
	"encoding/json"
	"errors"
	"flag"
	"runtime"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/size"
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
savings and the Go code that makes the pools.

For a Go program's trace (carve record -- go test ..., its objects labelled
with their types) and no --base, it advises on types instead: it replays the
trace through the Go heap, then with each of the --types largest
pointer-free types routed to carve pools (one per size), to an arena and,
for a type whose objects come in more than one size, to a carve heap,
--repeats times each at GOGCs around --gogc, and ranks them by the peak RSS
they save against the Go heap at the same GOGC. A type whose bytes could
not save ` + size.Format(advise.MinTypeSaving) + ` (what they cost on the Go heap) is not replayed. On a trace that records the
program's collections the Go heap is paced by the program's own marks (its
marked heap less the moved objects, times how far its heap grew in that
cycle), and once collected where the program collected, to print
the model's error; each move is replayed with its objects freed at the
start of the mark that did not find them (the latest they can have died)
and the program's marks as long as they were, and with them freed as
early as the trace allows and the marks shorter by what moved, the
saving's two bounds. A type is suggested when it saved at four in five of
the GOGCs (all of up to three), ` + size.Format(advise.MinTypeSaving) + ` or more in the median, and not
more than its bytes can cost on the Go heap (placement noise); types that
hold pointers are listed as staying where they are.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var cfg advise.Config
		fs.StringVar(&cfg.Base, "base", "", "the `ALLOCATOR` the pools go in front of: "+strings.Join(replay.Names(), ", ")+" (default: the Go heap for a Go program's trace, its types moved; "+advise.DefaultBase+" otherwise, sizes pooled)")
		var tc advise.TypeConfig
		fs.IntVar(&tc.GOGC, "gogc", rows.DefaultGOGC, "for a Go program's trace: the Go heap's `GOGC`")
		fs.IntVar(&tc.Repeats, "repeats", 5, "for a Go program's trace: replays of each candidate and of the Go heap, at GOGCs 2 apart around --gogc, the savings counted at the same GOGC (where the collections fall moves a peak); at most "+strconv.Itoa(advise.MaxRepeats))
		fs.IntVar(&tc.Candidates, "types", 5, "for a Go program's trace: try the `N` pointer-free types largest at the peak")
		fs.Var(&cfg.Min, "min", "the least `SAVING` of peak footprint a pool must bring: bytes (65536, 64KiB, 1MiB) or a percentage of the baseline's peak (2%); default 1%, at least 64 KiB")
		fs.IntVar(&cfg.MaxPools, "max", 4, "suggest at most `N` pools")
		fs.IntVar(&cfg.Candidates, "candidates", 8, "replay the `N` most requested sizes and the N sizes taking the most bytes")
		fs.IntVar(&cfg.Jobs, "jobs", runtime.GOMAXPROCS(0), "replays to run at once")
		format := fs.String("format", "text", "output `FORMAT`: text or json (schema "+advise.Schema+")")
		var maxRequest byteSize
		budgetFlags(fs, &maxRequest, nil)
		var tf traceFlags
		tf.register(fs)
		tf.registerFrees(fs)
		return func(c *cli, args []string) error {
			switch {
			case len(args) != 1:
				return badUsage("want one TRACE (%s), got %d", traces.Usage(), len(args))
			case *format != "text" && *format != "json":
				return badUsage("--format %q: want text or json", *format)
			case cfg.MaxPools < 1:
				return badUsage("--max %d: want 1 or more", cfg.MaxPools)
			case cfg.Candidates < 1:
				return badUsage("--candidates %d: want 1 or more", cfg.Candidates)
			case cfg.Jobs < 1:
				return badUsage("--jobs %d: want 1 or more", cfg.Jobs)
			case tc.Repeats > advise.MaxRepeats:
				return badUsage("--repeats %d: want 1 to %d (each repeat is another 1 + 2 x --types replays)", tc.Repeats, advise.MaxRepeats)
			case rows.IsReal(cfg.Base):
				return badUsage("--base %s: the real mallocs run in child processes, and the advisor replays in this one: want one of %s", cfg.Base, strings.Join(replay.Names(), ", "))
			}
			cfg.MaxRequest = int64(maxRequest)
			var err error
			if cfg.Trace, err = tf.resolve(args[0]); err != nil {
				return inputError{err}
			}
			if cfg.Base == "" && advise.Labelled(cfg.Trace) {
				if tc.Repeats < 1 || tc.Candidates < 1 || tc.GOGC < 1 {
					return badUsage("--repeats, --types and --gogc want 1 or more")
				}

				tc.Trace, tc.Jobs, tc.MaxRequest = cfg.Trace, cfg.Jobs, cfg.MaxRequest
				adv, err := advise.AdviseTypes(tc)
				if err != nil {
					return classify(err)
				}
				if *format == "json" {
					enc := json.NewEncoder(c.stdout)
					enc.SetIndent("", "  ")
					enc.SetEscapeHTML(false)
					return enc.Encode(adv)
				}
				return adv.WriteText(c.stdout)
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
			return adv.WriteText(c.stdout)
		}
	},
}
